#!/usr/bin/python3
"""The Vulkan provider's pre-pack cache (docs/VULKAN.md, docs/PREPACK.md).

usage: prepack_test.py ORT_RUN ORT_EP_VULKAN MODELS_DIR WORKDIR

On the integration CNN (float32 Convs: their filters interleaved for
conv_direct) and on a float16 CNN with 16-bit storage off (float16 weights
widened to float32, filters packed in float32) run on vulkan:
  - cold: every blob is packed (misses), no cache is written;
  - --save-prepacked writes MODEL.vulkan0.ortmk-prepack;
  - warm: every blob comes from the cache (hits = the cold misses, no
    misses), outputs bit-identical to the cold run's and within rtol 1e-3
    of cpu's (float32 model) or of numpy (float16 model, float16 tolerance);
  - a truncated, zeroed, other-version, other-kernel or other-model cache
    is ignored with a warning and everything is packed again; an entry
    whose source hash does not match is packed again with a warning; the
    outputs stay bit-identical.
Exit 77 (skip) when ORT_EP_VULKAN --probe finds no Vulkan device.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp16_test  # noqa: E402  (the float16 CNN and its numpy reference)

HEADER = 64             # magic 8, version 4, n_entries 4, kernel 32, model_id 8, file_size 8
ENTRY = 136             # key 112, src_hash 8, offset 8, size 8
passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    passed += bool(ok)
    failed += not ok


def run(ort_run, model, inputs, out, provider="vulkan,cpu", extra=(), env=None):
    cmd = [ort_run, model, "--provider", provider, "--output-dir", out, "--json", *extra]
    for k, v in inputs.items():
        cmd += ["--input", "%s=%s" % (k, v)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})))
    if r.returncode:
        raise SystemExit("ort-run failed: " + r.stderr[-2000:])
    return json.loads(r.stdout), r.stderr


def outputs(out):
    return {f: np.load(os.path.join(out, f)) for f in sorted(os.listdir(out))}


def same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def case(ort_run, label, model, inputs, work, env, reference):
    cache = model + ".vulkan0.ortmk-prepack"
    cold, _ = run(ort_run, model, inputs, work + "/cold", env=env)
    n = cold["prepack_cache"]["misses"]
    check(n > 0 and cold["prepack_cache"]["hits"] == 0 and not os.path.exists(cache),
          "%s cold: %d blobs packed, no cache written" % (label, n))
    run(ort_run, model, inputs, work + "/save", extra=["--save-prepacked"], env=env)
    check(os.path.exists(cache), "%s: --save-prepacked writes %s" % (label, os.path.basename(cache)))
    warm, err = run(ort_run, model, inputs, work + "/warm", env=env)
    check(warm["prepack_cache"]["hits"] == n and warm["prepack_cache"]["misses"] == 0 and
          "pre-pack" not in err, "%s warm: %d hits, no misses, no warning" % (label, n))
    ref = outputs(work + "/cold")
    check(same(ref, outputs(work + "/warm")), "%s: outputs bit-identical with the cache" % label)
    why = reference(work + "/warm")
    check(why is None, "%s: outputs match the reference%s" % (label, "" if why is None else ": " + why))
    good = open(cache, "rb").read()
    model_id = good[48:56]
    bad = {"truncated": (good[:len(good) // 2], "truncated"),
           "zeroed": (bytes(len(good)), "not a version-1"),
           "other version": (good[:8] + b"\x02" + good[9:], "not a version-1"),
           "other kernel": (good[:16] + b"ortmk-vk-pack-0".ljust(32, b"\0") + good[48:],
                            "another kernel"),
           "other model": (good[:48] + bytes(b ^ 0xff for b in model_id) + good[56:],
                           "another model"),
           "source hash": (good[:HEADER + 112] + bytes(8) + good[HEADER + 120:],
                           "changed since it was packed")}
    for name, (data, warning) in bad.items():
        with open(cache, "wb") as f:
            f.write(data)
        res, err = run(ort_run, model, inputs, work + "/bad", env=env)
        check(same(ref, outputs(work + "/bad")) and res["prepack_cache"]["misses"] > 0 and
              warning in err, "%s, %s cache: warning, re-packed (%d misses), same outputs" % (
                  label, name, res["prepack_cache"]["misses"]))
    os.unlink(cache)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    ort_run, ep, models, work = sys.argv[1:]
    if subprocess.run([ep, "--probe"], capture_output=True).returncode != 0:
        print("no Vulkan device: skipped")
        sys.exit(77)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work + "/cnn")
    src = os.path.join(models, "cnn")
    with open(os.path.join(src, "manifest.json")) as f:
        man = json.load(f)
    model = os.path.join(work, "cnn", "model.onnx")
    shutil.copy(os.path.join(src, "model.onnx"), model)
    inputs = {k: os.path.join(src, v) for k, v in man["inputs"].items()}

    def vs_cpu(out):
        run(ort_run, model, inputs, work + "/cnn/cpu", provider="cpu")
        got, want = outputs(out), outputs(work + "/cnn/cpu")
        ok = got.keys() == want.keys() and all(
            np.allclose(got[k], want[k], rtol=1e-3, atol=1e-5) for k in got)
        return None if ok else "differs from cpu"
    case(ort_run, "cnn", model, inputs, work + "/cnn", {}, vs_cpu)

    os.makedirs(work + "/cnn16")
    model16 = os.path.join(work, "cnn16", "cnn16.onnx")
    ref, shapes = fp16_test.cnn16(model16)
    x = np.random.default_rng(5).standard_normal(shapes["x"]).astype(np.float16)
    np.save(work + "/cnn16/x.npy", x)
    want = ref(x.astype(np.float32))
    case(ort_run, "cnn16 (fp16 storage off)", model16, {"x": work + "/cnn16/x.npy"},
         work + "/cnn16", {"ORTMK_VULKAN_FP16": "0"},
         lambda out: fp16_test.check_outputs(want, out))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
