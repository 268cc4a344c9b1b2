"""What the integration tests that compare with ONNX Runtime share: finding
onnxruntime-node (tools/dev.sh installs it; tools/bench/bench_run.py says
where it is looked for), writing and running a node.js job against it, and
counting checks."""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "bench"))
sys.dont_write_bytecode = True
from bench_run import find_node_modules  # noqa: E402


class Tally:
    """ok/FAIL lines and the final "N passed, M failed"."""

    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        self.passed += bool(ok)
        self.failed += not ok

    def result(self):
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0


def node_modules(arg=None):
    """The node_modules holding onnxruntime-node, or None (the caller exits
    77: skipped) when it or node is missing."""
    mods = find_node_modules(arg)
    if not mods or not shutil.which("node"):
        print("onnxruntime-node or node not found: skipped")
        return None
    return mods


def write_js(work, source):
    path = os.path.join(work, "ort.js")
    with open(path, "w") as f:
        f.write(source)
    return path


def run_js(js, mods, job):
    """node JS MODS JOB: the script reads its job file and prints JSON."""
    return subprocess.run(["node", js, mods, job], capture_output=True, text=True, timeout=120)


# A node.js job over many models: argv[3] is a JSON list of {model, inputs:
# {name: {type, dims, b64}}}; prints a JSON list of {ok, out: {name: {dims,
# type, b64}}} or {ok: false, error}.  Tensors cross as raw little-endian
# bytes (base64), so values keep their bits both ways.
ORT_JOBS_JS = r"""
const ort = require(process.argv[2] + '/onnxruntime-node');
const fs = require('fs');
const TA = {float32: Float32Array, float64: Float64Array, uint8: Uint8Array, int8: Int8Array,
            int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
            int64: BigInt64Array, uint64: BigUint64Array, float16: Uint16Array};
(async () => {
  const jobs = JSON.parse(fs.readFileSync(process.argv[3]));
  const res = [];
  for (const job of jobs) {
    try {
      const s = await ort.InferenceSession.create(job.model, {intraOpNumThreads: 1});
      const feeds = {};
      for (const [k, v] of Object.entries(job.inputs)) {
        const buf = Buffer.from(v.b64, 'base64');
        const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length);
        feeds[k] = new ort.Tensor(v.type, new TA[v.type](ab), v.dims);
      }
      const r = await s.run(feeds);
      const out = {};
      for (const k of Object.keys(r)) {
        const d = r[k].data;
        out[k] = {dims: r[k].dims, type: r[k].type,
                  b64: Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('base64')};
      }
      res.push({ok: true, out: out});
    } catch (e) {
      res.push({ok: false, error: e.message});
    }
  }
  console.log(JSON.stringify(res));
})().catch(e => { console.error(e.message); process.exit(1); });
"""
