"""Helpers shared by the CUDA provider's test scripts (tests/cuda/*.py):
running ort-run, comparing its .npy outputs, the models they use, and
reading which ops ort-ep-cuda loaded from its debug log."""
import json
import os
import re
import subprocess

import numpy as np
import onnx

HEAVY = ("Conv", "MatMul", "Gemm")
LOAD_RE = re.compile(r"cuda\[\d+\] debug: subgraph \d+ loaded: (\d+) nodes:([^;]*);")
GBS_RE = re.compile(r"cuda\[\d+\] info: weights of subgraph \d+: .*: ([0-9.]+) GB/s")
TIMEOUT = float(os.environ.get("ORTMK_TEST_TIMEOUT", "300"))


def out_file(outdir, name):
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:255]
    return os.path.join(outdir, safe + ".npy")


def run(ort_run, model, inputs, outdir, provider, env_extra=None, extra_args=()):
    """ort-run once (one thread, so cpu results are reproducible);
    returns (report, stderr)."""
    os.makedirs(outdir, exist_ok=True)
    cmd = [ort_run, model, "--provider", provider, "--output-dir", outdir, "--json",
           "--threads", "1"] + list(extra_args)
    for name, path in inputs.items():
        cmd += ["--input", "%s=%s" % (name, path)]
    env = dict(os.environ)
    env.update(env_extra or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return json.loads(p.stdout), p.stderr


def compare(names, got_dir, want_dir, rtol=1e-3, atol=1e-5, exact=False):
    """None when every output matches, else why not."""
    for name in names:
        got, want = np.load(out_file(got_dir, name)), np.load(out_file(want_dir, name))
        if got.shape != want.shape or got.dtype != want.dtype:
            return "output %s is %s%s, cpu gives %s%s" % (name, got.dtype, got.shape,
                                                          want.dtype, want.shape)
        if exact and not np.array_equal(got, want, equal_nan=True):
            return "output %s is not bit-identical to cpu's" % name
        if not np.allclose(got, want, rtol=rtol, atol=atol) or not np.all(np.isfinite(got)):
            err = np.abs(got.astype(np.float64) - want)
            return "output %s differs from cpu's: worst |diff| %.3g" % (name, err.max())
    return None


def cases(models_dir, example, work):
    """(name, model, {input: npy}, [outputs]) of the integration models
    (mlp, mlp_ext with external data, cnn, transformer) and the example
    CNN with a seeded input."""
    for name in ("mlp", "mlp_ext", "cnn", "transformer"):
        d = os.path.join(models_dir, name)
        with open(os.path.join(d, "manifest.json")) as f:
            man = json.load(f)
        yield (name, os.path.join(d, "model.onnx"),
               {k: os.path.join(d, v) for k, v in man["inputs"].items()}, list(man["outputs"]))
    os.makedirs(work, exist_ok=True)
    x = np.random.default_rng(5).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
    path = os.path.join(work, "example_image.npy")
    np.save(path, x)
    yield "example", example, {"image": path}, ["probs"]


def loaded_ops(stderr):
    """(nodes ort-ep-cuda loaded, their op types) from its debug log."""
    loads = LOAD_RE.findall(stderr)
    return sum(int(n) for n, _ in loads), " ".join(o for _, o in loads).split()


def heavy_on_cuda(model, report, stderr):
    """None when every Conv/MatMul/Gemm ran on cuda and the log agrees with
    nodes_per_provider, else why not."""
    count, ops = loaded_ops(stderr)
    if count != report["nodes_per_provider"].get("cuda", 0):
        return "cuda loaded %d nodes, --json says %s" % (count, report["nodes_per_provider"])
    graph_ops = [n.op_type for n in onnx.load(model, load_external_data=False).graph.node]
    for h in HEAVY:
        if ops.count(h) != graph_ops.count(h):
            return "%d of %d %s nodes run on cuda" % (ops.count(h), graph_ops.count(h), h)
    return None


def probe(ep):
    """(has a device, what --probe printed)."""
    p = subprocess.run([ep, "--probe"], capture_output=True, text=True, timeout=60)
    if p.returncode not in (0, 77):
        raise RuntimeError("%s --probe exited %d: %s" % (ep, p.returncode, p.stderr[-500:]))
    return p.returncode == 0, p.stdout.strip()
