"""What the tests of the quantized com.microsoft ops (tests/msq/) share:
one-node models built with onnx.helper, running a batch of them through
ortmk (ort-run, one process per model) and through onnxruntime-node (one
node.js process for the whole batch), and the comparisons.

Tensors cross to node.js as raw little-endian bytes (base64), so float32
values keep their bits both ways."""
import base64
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.dont_write_bytecode = True
from ort_ref import ORT_JOBS_JS, Tally, node_modules, run_js, write_js  # noqa: E402,F401

NP2ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.uint8): TensorProto.UINT8,
           np.dtype(np.int8): TensorProto.INT8, np.dtype(np.int32): TensorProto.INT32,
           np.dtype(np.int64): TensorProto.INT64, np.dtype(np.float16): TensorProto.FLOAT16}
NP2ORT = {np.dtype(np.float32): "float32", np.dtype(np.uint8): "uint8",
          np.dtype(np.int8): "int8", np.dtype(np.int32): "int32",
          np.dtype(np.float16): "float16"}
ORT2NP = {v: k for k, v in NP2ORT.items()}

def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, NP2ONNX[np.dtype(dtype)], shape)

def one_node(path, op, inputs, outputs, consts=None, **attrs):
    """A model of one com.microsoft node.  inputs: list of (name, array)
    fed at run time, or None for an omitted optional input (""); consts:
    {name: array} initializers, named among the node's inputs too;
    outputs: list of (name, dtype)."""
    consts = consts or {}
    names = [n if n is not None else "" for n, _ in inputs]
    g_in = [vi(n, a.dtype, list(a.shape)) for n, a in inputs if n is not None and n not in consts]
    g_out = [helper.make_tensor_value_info(n, NP2ONNX[np.dtype(d)], None) for n, d in outputs]
    inits = [numpy_helper.from_array(a, n) for n, a in consts.items()]
    node = helper.make_node(op, names, [n for n, _ in outputs], domain="com.microsoft", **attrs)
    g = helper.make_graph([node], op, g_in, g_out, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    onnx.save(m, path)
    return {n: a for n, a in inputs if n is not None and n not in consts}

def run_ortmk(ort_run, model, feeds, work, threads=1):
    """ortmk's outputs {name: array}, or the error text."""
    args = [ort_run, model, "--threads", str(threads), "--output-dir", os.path.join(work, "out")]
    os.makedirs(os.path.join(work, "out"), exist_ok=True)
    for f in os.listdir(os.path.join(work, "out")):
        os.unlink(os.path.join(work, "out", f))
    for k, v in feeds.items():
        p = os.path.join(work, "in_%s.npy" % k)
        np.save(p, v)
        args += ["--input", "%s=%s" % (k, p)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return p.stderr.strip()[-400:]
    outs = {}
    for f in os.listdir(os.path.join(work, "out")):
        outs[f[:-4]] = np.load(os.path.join(work, "out", f))
    return outs

def run_ort(mods, work, cases):
    """cases: list of (model, feeds).  Returns, per case, {name: array} or
    the error text."""
    jobs = [{"model": m, "inputs": {k: {"type": NP2ORT[v.dtype], "dims": list(v.shape),
                                        "b64": base64.b64encode(
                                            np.ascontiguousarray(v).tobytes()).decode()}
                                    for k, v in f.items()}} for m, f in cases]
    job = os.path.join(work, "jobs.json")
    with open(job, "w") as f:
        json.dump(jobs, f)
    p = run_js(write_js(work, ORT_JOBS_JS), mods, job)
    if p.returncode != 0:
        raise SystemExit("onnxruntime-node failed: " + p.stderr[-400:])
    res = []
    for r in json.loads(p.stdout):
        if not r["ok"]:
            res.append(r["error"])
            continue
        res.append({k: np.frombuffer(base64.b64decode(v["b64"]),
                                     ORT2NP[v["type"]]).reshape(v["dims"])
                    for k, v in r["out"].items()})
    return res

def compare(a, b, kind):
    """'' when ortmk's a matches ONNX Runtime's b, else why not.  kind:
    'exact', 'q1' (quantized, within one unit), or a float tolerance
    factor t: |a - b| <= t * max(1, max|b|)."""
    if isinstance(a, str):
        return "ortmk failed: " + a
    if isinstance(b, str):
        return "onnxruntime failed: " + b
    if a.shape != b.shape or a.dtype != b.dtype:
        return "shape/type %s %s vs %s %s" % (a.shape, a.dtype, b.shape, b.dtype)
    if kind == "exact":
        d = int(np.sum(a != b))
        return "" if d == 0 else "%d of %d differ" % (d, a.size)
    if kind == "q1":
        d = np.abs(a.astype(np.int32) - b.astype(np.int32))
        m = int(d.max()) if d.size else 0
        return "" if m <= 1 else "max diff %d (%d values off)" % (m, int(np.sum(d > 1)))
    tol = kind * max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    err = float(np.max(np.abs(a.astype(np.float64) - b))) if b.size else 0.0
    return "" if err <= tol else "max err %.3g > %.3g" % (err, tol)

class Batch:
    """Cases collected, then run through both runtimes and compared."""

    def __init__(self, ort_run, work, mods):
        self.ort_run, self.work, self.mods = ort_run, work, mods
        self.cases = []
        os.makedirs(work, exist_ok=True)

    def model_path(self, name):
        return os.path.join(self.work, "".join(c if c.isalnum() else "_" for c in name) + ".onnx")

    def add(self, name, path, feeds, kind, threads=1, ref_path=None):
        """ONNX Runtime runs ref_path when given (the same node with an
        omitted zero point written as an explicit 0, where its own type
        inference cannot take the omission)."""
        self.cases.append((name, path, feeds, kind, threads, ref_path or path))

    def run(self, tally):
        refs = run_ort(self.mods, self.work, [(r, f) for _, _, f, _, _, r in self.cases])
        for (name, path, feeds, kind, threads, _), ref in zip(self.cases, refs):
            got = run_ortmk(self.ort_run, path, feeds, self.work, threads)
            if isinstance(got, str) or isinstance(ref, str):
                tally.check(False, "%s: %s" % (name, compare(got, ref, kind)))
                continue
            why = [k + ": " + compare(got.get(k, "missing output"), v, kind)
                   for k, v in ref.items()]
            why = [w for w in why if not w.endswith(": ")]
            tally.check(not why, "%s%s" % (name, (" (" + "; ".join(why) + ")") if why else ""))
