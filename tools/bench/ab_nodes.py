#!/usr/bin/python3
"""ab_nodes: two settings of the CPU provider compared node by node, in
alternating short runs, for machines whose speed drifts (the 2-vCPU VMs
this project is measured on move by 10-40% over minutes, so two separate
benchmark runs of the same binary can disagree more than a change does).

usage: tools/bench/ab_nodes.py (--zoo NAME [--variant fp32] | MODEL --input NAME=FILE.npy ...)
           --a 'VAR=VAL ...' --b 'VAR=VAL ...' [--threads 1] [--threads-b T]
           [--rounds 7] [--iters 3] [--rows 25] [--build-dir build]

Each round runs ort-run with A's environment, B's, B's again and A's
again (the second run of a pair tends to be faster), each with
ORTMK_CPU_PROFILE, and takes every node's time per run, the mean of each
side's two.  Printed: the median over rounds of B's total / A's total,
then for the heaviest nodes (by A's median) the median of their per-round
ratios B / A.  Below 1: B is faster.  With --a and --b the same, the
total and the heavy nodes' ratios came out 0.91-1.06 (Zen 3 VM, 3-5
rounds): read a change of less than ~10% as noise; nodes under ~200 us
move by more.

Two provider builds: point one side at the other build's ort-ep-cpu with
ORTMK_EP_DIR (docs/ENVIRONMENT.md), e.g. --a ORTMK_EP_DIR=/tmp/old --b ''
after copying the old build's providers/cpu/ort-ep-cpu to /tmp/old.  An
algorithm switch: --a '' --b ORTMK_CPU_WINOGRAD=0.  --zoo NAME takes the
model and set a's inputs from build/zoo/NAME (tools/zoo/gen.py).

--threads-b T runs B with T intra-op threads (A with --threads): with
--a '' --b '' --threads 1 --threads-b 2 each node's B/A is its 2-thread
time over its 1-thread time, and a node near 1.0 is one the pool does
not split (a cost estimate under cpu_par_for's threshold, or a split
that defeats the kernel: how this project's 13th session found three).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile


def parse_env(s):
    env = {}
    for kv in s.split():
        if "=" not in kv:
            sys.exit("ab_nodes: '%s' is not VAR=VAL" % kv)
        k, v = kv.split("=", 1)
        env[k] = v
    return env


def run(ort_run, model, inputs, threads, iters, extra, prof):
    env = dict(os.environ, ORTMK_CPU_PROFILE=prof, **extra)
    if os.path.exists(prof):
        os.unlink(prof)
    cmd = [ort_run, model, "--iters", str(iters), "--warmup", "1", "--threads", str(threads)]
    for i in inputs:
        cmd += ["--input", i]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if p.returncode:
        sys.exit("ab_nodes: ort-run failed: " + (p.stderr.strip().splitlines() or ["?"])[-1])
    nodes = {}
    with open(prof) as f:
        for line in f:
            sg, k, op, name, us, runs = line.rstrip("\n").split("\t")
            key = (name or "%s#%s" % (op, k), op)
            nodes[key] = nodes.get(key, 0.0) + float(us)
    return nodes


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--zoo")
    ap.add_argument("--variant", default="fp32")
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--a", default="")
    ap.add_argument("--b", default="")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--threads-b", type=int)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--rows", type=int, default=25)
    ap.add_argument("--build-dir", default="build")
    a = ap.parse_args()
    model, inputs = a.model, list(a.input)
    if a.zoo:
        z = os.path.join(a.build_dir, "zoo", a.zoo)
        model = os.path.join(z, "op17", a.variant + ".onnx")
        ind = os.path.join(z, "in", "a")
        inputs += ["%s=%s" % (f[:-4], os.path.join(ind, f))
                   for f in sorted(os.listdir(ind)) if f.endswith(".npy")]
    if not model:
        sys.exit("ab_nodes: a model or --zoo NAME")
    ort_run = os.path.join(a.build_dir, "tools", "ort-run")
    ea, eb = parse_env(a.a), parse_env(a.b)
    ratios, times, totals = {}, {}, []
    with tempfile.TemporaryDirectory() as tmp:
        prof = os.path.join(tmp, "p.tsv")
        for r in range(a.rounds):
            # A B B A: whichever runs second in a pair tends to run faster
            # (caches, the clock); each side gets both places every round
            tb_threads = a.threads_b or a.threads
            got = [run(ort_run, model, inputs, t, a.iters, e, prof)
                   for e, t in ((ea, a.threads), (eb, tb_threads), (eb, tb_threads),
                                (ea, a.threads))]
            ta = {k: (us + got[3].get(k, us)) / 2 for k, us in got[0].items()}
            tb = {k: (us + got[2].get(k, us)) / 2 for k, us in got[1].items()}
            for k, us in ta.items():
                if k in tb and us > 0:
                    ratios.setdefault(k, []).append(tb[k] / us)
                    times.setdefault(k, []).append(us)
            totals.append(sum(tb.values()) / max(sum(ta.values()), 1e-9))
    print("total B/A %.3f (median of %d rounds; A %s, B %s%s)" %
          (statistics.median(totals), a.rounds, a.a or "unset", a.b or "unset",
           ", B at %d threads" % a.threads_b if a.threads_b else ""))
    for k in sorted(times, key=lambda k: -statistics.median(times[k]))[:a.rows]:
        print("%10.1f us  B/A %5.2f  %-16s %s" % (statistics.median(times[k]),
                                                  statistics.median(ratios[k]), k[1], k[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
