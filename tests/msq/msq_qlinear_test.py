#!/usr/bin/python3
"""The element-wise, concatenation and pooling ops of the quantized
com.microsoft domain against ONNX Runtime (onnxruntime-node):
QLinearAdd, QLinearMul (broadcasting, with and without zero points),
QLinearSigmoid, QLinearLeakyRelu, QLinearConcat (inputs in the output's
scale and not), QLinearGlobalAveragePool (channels_last 0 and 1),
QLinearAveragePool (1-D to 3-D, pads, strides, auto_pad, ceil_mode,
count_include_pad, channels_last) and NhwcMaxPool (pads, strides,
dilations, auto_pad, ceil_mode), each for uint8 and int8.

Exact except QLinearAdd and QLinearMul, within one unit: ONNX Runtime's
x86 kernels requantize those with a fixed-point form of the scale
ratios, which can round a value within its error of a half the other
way.  ONNX Runtime's type inference rejects an omitted zero point, so
where ortmk runs a node without one, ONNX Runtime runs it with an explicit 0.  QLinearSigmoid and QLinearLeakyRelu are compared with both zero
points given: onnxruntime-node 1.30 aborts (an out-of-range input index)
on a model that omits either.  ortmk's tables (Sigmoid, LeakyRelu, Concat) and pools follow ONNX
Runtime's float arithmetic step for step and must match every byte.

Usage: msq_qlinear_test.py ORT_RUN WORK [NODE_MODULES]; exits 77 (skipped)
without onnxruntime-node."""
import sys

import numpy as np

sys.dont_write_bytecode = True
from msq_ref import Batch, Tally, node_modules, one_node  # noqa: E402

rng = np.random.default_rng(23)


def q8(dt, shape):
    lo, hi = (0, 256) if dt == np.uint8 else (-128, 128)
    return rng.integers(lo, hi, shape).astype(dt)


def f(x):
    return np.array(x, np.float32)


def binary(b, op, dt, ashape, bshape, zps=True):
    name = "%s %s %s x %s%s" % (op, np.dtype(dt).name, ashape, bshape,
                                "" if zps else " no A, B zero points")
    ins = [("A", q8(dt, ashape)), ("A_scale", f(0.031)), ("A_zp", q8(dt, []) if zps else None),
           ("B", q8(dt, bshape)), ("B_scale", f(0.017)), ("B_zp", q8(dt, []) if zps else None),
           ("C_scale", f(0.045 if op == "QLinearAdd" else 0.09)),
           ("C_zp", q8(dt, []))]
    path, ref = b.model_path(name), b.model_path(name + " ref")
    zero = {n: np.zeros([], dt) for n, v in ins if v is None}
    one_node(ref, op, [(n, zero.get(n, v)) for n, v in ins], [("C", dt)], zero)
    ins = [(n if v is not None else None, v) for n, v in ins]
    b.add(name, path, one_node(path, op, ins, [("C", dt)]), "q1", ref_path=ref)


def unary(b, op, dt, zps=True, **attrs):
    name = "%s %s%s %s" % (op, np.dtype(dt).name, "" if zps else " no Y_zero_point",
                           attrs or "")
    ins = [("X", q8(dt, [3, 5, 17])), ("X_scale", f(0.05)), ("X_zp", q8(dt, [])),
           ("Y_scale", f(0.004 if op == "QLinearSigmoid" else 0.03)),
           ("Y_zp", q8(dt, []) if zps else None)]
    ins = [(n if v is not None else None, v) for n, v in ins]
    while ins[-1][0] is None:
        ins.pop()
    path = b.model_path(name)
    b.add(name, path, one_node(path, op, ins, [("Y", dt)], **attrs), "exact")


def concat(b, dt, axis, shapes, same):
    name = "QLinearConcat %s axis %d %s%s" % (np.dtype(dt).name, axis, shapes,
                                             " (one input in Y's scale)" if same else "")
    ys, yz = f(0.05), q8(dt, [])
    ins = [("Y_scale", ys), ("Y_zp", yz)]
    for i, s in enumerate(shapes):
        sc, zp = (ys, yz) if same and i == 0 else (f(rng.uniform(0.01, 0.1)), q8(dt, []))
        ins += [("x%d" % i, q8(dt, s)), ("s%d" % i, sc), ("z%d" % i, zp)]
    path = b.model_path(name)
    b.add(name, path, one_node(path, "QLinearConcat", ins, [("Y", dt)], axis=axis), "exact")


