"""What the Python package's tests share: building ONNX models with
onnx.helper, and ONNX Runtime's outputs for a model (onnxruntime-node run
by node, as tests/integration/ort_ref.py does), the reference the tests
compare ortmk with.  Never imports anything from the source tree: the tests
run against the installed package."""
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=17, **kw):
    g = helper.make_graph(nodes, kw.pop("graph_name", "g"), inputs, outputs, list(inits),
                          doc_string=kw.pop("graph_doc", ""))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], **kw)
    m.ir_version = 8
    return m


def save(m, directory, name="m.onnx"):
    path = os.path.join(str(directory), name)
    onnx.save(m, path)
    return path


def matmul_model(n):
    """y = x @ w, x [n, n] float32, w a fixed [n, n] initializer: a model
    whose run takes long enough to watch (n=1024: 2 GFLOP)."""
    w = np.random.default_rng(5).standard_normal((n, n)).astype(np.float32)
    return model([helper.make_node("MatMul", ["x", "w"], ["y"])],
                 [vi("x", TensorProto.FLOAT, [n, n])], [vi("y", TensorProto.FLOAT, [n, n])],
                 [numpy_helper.from_array(w, "w")]), w


# ---- ONNX Runtime (onnxruntime-node) ----------------------------------------

def node_modules():
    """The node_modules holding onnxruntime-node, or None."""
    for c in (os.environ.get("ORT_NODE_MODULES"), os.path.join(REPO, "node_modules"),
              "/tmp/ortnode/node_modules"):
        if c and os.path.isfile(os.path.join(c, "onnxruntime-node", "package.json")):
            return c if shutil.which("node") else None
    return None


# Tensors travel as raw little-endian files both ways: exact.
ORT_JS = r"""
const ort = require(process.argv[2] + '/onnxruntime-node');
const fs = require('fs');
const ARR = {float32: Float32Array, float64: Float64Array, int32: Int32Array,
             int64: BigInt64Array, uint8: Uint8Array, int8: Int8Array, bool: Uint8Array};
(async () => {
  const job = JSON.parse(fs.readFileSync(process.argv[3]));
  const s = await ort.InferenceSession.create(job.model, {intraOpNumThreads: 1});
  const feeds = {};
  for (const [k, v] of Object.entries(job.inputs)) {
    const b = fs.readFileSync(v.file);
    const data = new ARR[v.type](b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
    feeds[k] = new ort.Tensor(v.type, data, v.dims);
  }
  const r = await s.run(feeds);
  const out = {};
  Object.keys(r).forEach((k, i) => {
    const d = r[k].data, f = job.dir + '/out' + i + '.bin';
    fs.writeFileSync(f, Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    out[k] = {type: r[k].type, dims: r[k].dims, file: f};
  });
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e.message); process.exit(1); });
"""

_JS_TYPES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
             np.dtype(np.int32): "int32", np.dtype(np.int64): "int64",
             np.dtype(np.uint8): "uint8", np.dtype(np.int8): "int8", np.dtype(np.bool_): "bool"}


def ort_run(model_path, feeds):
    """ONNX Runtime's outputs {name: ndarray} for feeds, or None when
    onnxruntime-node is not installed (the caller skips)."""
    mods = node_modules()
    if not mods:
        return None
    with tempfile.TemporaryDirectory(prefix="ortmk-py-ort-") as work:
        job = {"model": os.path.abspath(model_path), "dir": work, "inputs": {}}
        for i, (name, arr) in enumerate(feeds.items()):
            arr = np.ascontiguousarray(arr)
            path = os.path.join(work, "in%d.bin" % i)
            arr.tofile(path)
            job["inputs"][name] = {"type": _JS_TYPES[arr.dtype], "dims": list(arr.shape),
                                   "file": path}
        with open(os.path.join(work, "job.json"), "w") as f:
            json.dump(job, f)
        js = os.path.join(work, "ort.js")
        with open(js, "w") as f:
            f.write(ORT_JS)
        p = subprocess.run(["node", js, mods, os.path.join(work, "job.json")],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, "onnxruntime-node failed: " + p.stderr
        res = {}
        for name, o in json.loads(p.stdout).items():
            dtype = {v: k for k, v in _JS_TYPES.items()}[o["type"]]
            res[name] = np.fromfile(o["file"], dtype=dtype).reshape(o["dims"])
        return res
