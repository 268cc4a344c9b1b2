#!/usr/bin/python3
"""Runs one generated model through ort-run and compares its outputs with
the numpy reference written by tools/models/gen_test_models.py.

usage: run_model_test.py ORT_RUN MODELS_DIR NAME [EXTRA ORT-RUN ARGS...]

Reads MODELS_DIR/NAME/manifest.json, runs
  ORT_RUN MODELS_DIR/NAME/model.onnx --input n=file ... --output-dir TMP --json
checks the JSON report, loads TMP/<output>.npy and compares each with its
expected file (rtol and atol from the manifest).  Prints one line; exit 0
when everything matches, 1 otherwise.  ORTMK_TEST_TIMEOUT (seconds,
default 120) bounds the run.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

JSON_KEYS = ("model", "provider", "threads", "iters", "session_create_ms", "median_ms",
             "p90_ms", "min_ms", "core_peak_rss_mb", "ep_peak_rss_mb", "nodes_per_provider")


def output_file(outdir, name):
    """Where ort-run writes output `name` (its sanitising rule)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:255]
    if safe in ("", ".", ".."):
        safe = "_"
    return os.path.join(outdir, safe + ".npy")


def check_report(stdout):
    """The --json report: one object with the documented keys."""
    try:
        report = json.loads(stdout)
    except ValueError as e:
        return None, "stdout is not one JSON object (%s): %r" % (e, stdout[:200])
    missing = [k for k in JSON_KEYS if k not in report]
    if missing:
        return None, "JSON report lacks %s" % ", ".join(missing)
    if not report["nodes_per_provider"] or sum(report["nodes_per_provider"].values()) <= 0:
        return None, "JSON report says no provider ran any node"
    return report, None


def compare(outdir, d, manifest):
    """Returns (error message or None, worst absolute error)."""
    rtol, atol = manifest.get("rtol", 1e-4), manifest["atol"]
    worst = 0.0
    for name, file in manifest["outputs"].items():
        want = np.load(os.path.join(d, file))
        path = output_file(outdir, name)
        if not os.path.exists(path):
            return "output %s was not written (%s)" % (name, os.path.basename(path)), worst
        got = np.load(path)
        if got.dtype != want.dtype or got.shape != want.shape:
            return ("output %s is %s%s, expected %s%s" % (name, got.dtype, list(got.shape),
                                                          want.dtype, list(want.shape)), worst)
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol)
        if bad.any() or not np.all(np.isfinite(got)):
            i = np.unravel_index(np.argmax(np.where(bad, err, -1)), err.shape)
            return ("output %s: %d of %d values off, worst at %s: got %.7g expected %.7g"
                    % (name, bad.sum(), bad.size, list(i), got[i], want[i]), worst)
        worst = max(worst, float(err.max()) if err.size else 0.0)
    return None, worst


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    ort_run, models, name = sys.argv[1:4]
    d = os.path.join(models, name)
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    timeout = float(os.environ.get("ORTMK_TEST_TIMEOUT", "120"))
    with tempfile.TemporaryDirectory(prefix="ortmk-%s-" % name) as tmp:
        cmd = [ort_run, os.path.join(d, "model.onnx")]
        for n, file in manifest["inputs"].items():
            cmd += ["--input", "%s=%s" % (n, os.path.join(d, file))]
        cmd += ["--output-dir", tmp, "--json"] + sys.argv[4:]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            print("FAIL %s: ort-run took more than %g s" % (name, timeout))
            return 1
        if p.returncode != 0:
            print("FAIL %s: ort-run exited with %d: %s"
                  % (name, p.returncode, p.stderr.strip().replace("\n", " | ")))
            return 1
        report, err = check_report(p.stdout)
        if not err:
            err, worst = compare(tmp, d, manifest)
    if err:
        print("FAIL %s: %s" % (name, err))
        return 1
    print("PASS %s: %d output(s) match (max abs err %.2g, atol %g), %s nodes, median %.3f ms"
          % (name, len(manifest["outputs"]), worst, manifest["atol"],
             ", ".join("%s %s" % kv for kv in report["nodes_per_provider"].items()),
             report["median_ms"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
