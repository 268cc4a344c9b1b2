"""Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity) whose input dies
there take the input's bytes in the memory plan (core/plan.c): nothing is
copied, and the arena is smaller.

- peak: Relu(x) and Sigmoid(x) live while Relu's result is reshaped: with
  the view on the input's bytes the plan needs two 4 MiB blocks, without
  it three (ort-run --json's arena_bytes);
- chain: a chain of every view kind ending in a graph output, and a view
  whose input is still read afterwards (so it must not alias), bit for bit
  against numpy.

And the other way round: a chain a provider fuses (Conv then Clip) keeps
the head's input to the chain's end, so the Clip's output does not take
the bytes the fused kernel still reads (it would compute into scratch and
copy):

- fused: Relu -> Conv -> Clip -> Exp on 4 MiB tensors: three blocks (the
  Relu's output lives to the Clip; two if the Clip's output took its
  bytes; four if it were not freed there for the Exp's output), the sum
  against numpy.

And a Concat on the CPU provider takes the parts that die there into its
output's block, so it copies nothing for them:

- concat: Concat(Relu(x), Neg(x), Abs(x)) with Abs(x) read again after it:
  20 MiB (the 12 MiB output holding the first two parts, Abs(x) and the
  Add after it apart; 24 MiB with every part in its own block), both
  outputs bit for bit against numpy.

And a Concat whose parts are consecutive parts of a later Concat (DenseNet's
layers each concatenate the block's input and all earlier features) is
planned as that range of the later one's block, so it copies nothing:

- prefix: p0 = Abs(x), c1 = Concat(p0), f1 = Neg(c1), c2 = Concat(p0, f1),
  f2 = ReduceMax(c2) over the channels, c3 = Concat(p0, f1, f2), the output
  ReduceMin(c3) over the channels, 1 MiB a channel: 4 MiB (c3's block
  holding p0, f1, f2, c1 and c2 as its first one and two channels, and the
  output; 5 MiB with c2 apart), bit for bit against numpy.

And a chain that adds a residual before its activation (ResNet's Conv ->
Add -> Relu, the residual from another branch dying at the Add) writes its
output over the residual's block, so the fused kernel adds it in place:

- residual: a = Relu(x), b = Neg(a), c = Conv(b), d = Conv(a),
  r = Relu(d + c) on 4 MiB tensors, planned so that best fit alone would
  give r the block d's Conv took from b: the plan's debug log says one
  chain output was placed over its residual, the result against numpy.

usage: view_alias_test.py ORT_RUN
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
    rep["stderr"] = p.stderr
    return rep, {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out)}


def bitwise(case, outs, want):
    """Each output against numpy's, bit for bit: the failures."""
    bad = 0
    for name, w in want.items():
        y = outs.get(name)
        same = y is not None and y.shape == w.shape and y.tobytes() == w.tobytes()
        print("%s %s %s: %s" % ("ok  " if same else "FAIL", case, name,
                                "bit for bit" if same else "differs from numpy"))
        bad += not same
    return bad


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
    return bitwise("chain", outs, want)


def fused(ort_run, d, rng):
    c, hw = 16, 256   # 4 MiB a tensor
    w = (rng.standard_normal((c, c, 1, 1)) * 0.3).astype(np.float32)
    path = os.path.join(d, "fused.onnx")
    save(path, [h.make_node("Relu", ["x"], ["a"]),
                h.make_node("Conv", ["a", "w"], ["c"]),
                h.make_node("Clip", ["c", "lo", "hi"], ["d"]),
                h.make_node("Exp", ["d"], ["e"]),
                h.make_node("ReduceSum", ["e"], ["out"], keepdims=0)],
         [h.make_tensor_value_info("x", T.FLOAT, [1, c, hw, hw])],
         [h.make_tensor_value_info("out", T.FLOAT, None)],
         [h.make_tensor("w", T.FLOAT, list(w.shape), w.ravel().tolist()),
          h.make_tensor("lo", T.FLOAT, [], [0.0]), h.make_tensor("hi", T.FLOAT, [], [6.0])])
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    rep, outs = run(ort_run, d, path, x)
    a = np.maximum(x.astype(np.float64), 0).reshape(c, hw * hw)
    dd = np.clip(w.reshape(c, c).astype(np.float64) @ a, 0, 6)
    want = np.exp(dd).sum()
    got = float(outs["out"])
    arena = rep.get("arena_bytes", -1)
    ok = 12 * MIB <= arena <= 12 * MIB + 4096 and abs(got - want) <= 1e-4 * abs(want)
    print("%s fused: arena %d bytes (three 4 MiB blocks: %d), sum %.6g (numpy %.6g)"
          % ("ok  " if ok else "FAIL", arena, 12 * MIB, got, want))
    return not ok


