#!/usr/bin/python3
"""zoo_bench.py: ortmk against ONNX Runtime on models of the zoo
(tools/zoo, build/zoo/<model>/op<N>/<variant>.onnx with inputs in
<model>/in/<set>/*.npy), the figures of docs/PERFORMANCE.md's int8 section.

usage: tools/bench/zoo_bench.py [--zoo DIR] [--build-dir build]
           [--models a,b] [--variant int8] [--opset 17] [--threads 1,2]
           [--rounds 3] [--iters N] [--json]

For every (model, threads) it runs, R rounds, `ort-run MODEL --json` and
ONNX Runtime (ort_npy_median.js, onnxruntime-node) back to back,
alternating which goes first, each with --iters timed runs after a
warmup, and prints the median over rounds of each side's median, the
ratio ortmk / ORT of those, and the median of the per-round ratios
(`paired`: the two ran within seconds of each other, so slow phases of a
shared machine cancel better).  --iters defaults per model from a first
untimed run (about 2 s of runs per side and round, 3 to 20).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def ortmk(a, model, ins, threads, iters):
    cmd = [os.path.join(a.build_dir, "tools", "ort-run"), model, "--json", "--iters", str(iters),
           "--warmup", "1", "--threads", str(threads)]
    for name, path in ins:
        cmd += ["--input", "%s=%s" % (name, path)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])["median_ms"]


def ort(a, model, indir, threads, iters):
    p = subprocess.run(["node", os.path.join(HERE, "ort_npy_median.js"), model, indir,
                        str(threads), str(iters), "1"], capture_output=True, text=True,
                       check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])["median_ms"]


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1])
    ap.add_argument("--zoo", default=os.path.join(REPO, "build", "zoo"))
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--models", default="unet_1024,mnv3_cls_48x192,transformer_encoder,"
                    "gpt_decode_step,efficientnet_b0,regnet_y_400mf")
    ap.add_argument("--variant", default="int8")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--set", default="a")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    for m in [x for x in a.models.split(",") if x]:
        model = os.path.join(a.zoo, m, "op%d" % a.opset, a.variant + ".onnx")
        indir = os.path.join(a.zoo, m, "in", a.set)
        ins = sorted((f[:-4], os.path.join(indir, f)) for f in os.listdir(indir)
                     if f.endswith(".npy"))
        for t in [int(x) for x in a.threads.split(",")]:
            iters = a.iters or max(3, min(20, int(2000 / max(ortmk(a, model, ins, t, 1), 1.0))))
            mk, rt, pr = [], [], []
            for r in range(a.rounds):
                if r % 2:
                    o = ort(a, model, indir, t, iters)
                    k = ortmk(a, model, ins, t, iters)
                else:
                    k = ortmk(a, model, ins, t, iters)
                    o = ort(a, model, indir, t, iters)
                mk.append(k)
                rt.append(o)
                pr.append(k / o)
            row = {"model": m, "threads": t, "iters": iters, "ortmk_ms": statistics.median(mk),
                   "ort_ms": statistics.median(rt), "paired": statistics.median(pr),
                   "ortmk_rounds": mk, "ort_rounds": rt}
            row["ratio"] = row["ortmk_ms"] / row["ort_ms"]
            rows.append(row)
            if not a.json:
                print("%-22s %d  ortmk %9.3f ms  ORT %9.3f ms  ratio %.2f  paired %.2f" % (
                    m, t, row["ortmk_ms"], row["ort_ms"], row["ratio"], row["paired"]),
                    flush=True)
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
