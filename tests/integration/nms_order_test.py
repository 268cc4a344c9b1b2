#!/usr/bin/python3
"""NonMaxSuppression and TopK with tied scores, as saturated detectors
produce them: ortmk's selected boxes must come in ONNX Runtime's order,
element for element (issue 17).  The spec leaves ties open; ONNX Runtime
takes each class's boxes from a max-heap on the score alone, TopK breaks
ties by the lower index.  Cases: every score 1.0, scores on a coarse grid
(many ties), a score threshold, a max per class, two batches and three
classes, boxes overlapping or not, hundreds kept with some of zero area.

Usage: nms_order_test.py ORT_RUN WORK [NODE_MODULES]
Exits 77 (skip) when onnxruntime-node is not installed (tools/dev.sh
installs it; see tools/bench/bench_run.py for where it is looked for)."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True   # ort_ref beside this file: no __pycache__ in the tree
from ort_ref import Tally, node_modules, run_js, write_js  # noqa: E402

T = Tally()
check = T.check
rng = np.random.default_rng(17)

ORT_JS = r"""
const ort = require(process.argv[2] + '/onnxruntime-node');
const fs = require('fs');
(async () => {
  const job = JSON.parse(fs.readFileSync(process.argv[3]));
  const s = await ort.InferenceSession.create(job.model);
  const b = new Float32Array(job.boxes), sc = new Float32Array(job.scores);
  const r = await s.run({boxes: new ort.Tensor('float32', b, job.bshape),
                         scores: new ort.Tensor('float32', sc, job.sshape)});
  const out = {};
  for (const k of Object.keys(r)) out[k] = {dims: r[k].dims, data: Array.from(r[k].data, Number)};
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e.message); process.exit(1); });
"""



def model(path, nb, nc, n, max_out, thresh, k):
    inits = [numpy_helper.from_array(np.array([max_out], np.int64), "max"),
             numpy_helper.from_array(np.array([0.5], np.float32), "iou"),
             numpy_helper.from_array(np.array([k], np.int64), "k")]
    ins = ["boxes", "scores", "max", "iou"]
    if thresh is not None:
        inits.append(numpy_helper.from_array(np.array([thresh], np.float32), "thr"))
        ins.append("thr")
    nodes = [helper.make_node("NonMaxSuppression", ins, ["sel"]),
             helper.make_node("TopK", ["scores", "k"], ["tv", "ti"], axis=-1)]
    g = helper.make_graph(nodes, "nms", [
        helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [nb, n, 4]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [nb, nc, n])],
        [helper.make_tensor_value_info("sel", TensorProto.INT64, None),
         helper.make_tensor_value_info("tv", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("ti", TensorProto.INT64, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def boxes(nb, n, spread):
    c = rng.uniform(0, spread, (nb, n, 2))
    wh = rng.uniform(2, 6, (nb, n, 2))
    return np.concatenate([c, c + wh], axis=-1).astype(np.float32)


def main():
    ort_run, work = sys.argv[1], sys.argv[2]
    mods = node_modules(sys.argv[3] if len(sys.argv) > 3 else None)
    if not mods:
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    js = write_js(work, ORT_JS)
    cases = [("all 1.0", 1, 1, 64, 64, None, lambda s: np.ones(s), 10),
             ("grid, threshold", 2, 3, 200, 20, 0.25, lambda s: np.round(rng.uniform(0, 1, s), 1), 30),
             ("grid, spread out", 1, 2, 300, 300, None, lambda s: np.round(rng.uniform(0, 1, s) * 4) / 4, 50),
             ("saturated sigmoid", 2, 1, 150, 40, 0.05,
              lambda s: 1 / (1 + np.exp(-rng.uniform(-30, 30, s).astype(np.float32))), 40),
             # hundreds kept against each candidate (nms_overlaps' vectors of
             # four), some boxes of zero width or height
             ("many kept, degenerate", 1, 2, 600, 500, None, lambda s: rng.uniform(0, 1, s), 20)]
    for name, nb, nc, n, max_out, thr, gen, k in cases:
        d = os.path.join(work, name.replace(" ", "_").replace(",", ""))
        os.makedirs(d)
        path = os.path.join(d, "nms.onnx")
        model(path, nb, nc, n, max_out, thr, k)
        b = boxes(nb, n, 200 if "spread" in name or "many" in name else 20)
        if "degenerate" in name:
            flat = b.reshape(-1, 4)
            z = rng.random(len(flat)) < 0.1
            flat[z, 2] = flat[z, 0]   # zero height
            z = rng.random(len(flat)) < 0.05
            flat[z, 3] = flat[z, 1]   # zero width
        s = gen((nb, nc, n)).astype(np.float32)
        np.save(os.path.join(d, "boxes.npy"), b)
        np.save(os.path.join(d, "scores.npy"), s)
        out = os.path.join(d, "out")
        p = subprocess.run([ort_run, path, "--input", "boxes=" + os.path.join(d, "boxes.npy"),
                            "--input", "scores=" + os.path.join(d, "scores.npy"),
                            "--output-dir", out], capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, "%s: ortmk runs (%s)" % (name, p.stderr.strip()[-200:]))
        job = os.path.join(d, "job.json")
        with open(job, "w") as f:
            json.dump({"model": path, "boxes": b.ravel().tolist(), "scores": s.ravel().tolist(),
                       "bshape": list(b.shape), "sshape": list(s.shape)}, f)
        q = run_js(js, mods, job)
        check(q.returncode == 0, "%s: ONNX Runtime runs (%s)" % (name, q.stderr.strip()[-200:]))
        if p.returncode or q.returncode:
            continue
        ref = json.loads(q.stdout)
        for o in ("sel", "tv", "ti"):
            got = np.load(os.path.join(out, o + ".npy"))
            want = np.array(ref[o]["data"], got.dtype).reshape(ref[o]["dims"])
            same = got.shape == want.shape and np.array_equal(got, want)
            check(same, "%s: %s %s equal to ONNX Runtime's (%d ties among the scores)" %
                  (name, o, list(got.shape), s.size - len(np.unique(s))))
    return T.result()


if __name__ == "__main__":
    sys.exit(main())