def concat(ort_run, d, rng):
    shape = [1, 4, 512, 512]   # 4 MiB a part
    path = os.path.join(d, "concat.onnx")
    save(path, [h.make_node("Relu", ["x"], ["a"]), h.make_node("Neg", ["x"], ["b"]),
                h.make_node("Abs", ["x"], ["d"]),
                h.make_node("Concat", ["a", "b", "d"], ["c"], axis=1),
                h.make_node("Add", ["d", "d"], ["e"])],
         [h.make_tensor_value_info("x", T.FLOAT, shape)],
         [h.make_tensor_value_info(v, T.FLOAT, None) for v in ("c", "e")])
    x = rng.standard_normal(shape).astype(np.float32)
    rep, outs = run(ort_run, d, path, x)
    want = {"c": np.concatenate([np.maximum(x, 0), -x, np.abs(x)], axis=1),
            "e": np.abs(x) + np.abs(x)}
    bad = bitwise("concat", outs, want)
    arena = rep.get("arena_bytes", -1)
    ok = 20 * MIB <= arena <= 20 * MIB + 4096
    print("%s concat: arena %d bytes (%d with the parts in place)"
          % ("ok  " if ok else "FAIL", arena, 20 * MIB))
    return bad + (not ok)


def prefix(ort_run, d, rng):
    shape = [1, 1, 512, 512]   # 1 MiB a channel
    path = os.path.join(d, "prefix.onnx")
    save(path, [h.make_node("Abs", ["x"], ["p0"]),
                h.make_node("Concat", ["p0"], ["c1"], axis=1),
                h.make_node("Neg", ["c1"], ["f1"]),
                h.make_node("Concat", ["p0", "f1"], ["c2"], axis=1),
                h.make_node("ReduceMax", ["c2"], ["f2"], axes=[1], keepdims=1),
                h.make_node("Concat", ["p0", "f1", "f2"], ["c3"], axis=1),
                h.make_node("ReduceMin", ["c3"], ["y"], axes=[1], keepdims=1)],
         [h.make_tensor_value_info("x", T.FLOAT, shape)],
         [h.make_tensor_value_info("y", T.FLOAT, None)])
    x = rng.standard_normal(shape).astype(np.float32)
    rep, outs = run(ort_run, d, path, x)
    p0 = np.abs(x)
    f1 = -p0
    f2 = np.maximum(p0, f1)
    want = {"y": np.minimum(np.minimum(p0, f1), f2)}
    bad = bitwise("prefix", outs, want)
    arena = rep.get("arena_bytes", -1)
    ok = 4 * MIB <= arena <= 4 * MIB + 4096
    print("%s prefix: arena %d bytes (%d with the prefixes in place)"
          % ("ok  " if ok else "FAIL", arena, 4 * MIB))
    return bad + (not ok)


def residual(ort_run, d, rng):
    c, hw = 16, 256   # 4 MiB a tensor
    w1 = (rng.standard_normal((c, c, 1, 1)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((c, c, 1, 1)) * 0.3).astype(np.float32)
    path = os.path.join(d, "residual.onnx")
    save(path, [h.make_node("Relu", ["x"], ["a"]),
                h.make_node("Neg", ["a"], ["b"]),
                h.make_node("Conv", ["b", "w1"], ["c"]),
                h.make_node("Conv", ["a", "w2"], ["d"]),
                h.make_node("Add", ["d", "c"], ["s"]),
                h.make_node("Relu", ["s"], ["r"]),
                h.make_node("ReduceSum", ["r"], ["out"], keepdims=0)],
         [h.make_tensor_value_info("x", T.FLOAT, [1, c, hw, hw])],
         [h.make_tensor_value_info("out", T.FLOAT, None)],
         [h.make_tensor("w1", T.FLOAT, list(w1.shape), w1.ravel().tolist()),
          h.make_tensor("w2", T.FLOAT, list(w2.shape), w2.ravel().tolist())])
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    os.environ["ORTMK_LOG"] = "debug"
    try:
        rep, outs = run(ort_run, d, path, x)
    finally:
        del os.environ["ORTMK_LOG"]
    a = np.maximum(x.astype(np.float64), 0).reshape(c, hw * hw)
    r = np.maximum(w2.reshape(c, c).astype(np.float64) @ a -
                   w1.reshape(c, c).astype(np.float64) @ a, 0)
    want = r.sum()
    got = float(outs["out"])
    placed = "memory plan: 1 chain outputs over their residuals" in rep.get("stderr", "")
    ok = placed and abs(got - want) <= 1e-4 * abs(want)
    print("%s residual: output over the residual's block: %s, sum %.6g (numpy %.6g)"
          % ("ok  " if ok else "FAIL", "yes" if placed else "no", got, want))
    return not ok


def main():
    ort_run = sys.argv[1]
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory() as d:
        bad = (peak(ort_run, d, rng) + chain(ort_run, d, rng) + fused(ort_run, d, rng) +
               concat(ort_run, d, rng) + prefix(ort_run, d, rng) +
               residual(ort_run, d, rng))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
