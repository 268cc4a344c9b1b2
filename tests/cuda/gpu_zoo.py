#!/usr/bin/python3
"""The zoo subset of a GPU bundle (tests/cuda/gpu_bundle.sh) on cuda,cpu
against cpu, and the latencies of both (and of ONNX Runtime when its Python
package is there).  Run by tests/cuda/gpu_check.sh on a GPU machine.

usage: gpu_zoo.py BIN_DIR ZOO_DIR WORK_DIR [--iters N] [--threads T] [--only M,M]
                  [--provider LIST] [--no-ort]

Per row of ZOO_DIR/manifest.txt ("name variant model --input N=F ..."):
ort-run on cpu (T threads) and on --provider (default cuda,cpu), outputs
compared with
  fp32: |cuda - cpu| <= 1e-3 * max|cpu| + 1e-3 * |cpu| element-wise
        (TF32 off: ort-ep-cuda's default);
  fp16: |cuda - cpu| <= 1e-2 of the output's range;
  integer and bool outputs: equal.
Then batch 32 (generated inputs, same seed on both) for the image
classifiers.  Prints one line per run and writes WORK_DIR/zoo.json.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

BATCH32 = ("squeezenet1_1", "mnv3_cls_48x192")


def ort_run(bin_dir, model, args, outdir, provider, iters, threads, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    cmd = [os.path.join(bin_dir, "ort-run"), model, "--provider", provider, "--json",
           "--output-dir", outdir, "--warmup", "3", "--iters", str(iters),
           "--threads", str(threads)] + args
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired:
        return None, "timeout after 120 s"
    if p.returncode != 0:
        return None, "exit %d: %s" % (p.returncode, p.stderr.strip()[-400:])
    try:
        r = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, "no JSON: %s" % p.stdout[-200:]
    r["wall_s"] = time.time() - t0
    return r, p.stderr


def compare(cpu_dir, cuda_dir, variant):
    worst, why = 0.0, ""
    names = sorted(f for f in os.listdir(cpu_dir) if f.endswith(".npy"))
    if not names:
        return None, "no outputs"
    for f in names:
        want = np.load(os.path.join(cpu_dir, f))
        got = np.load(os.path.join(cuda_dir, f))
        if got.shape != want.shape:
            return None, "%s: shape %s vs cpu %s" % (f, got.shape, want.shape)
        if want.dtype.kind not in "fc":
            if not np.array_equal(got, want):
                return None, "%s: %d elements differ" % (f, int((got != want).sum()))
            continue
        w = want.astype(np.float64)
        d = np.abs(got.astype(np.float64) - w)
        if variant == "fp16":
            tol = 1e-2 * max(float(w.max() - w.min()), 1e-6) + 0 * w
        else:
            tol = 1e-3 * float(np.abs(w).max()) + 1e-3 * np.abs(w)
        scale = float(np.abs(w).max()) or 1.0
        worst = max(worst, float(d.max()) / scale)
        if not np.all(d <= tol) or not np.all(np.isfinite(got)):
            i = np.unravel_index(int(np.argmax(d - tol)), d.shape)
            why = "%s%s: %g vs cpu %g" % (f, list(i), float(got[i]), float(want[i]))
            return worst, why
    return worst, ""


def ort_time(model, feeds, iters, threads, work):
    """ONNX Runtime (Python, CPU) median ms over `feeds`, or why it did not
    run; in a child process, since ONNX Runtime crashes on some float16
    models (the LSTM and GRU steps: SIGSEGV)."""
    npz = os.path.join(work, "ort_feeds.npz")
    np.savez(npz, **feeds)
    try:
        p = subprocess.run([sys.executable, __file__, "--ort", model, npz, str(iters), str(threads)],
                           capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None, "ORT: timeout after 120 s"
    if p.returncode != 0:
        return None, "ORT: exit %d %s" % (p.returncode, p.stderr.strip()[-200:])
    ms, why = json.loads(p.stdout.strip().splitlines()[-1])
    return ms, why


def ort_child(model, npz, iters, threads):
    feeds = dict(np.load(npz))
    try:
        import onnxruntime as ort
    except ImportError as e:
        return None, "no onnxruntime: %s" % e
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        for _ in range(3):
            s.run(None, feeds)
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            s.run(None, feeds)
            ts.append((time.perf_counter() - t0) * 1e3)
        return float(np.median(ts)), ""
    except Exception as e:  # noqa: BLE001 - any ORT failure is a reported row
        return None, "ORT: " + str(e)[:200]


def jobs_of(zoo):
    """(tag, name, variant, model, ort-run args, ORT feeds) per run."""
    for line in open(os.path.join(zoo, "manifest.txt")):
        if not line.strip():
            continue
        name, variant, model, *rest = line.split()
        model = os.path.join(zoo, model)
        inputs = dict(a.split("=", 1) for a in rest if a != "--input")
        inputs = {k: os.path.join(zoo, v) for k, v in inputs.items()}
        args = [x for k, v in inputs.items() for x in ("--input", "%s=%s" % (k, v))]
        feeds = {k: np.load(v) for k, v in inputs.items()}
        yield "%s-%s-b1" % (name, variant), name, variant, 1, model, args, feeds
        if name in BATCH32:
            (k, x), = feeds.items()
            shape = (32,) + x.shape[1:]
            args = ["--shape", "%s=%s" % (k, "x".join(map(str, shape)))]
            feeds = {k: np.random.default_rng(1).uniform(-1, 1, shape).astype(x.dtype)}
            yield "%s-%s-b32" % (name, variant), name, variant, 32, model, args, feeds


def fmt(v, f):
    return f % v if v is not None else "-"


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["--ort"]:
        print(json.dumps(ort_child(argv[1], argv[2], int(argv[3]), int(argv[4]))))
        return
    iters, threads, only, provider, with_ort = 20, 16, None, "cuda,cpu", True
    if "--provider" in argv:
        i = argv.index("--provider")
        provider = argv[i + 1]
        del argv[i:i + 2]
    if "--no-ort" in argv:
        argv.remove("--no-ort")
        with_ort = False
    if "--only" in argv:
        i = argv.index("--only")
        only = set(argv[i + 1].split(","))
        del argv[i:i + 2]
    if "--iters" in argv:
        i = argv.index("--iters")
        iters = int(argv[i + 1])
        del argv[i:i + 2]
    if "--threads" in argv:
        i = argv.index("--threads")
        threads = int(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) != 3:
        sys.exit(__doc__)
    bin_dir, zoo, work = argv
    os.makedirs(work, exist_ok=True)
    rows, bad = [], 0
    for tag, name, variant, batch, model, args, feeds in jobs_of(zoo):
        if only and name not in only:
            continue
        cpu, err_cpu = ort_run(bin_dir, model, args, os.path.join(work, tag, "cpu"), "cpu",
                               iters, threads)
        cuda, err_cuda = ort_run(bin_dir, model, args, os.path.join(work, tag, "cuda"),
                                 provider, iters, threads)
        row = {"model": name, "variant": variant, "batch": batch}
        if cpu is None or cuda is None:
            row["status"] = "error"
            row["reason"] = "cpu: " + err_cpu if cpu is None else provider + ": " + err_cuda
        else:
            worst, why = compare(os.path.join(work, tag, "cpu"), os.path.join(work, tag, "cuda"),
                                 variant)
            row.update(status="fail" if why else "pass", worst=worst, reason=why,
                       nodes=cuda["nodes_per_provider"], cpu_ms=cpu["median_ms"],
                       cuda_ms=cuda["median_ms"], cuda_create_ms=cuda["session_create_ms"],
                       cpu_create_ms=cpu["session_create_ms"])
        row["provider"] = provider
        row["ort_cpu_ms"], why = ort_time(model, feeds, iters, threads, work) if with_ort \
            else (None, "")
        if why:
            row["ort_reason"] = why
        bad += row["status"] != "pass"
        rows.append(row)
        print("%-20s %-4s b%-2d %-5s worst %-9s nodes %-26s cpu %8s ms  cuda %8s ms  "
              "cuda create %8s ms  ORT cpu %8s ms  %s" % (
                  name, variant, batch, row["status"], fmt(row.get("worst"), "%.3g"),
                  json.dumps(row.get("nodes", {})), fmt(row.get("cpu_ms"), "%.3f"),
                  fmt(row.get("cuda_ms"), "%.3f"), fmt(row.get("cuda_create_ms"), "%.1f"),
                  fmt(row.get("ort_cpu_ms"), "%.3f"),
                  "; ".join(r for r in (row.get("reason"), row.get("ort_reason")) if r)), flush=True)
    json.dump(rows, open(os.path.join(work, "zoo.json"), "w"), indent=1)
    print("%d rows, %d not passing" % (len(rows), bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
