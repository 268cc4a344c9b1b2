#!/usr/bin/python3
"""A loop kept on the device leaves no host<->device transfers after its
first step, and ort-trace stats says so.  Records `test_device ... --loop 20`
(small.onnx, its output fed back as its input, all bound to DEVICE) with
ort-trace and checks `stats --json`: exactly one COPY host->device (the
first input) and one device->host (the final read-back), no uploads or
downloads inside any of the 20 runs.  Where DEVICE has no device memory
(cpu), there are no copies at all.  Exit 77 when test_device skips.
Usage: device_trace_test.py ORT_TRACE TEST_DEVICE MODEL_DIR DEVICE PROVIDERS OUT_DIR"""
import json
import os
import subprocess
import sys


def main():
    ort_trace, test_device, model_dir, dev, providers, out = sys.argv[1:7]
    os.makedirs(out, exist_ok=True)
    trace = os.path.join(out, f"loop-{dev}.trace")
    if os.path.exists(trace):
        os.unlink(trace)
    r = subprocess.run([ort_trace, "record", "-o", trace, "--", test_device, model_dir, dev,
                        providers, "--loop", "20"], capture_output=True, text=True)
    if r.returncode == 77:
        print(r.stdout.strip())
        return 77
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    st = subprocess.run([ort_trace, "stats", trace, "--json"], capture_output=True, text=True,
                        check=True)
    stats = json.loads(st.stdout)
    p = stats["providers"][dev]
    t = p["transfers"]
    on_device = os.environ.get("ORTMK_EP_EMULATE_DEVICE") == dev or dev != "cpu"
    assert t["runs"] == 20, t
    assert t["runs_with_transfers"] == 0 and t["last_run_with_transfers"] == 0, t
    assert t["run_uploads"] == 0 and t["run_downloads"] == 0, t
    want = 1 if on_device else 0
    assert t["copy_h2d"] == want and t["copy_d2h"] == want and t["copy_d2d"] == 0, t
    assert t["copy_h2d_bytes"] == want * 256 and t["copy_d2h_bytes"] == want * 256, t
    assert stats["kinds"].get("COPY", {"count": 0})["count"] == 2 * want, stats["kinds"]
    text = subprocess.run([ort_trace, "stats", trace, "--no-color"], capture_output=True,
                          text=True, check=True).stdout
    if on_device:
        assert "runs with transfers 0 of 20" in text, text
    print(f"{dev}: 20 bound runs, {t['copy_h2d']} copy in, {t['copy_d2h']} copy out, "
          f"no transfers inside runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
