#!/usr/bin/python3
"""zoo_bench.py: ortmk against ONNX Runtime on the models of the zoo
(tools/zoo: CACHE/<model>/op<N>/<variant>.onnx, inputs in
CACHE/<model>/in/<set>/*.npy), the figures of docs/PERFORMANCE.md's
"Real architectures" section.

usage: tools/bench/zoo_bench.py [--zoo DIR] [--build-dir build]
           [--models all|a,b] [--variants fp32,int8,fp16] [--opset 17]
           [--threads 1,2] [--rounds 2] [--budget-ms 1000] [--iters N]
           [--set a] [--batch N] [--json FILE]

For every (variant, model, threads) it runs, R rounds, `ort-run MODEL
--json` and ONNX Runtime (ort_npy_median.js: onnxruntime-node,
intraOpNumThreads = T, interOpNumThreads 1, sequential, all graph
optimisations) back to back, alternating which goes first, each with
--iters timed runs after a warmup run, and prints the median over rounds
of each side's median latency, their ratio ortmk / ORT, and the median of
the per-round ratios (`paired`: the two ran seconds apart, so slow phases
of a shared machine cancel better).  --iters defaults per model from a
first untimed run: --budget-ms of runs per side and round, 3 to 20.  The
median over rounds of each side's session creation time (a single one
follows the VM's memory state: a process touching memory the host took
back pays for it) and the last round's peak memory (ortmk: the
application plus the provider process; ORT: the node process) are
printed too.  At the end: the geometric mean of the paired ratios per
variant and thread count.  The first lines name the CPU, its flags that
pick kernels, the ONNX Runtime version, the commit and the load average.

--batch N feeds N images a run: set a's inputs (one image each) repeated
N times along dim 0, each copy but the first with seeded noise of 1% of
the input's spread added (a classifier's batch of distinct images), made
in a temporary folder; models whose first input dimension is not dynamic
fail and are skipped.

--models all takes every model of the cache that has the variant at
--opset (else at its newest opset).  A model that fails on either side
is reported and skipped.  Run it on a quiet machine.
"""
import argparse
import json
import math
import os
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni",
         "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16")
TIMEOUT = 900


def cpu_line():
    model, flags = "?", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k.strip() == "model name" and model == "?":
                    model = v.strip()
                elif k.strip() == "flags" and not flags:
                    flags = set(v.split())
    except OSError:
        pass
    return "%s, %d CPUs; flags: %s" % (model, os.cpu_count() or 0,
                                       " ".join(f for f in FLAGS if f in flags) or "none")


