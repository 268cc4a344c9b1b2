#!/usr/bin/python3
"""com.microsoft GroupQueryAttention (providers/cpu/ops/ms/gqa.c) against
ONNX Runtime (onnxruntime-node): the prompt (S > 1, no past) and token
generation (S = 1 after a past cache longer than the tokens kept, a
different seqlens_k per batch), kv_num_heads below num_heads and equal to
it, packed QKV, rotary (halves, interleaved, part of the head),
local_window_size, scale, softcap, smooth_softmax; present_key and
present_value compared too; float16 (to 1e-3).  Also what is refused by
name (k_scale, qk_output, later attributes) and a seqlens_k or a
position that does not fit the caches.  position_ids with do_rotary,
attention_bias, head_sink.

Usage: ms_gqa_test.py ORT_RUN WORK [NODE_MODULES]
Exits 77 (skip) when onnxruntime-node is not installed."""
import shutil
import sys

import numpy as np

sys.dont_write_bytecode = True
from ms_ref import Batch, Tally, node_modules, one_node  # noqa: E402

rng = np.random.default_rng(29)
F = np.float32
I32 = np.int32
OUTS = [("y", F), ("pk_out", F), ("pv_out", F)]


def rnd(*shape, s=1.0):
    return (rng.standard_normal(shape) * s).astype(F)


def caches(maxpos, rot):
    """cos/sin [maxpos, rot / 2] as a rotary embedding's tables."""
    inv = 1.0 / (10000 ** (np.arange(0, rot, 2) / rot))
    ang = np.outer(np.arange(maxpos), inv)
    return np.cos(ang).astype(F), np.sin(ang).astype(F)


class Case:
    """One GroupQueryAttention node's inputs, built from its sizes."""

    def __init__(self, B=2, S=5, N=4, Nkv=2, H=16, P=0, seqlens=None, total=None,
                 packed=False, rot=0, maxpos=32):
        self.ins = []
        D, Dkv = N * H, Nkv * H
        if packed:
            self.ins += [("qkv", rnd(B, S, D + 2 * Dkv)), None, None]
        else:
            self.ins += [("q", rnd(B, S, D)), ("k", rnd(B, S, Dkv)), ("v", rnd(B, S, Dkv))]
        if P:
            self.ins += [("pk", rnd(B, Nkv, P, H)), ("pv", rnd(B, Nkv, P, H))]
        else:
            self.ins += [None, None]
        seqlens = seqlens if seqlens is not None else [S - 1] * B
        total = total if total is not None else max(seqlens) + 1
        self.ins += [("seqlens_k", np.array(seqlens, I32)), ("total", np.array(total, I32))]
        if rot:
            c, s = caches(maxpos, rot)
            self.ins += [("cos", c), ("sin", s)]
        self.attrs = dict(num_heads=N, kv_num_heads=Nkv)


