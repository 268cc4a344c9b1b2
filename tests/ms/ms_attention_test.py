#!/usr/bin/python3
"""com.microsoft Attention and MultiHeadAttention (providers/cpu/ops/ms/)
against ONNX Runtime (onnxruntime-node): every mask format (lengths [B],
end/start [2B], raw [B, T], [B, S, T], [B, 1, M, M], the [B, 1] that masks
nothing), unidirectional, past/present,
qkv_hidden_sizes, attention_bias broadcast over batch and heads, scale,
mask_filter_value; MultiHeadAttention's layouts ([B, L, D], [B, N, L, H],
packed QKV and KV compared with the unpacked model, which is what ONNX
Runtime's CPU provider runs), bias, key_padding_mask, past/present and
unidirectional.  Also what is refused by name (do_rotary, the [3B + 2]
mask).

Usage: ms_attention_test.py ORT_RUN WORK [NODE_MODULES]
Exits 77 (skip) when onnxruntime-node is not installed."""
import shutil
import sys

import numpy as np

sys.dont_write_bytecode = True
from ms_ref import Batch, Tally, node_modules, one_node  # noqa: E402

rng = np.random.default_rng(23)
F = np.float32
I32 = np.int32


def rnd(*shape, s=1.0):
    return (rng.standard_normal(shape) * s).astype(F)


def add_attention(b):
    B, S, Din, N, h = 2, 5, 16, 2, 8
    H = N * h
    x = rnd(B, S, Din)
    w = rnd(Din, 3 * H, s=0.3)
    bias = rnd(3 * H, s=0.2)
    base = [("x", x), ("w", w), ("b", bias)]
    cw = {"w": w, "b": bias}

    def att(name, extra, outs=(("y", F),), consts=cw, err=None, **attrs):
        attrs.setdefault("num_heads", N)
        b.add("Attention " + name, lambda p: one_node(
            p, "Attention", base + extra, list(outs), consts=consts, **attrs), expect_error=err)

    att("plain", [])
    att("weights fed", [], consts={})
    att("no bias", [], consts={"w": w})
    att("scale", [], scale=0.3)
    att("unidirectional", [], unidirectional=1)
    lens = np.array([5, 3], I32)
    att("mask [B] lengths", [("m", lens)])
    att("mask [2B] end, start", [("m", np.array([5, 4, 1, 2], I32))])
    raw = np.array([[1, 1, 0, 1, 1], [1, 1, 1, 0, 0]], I32)
    att("mask [B,T] raw", [("m", raw)])
    att("mask [B,T] + unidirectional, filter", [("m", raw)], unidirectional=1,
        mask_filter_value=-1000.0)
    m3 = rng.integers(0, 2, (B, S, S)).astype(I32)
    m3[:, :, 0] = 1
    att("mask [B,S,T]", [("m", m3)])
    m4 = rng.integers(0, 2, (B, 1, 7, 7)).astype(I32)
    m4[..., 0] = 1
    att("mask [B,1,M,M] refused (as ONNX Runtime's CPU provider does)", [("m", m4)],
        err="[B,1,M,M]")
    att("mask [B,1]", [("m", np.ones((B, 1), I32))])
    ab = rnd(B, N, S, S)
    att("attention_bias [B,N,S,T]", [None, None, ("ab", ab)])
    att("attention_bias [1,N,S,T] + mask", [("m", lens), None, ("ab", rnd(1, N, S, S))])
    att("attention_bias [B,1,S,T]", [None, None, ("ab", rnd(B, 1, S, S))])
    P = 3
    past = rnd(2, B, N, P, h)
    att("past/present", [None, ("past", past)], outs=(("y", F), ("present", F)))
    att("past + unidirectional + mask [B,T]",
        [("m", np.array([[1] * 8, [0] + [1] * 7], I32)), ("past", past)],
        outs=(("y", F), ("present", F)), unidirectional=1)
    att("present without past", [], outs=(("y", F), ("present", F)))
    wq = rnd(Din, 2 * H + 24, s=0.3)
    bq = rnd(2 * H + 24, s=0.2)
    b.add("Attention qkv_hidden_sizes (v 24)", lambda p: one_node(
        p, "Attention", [("x", x), ("w", wq), ("b", bq)], [("y", F)], consts={"w": wq},
        num_heads=N, qkv_hidden_sizes=[H, H, 24]))
    att("do_rotary refused", [], err="do_rotary", do_rotary=1)
    att("mask [3B+2] refused", [("m", np.array([5, 4, 0, 0, 5, 5, 5, 5], I32))],
        err="mask")
    # a bigger one, a BERT layer's size
    xb = rnd(2, 64, 96)
    wb = rnd(96, 288, s=0.1)
    bb = rnd(288, s=0.1)
    mb = np.ones((2, 64), I32)
    mb[1, 50:] = 0
    b.add("Attention BERT-sized, raw mask", lambda p: one_node(
        p, "Attention", [("x", xb), ("w", wb), ("b", bb), ("m", mb)], [("y", F)],
        consts={"w": wb, "b": bb}, num_heads=4))