def pool_ins(dt, shape, zps=True):
    ins = [("X", q8(dt, shape)), ("x_scale", f(0.04)), ("x_zp", q8(dt, []) if zps else None),
           ("y_scale", f(0.035)), ("y_zp", q8(dt, []))]
    return [(n if v is not None else None, v) for n, v in ins]


def gap(b, dt, shape, last):
    name = "QLinearGlobalAveragePool %s %s channels_last=%d" % (np.dtype(dt).name, shape, last)
    path = b.model_path(name)
    b.add(name, path, one_node(path, "QLinearGlobalAveragePool", pool_ins(dt, shape),
                               [("Y", dt)], channels_last=last), "exact")


def avgpool(b, dt, shape, zps=True, **attrs):
    name = "QLinearAveragePool %s %s %s" % (np.dtype(dt).name, shape,
                                            " ".join("%s=%s" % kv for kv in attrs.items()))
    ins = pool_ins(dt, shape, zps)
    path, ref = b.model_path(name), b.model_path(name + " ref")
    zero = {"x_zp": np.zeros([], dt)} if not zps else {}
    one_node(ref, "QLinearAveragePool", [(n or "x_zp", zero.get(n or "x_zp", v)) for n, v in ins],
             [("Y", dt)], zero, **attrs)
    b.add(name, path, one_node(path, "QLinearAveragePool", ins, [("Y", dt)], **attrs), "exact",
          ref_path=ref)


def maxpool(b, dt, shape, **attrs):
    name = "NhwcMaxPool %s %s %s" % (np.dtype(dt).name, shape,
                                     " ".join("%s=%s" % kv for kv in attrs.items()))
    path = b.model_path(name)
    b.add(name, path, one_node(path, "NhwcMaxPool", [("x", q8(dt, shape))], [("y", dt)], **attrs),
          "exact")


def cases(b):
    for dt in (np.uint8, np.int8):
        for op in ("QLinearAdd", "QLinearMul"):
            binary(b, op, dt, [4, 6, 10], [4, 6, 10])
            binary(b, op, dt, [2, 3, 8], [3, 1])
            binary(b, op, dt, [1], [5, 7], zps=False)
        unary(b, "QLinearSigmoid", dt)
        unary(b, "QLinearLeakyRelu", dt, alpha=0.13)
        concat(b, dt, 1, [[2, 3, 4], [2, 5, 4], [2, 1, 4]], False)
        concat(b, dt, -1, [[3, 4], [3, 2]], True)
        gap(b, dt, [2, 5, 7, 6], 0)
        gap(b, dt, [2, 7, 6, 5], 1)
        gap(b, dt, [1, 4, 9], 0)
        avgpool(b, dt, [1, 3, 9, 8], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        avgpool(b, dt, [1, 3, 9, 8], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1],
                count_include_pad=1)
        avgpool(b, dt, [2, 9, 8, 4], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                channels_last=1, count_include_pad=1)
        avgpool(b, dt, [1, 2, 10, 7], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
        avgpool(b, dt, [1, 2, 10, 7], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
                pads=[1, 1, 1, 1], count_include_pad=1)
        avgpool(b, dt, [1, 2, 9, 7], kernel_shape=[2, 3], strides=[2, 1], auto_pad="SAME_UPPER")
        avgpool(b, dt, [1, 2, 9, 7], kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER",
                channels_last=1)
        avgpool(b, dt, [1, 2, 9, 7], kernel_shape=[3, 3], auto_pad="VALID", zps=False)
        avgpool(b, dt, [2, 3, 11], kernel_shape=[4], strides=[3], pads=[2, 1])
        avgpool(b, dt, [1, 2, 5, 6, 4], kernel_shape=[2, 3, 2], strides=[2, 2, 1],
                pads=[0, 1, 1, 1, 0, 0])
        avgpool(b, dt, [1, 5, 6, 2, 3], kernel_shape=[2, 3, 2], channels_last=1)
        avgpool(b, dt, [1, 4, 6, 6], kernel_shape=[6, 6])
        maxpool(b, dt, [1, 9, 8, 5], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        maxpool(b, dt, [2, 10, 7, 3], kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1)
        maxpool(b, dt, [1, 11, 9, 4], kernel_shape=[2, 2], dilations=[2, 2],
                auto_pad="SAME_UPPER")
        maxpool(b, dt, [1, 12, 6], kernel_shape=[3], strides=[2], pads=[1, 1])


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    mods = node_modules(sys.argv[3] if len(sys.argv) > 3 else None)
    if not mods:
        return 77
    t = Tally()
    b = Batch(sys.argv[1], sys.argv[2], mods)
    cases(b)
    b.run(t)
    return t.result()


if __name__ == "__main__":
    sys.exit(main())
