#!/usr/bin/python3
"""ortmk against ortmk over the zoo: two builds (each a meson build
directory with its tools/ort-run, its core library and its providers),
interleaved per model and thread count, so a change is measured without
ONNX Runtime's own drift in the ratio (zoo_bench.py's).

usage: tools/bench/zoo_ab.py --base OLD_BUILD [--head build] [--rounds 3]
                             [--threads 1,2] [--models a,b] [--budget-ms 400]
                             [--variant fp32] [--zoo build/zoo]

The older build typically comes from a git worktree:
  git worktree add /tmp/base REV && (cd /tmp/base && meson setup build && ninja -C build)
  tools/bench/zoo_ab.py --base /tmp/base/build

Per model and thread count: iterations from the head's one-run time
(--budget-ms of runs, 3 to 20, as zoo_bench.py), then R rounds of
`ort-run --json` for each build, alternating which goes first; the figure
is the median of the per-round ratios head / base (below 1: the head is
faster). Last, the geometric means per thread count.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

sys.dont_write_bytecode = True   # zoo_models: no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
TIMEOUT = 900


def run(build, model, indir, threads, iters):
    cmd = [os.path.join(build, "tools", "ort-run"), model, "--json", "--iters", str(iters),
           "--warmup", "1", "--threads", str(threads)]
    for f in sorted(os.listdir(indir)):
        if f.endswith(".npy"):
            cmd += ["--input", "%s=%s" % (f[:-4], os.path.join(indir, f))]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    if p.returncode:
        last = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        raise RuntimeError("%s: %s" % (build, last))
    return json.loads(p.stdout.strip().splitlines()[-1])["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the older build directory")
    ap.add_argument("--head", default=os.path.join(REPO, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default="")
    ap.add_argument("--budget-ms", type=float, default=400)
    ap.add_argument("--variant", default="fp32")
    ap.add_argument("--zoo", default=os.path.join(REPO, "build", "zoo"))
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(REPO, "tools", "zoo"))
    import zoo_models
    names = a.models.split(",") if a.models else list(zoo_models.BY_NAME)
    threads = [int(t) for t in a.threads.split(",")]
    res = {t: [] for t in threads}
    for m in names:
        model = os.path.join(a.zoo, m, "op17", a.variant + ".onnx")
        indir = os.path.join(a.zoo, m, "in", "a")
        if not os.path.exists(model):
            continue
        for t in threads:
            try:
                iters = max(3, min(20, int(a.budget_ms / max(run(a.head, model, indir, t, 1), 1.0))))
                rs = []
                for r in range(a.rounds):
                    if r % 2:
                        h = run(a.head, model, indir, t, iters)
                        b = run(a.base, model, indir, t, iters)
                    else:
                        b = run(a.base, model, indir, t, iters)
                        h = run(a.head, model, indir, t, iters)
                    rs.append(h / b)
            except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
                print("%-40s T=%d failed: %s" % (m, t, e), flush=True)
                continue
            q = statistics.median(rs)
            res[t].append(q)
            print("%-40s T=%d head/base %.3f  (%s)" % (m, t, q, " ".join("%.3f" % x for x in rs)),
                  flush=True)
    for t in threads:
        if res[t]:
            print("T=%d geomean head/base %.4f over %d models" %
                  (t, math.exp(sum(map(math.log, res[t])) / len(res[t])), len(res[t])))


if __name__ == "__main__":
    main()
