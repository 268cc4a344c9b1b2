#!/usr/bin/python3
"""float16 models on the CPU provider (providers/cpu/cpu_f16.c): float16
weights and activations, float32 graph inputs and outputs through Cast (as
converters write them with keep_io_types).  Each model runs through ort-run
and is compared with numpy in float64 on the same float16-rounded weights,
within 1e-2 of the output's range (the zoo's float16 tolerance).  Models: a
CNN (Conv with bias and pads, BatchNormalization, Relu, HardSwish,
depthwise Conv, MaxPool, GlobalAveragePool, Gemm, Softmax) and a
transformer block (MatMul, Add, LayerNormalization, Transpose, Reshape,
Softmax, Erf-form Gelu, residual), two ResNet-style blocks whose outputs
the plan puts over their residuals (res16), and a chain whose float16
values stay float32 inside the provider (wide16).  Usage: float16_test.py ORT_RUN WORK"""
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

passed = failed = 0
rng = np.random.default_rng(16)
F16 = TensorProto.FLOAT16


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    passed += ok
    failed += not ok


def h(a):
    """float16-rounded, back in float64: what the model holds."""
    return np.asarray(a, np.float16).astype(np.float64)


def conv(x, w, b=None, stride=1, pad=0, group=1):
    n, c, hh, ww = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (hh + 2 * pad - kh) // stride + 1, (ww + 2 * pad - kw) // stride + 1
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                y[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch,
                                                       w[g * mg:(g + 1) * mg, :, i, j])
    if b is not None:
        y += b[None, :, None, None]
    return y


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def init(name, a, inits):
    inits.append(numpy_helper.from_array(np.asarray(a, np.float16), name))
    return h(a)


