"""What the ai.onnx.ml tests share: running a model through ortmk (the
public C API of libortmk through ctypes, so string tensors go in and come
out as they are) and through ONNX Runtime (onnxruntime-node, many models
in one node.js process), and comparing the two.

Outputs compare as: string and integer tensors identical; float tensors
within atol + rtol * |reference| (1e-5 each unless a test says)."""
import base64
import ctypes
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.dont_write_bytecode = True
from ort_ref import Tally, node_modules  # noqa: E402,F401

ML_OPSET = 3
DTYPES = {np.dtype(np.float32): (1, "float32"), np.dtype(np.int64): (7, "int64"),
          np.dtype(np.int32): (6, "int32"), np.dtype(np.float64): (11, "float64"),
          np.dtype(np.uint8): (9, "bool")}
NP_OF_ONNX = {1: np.float32, 7: np.int64, 6: np.int32, 11: np.float64, 9: np.bool_}
ONNX_OF_NP = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
              np.int64: TensorProto.INT64, np.int32: TensorProto.INT32}


def ml_model(nodes, inputs, outputs, path, opset=ML_OPSET, initializers=()):
    """inputs/outputs: (name, onnx elem type, shape) triples."""
    g = helper.make_graph(nodes, "ml", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs],
                          list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("ai.onnx.ml", opset)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


class Ortmk:
    """libortmk through ctypes: one environment, a session per model."""

    def __init__(self, lib):
        L = self.L = ctypes.CDLL(lib)
        vp, c = ctypes.c_void_p, ctypes
        L.ortmk_last_error.restype = c.c_char_p
        L.ortmk_value_data_const.restype = vp
        L.ortmk_value_dims.restype = c.POINTER(c.c_int64)
        L.ortmk_value_rank.restype = c.c_size_t
        L.ortmk_value_nbytes.restype = c.c_size_t
        L.ortmk_value_string.restype = c.c_char_p
        L.ortmk_value_sequence_length.restype = c.c_size_t
        for f in ("ortmk_value_destroy", "ortmk_session_destroy", "ortmk_env_destroy"):
            getattr(L, f).argtypes = [vp]
        for f in ("ortmk_value_data_const", "ortmk_value_dims", "ortmk_value_rank",
                  "ortmk_value_nbytes", "ortmk_value_dtype", "ortmk_value_kind_of",
                  "ortmk_value_sequence_length"):
            getattr(L, f).argtypes = [vp]
        L.ortmk_value_string.argtypes = [vp, c.c_size_t]
        # maps (ZipMap's sequence of them)
        L.ortmk_value_map_count.restype = c.c_size_t
        L.ortmk_value_map_int64_keys.restype = c.POINTER(c.c_int64)
        L.ortmk_value_map_string_key.restype = c.c_char_p
        L.ortmk_value_map_values.restype = c.POINTER(c.c_float)
        for f in ("ortmk_value_map_count", "ortmk_value_map_int64_keys",
                  "ortmk_value_map_values"):
            getattr(L, f).argtypes = [vp]
        L.ortmk_value_map_string_key.argtypes = [vp, c.c_size_t]
        self.env = vp()
        self.ok(L.ortmk_env_create(c.byref(self.env)))

    def ok(self, status):
        if status:
            raise RuntimeError(self.L.ortmk_last_error().decode(errors="replace"))

    def value(self, a):
        c, v = ctypes, ctypes.c_void_p()
        dims = (c.c_int64 * max(a.ndim, 1))(*a.shape)
        if a.dtype.kind in "OUS":
            strs = [s.encode() if isinstance(s, str) else bytes(s) for s in a.ravel()]
            arr = (c.c_char_p * max(len(strs), 1))(*strs)
            self.ok(self.L.ortmk_value_create_strings(self.env, dims, c.c_size_t(a.ndim), arr,
                                                      c.byref(v)))
            return v
        a = np.ascontiguousarray(a)
        self.ok(self.L.ortmk_value_create_copy(self.env, DTYPES[a.dtype][0], dims,
                                               c.c_size_t(a.ndim), a.ctypes.data_as(c.c_void_p),
                                               c.c_size_t(a.nbytes), c.byref(v)))
        return v

    def to_numpy(self, v):
        L = self.L
        kind = L.ortmk_value_kind_of(v)
        if kind == 1:   # a sequence
            items = []
            for i in range(L.ortmk_value_sequence_length(v)):
                it = ctypes.c_void_p()
                self.ok(L.ortmk_value_sequence_get(v, ctypes.c_size_t(i), ctypes.byref(it)))
                items.append(self.to_numpy(it))
                L.ortmk_value_destroy(it)
            return items
        if kind == 3:   # a map: {key: value} in the map's order
            n = L.ortmk_value_map_count(v)
            ik, vals = L.ortmk_value_map_int64_keys(v), L.ortmk_value_map_values(v)
            keys = [ik[i] if ik else L.ortmk_value_map_string_key(v, i).decode()
                    for i in range(n)]
            return {k: float(vals[i]) for i, k in enumerate(keys)}
        rank = L.ortmk_value_rank(v)
        dims = L.ortmk_value_dims(v)
        shape = tuple(dims[i] for i in range(rank))
        dt = L.ortmk_value_dtype(v)
        if dt == 8:
            n = int(np.prod(shape)) if shape else 1
            return np.array([L.ortmk_value_string(v, i).decode() for i in range(n)],
                            dtype=object).reshape(shape)
        nbytes = L.ortmk_value_nbytes(v)
        buf = ctypes.string_at(L.ortmk_value_data_const(v), nbytes) if nbytes else b""
        return np.frombuffer(buf, dtype=NP_OF_ONNX[dt]).reshape(shape).copy()

    def run(self, path, inputs, outputs):
        """{name: array} -> {name: array}, or raises RuntimeError."""
        L, c = self.L, ctypes
        s = c.c_void_p()
        self.ok(L.ortmk_session_create(self.env, path.encode(), None, c.byref(s)))
        vals = [self.value(a) for a in inputs.values()]
        try:
            names = (c.c_char_p * len(inputs))(*[k.encode() for k in inputs])
            ins = (c.c_void_p * len(vals))(*vals)
            onames = (c.c_char_p * len(outputs))(*[o.encode() for o in outputs])
            outs = (c.c_void_p * len(outputs))()
            self.ok(L.ortmk_session_run(s, names, ins, c.c_size_t(len(vals)), onames,
                                        c.c_size_t(len(outputs)), outs))
            res = {}
            for o, v in zip(outputs, outs):
                res[o] = self.to_numpy(c.c_void_p(v))
                L.ortmk_value_destroy(c.c_void_p(v))
            return res
        finally:
            for v in vals:
                L.ortmk_value_destroy(v)
            L.ortmk_session_destroy(s)


