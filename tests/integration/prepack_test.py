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


def subgraph_case(ort_run, work):
    """An If whose branches hold MatMuls with their own weights: they pack
    and cache too."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)

    def branch(name):
        w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), name + "_w")
        return helper.make_graph([helper.make_node("MatMul", ["x", name + "_w"], [name + "_y"])],
                                 name, [], [helper.make_tensor_value_info(name + "_y", TensorProto.FLOAT, [4, 8])],
                                 [w])
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("then"), else_branch=branch("else"))
    g = helper.make_graph([node], "ifmm",
                          [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                           helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    sub = os.path.join(work, "if")
    os.makedirs(sub, exist_ok=True)
    model = os.path.join(sub, "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    np.save(os.path.join(sub, "c.npy"), np.array(True))
    np.save(os.path.join(sub, "x.npy"), rng.standard_normal((4, 16)).astype(np.float32))
    args = ["--input", "c=" + os.path.join(sub, "c.npy"), "--input", "x=" + os.path.join(sub, "x.npy"), "--json"]
    runs = []
    for extra in (["--save-prepacked"], []):
        r = subprocess.run([ort_run, model, *args, *extra], capture_output=True, text=True, timeout=60)
        runs.append(json.loads(r.stdout) if r.returncode == 0 else None)
    ok = runs[0] and runs[1] and runs[0]["prepack_cache"]["misses"] == 2 and \
        runs[1]["prepack_cache"]["hits"] == 2 and runs[1]["prepack_cache"]["misses"] == 0
    check(bool(ok), "If branches: their MatMul weights pack and come from the cache")


def shared_case(ort_run, work):
    """Two MatMuls reading one weight, two Convs reading one filter: each
    is packed once and shared (a detector's head, one initializer for every
    pyramid level); the cache still holds an entry for every node."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    w = rng.standard_normal((64, 64)).astype(np.float32) * 0.2
    f = rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.2
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["a"]), helper.make_node("MatMul", ["a", "w"], ["b"]),
         helper.make_node("Conv", ["img", "f"], ["c1"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c1"], ["r"]),
         helper.make_node("Conv", ["r", "f"], ["c2"], pads=[1, 1, 1, 1])], "shared",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64]),
         helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 16, 12, 12])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("c2", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(f, "f")])
    sub = os.path.join(work, "shared")
    os.makedirs(sub, exist_ok=True)
    model = os.path.join(sub, "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    img = rng.standard_normal((1, 16, 12, 12)).astype(np.float32)
    np.save(os.path.join(sub, "x.npy"), x)
    np.save(os.path.join(sub, "img.npy"), img)

    def conv(v):   # 3x3, pads 1, float64
        p = np.pad(v.astype(np.float64), ((0, 0), (1, 1), (1, 1)))
        return np.stack([sum(f[m, c, i, j] * p[c, i:i + 12, j:j + 12]
                             for c in range(16) for i in range(3) for j in range(3))
                         for m in range(16)])
    want_b = x.astype(np.float64) @ w @ w
    want_c2 = conv(np.maximum(conv(img[0]), 0))
    runs = []
    for extra in (["--save-prepacked"], []):
        out = os.path.join(sub, "o%d" % len(runs))
        r = subprocess.run([ort_run, model, "--input", "x=" + os.path.join(sub, "x.npy"),
                            "--input", "img=" + os.path.join(sub, "img.npy"), "--output-dir", out,
                            "--json", *extra], capture_output=True, text=True, timeout=60)
        if r.returncode:
            check(False, "shared weights: ort-run failed: " + r.stderr.strip()[-200:])
            return
        rep = json.loads(r.stdout)
        b, c2 = np.load(os.path.join(out, "b.npy")), np.load(os.path.join(out, "c2.npy"))
        close = np.allclose(b, want_b, rtol=1e-4, atol=1e-4) and \
            np.allclose(c2[0], want_c2, rtol=1e-4, atol=1e-4)
        runs.append((rep["prepack_cache"], close))
    cold, warm = runs
    check(cold[1] and warm[1], "shared weights: outputs match numpy, cold and warm")
    check(cold[0]["misses"] == 2 and cold[0]["hits"] == 0,
          "shared weights: packed once each (%d packs for 4 nodes)" % cold[0]["misses"])
    check(warm[0]["hits"] == 4 and warm[0]["misses"] == 0,
          "shared weights: the cache holds every node's entry (%d hits)" % warm[0]["hits"])

    # The same graph with another filter and that cache: the Convs' entries
    # are stale (their hash is the old filter's), the MatMuls' still good;
    # a hash remembered for the wrong constant would hit the stale ones.
    f = rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.2
    g.initializer[1].CopyFrom(numpy_helper.from_array(f, "f"))
    sub2 = os.path.join(work, "shared2")
    os.makedirs(sub2, exist_ok=True)
    model2 = os.path.join(sub2, "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model2)
    shutil.copy(model + ".cpu0.ortmk-prepack", model2 + ".cpu0.ortmk-prepack")
    want_c2 = conv(np.maximum(conv(img[0]), 0))
    out = os.path.join(sub2, "o")
    r = subprocess.run([ort_run, model2, "--input", "x=" + os.path.join(sub, "x.npy"),
                        "--input", "img=" + os.path.join(sub, "img.npy"), "--output-dir", out,
                        "--json"], capture_output=True, text=True, timeout=60)
    if r.returncode:
        check(False, "stale shared filter: ort-run failed: " + r.stderr.strip()[-200:])
        return
    rep = json.loads(r.stdout)["prepack_cache"]
    c2 = np.load(os.path.join(out, "c2.npy"))
    check(np.allclose(c2[0], want_c2, rtol=1e-4, atol=1e-4) and rep["hits"] == 2 and
          rep["misses"] == 1, "stale shared filter: re-packed once, the MatMuls' packs "
          "reused (%d hits, %d misses), outputs match numpy" % (rep["hits"], rep["misses"]))


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
    subgraph_case(ort_run, work)
    shared_case(ort_run, work)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
