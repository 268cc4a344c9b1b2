#!/usr/bin/python3
"""Pre-pack cache (docs/PREPACK.md): with --save-prepacked the packed MatMul
weights of a model are written beside it; the next session uses them (hits,
prepack_ms 0); outputs are bit-identical with and without the cache; a
truncated, corrupted or foreign cache is ignored with a warning, re-packed,
and the output stays identical.  Usage: prepack_test.py ORT_RUN MODELS WORK"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    passed += ok
    failed += not ok


def run(ort_run, model, inp, out, *extra):
    r = subprocess.run([ort_run, model, "--input", "x=" + inp, "--output-dir", out, "--json", *extra],
                       capture_output=True, text=True, timeout=60)
    if r.returncode:
        raise SystemExit("ort-run failed: " + r.stderr)
    return json.loads(r.stdout), r.stderr


def main():
    ort_run, models, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(os.path.join(models, "mlp"), work)
    model = os.path.join(work, "model.onnx")
    inp = os.path.join(work, "input_0.npy")
    cache = model + ".cpu0.ortmk-prepack"

    cold, _ = run(ort_run, model, inp, work + "/o0")
    check(cold["prepack_cache"]["misses"] > 0 and not os.path.exists(cache), "cold: packs, writes nothing")
    saved, _ = run(ort_run, model, inp, work + "/o1", "--save-prepacked")
    check(os.path.exists(cache), "--save-prepacked writes the cache beside the model")
    warm, _ = run(ort_run, model, inp, work + "/o2")
    check(warm["prepack_cache"]["hits"] == cold["prepack_cache"]["misses"] and
          warm["prepack_cache"]["misses"] == 0 and warm["prepack_ms"] == 0, "warm: every blob from the cache")
    ref = np.load(work + "/o0/y.npy")
    check(np.array_equal(ref, np.load(work + "/o2/y.npy")), "outputs bit-identical with the cache")
    good = open(cache, "rb").read()
    bad = {"truncated": good[:len(good) // 2],
           "garbage": bytes(len(good)),
           "other version": good[:8] + b"\x63" + good[9:],
           "other isa": good[:16] + b"scalar-other\x00".ljust(32, b"\x00") + good[48:],
           "corrupt blob hash": good[:96 + 112] + bytes(8) + good[96 + 120:]}
    for name, data in bad.items():
        with open(cache, "wb") as f:
            f.write(data)
        res, err = run(ort_run, model, inp, work + "/o3")
        same = np.array_equal(ref, np.load(work + "/o3/y.npy"))
        repacked = res["prepack_cache"]["misses"] > 0
        warned = "pre-pack cache ignored" in err or name == "corrupt blob hash"
        check(same and repacked and warned, "%s cache: warning, re-pack, same output" % name)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
