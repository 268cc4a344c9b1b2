#!/usr/bin/python3
"""The matrix products of the quantized com.microsoft ops against ONNX
Runtime (onnxruntime-node): MatMulNBits (2, 4, 8 bits; block sizes 16 to
128; K a multiple of the block or not; no, packed uint8 and float zero
points; bias; g_idx; accuracy_level 0 and 4; decode and batched A; B and
scales constant or fed), MatMulIntegerToFloat, DynamicQuantizeMatMul and
QGemm (uint8/int8 A and B, per-tensor and per-column scales and zero
points, bias / C, transA / transB, alpha, float or quantized output).

Float outputs must be within 1e-4 * max(1, max|ref|) of ONNX Runtime's
(summation order); QGemm's quantized output within one unit (ONNX
Runtime's float requantization rounds the same float product, but the
float itself may differ in its last bit, which moves a value at a half).

Usage: msq_matmul_test.py ORT_RUN WORK [NODE_MODULES]; exits 77 (skipped)
without onnxruntime-node."""
import subprocess
import sys

import numpy as np

sys.dont_write_bytecode = True
from msq_ref import Batch, Tally, node_modules, one_node  # noqa: E402
from bench_run import ort_saturates  # noqa: E402  (tools/bench, on the path through msq_ref)

rng = np.random.default_rng(19)
FTOL = 1e-4