def ortmk(a, model, ins, threads, iters):
    cmd = [os.path.join(a.build_dir, "tools", "ort-run"), model, "--json", "--iters", str(iters),
           "--warmup", "1", "--threads", str(threads)]
    for name, path in ins:
        cmd += ["--input", "%s=%s" % (name, path)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    if p.returncode:
        raise RuntimeError("ortmk: " + (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
    r = json.loads(p.stdout.strip().splitlines()[-1])
    mem = (r.get("core_peak_rss_mb") or 0) + sum((r.get("ep_peak_rss_mb") or {}).values())
    return r["median_ms"], r.get("session_create_ms"), mem


def ort(a, model, indir, threads, iters):
    p = subprocess.run(["node", os.path.join(HERE, "ort_npy_median.js"), model, indir,
                        str(threads), str(iters), "1"], capture_output=True, text=True,
                       timeout=TIMEOUT)
    if p.returncode:
        raise RuntimeError("ORT: " + (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
    r = json.loads(p.stdout.strip().splitlines()[-1])
    a.ort_version = r.get("version") or a.ort_version
    return r["median_ms"], r.get("session_create_ms"), r.get("peak_rss_mb")


def model_path(a, m, variant):
    for op in [a.opset] + sorted((int(d[2:]) for d in os.listdir(os.path.join(a.zoo, m))
                                  if d.startswith("op") and d[2:].isdigit()), reverse=True):
        p = os.path.join(a.zoo, m, "op%d" % op, variant + ".onnx")
        if os.path.exists(p):
            return p, op
    return None, None


def zoo_order(a):
    """The cache's models, in the zoo's own order where it can be read."""
    names = sorted(d for d in os.listdir(a.zoo) if os.path.exists(os.path.join(a.zoo, d, "meta.json")))
    try:
        sys.path.insert(0, os.path.join(REPO, "tools", "zoo"))
        import zoo_models
        order = {n: i for i, n in enumerate(zoo_models.BY_NAME)}
        names.sort(key=lambda n: (order.get(n, 1e9), n))
    except Exception:
        pass
    return names


def batched(a, m):
    """Set a's inputs of model m as a batch of a.batch (see --batch)."""
    import numpy as np
    src = os.path.join(a.zoo, m, "in", "a")
    dst = os.path.join(a.tmp, m)
    os.makedirs(dst, exist_ok=True)
    rng = np.random.default_rng(1)
    for f in os.listdir(src):
        if f.endswith(".npy"):
            x = np.load(os.path.join(src, f))
            if x.ndim == 0 or x.shape[0] != 1:
                raise ValueError("input %s has no batch dimension of 1" % f)
            xs = [x]
            for _ in range(a.batch - 1):
                xs.append(x if x.dtype.kind != "f" else
                          (x + rng.standard_normal(x.shape) * 0.01 * float(x.std() or 1))
                          .astype(x.dtype))
            np.save(os.path.join(dst, f), np.concatenate(xs, 0))
    return dst


def bench(a, m, variant, t):
    model, op = model_path(a, m, variant)
    if not model:
        return None
    indir = batched(a, m) if a.batch > 1 else os.path.join(a.zoo, m, "in", a.set)
    ins = sorted((f[:-4], os.path.join(indir, f)) for f in os.listdir(indir) if f.endswith(".npy"))
    iters = a.iters or max(3, min(20, int(a.budget_ms / max(ortmk(a, model, ins, t, 1)[0], 1.0))))
    mk, rt, pr, kc, oc = [], [], [], [], []
    for r in range(a.rounds):
        if r % 2:
            o = ort(a, model, indir, t, iters)
            k = ortmk(a, model, ins, t, iters)
        else:
            k = ortmk(a, model, ins, t, iters)
            o = ort(a, model, indir, t, iters)
        mk.append(k[0])
        rt.append(o[0])
        pr.append(k[0] / o[0])
        kc += [k[1]] if k[1] is not None else []
        oc += [o[1]] if o[1] is not None else []
    return {"model": m, "variant": variant, "opset": op, "threads": t, "iters": iters,
            "ortmk_ms": statistics.median(mk), "ort_ms": statistics.median(rt),
            "ratio": statistics.median(mk) / statistics.median(rt),
            "paired": statistics.median(pr), "ortmk_rounds": mk, "ort_rounds": rt,
            "ortmk_create_ms": statistics.median(kc) if kc else None,
            "ort_create_ms": statistics.median(oc) if oc else None, "ortmk_mem_mb": k[2],
            "ort_mem_mb": o[2]}


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1])
    ap.add_argument("--zoo", default=os.path.join(REPO, "build", "zoo"))
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--models", default="all")
    ap.add_argument("--variants", "--variant", default="fp32")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--set", default="a")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget-ms", type=float, default=1000)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    a.tmp = tempfile.mkdtemp(prefix="zoo_bench")
    try:
        run(a)
    finally:
        shutil.rmtree(a.tmp, ignore_errors=True)


def run(a):
    a.zoo, a.build_dir = os.path.abspath(a.zoo), os.path.abspath(a.build_dir)
    a.ort_version = None
    models = zoo_order(a) if a.models == "all" else [x for x in a.models.split(",") if x]
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    print("# cpu: %s" % cpu_line())
    print("# ortmk %s (%s), %s, load average %s" % (head, a.build_dir, time.strftime("%Y-%m-%d %H:%M"),
                                                     " ".join(open("/proc/loadavg").read().split()[:3])))
    if a.batch > 1:
        print("# batch %d (set a's inputs repeated, seeded noise)" % a.batch)
    print("# %-28s %-5s %2s %3s %10s %10s %6s %6s %9s %9s %7s %7s" % (
        "model", "var", "op", "thr", "ortmk ms", "ORT ms", "ratio", "paired", "create k", "create O",
        "MB k", "MB O"), flush=True)
    rows, t0 = [], time.time()
    for variant in a.variants.split(","):
        for m in models:
            for t in [int(x) for x in a.threads.split(",")]:
                try:
                    row = bench(a, m, variant, t)
                except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
                    print("  %-28s %-5s     %3d  skipped: %s" % (m, variant, t, str(e)[:160]), flush=True)
                    continue
                if not row:
                    continue
                rows.append(row)
                print("  %-28s %-5s %2d %3d %10.3f %10.3f %6.2f %6.2f %9.0f %9.0f %7.0f %7.0f" % (
                    m, variant, row["opset"], t, row["ortmk_ms"], row["ort_ms"], row["ratio"],
                    row["paired"], row["ortmk_create_ms"] or 0, row["ort_create_ms"] or 0,
                    row["ortmk_mem_mb"] or 0, row["ort_mem_mb"] or 0), flush=True)
    print("# ONNX Runtime %s; %.0f s" % (a.ort_version or "?", time.time() - t0))
    for variant in a.variants.split(","):
        for t in [int(x) for x in a.threads.split(",")]:
            rs = [r["paired"] for r in rows if r["variant"] == variant and r["threads"] == t]
            if rs:
                gm = math.exp(sum(math.log(x) for x in rs) / len(rs))
                print("# %s, %d thread%s: geometric mean of paired ratios %.3f over %d models; "
                      "%d above 1.1" % (variant, t, "s" if t > 1 else "", gm, len(rs),
                                        sum(1 for x in rs if x > 1.1)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": cpu_line(), "commit": head, "ort_version": a.ort_version,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
