"""The loop of the one-model-per-case tests (depthwise_test.py,
topk_test.py, mask_test.py): each case of CASES through run_case(ort_run,
name, case, rng, tmp), which returns None or why it failed; one line per
case, a summary, exit status 1 on any failure.  run_model runs a case's
model with ort-run."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx


def run_model(ort_run, model, feeds, d, *args):
    """model (and feeds, as d/in_NAME.npy) saved in the new folder d, run by
    ort-run with its outputs into d; None, or why it failed."""
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    cmd = [ort_run, path, "--output-dir", d] + list(args)
    for k, v in feeds.items():
        np.save(os.path.join(d, "in_" + k + ".npy"), v)
        cmd += ["--input", "%s=%s" % (k, os.path.join(d, "in_" + k + ".npy"))]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode:
        return "ort-run failed: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    return None


def run_cases(cases, run_case, seed):
    ort_run = sys.argv[1]
    rng = np.random.default_rng(seed)
    width = max(len(n) for n in cases) + 1
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, case in cases.items():
            why = run_case(ort_run, name, case, rng, tmp)
            print("%-*s %s" % (width, name, "ok" if why is None else "FAIL: " + why))
            bad += why is not None
    print("%d of %d cases failed" % (bad, len(cases)) if bad else "all %d cases ok" % len(cases))
    return 1 if bad else 0