def pack_bits(q, bits):
    """q (..., n) values < 2^bits -> bytes, value k at bit k * bits."""
    per = 8 // bits
    q = q.reshape(q.shape[:-1] + (q.shape[-1] // per, per)).astype(np.uint16)
    out = np.zeros(q.shape[:-1], np.uint16)
    for i in range(per):
        out |= q[..., i] << (i * bits)
    return out.astype(np.uint8)


def nbits_case(b, name, M, K, N, bits=4, bs=32, zp="none", bias=False, acc=0, const=True,
               gidx=False, lead=None):
    nb = (K + bs - 1) // bs
    q = rng.integers(0, 1 << bits, (N, nb, bs))
    B = pack_bits(q, bits)
    scales = rng.uniform(0.005, 0.05, (N, nb)).astype(np.float32)
    A = rng.standard_normal((lead or []) + [M, K]).astype(np.float32)
    ins = [("A", A), ("B", B), ("scales", scales)]
    consts = {"B": B, "scales": scales} if const else {}
    if zp == "u8":
        zq = rng.integers(0, 1 << bits, (N, (nb * bits + 7) // 8 * (8 // bits)))
        ins.append(("zp", pack_bits(zq, bits)))
    elif zp == "float":
        ins.append(("zp", rng.uniform(0, (1 << bits) - 1, (N, nb)).astype(np.float32)))
    else:
        ins.append((None, None))
    if zp != "none" and const:
        consts["zp"] = ins[-1][1]
    ins.append(("g_idx", (np.arange(K) // bs).astype(np.int32)) if gidx else (None, None))
    if gidx:
        consts["g_idx"] = ins[-1][1]
    if bias:
        ins.append(("bias", rng.standard_normal(N).astype(np.float32)))
        consts["bias"] = ins[-1][1]
    while ins[-1][0] is None:
        ins.pop()
    path = b.model_path(name)
    feeds = one_node(path, "MatMulNBits", ins, [("Y", np.float32)], consts, K=K, N=N, bits=bits,
                     block_size=bs, accuracy_level=acc)
    b.add(name, path, feeds, FTOL)


def nbits_cases(b):
    nbits_case(b, "nbits 4b bs32 decode", 1, 256, 96)
    nbits_case(b, "nbits 4b bs32 u8 zp bias", 1, 256, 96, zp="u8", bias=True)
    nbits_case(b, "nbits 4b bs16 float zp", 3, 160, 40, bs=16, zp="float")
    nbits_case(b, "nbits 4b bs64 K=200 (partial block) u8 zp", 2, 200, 33, bs=64, zp="u8")
    nbits_case(b, "nbits 4b bs128 batched 3-D A", 7, 256, 70, bs=128, lead=[2], bias=True)
    nbits_case(b, "nbits 4b bs32 M=64 u8 zp", 64, 320, 130, zp="u8")
    # the GEMM path's packer past the last whole 16 rows of K (K=200)
    nbits_case(b, "nbits 4b bs32 M=6 K=200 u8 zp", 6, 200, 40, zp="u8")
    nbits_case(b, "nbits 4b B fed at run time", 5, 96, 24, zp="u8", const=False)
    nbits_case(b, "nbits 4b g_idx (plain order)", 2, 128, 16, gidx=True)
    nbits_case(b, "nbits 4b accuracy_level 4 decode", 1, 256, 64, acc=4)
    nbits_case(b, "nbits 4b accuracy_level 4 u8 zp M=33", 33, 192, 48, zp="u8", acc=4)
    nbits_case(b, "nbits 4b accuracy_level 4 float zp", 4, 128, 32, zp="float", acc=4)
    # the integer decode path (nbits_q8.c on VNNI CPUs): u8 zero points,
    # rows 1-4, N not a multiple of its 4 columns, blocks of 32-128, a
    # partial last block, bias
    nbits_case(b, "nbits 4b accuracy_level 4 u8 zp decode N=61", 1, 256, 61, zp="u8", acc=4)
    nbits_case(b, "nbits 4b accuracy_level 4 u8 zp 3 rows bias", 3, 192, 50, zp="u8", acc=4,
               bias=True)
    nbits_case(b, "nbits 4b accuracy_level 4 bs64 K=200 M=2", 2, 200, 33, bs=64, zp="u8",
               acc=4)
    nbits_case(b, "nbits 4b accuracy_level 4 bs128 M=4 3-D", 2, 512, 70, bs=128, acc=4,
               lead=[2])
    nbits_case(b, "nbits 4b accuracy_level 4 bs16 decode", 1, 96, 20, bs=16, zp="u8", acc=4)
    nbits_case(b, "nbits 4b accuracy_level 4 K=160 (odd blocks of 32) 2 rows", 2, 160, 37,
               zp="u8", acc=4)
    nbits_case(b, "nbits 8b bs32", 2, 128, 24, bits=8)
    nbits_case(b, "nbits 8b bs64 u8 zp M=20", 20, 192, 40, bits=8, bs=64, zp="u8")
    nbits_case(b, "nbits 8b accuracy_level 4", 3, 128, 24, bits=8, zp="u8", acc=4)
    nbits_case(b, "nbits 2b bs32", 2, 128, 24, bits=2)
    nbits_case(b, "nbits 2b bs16 u8 zp M=9", 9, 80, 24, bits=2, bs=16, zp="u8", bias=True)


# Where ONNX Runtime's u8 x s8 products saturate (bench_run.ort_saturates:
# no VNNI) the int8 B values stay within [-64, 64), where a pair of
# products fits int16, so ONNX Runtime's reference is exact there too
# (ortmk's kernels take the full range on every CPU: tests/unit/test_igemm).
ORT_SATURATES = ort_saturates()


def q8(dt, shape, weight=False):
    lo, hi = (0, 256) if dt == np.uint8 else (-64, 64) if weight and ORT_SATURATES else (-128, 128)
    return rng.integers(lo, hi, shape).astype(dt)


def mitf_case(b, name, ashape, bshape, adt=np.uint8, bdt=np.uint8, bscale="tensor", azp=True,
              bzp="tensor", bias=False, const=True):
    N = bshape[-1]
    A, B = q8(adt, ashape), q8(bdt, bshape, weight=True)
    a_s = np.array(0.02, np.float32)
    b_s = (rng.uniform(0.01, 0.03, N).astype(np.float32) if bscale == "column"
           else np.array(0.015, np.float32))
    ins = [("A", A), ("B", B), ("a_scale", a_s), ("b_scale", b_s)]
    consts = {"B": B, "b_scale": b_s} if const else {}
    ins.append(("a_zp", q8(adt, [])) if azp else (None, None))
    ins.append(("b_zp", q8(bdt, [N] if bzp == "column" else [], weight=True)) if bzp
               else (None, None))
    if bias:
        ins.append(("bias", rng.standard_normal(N).astype(np.float32)))
    while ins[-1][0] is None:
        ins.pop()
    path = b.model_path(name)
    b.add(name, path, one_node(path, "MatMulIntegerToFloat", ins, [("Y", np.float32)], consts),
          FTOL)


def dqmm_case(b, name, ashape, bshape, bdt=np.int8, bscale="tensor", bzp=None, bias=False):
    N = bshape[-1]
    A = rng.standard_normal(ashape).astype(np.float32)
    B = q8(bdt, bshape, weight=True)
    b_s = (rng.uniform(0.01, 0.03, N).astype(np.float32) if bscale == "column"
           else np.array(0.015, np.float32))
    ins = [("A", A), ("B", B), ("b_scale", b_s)]
    ins.append(("b_zp", q8(bdt, [N] if bzp == "column" else [], weight=True)) if bzp
               else (None, None))
    if bias:
        ins.append(("bias", rng.standard_normal(N).astype(np.float32)))
    while ins[-1][0] is None:
        ins.pop()
    path = b.model_path(name)
    b.add(name, path, one_node(path, "DynamicQuantizeMatMul", ins, [("Y", np.float32)],
                               {"B": B}), FTOL)


def qgemm_case(b, name, M, K, N, adt=np.uint8, bdt=np.int8, ta=0, tb=0, alpha=1.0,
               bscale="tensor", bzp="tensor", c=None, ydt=None, const=True):
    A = q8(adt, [K, M] if ta else [M, K])
    B = q8(bdt, [N, K] if tb else [K, N], weight=True)
    b_s = (rng.uniform(0.01, 0.03, N).astype(np.float32) if bscale == "column"
           else np.array(0.015, np.float32))
    ins = [("A", A), ("a_scale", np.array(0.02, np.float32)), ("a_zp", q8(adt, [])),
           ("B", B), ("b_scale", b_s)]
    ins.append(("b_zp", q8(bdt, [N] if bzp == "column" else [], weight=True)) if bzp
               else (None, None))
    ins.append(("C", rng.integers(-5000, 5000, c).astype(np.int32)) if c else (None, None))
    if ydt is not None:
        ins += [("y_scale", np.array(0.9 if ydt != np.float32 else 1, np.float32)),
                ("y_zp", q8(ydt, []))]
    while ins[-1][0] is None:
        ins.pop()
    consts = {"B": B} if const else {}
    path = b.model_path(name)
    b.add(name, path, one_node(path, "QGemm", ins, [("Y", ydt or np.float32)], consts,
                               transA=ta, transB=tb, alpha=alpha),
          "q1" if ydt else FTOL)


def int8_cases(b):
    mitf_case(b, "MatMulIntegerToFloat u8 x u8 per tensor", [3, 40], [40, 24])
    mitf_case(b, "MatMulIntegerToFloat u8 x s8 per column scale+zp, bias", [2, 5, 64], [64, 30],
              bdt=np.int8, bscale="column", bzp="column", bias=True)
    mitf_case(b, "MatMulIntegerToFloat no zero points, B fed", [7, 33], [33, 17], azp=False,
              bzp=None, const=False)
    mitf_case(b, "MatMulIntegerToFloat batched B", [2, 4, 16], [2, 16, 8], bdt=np.int8)
    mitf_case(b, "MatMulIntegerToFloat s8 A", [4, 32], [32, 16], adt=np.int8, bdt=np.int8)
    dqmm_case(b, "DynamicQuantizeMatMul s8 B per tensor", [4, 48], [48, 20])
    dqmm_case(b, "DynamicQuantizeMatMul u8 B per column, zp, bias", [2, 3, 64], [64, 32],
              bdt=np.uint8, bscale="column", bzp="column", bias=True)
    dqmm_case(b, "DynamicQuantizeMatMul s8 B zp per tensor", [1, 100], [100, 50], bzp="tensor")
    qgemm_case(b, "QGemm u8 x s8 float out", 5, 40, 24)
    qgemm_case(b, "QGemm transA transB alpha, C row", 6, 32, 20, ta=1, tb=1, alpha=0.5, c=[20])
    qgemm_case(b, "QGemm per column b, C (M,N), u8 out", 7, 48, 16, bscale="column",
               bzp="column", c=[7, 16], ydt=np.uint8)
    qgemm_case(b, "QGemm s8 x s8, s8 out, B fed transB", 4, 24, 12, adt=np.int8, tb=1,
               ydt=np.int8, const=False)
    qgemm_case(b, "QGemm u8 x u8, C (M,1)", 3, 17, 9, bdt=np.uint8, c=[3, 1])


def refusals(b, t):
    """Attributes ortmk does not implement are refused at load, by name."""
    for attr, kw in (("bits", {"bits": 3}), ("weight_prepacked", {"weight_prepacked": 1}),
                     ("block_size", {"block_size": 24})):
        path = b.model_path("refuse " + attr)
        args = dict(K=64, N=8, bits=4, block_size=32)
        args.update(kw)
        one_node(path, "MatMulNBits", [("A", np.zeros((1, 64), np.float32)),
                                       ("B", np.zeros((8, 2, 16), np.uint8)),
                                       ("scales", np.ones((8, 2), np.float32))],
                 [("Y", np.float32)], {"B": np.zeros((8, 2, 16), np.uint8),
                                       "scales": np.ones((8, 2), np.float32)}, **args)
        p = subprocess.run([b.ort_run, path], capture_output=True, text=True, timeout=60)
        t.check(p.returncode != 0 and attr in p.stderr,
                "MatMulNBits %s refused by name (%s)" % (kw, p.stderr.strip()[-160:]))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    mods = node_modules(sys.argv[3] if len(sys.argv) > 3 else None)
    if not mods:
        return 77
    t = Tally()
    b = Batch(sys.argv[1], sys.argv[2], mods)
    nbits_cases(b)
    int8_cases(b)
    b.run(t)
    refusals(b, t)
    return t.result()


if __name__ == "__main__":
    sys.exit(main())
