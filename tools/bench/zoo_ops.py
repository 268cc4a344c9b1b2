#!/usr/bin/python3
"""zoo_ops.py: where a zoo model's time goes, by class of op, in ortmk and
in ONNX Runtime, each in the whole model (not one op at a time, as
`ort-bench --ops` does for the benchmark graphs).

    tools/bench/zoo_ops.py resnet50 [--threads 1] [--iters 5] [--variant fp32]
                           [--inputs a] [--build-dir build] [--zoo BUILD/zoo]

ortmk's side is the CPU provider's per-node profile (ORTMK_CPU_PROFILE:
wall time of each node, fused tails included) over `ort-run --iters N`;
ONNX Runtime's is its own session profile (ort_npy_median.js with
ORT_PROFILE_PREFIX: each node's kernel time) over the same inputs, thread
count and iterations.  A fused node is counted in its first op's class on
both sides (ortmk's Conv+Relu+Add and ORT's FusedConv both under Conv), so
compare classes, not nodes.  Prints the two totals of node time and a row
a class: milliseconds a run on each side and their ratio.  The totals
leave out each runtime's per-run costs outside its nodes.
"""
import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CLASSES = (
    ("Conv (fused tails, elementwise)",
     {"Conv", "FusedConv", "Relu", "Add", "Sum", "Clip", "HardSigmoid", "HardSwish", "Mul",
      "Sigmoid"}),
    ("MatMul, Gemm, attention",
     {"MatMul", "FusedMatMul", "Gemm", "Attention", "MultiHeadAttention", "Softmax",
      "MatMulNBits", "MatMulInteger", "DynamicQuantizeMatMul"}),
    ("normalization, GELU",
     {"LayerNormalization", "SkipLayerNormalization", "BiasGelu", "Gelu", "FastGelu", "Erf",
      "Div", "Sub", "Pow", "Sqrt", "ReduceMean", "BatchNormalization"}),
    ("layout reorders (ORT's NCHWc)", {"ReorderInput", "ReorderOutput"}),
    ("Concat, Split, Slice, Transpose", {"Concat", "Split", "Slice", "Transpose"}),
)


def op_class(op):
    op = op.split("+")[0]
    if "Pool" in op:
        return op
    for name, ops in CLASSES:
        if op in ops:
            return name
    return "other"


def inputs_of(d):
    return [(f[:-4], os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")]


def ortmk_classes(a, model, ins, tmp):
    prof = os.path.join(tmp, "ortmk.tsv")
    cmd = [os.path.join(a.build_dir, "tools", "ort-run"), model, "--json", "--iters",
           str(a.iters), "--warmup", "2", "--threads", str(a.threads)]
    for name, path in ins:
        cmd += ["--input", "%s=%s" % (name, path)]
    p = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, ORTMK_CPU_PROFILE=prof))
    if p.returncode or not os.path.exists(prof):
        sys.exit("zoo_ops: ort-run failed: %s" % (p.stderr.strip().splitlines() or ["?"])[-1])
    out = collections.defaultdict(float)
    with open(prof) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) == 6:
                out[op_class(cols[2])] += float(cols[4]) / 1e3   # us a run -> ms
    return out


def ort_classes(a, model, indir, tmp):
    prefix = os.path.join(tmp, "ort")
    p = subprocess.run(["node", os.path.join(HERE, "ort_npy_median.js"), model, indir,
                        str(a.threads), str(a.iters), "2"], capture_output=True, text=True,
                       env=dict(os.environ, ORT_PROFILE_PREFIX=prefix))
    files = glob.glob(prefix + "*.json")
    if p.returncode or not files:
        sys.exit("zoo_ops: ONNX Runtime failed: %s" %
                 (p.stderr.strip().splitlines() or ["no profile written"])[-1])
    with open(files[0]) as f:
        events = json.load(f)
    out = collections.defaultdict(float)
    runs = a.iters + 2
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            out[op_class(e.get("args", {}).get("op_name", "?"))] += e["dur"] / 1e3 / runs
    return out


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1].strip())
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--variant", default="fp32")
    ap.add_argument("--inputs", default="a")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--zoo", default=None)
    a = ap.parse_args()
    zoo = a.zoo or os.path.join(a.build_dir, "zoo")
    mdir = os.path.join(zoo, a.model)
    ops = sorted((d for d in os.listdir(mdir) if d.startswith("op")), reverse=True) \
        if os.path.isdir(mdir) else []
    models = [os.path.join(mdir, d, a.variant + ".onnx") for d in ops]
    models = [m for m in models if os.path.exists(m)]
    indir = os.path.join(mdir, "in", a.inputs)
    if not models or not os.path.isdir(indir):
        sys.exit("zoo_ops: no %s model or inputs '%s' under %s (tools/zoo/gen.py makes them)" %
                 (a.variant, a.inputs, mdir))
    with tempfile.TemporaryDirectory(prefix="zoo_ops") as tmp:
        k = ortmk_classes(a, models[0], inputs_of(indir), tmp)
        o = ort_classes(a, models[0], indir, tmp)
    tk, to = sum(k.values()), sum(o.values())
    print("%s %s, %d thread(s): node time a run, ortmk %.2f ms, ONNX Runtime %.2f ms (%.2fx)" %
          (a.model, a.variant, a.threads, tk, to, tk / to if to else float("nan")))
    for c in sorted(set(k) | set(o), key=lambda c: -max(k.get(c, 0.0), o.get(c, 0.0))):
        r = "%.2fx" % (k[c] / o[c]) if o.get(c) and k.get(c) else "-"
        print("  %-34s ortmk %9.2f  ORT %9.2f  %s" % (c, k.get(c, 0.0), o.get(c, 0.0), r))


if __name__ == "__main__":
    main()