ORT_JS = r"""
const ort = require(process.argv[2] + '/onnxruntime-node');
const fs = require('fs');
const TYPES = {float32: Float32Array, float64: Float64Array, int32: Int32Array,
               int64: BigInt64Array, bool: Uint8Array};
(async () => {
  const jobs = JSON.parse(fs.readFileSync(process.argv[3]));
  const results = [];
  for (const job of jobs) {
    try {
      const s = await ort.InferenceSession.create(job.model, {intraOpNumThreads: 1});
      const feeds = {};
      for (const [k, v] of Object.entries(job.inputs)) {
        if (v.type === 'string') { feeds[k] = new ort.Tensor('string', v.data, v.dims); continue; }
        const b = Buffer.from(v.b64, 'base64');
        const T = TYPES[v.type];
        const a = new T(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
        feeds[k] = new ort.Tensor(v.type, a, v.dims);
      }
      const r = await s.run(feeds);
      const out = {};
      for (const k of Object.keys(r)) {
        const t = r[k];
        if (t.type === 'string') { out[k] = {type: 'string', dims: t.dims, data: Array.from(t.data)}; continue; }
        const d = t.data;
        out[k] = {type: t.type, dims: t.dims,
                  b64: Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('base64')};
      }
      results.push(out);
    } catch (e) { results.push({error: String(e.message || e)}); }
  }
  console.log(JSON.stringify(results));
})().catch(e => { console.error(e.message); process.exit(1); });
"""
NP_OF_JS = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
            "bool": np.uint8}


