#!/usr/bin/python3
"""ort_optimized: run the graphs ONNX Runtime's optimizer writes through
ortmk (issue 19, part 2).

usage: tools/zoo/ort_optimized.py [--zoo BUILD/zoo] [--build-dir build]
           [--level extended|all|basic] [--only NAME[,NAME]] [--opset 17]
           [--node-modules DIR] [--threads T] [--keep DIR]

For every zoo model (docs/ZOO.md; the cache tools/zoo/gen.py fills) with
an fp32 export at the opset, onnxruntime-node creates a session with
graphOptimizationLevel LEVEL and optimizedModelFilePath, which saves the
graph it optimized (fused: FusedConv, FusedGemm, Attention,
SkipLayerNormalization, ...).  ortmk runs that file (ort-run) and ONNX
Runtime runs the ORIGINAL model, on the zoo's input set a; the outputs are
compared with the zoo's fp32 tolerance (zoo_compare.py: 1e-4 of max|ref|
plus 1e-3 relative).  One line per model:

    model  status  worst  ops-outside-ai.onnx  reason

status: pass, fail (ortmk ran and disagrees or its run failed), refused
(ortmk would not load the optimized file: the reason is its message),
ort-fails (ONNX Runtime could not optimize or run the model).  'all' adds
ONNX Runtime's layout transformations (NCHWc: com.microsoft.nchwc ReorderInput,
Conv) that are internal to its CPU provider; ortmk refuses those by name.
Exit status 0 when every model passed.  Outside CI (minutes per model).
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import zoo_compare  # noqa: E402
from zoo_run import find_node_modules, inputs_of, run_ort, run_ortmk  # noqa: E402

SAVE_JS = r"""
const ort = require(process.argv[2] + '/onnxruntime-node');
(async () => {
  await ort.InferenceSession.create(process.argv[3], {
    graphOptimizationLevel: process.argv[5], optimizedModelFilePath: process.argv[4],
    intraOpNumThreads: 1});
})().catch(e => { console.error(e.message); process.exit(1); });
"""


def save_optimized(mods, model, out, level, work):
    js = os.path.join(work, "save.js")
    with open(js, "w") as f:
        f.write(SAVE_JS)
    p = subprocess.run(["node", js, mods, model, out, level], capture_output=True, text=True,
                       timeout=1200)
    return None if p.returncode == 0 and os.path.exists(out) else \
        (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]


def foreign_ops(path):
    """{domain.op: count} of the nodes outside ai.onnx (subgraphs too)."""
    m = onnx.load(path, load_external_data=False)
    seen = collections.Counter()

    def walk(g):
        for n in g.node:
            if n.domain not in ("", "ai.onnx"):
                seen["%s.%s" % (n.domain.replace("com.microsoft", "ms"), n.op_type)] += 1
            elif n.op_type == "SimplifiedLayerNormalization":
                seen[n.op_type] += 1
            for a in n.attribute:
                if a.g and a.g.node:
                    walk(a.g)
    walk(m.graph)
    return seen


def load_npy_dir(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}


def run_one(a, mods, name, work):
    meta_p = os.path.join(a.zoo, name, "meta.json")
    model = os.path.join(a.zoo, name, "op%d" % a.opset, "fp32.onnx")
    if not os.path.exists(meta_p) or not os.path.exists(model):
        return None
    with open(meta_p) as f:
        meta = json.load(f)
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    opt = os.path.join(d, "opt_%s.onnx" % a.level)
    err = save_optimized(mods, model, opt, a.level, d)
    if err:
        return "ort-fails", float("nan"), "", "optimizing: " + err
    ops = foreign_ops(opt)
    ops_s = ",".join("%s:%d" % kv for kv in sorted(ops.items())) or "-"
    feeds = inputs_of(a.zoo, meta, "a")
    got_dir, ref_dir = os.path.join(d, "ortmk"), os.path.join(d, "ort")
    res, why = run_ortmk(a.ort_run, opt, feeds, got_dir, a.threads)
    if why:
        return why[0], float("nan"), ops_s, why[1]
    ref = run_ort(mods, model, [("a", feeds, ref_dir)], [a.threads])[(a.threads, "a")]
    if "error" in ref:
        return "ort-fails", float("nan"), ops_s, ref["error"]
    ok, worst, reason = zoo_compare.compare_outputs(load_npy_dir(got_dir), load_npy_dir(ref_dir),
                                                    "fp32", meta.get("kind", "tensor"))
    return ("pass" if ok else "fail"), worst, ops_s, reason


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zoo", default=os.path.join(REPO, "build", "zoo"))
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--level", default="extended", choices=("basic", "extended", "all"))
    ap.add_argument("--only", default="")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--node-modules")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keep", help="keep the optimized files and outputs here")
    a = ap.parse_args()
    a.ort_run = os.path.join(a.build_dir, "tools", "ort-run")
    mods = find_node_modules(a.node_modules)
    if not mods:
        print("onnxruntime-node not found", file=sys.stderr)
        return 2
    names = a.only.split(",") if a.only else sorted(
        n for n in os.listdir(a.zoo) if os.path.exists(os.path.join(a.zoo, n, "meta.json")))
    work = a.keep or tempfile.mkdtemp(prefix="ort-opt-")
    os.makedirs(work, exist_ok=True)
    print("%-40s %-9s %-8s %-50s %s" % ("model", "status", "worst", "ops outside ai.onnx",
                                        "reason"))
    bad = 0
    for name in names:
        r = run_one(a, mods, name, work)
        if r is None:
            continue
        status, worst, ops, reason = r
        bad += status != "pass"
        print("%-40s %-9s %-8.3g %-50s %s" % (name, status, worst, ops, reason[:200]),
              flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
