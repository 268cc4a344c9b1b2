#!/usr/bin/python3
"""A tiny GPT-style decoder whose linear layers are com.microsoft
MatMulNBits, for the model zoo (issue 19).

Token ids [batch, seq] (int64) -> Gather from a float32 embedding table
plus a learned position table -> `layers` pre-LayerNorm blocks (causal
multi-head self-attention: Q, K, V and output projections; an MLP of two
projections with the erf Gelu between, in ai.onnx ops) -> final LayerNorm -> LM head -> logits
[batch, seq, vocab].  No KV cache: every run sees the whole sequence.

Every projection's weight W (K x N, seeded random float32) is quantized
to 4 bits the way ONNX Runtime's MatMul4BitsQuantizer lays it out
(asymmetric, block_size along K per column: the block's range stretched
to include 0, scale = (max - min) / 15, zero point round(-min / scale)
clamped to [0, 15], q = clamp(round(w / scale) + zp, 0, 15)); B holds
N x k_blocks x block_size/2 bytes, low nibble first, scales N x k_blocks
and zero points N x ceil(k_blocks / 2) bytes.  accuracy_level 0 (float A)
unless --accuracy-level 4.

usage: gen_nbits_decoder.py OUT.onnx [--vocab 512] [--dim 128] [--heads 4]
       [--layers 2] [--seq 32] [--block-size 32] [--accuracy-level 0]
       [--seed 19]
The sequence length is the symbolic dim 'seq' (batch 'batch'); --seq only
sizes the position table.  Run it with ort-run OUT.onnx --dim batch=1
--dim seq=16 (inputs are generated), or against ONNX Runtime with the same
ids."""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def quantize_4bits(w, bs):
    """W (K x N float32) -> B, scales, zero points (MatMulNBits layout)."""
    K, N = w.shape
    nb = (K + bs - 1) // bs
    wp = np.zeros((nb * bs, N), np.float32)
    wp[:K] = w
    blocks = wp.T.reshape(N, nb, bs)
    lo = np.minimum(blocks.min(axis=2), 0.0)
    hi = np.maximum(blocks.max(axis=2), 0.0)
    scale = ((hi - lo) / 15.0).astype(np.float32)
    scale[scale == 0] = 1.0
    zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
    q = np.clip(np.round(blocks / scale[..., None]) + zp[..., None], 0, 15).astype(np.uint8)
    B = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    zpp = np.zeros((N, (nb + 1) // 2), np.uint8)
    for b in range(nb):
        zpp[:, b // 2] |= zp[:, b] << (4 * (b % 2))
    return B, scale, zpp


class Builder:
    def __init__(self, rng, bs, acc):
        self.rng, self.bs, self.acc = rng, bs, acc
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, s):
        self.n += 1
        return "%s_%d" % (s, self.n)

    def const(self, arr, s):
        n = self.name(s)
        self.inits.append(numpy_helper.from_array(arr, n))
        return n

    def node(self, op, ins, domain="", **attrs):
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [out], domain=domain, **attrs))
        return out

    def linear(self, x, K, N, bias=True):
        w = (self.rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
        B, sc, zp = quantize_4bits(w, self.bs)
        ins = [x, self.const(B, "B"), self.const(sc, "scales"), self.const(zp, "zp")]
        if bias:
            ins += ["", self.const((0.02 * self.rng.standard_normal(N)).astype(np.float32),
                                   "bias")]
        return self.node("MatMulNBits", ins, "com.microsoft", K=K, N=N, bits=4,
                         block_size=self.bs, accuracy_level=self.acc)

    def layernorm(self, x, d):
        return self.node("LayerNormalization",
                         [x, self.const(np.ones(d, np.float32), "gamma"),
                          self.const(np.zeros(d, np.float32), "beta")], axis=-1, epsilon=1e-5)


def attention(b, x, d, heads, mask):
    hd = d // heads
    shape = b.const(np.array([0, 0, heads, hd], np.int64), "shape")
    q, k, v = (b.node("Transpose", [b.node("Reshape", [b.linear(x, d, d), shape])],
                      perm=[0, 2, 1, 3]) for _ in range(3))
    kt = b.node("Transpose", [k], perm=[0, 1, 3, 2])
    s = b.node("Mul", [b.node("MatMul", [q, kt]),
                       b.const(np.array(1 / np.sqrt(hd), np.float32), "scale")])
    p = b.node("Softmax", [b.node("Add", [s, mask])], axis=-1)
    o = b.node("Transpose", [b.node("MatMul", [p, v])], perm=[0, 2, 1, 3])
    o = b.node("Reshape", [o, b.const(np.array([0, 0, d], np.int64), "shape")])
    return b.linear(o, d, d)


def gelu(b, x):
    """x * 0.5 * (1 + erf(x / sqrt 2)) in ai.onnx ops (opset 17 has no Gelu)."""
    e = b.node("Erf", [b.node("Mul", [x, b.const(np.array(1 / np.sqrt(2), np.float32), "r2")])])
    h = b.node("Mul", [x, b.node("Add", [e, b.const(np.array(1, np.float32), "onef")])])
    return b.node("Mul", [h, b.const(np.array(0.5, np.float32), "half")])


def build(a):
    rng = np.random.default_rng(a.seed)
    b = Builder(rng, a.block_size, a.accuracy_level)
    d = a.dim
    emb = b.const((0.1 * rng.standard_normal((a.vocab, d))).astype(np.float32), "wte")
    pos = b.const((0.1 * rng.standard_normal((a.seq, d))).astype(np.float32), "wpe")
    # positions 0..seq-1 and the causal mask, from the ids' shape
    seq = b.node("Gather", [b.node("Shape", ["ids"]), b.const(np.array(1, np.int64), "one")])
    rng_ = b.node("Range", [b.const(np.array(0, np.int64), "zero"), seq,
                            b.const(np.array(1, np.int64), "one")])
    x = b.node("Add", [b.node("Gather", [emb, "ids"]), b.node("Gather", [pos, rng_])])
    ii = b.node("Unsqueeze", [rng_, b.const(np.array([1], np.int64), "ax")])
    jj = b.node("Unsqueeze", [rng_, b.const(np.array([0], np.int64), "ax")])
    mask = b.node("Where", [b.node("Greater", [jj, ii]),
                            b.const(np.array(-1e9, np.float32), "neg"),
                            b.const(np.array(0, np.float32), "zerof")])
    for _ in range(a.layers):
        x = b.node("Add", [x, attention(b, b.layernorm(x, d), d, a.heads, mask)])
        h = gelu(b, b.linear(b.layernorm(x, d), d, 4 * d))
        x = b.node("Add", [x, b.linear(h, 4 * d, d)])
    logits = b.linear(b.layernorm(x, d), d, a.vocab, bias=False)
    b.nodes.append(helper.make_node("Identity", [logits], ["logits"]))
    g = helper.make_graph(
        b.nodes, "nbits_decoder",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", a.vocab])],
        b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--accuracy-level", type=int, default=0)
    ap.add_argument("--seed", type=int, default=19)
    return ap


def model(accuracy_level=0):
    """The zoo's nbits_decoder (tools/zoo/zoo_models.py): the defaults above."""
    return build(parser().parse_args(["-", "--accuracy-level", str(accuracy_level)]))


def main():
    a = parser().parse_args()
    m = build(a)
    onnx.checker.check_model(m)
    onnx.save(m, a.out)


if __name__ == "__main__":
    main()
