#!/usr/bin/python3
"""The IO-binding example on vulkan (issue #9's acceptance): 100 steps of
examples/autoregressive with the state bound to the Vulkan device, recorded
with ort-trace.

Checks:
  - `ort-trace stats`: the RUNs moved no tensor between host and device
    (RESULT uploads/downloads 0 on every one of the 100 runs), and the only
    COPY traffic is the initial state going up (before the first step) and
    the final y and cache coming back: 2 host->device and 2 device->host
    copy ops in all;
  - the bound loop's outputs equal the unbound loop's (same kernels, same
    inputs: within 1e-5), and both match the numpy float64 reference of
    tools/models/gen_autoregressive.py (rtol 1e-3, atol 1e-4);
  - `--mode both` (the example's own comparison) exits 0, with the state
    on vulkan; with no usable Vulkan device (ORTMK_VULKAN_DEVICE matching
    none) the same program runs with the state on the host.
Exit 77 (skipped) without a Vulkan device.

usage: autoregressive_test.py EXAMPLE ORT_TRACE ORT_EP_VULKAN GENERATOR WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

STEPS = 100
H = 64
PREFILL = 256


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    if p.returncode != 0:
        sys.exit("FAIL: %s exited %d\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p.stdout


def load_dump(d, cache_len):
    y = np.fromfile(os.path.join(d, "y.bin"), dtype=np.float32)
    c = np.fromfile(os.path.join(d, "cache.bin"), dtype=np.float32)
    if y.size != H or c.size != cache_len * H:
        sys.exit("FAIL: %s: y has %d floats, cache %d (want %d and %d)"
                 % (d, y.size, c.size, H, cache_len * H))
    return y.reshape(1, H), c.reshape(1, cache_len, H)


def stats_of(trace, ort_trace):
    s = json.loads(run([ort_trace, "stats", trace, "--json"]))
    return s, s.get("providers", {}).get("vulkan", {}).get("transfers", {})


def check_traffic(s, v):
    runs = s["kinds"].get("RUN", {}).get("count", 0)
    if runs != STEPS:
        sys.exit("FAIL: %d RUN messages, want %d (one step each)" % (runs, STEPS))
    want = {"run_uploads": 0, "run_downloads": 0, "copy_h2d": 2, "copy_d2h": 2}
    missing = [k for k in want if k not in v]
    if missing:
        sys.exit("FAIL: ort-trace stats reports no %s for vulkan: %s" % (missing, json.dumps(v)))
    bad = {k: v[k] for k in want if v[k] != want[k]}
    if bad:
        sys.exit("FAIL: host<->device traffic %s, want %s" % (bad, want))
    if v.get("copy_d2d", 0):
        sys.exit("FAIL: %d device-to-device copies, want none" % v["copy_d2d"])


def main():
    example, ort_trace, ep_vulkan, gen, work = sys.argv[1:6]
    if subprocess.run([ep_vulkan, "--probe"], capture_output=True).returncode != 0:
        print("SKIP: no Vulkan device")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    ref_dir, bound_dir, unbound_dir = (os.path.join(work, d) for d in ("ref", "bound", "unbound"))
    for d in (ref_dir, bound_dir, unbound_dir):
        os.makedirs(d)
    model = os.path.join(work, "autoregressive.onnx")
    run([sys.executable, gen, model, "--hidden", str(H), "--reference", ref_dir,
         "--steps", str(STEPS), "--prefill", str(PREFILL)])
    common = [model, "--provider", "vulkan,cpu", "--steps", str(STEPS), "--prefill", str(PREFILL)]

    trace = os.path.join(work, "bound.trace")
    run([ort_trace, "record", "-o", trace, "--", example] + common +
        ["--mode", "bound", "--dump", bound_dir])
    s, v = stats_of(trace, ort_trace)
    check_traffic(s, v)

    run([example] + common + ["--mode", "unbound", "--dump", unbound_dir])
    yb, cb = load_dump(bound_dir, PREFILL + STEPS)
    yu, cu = load_dump(unbound_dir, PREFILL + STEPS)
    diff = max(np.abs(yb - yu).max(), np.abs(cb - cu).max())
    if diff > 1e-5:
        sys.exit("FAIL: bound and unbound outputs differ by %g" % diff)
    yr, cr = np.load(os.path.join(ref_dir, "y.npy")), np.load(os.path.join(ref_dir, "cache.npy"))
    for name, got, want in (("y", yb, yr), ("cache", cb, cr)):
        if not np.allclose(got, want, rtol=1e-3, atol=1e-4):
            sys.exit("FAIL: %s differs from numpy: max abs error %g"
                     % (name, np.abs(got - want).max()))

    out = run([example] + common + ["--mode", "both", "--json"])
    j = json.loads(out.strip().splitlines()[-1])
    if j["device"] != "vulkan":
        sys.exit("FAIL: the bound state was on %s, not vulkan" % j["device"])

    # Without a usable Vulkan device the provider has no device memory: the
    # same program runs on host values (and everything on cpu).
    env = dict(os.environ, ORTMK_VULKAN_DEVICE="no-such-device")
    out = run([example] + common + ["--mode", "both", "--json", "--steps", "10"], env=env)
    if json.loads(out.strip().splitlines()[-1])["device"] != "host":
        sys.exit("FAIL: without a Vulkan device the bound state is not on the host: " + out)
    print("ok: 100 steps; traffic %s; bound %.1f ms, unbound %.1f ms, |bound - unbound| %g"
          % ({k: v[k] for k in ("run_uploads", "run_downloads", "copy_h2d", "copy_d2h")},
             j["bound_ms"], j["unbound_ms"], j["max_abs_diff"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
