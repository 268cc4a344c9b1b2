#!/usr/bin/python3
"""The element-wise, fused and normalization ops of com.microsoft
(providers/cpu/ops/ms/) against ONNX Runtime (onnxruntime-node): Gelu,
BiasGelu, FastGelu, QuickGelu, FusedConv, FusedGemm, FusedMatMul,
SkipLayerNormalization, SkipSimplifiedLayerNormalization,
SimplifiedLayerNormalization (default domain), EmbedLayerNormalization and
RotaryEmbedding, each attribute and optional input, one-node models on
seeded inputs; plus the activations and inputs ortmk refuses by name.

Usage: ms_ops_test.py ORT_RUN WORK [NODE_MODULES]
Exits 77 (skip) when onnxruntime-node is not installed."""
import shutil
import sys

import numpy as np
from onnx import helper

sys.dont_write_bytecode = True
import ms_ref  # noqa: E402
from ms_ref import Batch, Tally, node_modules, one_node  # noqa: E402

rng = np.random.default_rng(19)
F = np.float32


def rnd(*shape, s=1.0):
    return (rng.standard_normal(shape) * s).astype(F)


def add_gelus(b):
    x = rnd(2, 5, 24, s=2.0)
    bias = rnd(24)
    b.add("Gelu", lambda p: one_node(p, "Gelu", [("x", x)], [("y", F)]))
    b.add("BiasGelu", lambda p: one_node(p, "BiasGelu", [("x", x), ("b", bias)], [("y", F)]))
    b.add("BiasGelu const bias", lambda p: one_node(p, "BiasGelu", [("x", x), ("b", bias)],
                                                    [("y", F)], consts={"b": bias}))
    b.add("FastGelu", lambda p: one_node(p, "FastGelu", [("x", x)], [("y", F)]))
    b.add("FastGelu bias", lambda p: one_node(p, "FastGelu", [("x", x), ("b", bias)], [("y", F)]))
    b.add("QuickGelu", lambda p: one_node(p, "QuickGelu", [("x", x)], [("y", F)]))
    b.add("QuickGelu alpha", lambda p: one_node(p, "QuickGelu", [("x", x)], [("y", F)], alpha=1.2))


CONV_ACTS = [(None, None), ("Relu", None), ("Tanh", None), ("Sigmoid", None),
             ("LeakyRelu", [0.2]), ("Clip", [-0.5, 0.7]), ("HardSigmoid", [0.3, 0.4])]


def add_fused_conv(b):
    x = rnd(2, 6, 9, 11)
    w = rnd(8, 6, 3, 3, s=0.3)
    wg = rnd(8, 3, 3, 3, s=0.3)
    wd = rnd(6, 1, 3, 3, s=0.3)
    bias = rnd(8)
    z = rnd(2, 8, 9, 11)
    for act, params in CONV_ACTS:
        attrs = dict(pads=[1, 1, 1, 1], kernel_shape=[3, 3])
        if act:
            attrs["activation"] = act
        if params:
            attrs["activation_params"] = params
        b.add("FusedConv %s" % act, lambda p, a=attrs: one_node(
            p, "FusedConv", [("x", x), ("w", w), ("b", bias)], [("y", F)],
            consts={"w": w, "b": bias}, **a))
    b.add("FusedConv Relu + Z", lambda p: one_node(
        p, "FusedConv", [("x", x), ("w", w), ("b", bias), ("z", z)], [("y", F)],
        consts={"w": w, "b": bias}, pads=[1, 1, 1, 1], activation="Relu"))
    b.add("FusedConv Z no bias", lambda p: one_node(
        p, "FusedConv", [("x", x), ("w", w), None, ("z", z)], [("y", F)], consts={"w": w},
        pads=[1, 1, 1, 1]))
    b.add("FusedConv group 2 strided Sigmoid", lambda p: one_node(
        p, "FusedConv", [("x", x), ("w", wg)], [("y", F)], group=2, strides=[2, 2],
        activation="Sigmoid"))
    b.add("FusedConv depthwise dilated LeakyRelu", lambda p: one_node(
        p, "FusedConv", [("x", x), ("w", wd)], [("y", F)], group=6, dilations=[2, 2],
        pads=[2, 1, 2, 2], activation="LeakyRelu", activation_params=[0.1]))
    b.add("FusedConv SAME_UPPER HardSigmoid", lambda p: one_node(
        p, "FusedConv", [("x", x), ("w", w)], [("y", F)], auto_pad="SAME_UPPER", strides=[2, 2],
        activation="HardSigmoid", activation_params=[0.2, 0.5]))
    b.add("FusedConv Silu", lambda p: one_node(
        p, "FusedConv", [("x", x), ("w", w)], [("y", F)], activation="Silu"),
        expect_error="activation 'Silu'")
    b.add("FusedConv Clip one param", lambda p: one_node(
        p, "FusedConv", [("x", x), ("w", w)], [("y", F)], activation="Clip",
        activation_params=[0.0]), expect_error="activation_params")
    x1 = rnd(2, 4, 20)
    w1 = rnd(5, 4, 3, s=0.3)
    b.add("FusedConv 1-D Relu", lambda p: one_node(
        p, "FusedConv", [("x", x1), ("w", w1)], [("y", F)], activation="Relu"))
    b.add("FusedConv unknown activation", lambda p: one_node(
        p, "FusedConv", [("x", x), ("w", w)], [("y", F)], activation="Gelu"),
        expect_error="activation 'Gelu'")