def ort_run_many(mods, work, jobs):
    """jobs: [(model path, {name: array})] -> [{name: array} or {"error": msg}]."""
    js = os.path.join(work, "ort_ml.js")
    with open(js, "w") as f:
        f.write(ORT_JS)
    enc = []
    for path, inputs in jobs:
        ins = {}
        for k, a in inputs.items():
            if a.dtype.kind in "OUS":
                ins[k] = {"type": "string", "dims": list(a.shape),
                          "data": [str(s) for s in a.ravel()]}
            else:
                a = np.ascontiguousarray(a)
                ins[k] = {"type": DTYPES[a.dtype][1], "dims": list(a.shape),
                          "b64": base64.b64encode(a.tobytes()).decode()}
        enc.append({"model": path, "inputs": ins})
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=work, delete=False) as f:
        json.dump(enc, f)
    p = subprocess.run(["node", js, mods, f.name], capture_output=True, text=True, timeout=300)
    if p.returncode:
        raise RuntimeError("node: " + p.stderr.strip()[-500:])
    out = []
    for r in json.loads(p.stdout):
        if "error" in r:
            out.append(r)
            continue
        res = {}
        for k, v in r.items():
            if v["type"] == "string":
                res[k] = np.array(v["data"], dtype=object).reshape(v["dims"])
            else:
                res[k] = np.frombuffer(base64.b64decode(v["b64"]),
                                       dtype=NP_OF_JS[v["type"]]).reshape(v["dims"])
        out.append(res)
    return out


def same(got, want, rtol=1e-5, atol=1e-5):
    """(ok, why) comparing one output.  rtol < 0: relative to the largest
    |reference| of the tensor (sums of large terms that cancel, as an SVR's
    kernel expansion, differ by the terms' rounding, not the result's)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False, "shape %s vs %s" % (list(got.shape), list(want.shape))
    if want.dtype == object or got.dtype == object:
        bad = int(sum(a != b for a, b in zip(got.ravel(), want.ravel())))
        return bad == 0, "%d of %d labels differ" % (bad, want.size)
    if got.dtype != want.dtype:
        return False, "dtype %s vs %s" % (got.dtype, want.dtype)
    if want.dtype.kind in "iub":
        bad = int((got != want).sum())
        return bad == 0, "%d of %d differ" % (bad, want.size)
    g, w = got.astype(np.float64), want.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    scale = np.abs(w) if rtol >= 0 else np.nanmax(np.abs(w)) if w.size else 0.0
    err = np.where(both_nan, 0, np.abs(g - w) - atol - abs(rtol) * scale)
    worst = float(np.nanmax(np.abs(g - w) * ~both_nan)) if g.size else 0.0
    ok = not np.any(np.isnan(err)) and (g.size == 0 or float(err.max()) <= 0)
    return ok, "max |diff| %.3g" % worst


class Runner:
    """Collects (name, model, inputs, outputs) cases, runs them all through
    ONNX Runtime in one process and through ortmk, and checks."""

    def __init__(self, lib, mods, work, tally):
        self.mk = Ortmk(lib)
        self.mods, self.work, self.t = mods, work, tally
        self.cases = []

    def add(self, name, path, inputs, outputs, rtol=1e-5, atol=1e-5, ort_fails=False,
            ref=None, first_column=()):
        """ref: (model, inputs) ONNX Runtime runs instead (a type it has no
        kernel for, compared through an equivalent model).  first_column:
        outputs compared on column 0 only (ONNX Runtime leaves the other
        unset)."""
        self.cases.append((name, path, inputs, outputs, rtol, atol, ort_fails,
                           ref or (path, inputs), first_column))

    def run(self):
        refs = ort_run_many(self.mods, self.work, [c[7] for c in self.cases])
        for (name, path, inputs, outputs, rtol, atol, ort_fails, _, first), ref in zip(
                self.cases, refs):
            try:
                got = self.mk.run(path, inputs, outputs)
            except RuntimeError as e:
                got = {"error": str(e)}
            if ort_fails or "error" in ref:
                # both must refuse (ONNX Runtime's message is not ours)
                self.t.check("error" in got and "error" in ref,
                             "%s: refused by both (ortmk: %s; ORT: %s)" %
                             (name, got.get("error", "ran")[:120], ref.get("error", "ran")[:120]))
                continue
            if "error" in got:
                self.t.check(False, "%s: ortmk failed: %s" % (name, got["error"][:300]))
                continue
            for o in outputs:
                g, w = (got[o][:, :1], ref[o][:, :1]) if o in first else (got[o], ref[o])
                ok, why = same(g, w, rtol, atol)
                self.t.check(ok, "%s: %s %s" % (name, o, why))
        self.cases = []
