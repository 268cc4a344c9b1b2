#!/usr/bin/python3
"""ort-run --bind DEVICE gives the outputs numpy gives (one step of
step.onnx: y, the grown cache `present`, the data-dependent `pos`), the same
bytes as ort-run without --bind, and fails with one line for a provider
that does not exist.
Usage: ort_run_bind_test.py ORT_RUN MODEL_DIR DEVICE PROVIDERS OUT_DIR"""
import os
import subprocess
import sys

import numpy as np


def run(ort_run, model_dir, out, extra):
    d = os.path.join(model_dir)
    cmd = [ort_run, os.path.join(d, "step.onnx"), "--input", "x=" + os.path.join(d, "x0.npy"),
           "--input", "past=" + os.path.join(d, "past0.npy"), "--output-dir", out] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r


def main():
    ort_run, model_dir, dev, providers, out = sys.argv[1:6]
    x = np.load(os.path.join(model_dir, "x0.npy"))
    past = np.load(os.path.join(model_dir, "past0.npy"))
    y = np.load(os.path.join(model_dir, "y_1.npy"))
    want = {"y": y, "present": np.concatenate([past, y[:, None, :]], axis=1),
            "pos": y[:, y[0] > 0]}
    assert x.shape == (1, 8)
    bound = run(ort_run, model_dir, os.path.join(out, "bound"),
                ["--provider", providers, "--bind", dev, "--iters", "3"])
    if bound.returncode != 0 and "unknown provider" in bound.stderr:
        print("SKIP:", bound.stderr.strip())
        return 77
    assert bound.returncode == 0, bound.stderr
    plain = run(ort_run, model_dir, os.path.join(out, "plain"), ["--provider", providers])
    assert plain.returncode == 0, plain.stderr
    for name, ref in want.items():
        a = np.load(os.path.join(out, "bound", name + ".npy"))
        b = np.load(os.path.join(out, "plain", name + ".npy"))
        assert a.shape == ref.shape, (name, a.shape, ref.shape)
        assert np.abs(a - ref).max() <= 1e-5, (name, np.abs(a - ref).max())
        assert a.tobytes() == b.tobytes(), name
    bad = run(ort_run, model_dir, os.path.join(out, "bad"), ["--bind", "nosuch"])
    assert bad.returncode == 1 and "nosuch" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, \
        bad.stderr
    print(f"ort-run --bind {dev}: outputs match numpy and the unbound run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