GEMM_ACTS = [("Relu", {}), ("Tanh", {}), ("Sigmoid", {}),
             ("LeakyRelu", {"activation_alpha": 0.1}),
             ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.45}),
             ("Elu", {"activation_alpha": 0.7}),
             ("Selu", {"activation_alpha": 1.6, "activation_gamma": 1.1}), ("Softplus", {}),
             ("Softsign", {}), ("ThresholdedRelu", {"activation_alpha": 0.3}),
             ("ScaledTanh", {"activation_alpha": 1.5, "activation_beta": 0.5}),
             ("ParametricSoftplus", {"activation_alpha": 1.5, "activation_beta": 0.5})]


def add_fused_gemm(b):
    a = rnd(7, 12)
    w = rnd(12, 9, s=0.4)
    wt = np.ascontiguousarray(w.T)
    c = rnd(9)
    c2 = rnd(7, 9)
    for act, extra in GEMM_ACTS:
        attrs = dict(extra)
        if act:
            attrs["activation"] = act
        b.add("FusedGemm %s" % act, lambda p, at=attrs: one_node(
            p, "FusedGemm", [("a", a), ("w", wt), ("c", c)], [("y", F)],
            consts={"w": wt, "c": c}, transB=1, **at))
    b.add("FusedGemm alpha beta C 2-D Relu", lambda p: one_node(
        p, "FusedGemm", [("a", a), ("w", w), ("c", c2)], [("y", F)], alpha=0.5, beta=2.0,
        activation="Relu"))
    at = np.ascontiguousarray(a.T)
    b.add("FusedGemm transA no C Tanh", lambda p: one_node(
        p, "FusedGemm", [("a", at), ("w", w)], [("y", F)], transA=1, activation="Tanh"))
    b.add("FusedGemm Elu transA C 2-D", lambda p: one_node(
        p, "FusedGemm", [("a", at), ("w", w), ("c", c2)], [("y", F)], transA=1, beta=0.5,
        activation="Elu", activation_alpha=1.0))
    b.add("FusedGemm Selu without gamma", lambda p: one_node(
        p, "FusedGemm", [("a", a), ("w", w)], [("y", F)], activation="Selu",
        activation_alpha=1.0), expect_error="activation_gamma")
    b.add("FusedGemm unknown activation", lambda p: one_node(
        p, "FusedGemm", [("a", a), ("w", w)], [("y", F)], activation="Gelu"),
        expect_error="activation 'Gelu'")


