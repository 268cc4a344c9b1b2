"""The memory plan's two exceptions to "outputs placed before dead inputs
are freed" (core/plan.c), seen through ort-run --json's arena_bytes:

- views (Reshape, Flatten, Squeeze, Unsqueeze, Identity) whose input dies
  there take the input's bytes: nothing is copied, and the arena is
  smaller.  peak: Relu(x) and Sigmoid(x) live while Relu's result is
  reshaped: two 4 MiB blocks with the view on the input's bytes, three
  without; chain: every view kind ending in a graph output, and a view
  whose input is still read afterwards, bit for bit against numpy;
- a convolution and the elementwise nodes after it (which the CPU provider
  runs as one kernel) keep the values that die among them apart from the
  run's output until its end, so the fused kernel never writes over what
  it reads.  run: Relu -> 1x1 Conv -> Relu, 4 MiB each: three blocks
  (two when the last Relu's output took the Conv's input), outputs against
  numpy.

usage: memory_plan_test.py ORT_RUN
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

MIB = 1 << 20


def save(path, nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "views", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, path)


def run(ort_run, d, model, x):
    xp, out = os.path.join(d, "x.npy"), os.path.join(d, "out")
    np.save(xp, x)
    p = subprocess.run([ort_run, model, "--input", "x=" + xp, "--output-dir", out, "--json",
                        "--iters", "2", "--threads", "1"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("ort-run: " + p.stderr.strip()[-300:])
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    return rep, {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out)}


def peak(ort_run, d, rng):
    n = MIB   # floats: 4 MiB a tensor
    path = os.path.join(d, "peak.onnx")
    save(path, [h.make_node("Relu", ["x"], ["y"]), h.make_node("Sigmoid", ["x"], ["z"]),
                h.make_node("Reshape", ["y", "s"], ["r"]),
                h.make_node("ReduceSum", ["r"], ["s1"], keepdims=0),
                h.make_node("ReduceSum", ["z"], ["s2"], keepdims=0),
                h.make_node("Add", ["s1", "s2"], ["out"])],
         [h.make_tensor_value_info("x", T.FLOAT, [1, n])],
         [h.make_tensor_value_info("out", T.FLOAT, None)],
         [h.make_tensor("s", T.INT64, [2], [1024, 1024])])
    x = rng.standard_normal((1, n)).astype(np.float32)
    rep, outs = run(ort_run, d, path, x)
    x64 = x.astype(np.float64)
    want = np.maximum(x64, 0).sum() + (1 / (1 + np.exp(-x64))).sum()
    got = float(outs["out"])
    arena = rep.get("arena_bytes", -1)
    ok = 0 < arena <= 8 * MIB + 4096 and abs(got - want) <= 1e-4 * abs(want)
    print("%s peak: arena %d bytes (two 4 MiB blocks: %d; three without the view "
          "aliasing), sum %.6g (numpy %.6g)" % ("ok  " if ok else "FAIL", arena, 8 * MIB,
                                               got, want))
    return not ok


def chain(ort_run, d, rng):
    path = os.path.join(d, "chain.onnx")
    save(path, [h.make_node("Relu", ["x"], ["y"]),
                h.make_node("Reshape", ["y", "s"], ["r1"]),
                h.make_node("Unsqueeze", ["r1", "ax"], ["r2"]),
                h.make_node("Squeeze", ["r2", "ax"], ["r3"]),
                h.make_node("Flatten", ["r3"], ["f"], axis=1),
                h.make_node("Identity", ["f"], ["id"]),
                h.make_node("Neg", ["x"], ["m"]),
                h.make_node("Reshape", ["m", "s"], ["k"]),
                h.make_node("Add", ["m", "m"], ["twice"])],
         [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 64, 64])],
         [h.make_tensor_value_info(v, T.FLOAT, None) for v in ("id", "k", "twice")],
         [h.make_tensor("s", T.INT64, [3], [6, 64, 64]),
          h.make_tensor("ax", T.INT64, [1], [0])])
    x = rng.standard_normal((2, 3, 64, 64)).astype(np.float32)
    _, outs = run(ort_run, d, path, x)
    want = {"id": np.maximum(x, 0).reshape(6, 64 * 64), "k": (-x).reshape(6, 64, 64),
            "twice": -x + -x}
    bad = 0
    for name, w in want.items():
        y = outs.get(name)
        same = y is not None and y.shape == w.shape and y.tobytes() == w.tobytes()
        print("%s chain %s: %s" % ("ok  " if same else "FAIL", name,
                                   "bit for bit" if same else "differs from numpy"))
        bad += not same
    return bad


def fused_run(ort_run, d, rng):
    c, hw = 16, 256   # 16 x 256 x 256 floats: 4 MiB a tensor
    path = os.path.join(d, "run.onnx")
    w = (rng.standard_normal((c, c, 1, 1)) / 4).astype(np.float32)
    save(path, [h.make_node("Relu", ["x"], ["a"]),
                h.make_node("Conv", ["a", "w"], ["conv"]),
                h.make_node("Relu", ["conv"], ["y"])],
         [h.make_tensor_value_info("x", T.FLOAT, [1, c, hw, hw])],
         [h.make_tensor_value_info("y", T.FLOAT, None)],
         [numpy_helper.from_array(w, "w")])
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    rep, outs = run(ort_run, d, path, x)
    a = np.maximum(x, 0).astype(np.float64).reshape(c, -1)
    want = np.maximum(w.reshape(c, c).astype(np.float64) @ a, 0).reshape(1, c, hw, hw)
    err = float(np.max(np.abs(outs["y"] - want)))
    arena = rep.get("arena_bytes", -1)
    ok = arena >= 12 * MIB and err < 1e-4
    print("%s run: arena %d bytes (three 4 MiB blocks: %d; two when the fused output "
          "takes the Conv's input), max error %.2g" % ("ok  " if ok else "FAIL", arena,
                                                       12 * MIB, err))
    return not ok


def main():
    ort_run = sys.argv[1]
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory() as d:
        bad = peak(ort_run, d, rng) + chain(ort_run, d, rng) + fused_run(ort_run, d, rng)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