def add_gqa(b):
    def gqa(name, case, err=None, extra=(), outs=OUTS, tol=1e-4, **attrs):
        attrs = dict(case.attrs, **attrs)
        ins = case.ins + list(extra)
        b.add("GroupQueryAttention " + name, lambda p: one_node(
            p, "GroupQueryAttention", ins, list(outs), **attrs), expect_error=err, tol=tol)

    gqa("prompt", Case())
    gqa("prompt, kv_num_heads = num_heads", Case(Nkv=4))
    gqa("prompt, one K/V head", Case(N=4, Nkv=1, H=8))
    gqa("prompt, batch 1, S 9", Case(B=1, S=9, N=6, Nkv=2, H=8))
    gqa("token, past buffer of 8, seqlens_k [5, 7]", Case(S=1, P=8, seqlens=[5, 7]))
    gqa("token, past 6, seqlens_k [6, 6]", Case(S=1, P=6, seqlens=[6, 6]))
    gqa("token, past 6, seqlens_k [2, 6], total 7", Case(S=1, P=6, seqlens=[2, 6]))
    gqa("token, no past, seqlens_k [0, 0]", Case(S=1, seqlens=[0, 0]))
    gqa("packed QKV prompt", Case(packed=True))
    gqa("packed QKV token", Case(S=1, P=8, seqlens=[3, 8], packed=True))
    gqa("rotary prompt", Case(rot=16), do_rotary=1)
    gqa("rotary prompt interleaved", Case(rot=16), do_rotary=1, rotary_interleaved=1)
    gqa("rotary token, seqlens_k [4, 7]", Case(S=1, P=8, seqlens=[4, 7], rot=16), do_rotary=1)
    gqa("rotary token interleaved", Case(S=1, P=8, seqlens=[4, 7], rot=16), do_rotary=1,
        rotary_interleaved=1)
    gqa("rotary on half the head (H 32, rot 16)", Case(S=1, P=8, seqlens=[4, 7], H=32, rot=16),
        do_rotary=1)
    gqa("rotary packed QKV token", Case(S=1, P=8, seqlens=[6, 2], packed=True, rot=16),
        do_rotary=1)
    gqa("local_window_size 2 prompt", Case(S=7), local_window_size=2)
    gqa("local_window_size 3 token", Case(S=1, P=8, seqlens=[6, 8]), local_window_size=3)
    gqa("scale", Case(), scale=0.2)
    gqa("softcap", Case(S=1, P=8, seqlens=[5, 7]), softcap=2.0)
    gqa("smooth_softmax", Case(S=1, P=8, seqlens=[5, 7]), smooth_softmax=1)
    gqa("softcap + local window + rotary prompt", Case(S=6, rot=16), softcap=3.0,
        local_window_size=2, do_rotary=1)
    gqa("subsequent prompt (S 3 after a past), batch 1", Case(B=1, S=3, P=8, seqlens=[6]))
    gqa("subsequent prompt, rotary + window", Case(B=1, S=3, P=8, seqlens=[7], rot=16),
        do_rotary=1, local_window_size=4)
    c = Case(S=1, P=8, seqlens=[5, 7])
    gqa("head_sink", c, extra=[None, None, None, None, ("sink", rnd(4))])
    gqa("Llama-sized prompt (N 8, Nkv 2, H 64, S 40), rotary", Case(B=1, S=40, N=8, Nkv=2, H=64,
                                                                    rot=64, maxpos=64),
        do_rotary=1)
    gqa("Llama-sized token (past buffer 48, seqlens_k [40, 17])",
        Case(S=1, P=48, N=8, Nkv=2, H=64, seqlens=[40, 17], rot=64, maxpos=64), do_rotary=1)
    gqa("padded prompt, seqlens_k [4, 2] (rows past a batch's length)", Case(seqlens=[4, 2]))
    gqa("seqlens_k beyond the cache refused", Case(S=1, P=4, seqlens=[3, 9], total=5),
        err="seqlens_k[1]")
    # float16: the provider runs the float32 kernel between conversions
    # (docs/ARCHITECTURE.md); ONNX Runtime's kernel also computes in float32
    for name, h, at in (("float16 prompt", Case(), {}),
                        ("float16 token, rotary", Case(S=1, P=8, seqlens=[5, 7], rot=16),
                         {"do_rotary": 1})):
        h.ins = [i and (i[0], i[1].astype(np.float16) if i[1].dtype == F else i[1])
                 for i in h.ins]
        gqa(name, h, outs=[(n, np.float16) for n, _ in OUTS], tol=1e-3, **at)
    c = Case()
    tok = Case(S=1, P=8, seqlens=[5, 7], rot=16)
    gqa("position_ids token, rotary", tok, do_rotary=1,
        extra=[("pos", np.array([[9], [3]], np.int64))])
    gqa("position_ids prompt, rotary (its first value as the offset)", Case(rot=16),
        do_rotary=1, extra=[("pos", np.array([[2, 3, 4, 5, 6], [0, 1, 2, 3, 4]], np.int64))])
    gqa("position_ids without do_rotary (not read)", c,
        extra=[None, None, ("pos", np.array([[7] * 5, [1] * 5], np.int64))])
    gqa("position_ids outside cos_cache refused", tok, err="outside cos_cache", do_rotary=1,
        extra=[("pos", np.array([[40], [3]], np.int64))])
    gqa("attention_bias [B,1,S,T] prompt", c, extra=[None, None, None, ("ab", rnd(2, 1, 5, 5))])
    gqa("attention_bias [1,N,S,T] token + softcap + rotary", tok, softcap=2.0, do_rotary=1,
        extra=[None, ("ab", rnd(1, 4, 1, 8))])
    gqa("k_scale (quantized cache) refused", c, err="k_scale",
        extra=[None] * 5 + [("ks", np.ones(1, F))])
    gqa("an attribute of a later ONNX Runtime refused", c, err="sliding_window_cache",
        sliding_window_cache=1)
    gqa("qk_output refused", c, err="qk_output", qk_output=1,
        outs=OUTS + [("qk", F)])


def main():
    ort_run, work = sys.argv[1], sys.argv[2]
    mods = node_modules(sys.argv[3] if len(sys.argv) > 3 else None)
    if not mods:
        return 77
    shutil.rmtree(work, ignore_errors=True)
    t = Tally()
    b = Batch(ort_run, work, t)
    add_gqa(b)
    b.run(mods)
    return t.result()


if __name__ == "__main__":
    sys.exit(main())