def model(name, nodes, inits, x_shape, y_shape, path):
    nodes = [helper.make_node("Cast", ["x"], ["x16"], to=F16)] + nodes + \
        [helper.make_node("Cast", ["y16"], ["y"], to=TensorProto.FLOAT)]
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def cnn(path):
    inits = []
    x = rng.uniform(-1, 1, (2, 3, 16, 16)).astype(np.float32)
    w1 = init("w1", rng.uniform(-0.4, 0.4, (8, 3, 3, 3)), inits)
    b1 = init("b1", rng.uniform(-0.1, 0.1, 8), inits)
    sc = init("sc", rng.uniform(0.5, 1.5, 8), inits)
    bb = init("bb", rng.uniform(-0.2, 0.2, 8), inits)
    mu = init("mu", rng.uniform(-0.2, 0.2, 8), inits)
    var = init("var", rng.uniform(0.5, 2, 8), inits)
    wd = init("wd", rng.uniform(-0.5, 0.5, (8, 1, 3, 3)), inits)
    wg = init("wg", rng.uniform(-0.3, 0.3, (10, 8)), inits)
    bg = init("bg", rng.uniform(-0.1, 0.1, 10), inits)
    nodes = [helper.make_node("Conv", ["x16", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c1", "sc", "bb", "mu", "var"], ["n1"]),
             helper.make_node("Relu", ["n1"], ["r1"]),
             helper.make_node("Conv", ["r1", "wd"], ["d1"], pads=[1, 1, 1, 1], group=8,
                              strides=[2, 2]),
             helper.make_node("HardSwish", ["d1"], ["s1"]),
             helper.make_node("MaxPool", ["s1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p1"], ["g1"]),
             helper.make_node("Flatten", ["g1"], ["f1"]),
             helper.make_node("Gemm", ["f1", "wg", "bg"], ["m1"], transB=1),
             helper.make_node("Softmax", ["m1"], ["y16"])]
    model("cnn16", nodes, inits, [2, 3, 16, 16], [2, 10], path)
    c1 = conv(h(x), w1, b1, pad=1)
    n1 = (c1 - mu[None, :, None, None]) / np.sqrt(var + 1e-5)[None, :, None, None] * \
        sc[None, :, None, None] + bb[None, :, None, None]
    d1 = conv(np.maximum(n1, 0), wd, stride=2, pad=1, group=8)
    s1 = d1 * np.clip(d1 / 6 + 0.5, 0, 1)
    p1 = s1.reshape(2, 8, 4, 2, 4, 2).max(axis=(3, 5))
    g1 = p1.mean(axis=(2, 3))
    return x, softmax(g1 @ wg.T + bg)


def resblocks(path):
    """Two ResNet-style blocks (1x1 -> 3x3 -> 1x1, + the block's input,
    Relu): the plan puts each block's output over its residual, which
    dies there, and the provider then hands the residual's float32 twin
    to the output (cpu_exec.c's wide_share); the second block reads the
    first one's output as its residual, the first block's input is read
    by both its first layer and its sum."""
    inits = []
    x = rng.uniform(-1, 1, (1, 16, 12, 12)).astype(np.float32)
    ws = []
    for b in range(2):
        ws.append((init("wa%d" % b, rng.uniform(-0.3, 0.3, (8, 16, 1, 1)), inits),
                   init("wb%d" % b, rng.uniform(-0.2, 0.2, (8, 8, 3, 3)), inits),
                   init("wc%d" % b, rng.uniform(-0.3, 0.3, (16, 8, 1, 1)), inits),
                   init("bc%d" % b, rng.uniform(-0.1, 0.1, 16), inits)))
    nodes, cur = [], "x16"
    for b in range(2):
        out = "y16" if b == 1 else "o%d" % b
        nodes += [helper.make_node("Conv", [cur, "wa%d" % b], ["a%d" % b]),
                  helper.make_node("Relu", ["a%d" % b], ["ra%d" % b]),
                  helper.make_node("Conv", ["ra%d" % b, "wb%d" % b], ["b%d" % b],
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["b%d" % b], ["rb%d" % b]),
                  helper.make_node("Conv", ["rb%d" % b, "wc%d" % b, "bc%d" % b], ["c%d" % b]),
                  helper.make_node("Add", ["c%d" % b, cur], ["s%d" % b]),
                  helper.make_node("Relu", ["s%d" % b], [out])]
        cur = out
    model("res16", nodes, inits, [1, 16, 12, 12], [1, 16, 12, 12], path)
    y = h(x)
    for wa, wb, wc, bc in ws:
        a = np.maximum(conv(y, wa), 0)
        bb = np.maximum(conv(a, wb, pad=1), 0)
        y = np.maximum(conv(bb, wc, bc) + y, 0)
    return x, y


def transformer(path):
    inits = []
    s, d, nh = 12, 16, 2
    x = rng.standard_normal((1, s, d)).astype(np.float32)
    wq, wk, wv, wo = (init("w" + c, rng.uniform(-0.3, 0.3, (d, d)), inits) for c in "qkvo")
    w1 = init("w1", rng.uniform(-0.3, 0.3, (d, 2 * d)), inits)
    w2 = init("w2", rng.uniform(-0.3, 0.3, (2 * d, d)), inits)
    gam = init("gam", rng.uniform(0.5, 1.5, d), inits)
    bet = init("bet", rng.uniform(-0.2, 0.2, d), inits)
    inits.append(numpy_helper.from_array(np.array([1, s, nh, d // nh], np.int64), "hs"))
    inits.append(numpy_helper.from_array(np.array([1, s, d], np.int64), "ms"))
    scale = init("scale", math.sqrt(d // nh), inits)
    half = init("half", 0.5, inits)
    one = init("one", 1.0, inits)
    r2 = init("r2", 1 / math.sqrt(2), inits)
    n = helper.make_node
    nodes = [n("LayerNormalization", ["x16", "gam", "bet"], ["ln"], axis=-1)]
    for k in "qkv":
        nodes += [n("MatMul", ["ln", "w" + k], [k]), n("Reshape", [k, "hs"], [k + "r"]),
                  n("Transpose", [k + "r"], [k + "t"],
                    perm=[0, 2, 3, 1] if k == "k" else [0, 2, 1, 3])]
    nodes += [n("MatMul", ["qt", "kt"], ["sc"]), n("Div", ["sc", "scale"], ["sd"]),
              n("Softmax", ["sd"], ["sm"], axis=-1), n("MatMul", ["sm", "vt"], ["av"]),
              n("Transpose", ["av"], ["at"], perm=[0, 2, 1, 3]), n("Reshape", ["at", "ms"], ["am"]),
              n("MatMul", ["am", "wo"], ["ao"]), n("Add", ["ao", "x16"], ["h1"]),
              n("MatMul", ["h1", "w1"], ["f1"]), n("Mul", ["f1", "r2"], ["fe"]),
              n("Erf", ["fe"], ["er"]), n("Add", ["er", "one"], ["e1"]),
              n("Mul", ["f1", "e1"], ["g0"]), n("Mul", ["g0", "half"], ["ge"]),
              n("MatMul", ["ge", "w2"], ["f2"]), n("Add", ["f2", "h1"], ["y16"])]
    model("tf16", nodes, inits, [1, s, d], [1, s, d], path)
    xh = h(x)
    mu = xh.mean(-1, keepdims=True)
    ln = (xh - mu) / np.sqrt(((xh - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * gam + bet
    q, k, v = ((ln @ w).reshape(1, s, nh, d // nh).transpose(0, 2, 1, 3) for w in (wq, wk, wv))
    a = softmax(q @ k.transpose(0, 1, 3, 2) / scale) @ v
    h1 = a.transpose(0, 2, 1, 3).reshape(1, s, d) @ wo + xh
    f1 = h1 @ w1
    erf = np.vectorize(math.erf)
    return x, (0.5 * f1 * (1 + erf(f1 * r2))) @ w2 + h1


def run(ort_run, work, name, build):
    path = os.path.join(work, name + ".onnx")
    x, ref = build(path)
    np.save(os.path.join(work, name + "_x.npy"), x)
    out = os.path.join(work, name + "_out")
    p = subprocess.run([ort_run, path, "--input", "x=" + os.path.join(work, name + "_x.npy"),
                        "--output-dir", out], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "%s: runs (%s)" % (name, p.stderr.strip()[-300:]))
    if p.returncode != 0:
        return
    y = np.load(os.path.join(out, "y.npy")).astype(np.float64)
    err = np.abs(y - ref).max()
    rng_ = ref.max() - ref.min()
    check(y.shape == ref.shape and err <= 1e-2 * rng_,
          "%s: max |ortmk - numpy| %.3g <= 1e-2 of range %.3g" % (name, err, rng_))


def wide(ort_run, work):
    """Values inside the provider stay float32 (cpu_plan_wide): x16 + 1000
    - 1000 gives x back to float32 precision, where rounding the sum to
    float16 (spacing 0.5 at 1000) loses it; ORTMK_CPU_F16_WIDE=0 rounds
    every value.  With it on, the input's Cast to float16 keeps its float32
    value too (only widened nodes read it), as ONNX Runtime drops that Cast
    with the one it inserts back to float32, so x is never rounded to
    float16 either.  Both against numpy doing exactly those steps."""
    c = numpy_helper.from_array(np.array([1000.0], np.float16), "c")
    nodes = [helper.make_node("Add", ["x16", "c"], ["a"]),
             helper.make_node("Sub", ["a", "c"], ["y16"])]
    path = os.path.join(work, "wide16.onnx")
    model("wide16", nodes, [c], [64], [64], path)
    x = rng.uniform(-2, 2, 64).astype(np.float32)
    xin = os.path.join(work, "wide16_x.npy")
    np.save(xin, x)
    x16 = x.astype(np.float16)
    f32, f16 = np.float32(1000), np.float16(1000)
    want = {"1": (x + f32) - f32,
            "0": ((x16 + f16) - f16).astype(np.float32)}
    for mode, ref in sorted(want.items()):
        out = os.path.join(work, "wide16_out" + mode)
        env = dict(os.environ, ORTMK_CPU_F16_WIDE=mode)
        p = subprocess.run([ort_run, path, "--input", "x=" + xin, "--output-dir", out],
                           capture_output=True, text=True, timeout=120, env=env)
        check(p.returncode == 0, "wide16 (ORTMK_CPU_F16_WIDE=%s): runs (%s)" %
              (mode, p.stderr.strip()[-300:]))
        if p.returncode == 0:
            y = np.load(os.path.join(out, "y.npy"))
            check(np.array_equal(y, ref), "wide16 (ORTMK_CPU_F16_WIDE=%s): equals numpy's "
                  "steps (max diff %.3g)" % (mode, np.abs(y - ref).max()))


def main():
    ort_run, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    run(ort_run, work, "cnn16", cnn)
    run(ort_run, work, "tf16", transformer)
    run(ort_run, work, "res16", resblocks)
    wide(ort_run, work)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
