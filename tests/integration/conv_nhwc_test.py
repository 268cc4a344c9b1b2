"""One-group convolutions of at least 16 input and 16 output channels with
more than one tap (conv_nhwc.c on a CPU whose best ISA is AVX2 + FMA: the
input band transposed to channels-last, six output pixels by sixteen
output channels a tile) of every geometry that kernel distinguishes,
against numpy (float64), through depthwise_test.py's model builder and
checks.  On other CPUs the same cases run through the other forms and
must pass too.

usage: conv_nhwc_test.py ORT_RUN

The cases hit each edge: output channels that leave a partial block of 16
(17, 21, 33, 70), input channels that leave a partial block of the 8 x 8
transposes (17, 19, 20, 24), rows that end inside a tile of 6 pixels or
inside an 8 x 8 output transpose (widths 1, 8, 12, 13, 25), strides 1 to 3
(also 2 x 1), dilation 2, asymmetric pads, 1x7, 7x1, 5x5, 1-D images, an
image large enough that Winograd does not take its 3x3 layer, batches
split over the pool and images split into bands of rows, the fused tails
(Relu, Clip, HardSwish, a residual, one written in place), filters fed as
inputs (laid out on each run instead of at load), and 3-D convolutions
(a slab per kernel depth, depth strides, pads and dilation).
Prints one line per case, exit 1 on any mismatch.
"""
import math
import os
import sys

sys.dont_write_bytecode = True   # the modules beside this file: no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from onnx import helper, numpy_helper, TensorProto  # noqa: E402

from case_runner import run_cases  # noqa: E402
from depthwise_test import build, run_check  # noqa: E402

# name: (N, C, H, W, kh, kw, stride (one, or rows and columns), dilation,
#        pads (t, l, b, r), tail, output channels)
CASES = {
    "k3s2_m17": (1, 16, 15, 23, 3, 3, 2, 1, (1, 1, 1, 1), None, 17),
    "k5_m40_relu": (1, 24, 13, 29, 5, 5, 1, 1, (2, 2, 2, 2), "relu", 40),
    "k1x7_add_relu": (1, 32, 9, 17, 1, 7, 1, 1, (0, 3, 0, 3), "add_relu", 32),
    "k7x1_clip_b2": (2, 20, 17, 9, 7, 1, 1, 1, (3, 0, 3, 0), "clip", 24),
    "k3s1_large_add": (1, 16, 182, 182, 3, 3, 1, 1, (1, 1, 1, 1), "add", 20),
    "dilated_hardswish": (1, 16, 20, 26, 3, 3, 1, 2, (2, 2, 2, 2), "hardswish", 18),
    "s3_c17": (1, 17, 16, 20, 3, 3, 3, 1, (1, 1, 1, 1), None, 33),
    "asym_s2x1_inplace": (1, 19, 11, 30, 3, 3, (2, 1), 1, (0, 1, 2, 0), "add_inplace", 21),
    "w1_s2": (1, 24, 6, 1, 3, 3, 2, 1, (1, 1, 1, 1), None, 24),
    "w8_s2": (1, 16, 10, 16, 3, 3, 2, 1, (1, 1, 1, 1), None, 32),
    "1d_s2_relu": (1, 32, 1, 50, 1, 5, 2, 1, (0, 2, 0, 2), "relu", 48),
    "c96_add_clip": (1, 96, 9, 13, 3, 3, 2, 1, (1, 1, 1, 1), "add_clip", 70),
    "after_unpadded_s2": (1, 16, 20, 22, 3, 3, 2, 1, (1, 1, 1, 1), "after_unpadded", 32),
    "b3_k5_add_hardswish": (3, 16, 30, 14, 5, 5, 1, 1, (2, 2, 2, 2), "add_hardswish", 17),
    "tall_bands": (1, 20, 120, 25, 3, 3, 2, 1, (1, 1, 1, 1), "relu", 16),
    # many channels at stride 2: conv_nhwc.c on AVX-512 too (the GEMM
    # before; two zmm blocks and a partial one of output channels)
    "s2_c48_m80_add_relu": (1, 48, 17, 19, 3, 3, 2, 1, (1, 1, 1, 1), "add_relu", 80),
}
# 3-D: (N, C, (D, H, W), kernel, strides, dilations, pads (begins, ends),
#       tail, output channels)
CASES3 = {
    "3d_k3_relu": (1, 16, (5, 9, 11), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1, 1, 1, 1),
                   "relu", 20),
    "3d_s2_add_b2": (2, 17, (6, 8, 7), (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 0, 1, 1, 1, 0),
                     "add", 33),
    "3d_k1x3x3_dil": (1, 24, (4, 10, 12), (1, 3, 3), (1, 1, 1), (1, 2, 1), (0, 2, 1, 0, 2, 1),
                      None, 16),
    "3d_k3x1x1": (1, 16, (7, 5, 6), (3, 1, 1), (1, 1, 1), (1, 1, 1), (1, 0, 0, 1, 0, 0),
                  "relu", 24),
}
# cases run a second time with the filter fed as an input
FED = ("k3s2_m17", "k1x7_add_relu", "s3_c17")


