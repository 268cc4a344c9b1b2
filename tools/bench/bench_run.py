"""Runs one model with ortmk (ort-run --json) or ONNX Runtime
(ort_node_bench.js) and compares their outputs; used by ort-bench and
op_breakdown.py.  A model is described as bench_models.ensure() returns it:
{"model": PATH, "inputs": [{"name", "shape", "npy", "bin"}]}.
"""
import json
import os
import subprocess
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RTOL = 1e-3


def ort_saturates():
    """Whether ONNX Runtime's u8 x s8 products saturate on this CPU: without
    VNNI (AVX-512 VNNI, AVX-VNNI, AMX) MLAS sums pairs of them in int16
    (vpmaddubsw), which clips 255 * 127 * 2 (its documented limitation);
    ortmk's int8 kernels widen to int32 and stay exact.  For the tests and
    tools that compare int8 results with it (msq_matmul, ort-zoo --ci)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        return False
    return "avx2" in flags and not {"avx512_vnni", "avx_vnni", "amx_int8"} & set(flags)


def find_node_modules(explicit):
    cands = [explicit, os.environ.get("ORT_NODE_MODULES"), os.path.abspath("node_modules"),
             os.path.join(REPO, "node_modules"), "/tmp/ortnode/node_modules"]
    for c in cands:
        if c and os.path.isfile(os.path.join(c, "onnxruntime-node", "package.json")):
            return c
    return None


def ort_version(mods):
    with open(os.path.join(mods, "onnxruntime-node", "package.json")) as f:
        return json.load(f).get("version", "?")


def run_ortmk(ort_run, meta, threads, iters, warmup, out_dir):
    cmd = [ort_run, meta["model"], "--json", "--iters", str(iters), "--warmup", str(warmup),
           "--threads", str(threads)]
    for i in meta["inputs"]:
        cmd += ["--input", "%s=%s" % (i["name"], i["npy"])]
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        cmd += ["--output-dir", out_dir]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        return {"error": "ort-run: no result within 30 minutes"}
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return {k: r[k] for k in ("median_ms", "p90_ms", "min_ms", "session_create_ms")}


def run_ort(node, mods, meta, threads, iters, warmup, out_dir, profile_prefix=None):
    job = {"node_modules": mods, "model": meta["model"], "threads": [threads],
           "iters": iters, "warmup": warmup, "out_dir": out_dir, "inputs": meta["inputs"],
           "profile_prefix": profile_prefix}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    try:
        p = subprocess.run([node, os.path.join(HERE, "ort_node_bench.js"), f.name],
                           capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        return {"error": "ort_node_bench.js: no result within 30 minutes"}
    finally:
        os.unlink(f.name)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return {k: r[k] for k in ("median_ms", "p90_ms", "min_ms", "session_create_ms")}


# ------------------------------------------------------------------ outputs

def load_ort_outputs(d):
    out = {}
    for fn in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if fn.endswith(".bin"):
            with open(os.path.join(d, fn[:-4] + ".json")) as f:
                shape = json.load(f)["shape"]
            out[fn[:-4]] = np.fromfile(os.path.join(d, fn), np.float32).reshape(shape)
    return out


def compare(ortmk_dir, ort_dir):
    """Max abs diff and agreement of every output both runtimes wrote."""
    ref = load_ort_outputs(ort_dir)
    if not ref:
        return None
    worst, ok = 0.0, True
    for name, b in ref.items():
        path = os.path.join(ortmk_dir, name + ".npy")
        if not os.path.exists(path):
            return {"max_abs_diff": None, "agree": False, "why": "ortmk wrote no " + name}
        a = np.load(path).astype(np.float64)
        b = b.astype(np.float64)
        if a.shape != b.shape:
            return {"max_abs_diff": None, "agree": False,
                    "why": "%s: shape %s vs %s" % (name, a.shape, b.shape)}
        diff = np.abs(a - b)
        worst = max(worst, float(diff.max()))
        tol = RTOL * np.abs(b) + 1e-4 * float(np.abs(b).max())
        ok = ok and bool(np.all(diff <= tol)) and bool(np.all(np.isfinite(a)))
    return {"max_abs_diff": worst, "agree": ok}
