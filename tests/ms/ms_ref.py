"""What the tests of the com.microsoft ops (tests/ms/) share: small models
built with onnx.helper, a batch of them run through ortmk (ort-run, one
process per model) and through onnxruntime-node (one node.js process for
the whole batch) on the same seeded inputs, and the comparison.

Tensors cross to node.js as raw little-endian bytes (base64), so float32
values keep their bits both ways.  A case may name a second model for
ONNX Runtime (`ref_model`): the same computation written with ops ONNX
Runtime's CPU provider runs, for a form it refuses (packed QKV)."""
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

NP2ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32,
           np.dtype(np.int64): TensorProto.INT64, np.dtype(np.float16): TensorProto.FLOAT16}
NP2ORT = {np.dtype(np.float32): "float32", np.dtype(np.int32): "int32",
          np.dtype(np.int64): "int64", np.dtype(np.float16): "float16"}
ORT2NP = {v: k for k, v in NP2ORT.items()}

MS_OPSET = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]

def vi(name, arr_or_dtype, shape=None):
    dt = arr_or_dtype.dtype if shape is None else np.dtype(arr_or_dtype)
    return helper.make_tensor_value_info(name, NP2ONNX[np.dtype(dt)],
                                         list(arr_or_dtype.shape) if shape is None else shape)

def graph_model(path, nodes, feeds, outputs, consts=None):
    """A model of nodes: feeds {name: array} are graph inputs, consts
    {name: array} initializers, outputs a list of (name, dtype)."""
    consts = consts or {}
    g_in = [vi(n, a) for n, a in feeds.items()]
    g_out = [helper.make_tensor_value_info(n, NP2ONNX[np.dtype(d)], None) for n, d in outputs]
    inits = [numpy_helper.from_array(a, n) for n, a in consts.items()]
    g = helper.make_graph(nodes, "ms", g_in, g_out, inits)
    onnx.save(helper.make_model(g, opset_imports=MS_OPSET, ir_version=8), path)

def one_node(path, op, inputs, outputs, consts=None, domain="com.microsoft", **attrs):
    """One node: inputs a list of (name, array), None for an omitted
    optional input; names in consts are initializers, the rest fed."""
    consts = consts or {}
    inputs = [i if i is not None else ("", None) for i in inputs]
    names = [n for n, _ in inputs]
    feeds = {n: a for n, a in inputs if n and n not in consts}
    node = helper.make_node(op, names, [n for n, _ in outputs], domain=domain, **attrs)
    graph_model(path, [node], feeds, [o for o in outputs if o[0]], consts)
    return feeds

def check(tally, ok, what):
    tally.check(ok, what)
    return ok

class Batch:
    """Cases to run through both runtimes, then compare."""

    def __init__(self, ort_run, work, tally):
        self.ort_run, self.work, self.t = ort_run, work, tally
        self.cases = []

    def add(self, name, build, tol=1e-4, ref_build=None, expect_error=None):
        """build(path) writes the model and returns its feeds; ref_build
        the model ONNX Runtime runs instead, returning its own feeds.  expect_error:
        ortmk must refuse the model with a message containing it."""
        d = os.path.join(self.work, "c%03d" % len(self.cases))
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "m.onnx")
        feeds = build(path)
        ref, ref_feeds = path, feeds
        if ref_build:
            ref = os.path.join(d, "ref.onnx")
            ref_feeds = ref_build(ref)
        self.cases.append(dict(name=name, dir=d, model=path, ref=ref, feeds=feeds, tol=tol,
                               ref_feeds=ref_feeds, expect_error=expect_error))

    def _ortmk(self, c):
        args = [self.ort_run, c["model"], "--threads", "2", "--output-dir",
                os.path.join(c["dir"], "out")]
        for k, v in c["feeds"].items():
            p = os.path.join(c["dir"], "in_%s.npy" % k)
            np.save(p, v)
            args += ["--input", "%s=%s" % (k, p)]
        return subprocess.run(args, capture_output=True, text=True, timeout=120)

    def run(self, mods):
        js = write_js(self.work, ORT_JOBS_JS)
        jobs = [{"model": c["ref"], "inputs": {
            k: {"type": NP2ORT[v.dtype], "dims": list(v.shape),
                "b64": base64.b64encode(np.ascontiguousarray(v).tobytes()).decode()}
            for k, v in c["ref_feeds"].items()}} for c in self.cases if not c["expect_error"]]
        job = os.path.join(self.work, "jobs.json")
        with open(job, "w") as f:
            json.dump(jobs, f)
        q = run_js(js, mods, job)
        self.t.check(q.returncode == 0, "ONNX Runtime ran the batch (%s)" % q.stderr.strip()[-300:])
        refs = iter(json.loads(q.stdout) if q.returncode == 0 else [])
        for c in self.cases:
            p = self._ortmk(c)
            if c["expect_error"]:
                self.t.check(p.returncode != 0 and c["expect_error"] in p.stderr,
                             "%s: refused naming '%s' (%s)" % (c["name"], c["expect_error"],
                                                              p.stderr.strip()[-200:]))
                continue
            r = next(refs, None)
            if not check(self.t, p.returncode == 0, "%s: ortmk runs (%s)" %
                                (c["name"], p.stderr.strip()[-300:])) or r is None:
                continue
            if not check(self.t, r["ok"], "%s: ONNX Runtime runs (%s)" %
                                (c["name"], r.get("error", "")[-300:])):
                continue
            for o, v in sorted(r["out"].items()):
                want = np.frombuffer(base64.b64decode(v["b64"]), ORT2NP[v["type"]]).reshape(v["dims"])
                fp = os.path.join(c["dir"], "out", o + ".npy")
                got = np.load(fp) if os.path.exists(fp) else None
                self.compare(c["name"] + ": " + o, got, want, c["tol"])

    def compare(self, what, got, want, tol):
        if got is None or got.shape != want.shape:
            self.t.check(False, "%s: shape %s, ONNX Runtime's %s" %
                         (what, None if got is None else list(got.shape), list(want.shape)))
            return
        if want.dtype.kind in "iu":
            self.t.check(np.array_equal(got, want), "%s: %s equal" % (what, list(want.shape)))
            return
        scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
        err = float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
        self.t.check(err <= tol * scale and np.isfinite(got).all() == np.isfinite(want).all(),
                     "%s: %s max err %.3g (tol %.3g)" % (what, list(want.shape), err, tol * scale))
