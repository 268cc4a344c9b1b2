#!/usr/bin/python3
"""CPU provider fusions (providers/cpu/cpu_fuse.c, docs/PERFORMANCE.md): the
same models run fused (default) and unfused (ORTMK_CPU_FUSE=0) give the
same outputs within 1e-4, both match numpy, and the provider reports the
chains it fused.  Models: a ResNet block (Conv+BN+Relu, Conv+BN+Add+Relu,
a 1x1/2 downsample with BN, one intermediate also a graph output, which
must not be fused away), a transformer layer (MatMul+bias, Erf-form Gelu,
also after a dynamically quantized MatMulInteger,
residual Add, attention MatMul->Div->Softmax->MatMul), a Gemm transB
MLP, a chain of every activation a Conv or Gemm takes into its tail,
DenseNet's BatchNormalization+Relu on a concatenation, and an attention
whose scale only constant folding (core and provider) shows
(ORTMK_FOLD=0 and ORTMK_CPU_FOLD=0 for the plain runs).  Usage: fusion_test.py ORT_RUN WORK"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

passed = failed = 0
rng = np.random.default_rng(7)


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    passed += ok
    failed += not ok


def conv(x, w, stride=1, pad=0):
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))).astype(np.float64)
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, m, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            y += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j].astype(np.float64))
    return y


def bn(y, p, eps=1e-5):
    s, b, mean, var = (q.astype(np.float64)[None, :, None, None] for q in p)
    return (y - mean) / np.sqrt(var + eps) * s + b


def bn_params(c, name, inits):
    vals = [rng.uniform(0.5, 1.5, c), rng.uniform(-0.5, 0.5, c), rng.uniform(-0.2, 0.2, c),
            rng.uniform(0.5, 2.0, c)]
    names = [name + s for s in (".scale", ".b", ".mean", ".var")]
    for n, v in zip(names, vals):
        inits.append(numpy_helper.from_array(v.astype(np.float32), n))
    return names, [v.astype(np.float32) for v in vals]


def resnet_model():
    c, hw = 16, 12
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    w1, w2 = (rng.standard_normal((c, c, 3, 3)).astype(np.float32) * 0.2 for _ in range(2))
    w3 = rng.standard_normal((2 * c, c, 3, 3)).astype(np.float32) * 0.2
    wd = rng.standard_normal((2 * c, c, 1, 1)).astype(np.float32) * 0.2
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (w2, "w2"), (w3, "w3"), (wd, "wd"))]
    b1, p1 = bn_params(c, "bn1", inits)
    b2, p2 = bn_params(c, "bn2", inits)
    b3, p3 = bn_params(2 * c, "bn3", inits)
    bd, pd = bn_params(2 * c, "bnd", inits)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1"] + b1, ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2"] + b2, ["n2"]),
        helper.make_node("Add", ["n2", "x"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c3"] + b3, ["n3"]),
        helper.make_node("Conv", ["r2", "wd"], ["cd"], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["cd"] + bd, ["nd"]),
        helper.make_node("Add", ["n3", "nd"], ["a3"]),
        helper.make_node("Relu", ["a3"], ["y"]),
    ]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("n1", TensorProto.FLOAT, None)]
    g = helper.make_graph(nodes, "resnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          outs, inits)
    n1 = bn(conv(x, w1, pad=1), p1)
    r1 = np.maximum(n1, 0)
    r2 = np.maximum(bn(conv(r1, w2, pad=1), p2) + x, 0)
    y = np.maximum(bn(conv(r2, w3, 2, 1), p3) + bn(conv(r2, wd, 2), pd), 0)
    return g, {"x": x}, {"y": y, "n1": n1}


def densenet_model():
    """DenseNet's pre-activation: BatchNormalization on a concatenation,
    then Relu (one pass, cpu_fuse.c; the output planned over the
    concatenation, which only the BN reads) and Clip, then a 1x1 Conv."""
    c, hw = 12, 9
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    w = rng.standard_normal((c, 2 * c, 1, 1)).astype(np.float32) * 0.2
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array(-0.3, np.float32), "lo"),
             numpy_helper.from_array(np.array(0.8, np.float32), "hi")]
    b1, p1 = bn_params(2 * c, "bn1", inits)
    b2, p2 = bn_params(c, "bn2", inits)
    nodes = [
        helper.make_node("Neg", ["x"], ["nx"]),
        helper.make_node("Concat", ["x", "nx"], ["cat"], axis=1),
        helper.make_node("BatchNormalization", ["cat"] + b1, ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w"], ["c1"]),
        helper.make_node("BatchNormalization", ["x"] + b2, ["n2"]),
        helper.make_node("Clip", ["n2", "lo", "hi"], ["r2"]),
        helper.make_node("Add", ["c1", "r2"], ["y"]),
    ]
    g = helper.make_graph(nodes, "densenet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    r1 = np.maximum(bn(np.concatenate([x, -x], axis=1), p1), 0)
    y = conv(r1, w) + np.clip(bn(x, p2), -0.3, 0.8)
    return g, {"x": x}, {"y": y}


def erf(v):
    from math import erf as e
    return np.vectorize(e)(v)


def bert_model():
    s, d, f = 16, 32, 64
    h = rng.standard_normal((s, d)).astype(np.float32)
    W = {n: (rng.standard_normal(shape) * 0.2).astype(np.float32) for n, shape in
         (("wq", (d, d)), ("wk", (d, d)), ("w1", (d, f)), ("w2", (f, d)))}
    B = {n: rng.standard_normal(shape).astype(np.float32) * 0.1 for n, shape in
         (("bq", (d,)), ("b1", (f,)), ("b2", (d,)))}
    consts = {"sqrt2": np.array(1.4142135, np.float32), "one": np.array(1.0, np.float32),
              "half": np.array(0.5, np.float32), "scale": np.array(np.sqrt(d), np.float32)}
    inits = [numpy_helper.from_array(v, n) for n, v in {**W, **B, **consts}.items()]
    nodes = [
        helper.make_node("MatMul", ["h", "wq"], ["q0"]), helper.make_node("Add", ["q0", "bq"], ["q"]),
        helper.make_node("MatMul", ["h", "wk"], ["k"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[1, 0]),
        helper.make_node("MatMul", ["q", "kt"], ["s0"]), helper.make_node("Div", ["s0", "scale"], ["s1"]),
        helper.make_node("Softmax", ["s1"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "h"], ["ctx"]),
        helper.make_node("MatMul", ["ctx", "w1"], ["f0"]), helper.make_node("Add", ["f0", "b1"], ["f"]),
        helper.make_node("Div", ["f", "sqrt2"], ["g0"]), helper.make_node("Erf", ["g0"], ["g1"]),
        helper.make_node("Add", ["g1", "one"], ["g2"]), helper.make_node("Mul", ["f", "g2"], ["g3"]),
        helper.make_node("Mul", ["g3", "half"], ["g"]),
        helper.make_node("MatMul", ["g", "w2"], ["o0"]), helper.make_node("Add", ["o0", "b2"], ["o1"]),
        helper.make_node("Add", ["o1", "h"], ["y"]),
    ]
    g = helper.make_graph(nodes, "bert", [helper.make_tensor_value_info("h", TensorProto.FLOAT, [s, d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    h64 = h.astype(np.float64)
    q = h64 @ W["wq"] + B["bq"]
    sc = q @ (h64 @ W["wk"]).T / np.sqrt(d)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    fv = (p @ h64) @ W["w1"] + B["b1"]
    gv = fv * 0.5 * (1 + erf(fv / np.sqrt(2)))
    return g, {"h": h}, {"y": gv @ W["w2"] + B["b2"] + h64}


def attention_model():
    """Multi-head attention, [batch 2, heads 3, seq 10, dim 8]: Q x K^T / 4 ->
    Softmax (default axis, opset 17) -> x V fuses into one node; a second
    Softmax over axis 2 (not the last) must not fuse."""
    b, h, s, d = 2, 3, 10, 8
    q = rng.standard_normal((b, h, s, d)).astype(np.float32)
    k = rng.standard_normal((b, h, s, d)).astype(np.float32)
    v = rng.standard_normal((b, s, h, d)).astype(np.float32)
    inits = [numpy_helper.from_array(np.array(4.0, np.float32), "four")]
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("Transpose", ["v"], ["vh"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["q", "kt"], ["s0"]), helper.make_node("Div", ["s0", "four"], ["s1"]),
        helper.make_node("Softmax", ["s1"], ["p"]),
        helper.make_node("MatMul", ["p", "vh"], ["y"]),
        helper.make_node("MatMul", ["q", "kt"], ["t0"]),
        helper.make_node("Softmax", ["t0"], ["tp"], axis=2),
        helper.make_node("MatMul", ["tp", "vh"], ["z"]),
    ]
    g = helper.make_graph(nodes, "attention",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape))
                           for n, a in (("q", q), ("k", k), ("v", v))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)

    def softmax(x, axis):
        e = np.exp(x - x.max(axis, keepdims=True))
        return e / e.sum(axis, keepdims=True)
    sc = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2)
    vh = v.astype(np.float64).transpose(0, 2, 1, 3)
    return g, {"q": q, "k": k, "v": v}, {"y": softmax(sc / 4.0, -1) @ vh, "z": softmax(sc, 2) @ vh}


def activations_model():
    """Each activation a Conv or Gemm takes into its tail: HardSwish, Clip
    (bounds as inputs), SiLU (Sigmoid and Mul, after a depthwise Conv),
    LeakyRelu, HardSigmoid, Tanh, Sigmoid."""
    c = 8
    x = rng.standard_normal((1, c, 10, 10)).astype(np.float32)
    w = {n: (rng.standard_normal(shape) * 0.4).astype(np.float32) for n, shape in
         (("w1", (c, c, 3, 3)), ("w2", (c, c, 1, 1)), ("wd", (c, 1, 3, 3)), ("w4", (c, c, 1, 1)),
          ("w5", (c, c, 3, 3)), ("w6", (c, c, 1, 1)), ("wg", (5, c * 100)))}
    consts = {"lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32)}
    inits = [numpy_helper.from_array(v, n) for n, v in {**w, **consts}.items()]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), n("HardSwish", ["c1"], ["h1"]),
             n("Conv", ["h1", "w2"], ["c2"]), n("Clip", ["c2", "lo", "hi"], ["h2"]),
             n("Conv", ["h2", "wd"], ["c3"], pads=[1, 1, 1, 1], group=c),
             n("Sigmoid", ["c3"], ["s3"]), n("Mul", ["c3", "s3"], ["h3"]),
             n("Conv", ["h3", "w4"], ["c4"]), n("LeakyRelu", ["c4"], ["h4"], alpha=0.1),
             n("Conv", ["h4", "w5"], ["c5"], pads=[1, 1, 1, 1]),
             n("HardSigmoid", ["c5"], ["h5"], alpha=0.3, beta=0.4),
             n("Conv", ["h5", "w6"], ["c6"]), n("Tanh", ["c6"], ["h6"]),
             n("Flatten", ["h6"], ["f"]), n("Gemm", ["f", "wg"], ["gm"], transB=1),
             n("Sigmoid", ["gm"], ["y"])]
    g = helper.make_graph(nodes, "acts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)

    def dw(a, k):
        ap = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros_like(a)
        for i in range(3):
            for j in range(3):
                out += ap[:, :, i:i + 10, j:j + 10] * k[None, :, 0, i, j, None, None]
        return out

    def sig(v):
        return 1 / (1 + np.exp(-v))
    x64 = x.astype(np.float64)
    c1 = conv(x64, w["w1"], pad=1)
    h1 = c1 * np.clip(c1 / 6 + 0.5, 0, 1)
    h2 = np.clip(conv(h1, w["w2"]), 0, 6)
    c3 = dw(h2, w["wd"].astype(np.float64))
    h3 = c3 * sig(c3)
    c4 = conv(h3, w["w4"])
    h4 = np.where(c4 < 0, 0.1 * c4, c4)
    h5 = np.clip(0.3 * conv(h4, w["w5"], pad=1) + 0.4, 0, 1)
    h6 = np.tanh(conv(h5, w["w6"]))
    return g, {"x": x}, {"y": sig(h6.reshape(1, -1) @ w["wg"].T.astype(np.float64))}


def folding_model():
    """Attention whose 1/sqrt(d) torch computes after the first MatMul from
    the input's shape: Shape -> Gather (a static dim beside a symbolic
    batch: the core folds it), Cast -> Pow (constant inputs then: the
    provider folds them), so the Mul, Softmax and MatMul fuse; and a weight
    used through a Transpose (folded, then packed)."""
    s, d = 6, 8
    x = rng.standard_normal((2, s, d)).astype(np.float32)
    w = {n: (rng.standard_normal((d, d)) * 0.3).astype(np.float32) for n in ("wq", "wk", "wv", "wo")}
    consts = {"two": np.array([2], np.int64), "mhalf": np.array(-0.5, np.float32)}
    inits = [numpy_helper.from_array(v, n) for n, v in {**w, **consts}.items()]
    n = helper.make_node
    nodes = [n("MatMul", ["x", "wq"], ["q"]), n("MatMul", ["x", "wk"], ["k"]),
             n("MatMul", ["x", "wv"], ["v"]), n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             n("MatMul", ["q", "kt"], ["sc"]),
             n("Shape", ["x"], ["sh"]), n("Gather", ["sh", "two"], ["dim"], axis=0),
             n("Cast", ["dim"], ["dimf"], to=TensorProto.FLOAT),
             n("Pow", ["dimf", "mhalf"], ["scale"]), n("Mul", ["sc", "scale"], ["sm"]),
             n("Softmax", ["sm"], ["p"], axis=-1), n("MatMul", ["p", "v"], ["a"]),
             n("Transpose", ["wo"], ["wot"]), n("MatMul", ["a", "wot"], ["y"])]
    g = helper.make_graph(nodes, "folding", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", s, d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    x64 = x.astype(np.float64)
    q, k, v = (x64 @ w[m] for m in ("wq", "wk", "wv"))
    sc = q @ k.transpose(0, 2, 1) / np.sqrt(d)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return g, {"x": x}, {"y": (p @ v) @ w["wo"].T}


def masked_attention_model():
    """Attention with a relative position bias [heads, s, s] and a mask
    [batch, 1, 1, s] added to the scaled scores before the Softmax (BERT's
    mask, Swin's bias): both Adds fuse into the attention node; the
    mask's batch dim widens scores computed for one batch of Q."""
    b, h, s, d = 2, 3, 7, 8
    q = rng.standard_normal((1, h, s, d)).astype(np.float32)
    k = rng.standard_normal((1, h, d, s)).astype(np.float32)
    v = rng.standard_normal((b, h, s, d)).astype(np.float32)
    bias = rng.standard_normal((h, s, s)).astype(np.float32)
    mask = np.where(rng.uniform(size=(b, 1, 1, s)) < 0.3, -1e4, 0).astype(np.float32)
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "half"),
             numpy_helper.from_array(bias, "bias")]
    n = helper.make_node
    nodes = [n("MatMul", ["q", "k"], ["s0"]), n("Mul", ["s0", "half"], ["s1"]),
             n("Add", ["s1", "bias"], ["s2"]), n("Add", ["s2", "mask"], ["s3"]),
             n("Softmax", ["s3"], ["p"], axis=-1), n("MatMul", ["p", "v"], ["y"])]
    g = helper.make_graph(nodes, "masked", [helper.make_tensor_value_info(nm, TensorProto.FLOAT, list(a.shape))
                                            for nm, a in (("q", q), ("k", k), ("v", v), ("mask", mask))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    sc = (q.astype(np.float64) @ k.astype(np.float64)) * 0.5 + bias + mask
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return g, {"q": q, "k": k, "v": v, "mask": mask}, {"y": p @ v.astype(np.float64)}


def mlp_model():
    x = rng.standard_normal((3, 40)).astype(np.float32)
    w = (rng.standard_normal((50, 40)) * 0.3).astype(np.float32)
    b = rng.standard_normal(50).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1),
             helper.make_node("Relu", ["g"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 40])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return g, {"x": x}, {"y": np.maximum(x.astype(np.float64) @ w.T + b, 0)}


def qgelu_model():
    """Dynamic quantization as ONNX Runtime's quantizer writes it
    (DynamicQuantizeLinear, MatMulInteger, Cast, the scales' Mul, Mul, Add
    of the bias) and the Erf-form Gelu after it: one chain."""
    x = rng.standard_normal((12, 48)).astype(np.float32)
    wq = rng.integers(-100, 100, (48, 40)).astype(np.int8)
    ws = np.array(0.004, np.float32)
    b = (rng.standard_normal(40) * 0.2).astype(np.float32)
    consts = {"wq": wq, "wz": np.array(0, np.int8), "ws": ws, "b": b,
              "sqrt2": np.array(1.4142135, np.float32), "one": np.array(1.0, np.float32),
              "half": np.array(0.5, np.float32)}
    inits = [numpy_helper.from_array(v, n) for n, v in consts.items()]
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("MatMulInteger", ["xq", "wq", "xz", "wz"], ["mi"]),
        helper.make_node("Cast", ["mi"], ["mf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["xs", "ws"], ["sc"]), helper.make_node("Mul", ["mf", "sc"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["f"]),
        helper.make_node("Div", ["f", "sqrt2"], ["g0"]), helper.make_node("Erf", ["g0"], ["g1"]),
        helper.make_node("Add", ["g1", "one"], ["g2"]), helper.make_node("Mul", ["f", "g2"], ["g3"]),
        helper.make_node("Mul", ["g3", "half"], ["y"]),
    ]
    g = helper.make_graph(nodes, "qgelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [12, 48])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    # DynamicQuantizeLinear as its spec says, in float32
    lo, hi = min(0.0, float(x.min())), max(0.0, float(x.max()))
    xs = np.float32((hi - lo) / 255)
    xz = np.clip(np.rint(np.float32(0 - lo) / xs), 0, 255)
    xq = np.clip(np.rint(x / xs) + xz, 0, 255)
    f = ((xq - xz) @ wq.astype(np.float64)) * float(xs * ws) + b
    return g, {"x": x}, {"y": f * 0.5 * (1 + erf(f / np.sqrt(2)))}


def run(ort_run, model, feeds, out, fuse):
    args = [ort_run, model, "--output-dir", out, "--json", "--threads", "2"]
    for name, path in feeds.items():
        args += ["--input", name + "=" + path]
    env = dict(os.environ, ORTMK_CPU_FUSE=fuse, ORTMK_CPU_FOLD=fuse, ORTMK_FOLD=fuse,
               ORTMK_LOG="debug")
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    if r.returncode:
        raise SystemExit("ort-run failed: " + r.stderr[-2000:])
    folded = [int(line.split("folded ")[1].split()[0]) for line in r.stderr.splitlines()
              if "folded " in line]
    return r.stderr.count("fused "), r.stderr.count(", attention"), sum(folded), r.stderr


def main():
    ort_run, work = sys.argv[1:3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    for name, (g, inputs, want), min_fused, n_attention in (
            ("resnet", resnet_model(), 4, 0), ("bert", bert_model(), 4, 1),
            ("attention", attention_model(), 1, 1), ("mlp", mlp_model(), 1, 0),
            ("activations", activations_model(), 7, 0), ("folding", folding_model(), 1, 1),
            ("masked", masked_attention_model(), 1, 1), ("densenet", densenet_model(), 2, 0),
            ("qgelu", qgelu_model(), 1, 0)):
        d = os.path.join(work, name)
        os.makedirs(d)
        model = os.path.join(d, "model.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
        feeds = {}
        for k, v in inputs.items():
            feeds[k] = os.path.join(d, k + ".npy")
            np.save(feeds[k], v)
        n_fused, n_att, n_folded, log = run(ort_run, model, feeds, os.path.join(d, "fused"), "1")
        n_plain, _, _, _ = run(ort_run, model, feeds, os.path.join(d, "plain"), "0")
        if name == "qgelu":
            # the Gelu in the int8 chain's tail (act 2: CPU_FUSE_ACT_GELU)
            check("(MatMulInteger): add -1, bias 6, act 2" in log,
                  "qgelu: the Gelu fused into the MatMulInteger chain")
        if name == "folding":
            check(n_folded >= 3, "folding: %d nodes folded by the provider (>= 3)" % n_folded)
        check(n_fused >= min_fused and n_plain == 0,
              "%s: %d chains fused (>= %d), none with ORTMK_CPU_FUSE=0" % (name, n_fused, min_fused))
        check(n_att == n_attention, "%s: %d attention chains fused (want %d)" % (name, n_att, n_attention))
        for out, ref in want.items():
            a = np.load(os.path.join(d, "fused", out + ".npy")).astype(np.float64)
            b = np.load(os.path.join(d, "plain", out + ".npy")).astype(np.float64)
            tol = 1e-4 * max(1.0, np.abs(ref).max())
            check(a.shape == b.shape == ref.shape and np.abs(a - b).max() <= tol,
                  "%s.%s: fused vs unfused max diff %.2g (tol %.2g)" % (name, out, np.abs(a - b).max(), tol))
            check(np.abs(a - ref).max() <= tol,
                  "%s.%s: fused vs numpy max diff %.2g" % (name, out, np.abs(a - ref).max()))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