def add_fused_matmul(b):
    cases = [
        ("2-D", (6, 8), (8, 5), {}),
        ("alpha", (3, 6, 8), (8, 5), {"alpha": 0.125}),
        ("transB const", (2, 6, 8), (5, 8), {"transB": 1}),
        ("transA", (2, 8, 6), (8, 5), {"transA": 1}),
        ("transA transB batched", (2, 3, 8, 6), (2, 3, 5, 8), {"transA": 1, "transB": 1,
                                                                "alpha": 0.5}),
        ("broadcast batch transB", (2, 3, 6, 8), (3, 5, 8), {"transB": 1}),
        ("transBatchA", (6, 2, 3, 8), (2, 3, 8, 5), {"transBatchA": 1}),
        ("transBatchB transB", (2, 3, 6, 8), (5, 2, 3, 8), {"transBatchB": 1, "transB": 1}),
        ("transBatchA transA", (8, 2, 3, 6), (2, 3, 8, 5), {"transBatchA": 1, "transA": 1}),
        ("1-D B", (3, 6, 8), (8,), {}),
    ]
    for name, sa, sb, attrs in cases:
        a = rnd(*sa)
        w = rnd(*sb)
        b.add("FusedMatMul %s" % name, lambda p, a=a, w=w, at=attrs: one_node(
            p, "FusedMatMul", [("a", a), ("b", w)], [("y", F)], **at))
    a = rnd(4, 6, 8)
    w = rnd(5, 8)
    b.add("FusedMatMul const transB", lambda p: one_node(
        p, "FusedMatMul", [("a", a), ("b", w)], [("y", F)], consts={"b": w}, transB=1,
        alpha=2.0))


def add_norms(b):
    x = rnd(2, 5, 32, s=3.0) + 1.5
    sk = rnd(2, 5, 32)
    sk1 = rnd(1, 5, 32)
    sk2 = rnd(5, 32)
    g = rnd(32) + 1.0
    be = rnd(32)
    bi = rnd(32)
    outs4 = [("y", F), ("mean", F), ("inv", F), ("sum", F)]
    b.add("SkipLayerNormalization", lambda p: one_node(
        p, "SkipLayerNormalization", [("x", x), ("s", sk), ("g", g), ("b", be)], [("y", F)],
        consts={"g": g, "b": be}, epsilon=1e-5))
    b.add("SkipLayerNormalization bias all outputs", lambda p: one_node(
        p, "SkipLayerNormalization", [("x", x), ("s", sk), ("g", g), ("b", be), ("bi", bi)],
        outs4))
    b.add("SkipLayerNormalization no beta, sum output", lambda p: one_node(
        p, "SkipLayerNormalization", [("x", x), ("s", sk), ("g", g), None, ("bi", bi)],
        [("y", F), ("", F), ("", F), ("sum", F)]))
    b.add("SkipLayerNormalization skip [1,S,H]", lambda p: one_node(
        p, "SkipLayerNormalization", [("x", x), ("s", sk1), ("g", g), ("b", be)], [("y", F)]))
    b.add("SkipLayerNormalization skip [S,H]", lambda p: one_node(
        p, "SkipLayerNormalization", [("x", x), ("s", sk2), ("g", g), ("b", be)], [("y", F)]))
    b.add("SkipLayerNormalization 2-D", lambda p: one_node(
        p, "SkipLayerNormalization", [("x", x[0]), ("s", sk[0]), ("g", g), ("b", be)],
        [("y", F)]))
    b.add("SkipSimplifiedLayerNormalization", lambda p: one_node(
        p, "SkipSimplifiedLayerNormalization", [("x", x), ("s", sk), ("g", g)], [("y", F)]))
    b.add("SkipSimplifiedLayerNormalization bias all outputs", lambda p: one_node(
        p, "SkipSimplifiedLayerNormalization", [("x", x), ("s", sk), ("g", g), ("bi", bi)],
        outs4, epsilon=1e-4))
    b.add("SimplifiedLayerNormalization", lambda p: one_node(
        p, "SimplifiedLayerNormalization", [("x", x), ("g", g)], [("y", F)], domain="",
        epsilon=1e-5))
    g2 = rnd(5, 32) + 1.0
    b.add("SimplifiedLayerNormalization axis 1, inv_std_var", lambda p: one_node(
        p, "SimplifiedLayerNormalization", [("x", x), ("g", g2)], [("y", F), ("inv", F)],
        domain="", axis=1))