def tol_scale(k):
    """The tolerance grown as sqrt(K / 160) past K = 160 input channels x
    taps (the sums are in float)."""
    return max(1.0, math.sqrt(k / 160.0))


def conv3d(x, w, b, s, dil, pads):
    """ONNX Conv on float64 (3-D, one group) by explicit taps."""
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[3 + i]) for i in range(3)])
    k = w.shape[2:]
    out = [(xp.shape[2 + i] - (k[i] - 1) * dil[i] - 1) // s[i] + 1 for i in range(3)]
    y = np.zeros((x.shape[0], w.shape[0]) + tuple(out))
    for a in range(k[0]):
        for bb in range(k[1]):
            for c in range(k[2]):
                o = (a * dil[0], bb * dil[1], c * dil[2])
                v = xp[:, :, o[0]:o[0] + (out[0] - 1) * s[0] + 1:s[0],
                       o[1]:o[1] + (out[1] - 1) * s[1] + 1:s[1],
                       o[2]:o[2] + (out[2] - 1) * s[2] + 1:s[2]]
                y += np.einsum("ncdhw,mc->nmdhw", v, w[:, :, a, bb, c])
    return y + b.reshape(1, -1, 1, 1, 1)


def run_case3(ort_run, name, case, rng, tmp):
    n, c, dhw, k, s, dil, pads, tail, m = case
    x = rng.standard_normal((n, c) + dhw).astype(np.float32)
    w = (rng.standard_normal((m, c) + k) * 0.5).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    ref = conv3d(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), s, dil, pads)
    feeds = {"x": x}
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], kernel_shape=list(k),
                              strides=list(s), dilations=list(dil), pads=list(pads))]
    out = "conv"
    if tail == "add":
        r = rng.standard_normal(ref.shape).astype(np.float32)
        feeds["r"] = r
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, list(r.shape)))
        nodes.append(helper.make_node("Add", ["conv", "r"], ["sum"]))
        ref, out = ref + r, "sum"
    if tail == "relu":
        nodes.append(helper.make_node("Relu", [out], ["y"]))
        ref, out = np.maximum(ref, 0.0), "y"
    g = helper.make_graph(nodes, "c3", inputs,
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, list(ref.shape))],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return run_check(ort_run, model, feeds, ref, out, os.path.join(tmp, name),
                     tol_scale(c * int(np.prod(k))))


def run_case(ort_run, name, case, rng, tmp):
    """depthwise_test.run_case with tol_scale; the filter an input of the
    model for the FED cases."""
    if name in CASES3:
        return run_case3(ort_run, name, case, rng, tmp)
    model, feeds, ref, out = build(case, rng)
    fed = name.endswith("_fed")
    if fed:
        g = model.graph
        w = next(t for t in g.initializer if t.name == "w")
        arr = np.frombuffer(w.raw_data, np.float32).reshape(tuple(w.dims)) if w.raw_data \
            else np.array(w.float_data, np.float32).reshape(tuple(w.dims))
        g.initializer.remove(w)
        g.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w.dims)))
        feeds["w"] = arr
    return run_check(ort_run, model, feeds, ref, out, os.path.join(tmp, name),
                     tol_scale(case[1] * case[4] * case[5]))


if __name__ == "__main__":
    cases = dict(CASES)
    cases.update(CASES3)
    cases.update({n + "_fed": CASES[n] for n in FED})
    sys.exit(run_cases(cases, run_case, 13))