def add_mha(b):
    B, S, L, N, h, hv = 2, 4, 6, 2, 8, 4
    D, Dv = N * h, N * hv
    q, k, v = rnd(B, S, D), rnd(B, L, D), rnd(B, L, Dv)
    bias = rnd(2 * D + Dv, s=0.3)

    def mha(name, ins, outs=(("y", F),), err=None, ref=None, **attrs):
        attrs.setdefault("num_heads", N)
        rb = None
        if ref:
            def rb(p, ref=ref, outs=outs, attrs=attrs):
                return one_node(p, "MultiHeadAttention", ref, list(outs), **attrs)
        b.add("MultiHeadAttention " + name, lambda p: one_node(
            p, "MultiHeadAttention", ins, list(outs), **attrs), expect_error=err, ref_build=rb)

    base = [("q", q), ("k", k), ("v", v)]
    mha("cross", base)
    mha("bias", base + [("b", bias)])
    mha("scale", base, scale=0.5)
    mha("key_padding_mask [B]", base + [None, ("m", np.array([6, 3], I32))])
    mha("key_padding_mask [B,T]", base + [None, ("m", np.array([[1] * 6, [1, 1, 0, 1, 0, 1]], I32))])
    m3 = rng.integers(0, 2, (B, S, L)).astype(I32)
    m3[..., 0] = 1
    mha("key_padding_mask [B,S,T]", base + [None, ("m", m3)])
    mha("attention_bias [1,N,S,T]", base + [None, None, ("ab", rnd(1, N, S, L))])
    kh = np.ascontiguousarray(k.reshape(B, L, N, h).transpose(0, 2, 1, 3))
    vh = rnd(B, N, L, h)
    mha("key/value [B,N,L,H]", [("q", q), ("kh", kh), ("vh", vh)])
    mha("key/value [B,N,L,H] + bias", [("q", q), ("kh", kh), ("vh", vh),
                                        ("b", rnd(3 * D, s=0.3))])
    # self-attention with past and causal masking
    qs, ks, vs = rnd(B, S, D), rnd(B, S, D), rnd(B, S, D)
    P = 3
    pk, pv = rnd(B, N, P, h), rnd(B, N, P, h)
    selfb = [("q", qs), ("k", ks), ("v", vs), ("b", rnd(3 * D, s=0.3)), None, None,
             ("pk", pk), ("pv", pv)]
    mha("past/present", selfb, outs=(("y", F), ("pk_out", F), ("pv_out", F)))
    mha("past/present unidirectional", selfb, outs=(("y", F), ("pk_out", F), ("pv_out", F)),
        unidirectional=1)
    mha("present without past", [("q", qs), ("k", ks), ("v", vs)],
        outs=(("y", F), ("pk_out", F), ("pv_out", F)))
    # packed forms: ONNX Runtime's CPU provider refuses them, so the
    # reference is the same data unpacked
    qkv = np.ascontiguousarray(np.stack([qs.reshape(B, S, N, h), ks.reshape(B, S, N, h),
                                         vs.reshape(B, S, N, h)], axis=3))
    mha("packed QKV", [("qkv", qkv)], ref=[("q", qs), ("k", ks), ("v", vs)])
    kvp = np.ascontiguousarray(np.stack([k.reshape(B, L, N, h), rnd(B, L, N, h)], axis=3))
    mha("packed KV", [("q", q), ("kv", kvp)],
        ref=[("q", q), ("k", np.ascontiguousarray(kvp[:, :, :, 0].reshape(B, L, D))),
             ("v", np.ascontiguousarray(kvp[:, :, :, 1].reshape(B, L, D)))])


def main():
    ort_run, work = sys.argv[1], sys.argv[2]
    mods = node_modules(sys.argv[3] if len(sys.argv) > 3 else None)
    if not mods:
        return 77
    shutil.rmtree(work, ignore_errors=True)
    t = Tally()
    b = Batch(ort_run, work, t)
    only = sys.argv[4] if len(sys.argv) > 4 else ""
    for add in (add_attention, add_mha):
        if only in add.__name__:
            add(b)
    b.run(mods)
    return t.result()


if __name__ == "__main__":
    sys.exit(main())