def add_embed(b):
    B, S, H, V, P = 2, 7, 16, 30, 12
    ids = rng.integers(0, V, (B, S)).astype(np.int32)
    seg = rng.integers(0, 2, (B, S)).astype(np.int32)
    we, pe, se = rnd(V, H), rnd(P, H), rnd(2, H)
    g, be = rnd(H) + 1.0, rnd(H)
    mask = np.array([[1] * 7, [1] * 4 + [0] * 3], np.int32)
    pos = rng.integers(0, P, (B, S)).astype(np.int32)
    pos1 = rng.integers(0, P, (1, S)).astype(np.int32)
    tabs = {"we": we, "pe": pe, "se": se, "g": g, "be": be}
    full = [("ids", ids), ("seg", seg), ("we", we), ("pe", pe), ("se", se), ("g", g),
            ("be", be)]
    b.add("EmbedLayerNormalization", lambda p: one_node(
        p, "EmbedLayerNormalization", full, [("y", F), ("mi", np.int32)], consts=tabs))
    b.add("EmbedLayerNormalization mask, sum", lambda p: one_node(
        p, "EmbedLayerNormalization", full + [("m", mask)],
        [("y", F), ("mi", np.int32), ("sum", F)], consts=tabs, epsilon=1e-5))
    b.add("EmbedLayerNormalization no segment", lambda p: one_node(
        p, "EmbedLayerNormalization", [("ids", ids), None, ("we", we), ("pe", pe), None,
                                       ("g", g), ("be", be), ("m", mask)],
        [("y", F), ("mi", np.int32)], consts=tabs))
    b.add("EmbedLayerNormalization position_ids", lambda p: one_node(
        p, "EmbedLayerNormalization", full + [None, ("pos", pos)],
        [("y", F), ("mi", np.int32)], consts=tabs))
    b.add("EmbedLayerNormalization position_ids [1,S]", lambda p: one_node(
        p, "EmbedLayerNormalization", full + [("m", mask), ("pos", pos1)],
        [("y", F), ("mi", np.int32), ("sum", F)], consts=tabs))


def add_rotary(b):
    B, S, N, H, M = 2, 5, 3, 8, 16
    cos = rng.uniform(-1, 1, (M, H // 2)).astype(F)
    sin = rng.uniform(-1, 1, (M, H // 2)).astype(F)
    x3 = rnd(B, S, N * H)
    x4 = rnd(B, N, S, H)
    pos = rng.integers(0, M - 1, (B, S)).astype(np.int64)
    off = np.array([3], np.int64)
    for inter in (0, 1):
        b.add("RotaryEmbedding 3-D interleaved=%d" % inter, lambda p, i=inter: one_node(
            p, "RotaryEmbedding", [("x", x3), ("pos", pos), ("cos", cos), ("sin", sin)],
            [("y", F)], interleaved=i))
        b.add("RotaryEmbedding 4-D interleaved=%d" % inter, lambda p, i=inter: one_node(
            p, "RotaryEmbedding", [("x", x4), ("pos", pos), ("cos", cos), ("sin", sin)],
            [("y", F)], interleaved=i))
    b.add("RotaryEmbedding position offset", lambda p: one_node(
        p, "RotaryEmbedding", [("x", x3), ("pos", off), ("cos", cos), ("sin", sin)], [("y", F)],
        num_heads=N))
    cosr, sinr = cos[:, :2], sin[:, :2]
    for inter in (0, 1):
        b.add("RotaryEmbedding partial dim interleaved=%d" % inter, lambda p, i=inter: one_node(
            p, "RotaryEmbedding", [("x", x3), ("pos", pos), ("cos", cosr), ("sin", sinr)],
            [("y", F)], num_heads=N, rotary_embedding_dim=4, interleaved=i))
    b.add("RotaryEmbedding is_packed_batching", lambda p: one_node(
        p, "RotaryEmbedding", [("x", x3), ("pos", pos), ("cos", cos), ("sin", sin)],
        [("y", F)], is_packed_batching=1), expect_error="is_packed_batching")


def main():
    ort_run, work = sys.argv[1], sys.argv[2]
    mods = node_modules(sys.argv[3] if len(sys.argv) > 3 else None)
    if not mods:
        return 77
    shutil.rmtree(work, ignore_errors=True)
    t = Tally()
    b = Batch(ort_run, work, t)
    only = sys.argv[4] if len(sys.argv) > 4 else ""
    for add in (add_gelus, add_fused_conv, add_fused_gemm, add_fused_matmul, add_norms,
                add_embed, add_rotary):
        if only in add.__name__:
            add(b)
    b.run(mods)
    return t.result()


if __name__ == "__main__":
    sys.exit(main())
