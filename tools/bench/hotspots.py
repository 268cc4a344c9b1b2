"""Where each runtime spends a model's run, from its own profiler.

Used by `ort-bench --profile`.  ortmk: `perf record --call-graph dwarf` on
ort-run, whose ort-ep-cpu child is sampled too; each `*_compute` function
(one per op kernel) gets its inclusive share of the provider's run path
(`cpu_run`, so session creation and weight loading are left out), and the
hottest functions by self time (share of all the provider's samples, the
ring's spinning between runs included) are listed.  Samples count CPU time, so these
shares hold on a loaded machine, where wall-clock timings do not.  ONNX
Runtime: its own profiler (enableProfiling) on the optimised graph, with the
fused nodes it really runs; the median over runs of each node's kernel
time, summed per op type.
"""
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile

from bench_run import run_ort

CHILDREN = re.compile(r"^\s*([\d.]+)%\s+[\d.]+%\s+\[\.\]\s+(\S+)")
SELF = re.compile(r"^\s*([\d.]+)%\s+\[\.\]\s+(\S+)")


def _report(perf, data, children):
    """[(percent, symbol)] of ort-ep-cpu's user-space samples."""
    cmd = [perf, "report", "-i", data, "--stdio", "--sort", "symbol", "--comms", "ort-ep-cpu",
           "-g", "none", "--percent-limit", "0.3"]
    cmd.append("--children" if children else "--no-children")
    p = subprocess.run(cmd, capture_output=True, text=True)
    rows = []
    for ln in p.stdout.splitlines():
        m = (CHILDREN if children else SELF).match(ln)
        if m:
            rows.append((float(m.group(1)), m.group(2)))
    return rows


def perf_ortmk(ort_run, meta, iters, warmup):
    """{"kernels": [[name, % of the run path]], "hot": [[symbol, % of the
    provider's samples, self time]]} or {"error": ...}."""
    perf = shutil.which("perf")
    if not perf:
        return {"error": "perf not found"}
    d = tempfile.mkdtemp(prefix="ortmk-perf-")
    try:
        return _perf_ortmk(perf, ort_run, meta, iters, warmup, os.path.join(d, "perf.data"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _perf_ortmk(perf, ort_run, meta, iters, warmup, data):
    cmd = [perf, "record", "-q", "-F", "999", "--call-graph", "dwarf,16384", "-o", data, "--",
           ort_run, meta["model"], "--iters", str(iters), "--warmup", str(warmup),
           "--threads", "1"]
    for i in meta["inputs"]:
        cmd += ["--input", "%s=%s" % (i["name"], i["npy"])]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": "perf record: " + (p.stderr.strip().splitlines() or ["failed"])[-1]}
    children = _report(perf, data, True)
    run = next((pct for pct, sym in children if sym == "cpu_run"), 0.0)
    if run <= 0:
        return {"error": "no samples in cpu_run (is ort-ep-cpu built with symbols?)"}
    kernels = [[sym, round(100 * pct / run, 1)] for pct, sym in children
               if sym.endswith("_compute")]
    hot = [[sym, pct] for pct, sym in _report(perf, data, False)[:8]]
    return {"kernels": kernels, "hot": hot}


def ort_profile(node, mods, meta, iters, warmup):
    """{"ops": [[op type, ms per run, %]]} from ORT's profiler, 1 thread."""
    d = tempfile.mkdtemp(prefix="ort-prof-")
    try:
        r = run_ort(node, mods, meta, 1, iters, warmup, None,
                    profile_prefix=os.path.join(d, "ort"))
        if "error" in r:
            return {"error": r["error"]}
        files = glob.glob(os.path.join(d, "ort*.json"))
        if not files:
            return {"error": "ORT wrote no profile"}
        with open(files[0]) as f:
            events = json.load(f)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    # Median over runs of each node's kernel time, summed per op type: the
    # mean would follow the runs another process interrupted.
    per_node = {}
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            key = (e.get("args", {}).get("op_name", "?"), e["name"])
            per_node.setdefault(key, []).append(e.get("dur", 0))
    per_op = {}
    for (op, _), durs in per_node.items():
        per_op[op] = per_op.get(op, 0.0) + statistics.median(durs)
    total = sum(per_op.values()) or 1.0
    ops = sorted(per_op.items(), key=lambda kv: -kv[1])
    return {"ops": [[op, round(us / 1000, 3), round(100 * us / total, 1)] for op, us in ops]}
