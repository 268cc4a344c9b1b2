"""Depthwise convolutions of every geometry the CPU kernel distinguishes,
against numpy (tools/models/common.py's conv2d, float64).

usage: depthwise_test.py ORT_RUN

conv_dw.c interleaves eight planes (a pixel's eight channels one vector),
transposes image rows into a ring of zero-padded rows, computes eight
pixels at a time past the row ends and transposes the results back with
overlapping or partial vectors: each case below hits one of those edges
(planes narrower than a vector, odd widths at stride 2, strides 3 to 5 and
unequal ones, dilation, asymmetric and zero pads, large kernels, 1-D
images, channel counts that leave a last group of fewer than eight planes,
groups that span two images of a batch) and the fused tails (Relu, a
residual Add from the input or in place over an intermediate, an activation
applied over the strip or after a residual).  Each case is a small model run by ort-run;
prints one line per case, exit 1 on any mismatch.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True   # case_runner beside this file: no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_runner import run_cases, run_model  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "models"))
import common as C  # noqa: E402

# name: (N, C, H, W, kh, kw, stride (one, or rows and columns), dilation,
#        pads (t, l, b, r), tail)
CASES = {
    "k3s1_14": (1, 24, 14, 14, 3, 3, 1, 1, (1, 1, 1, 1), None),
    "k3s1_7": (1, 40, 7, 7, 3, 3, 1, 1, (1, 1, 1, 1), None),
    "k3s1_5x3": (1, 8, 5, 3, 3, 3, 1, 1, (1, 1, 1, 1), None),
    "k3s1_1x1": (1, 8, 1, 1, 3, 3, 1, 1, (1, 1, 1, 1), None),
    "k3s1_nopad": (1, 8, 9, 20, 3, 3, 1, 1, (0, 0, 0, 0), None),
    "k3s1_asym": (1, 8, 11, 13, 3, 3, 1, 1, (0, 1, 2, 0), None),
    "k3s2_odd": (1, 16, 17, 33, 3, 3, 2, 1, (1, 1, 1, 1), None),
    "k3s2_even": (1, 16, 28, 28, 3, 3, 2, 1, (0, 0, 1, 1), None),
    "k3s2_big": (1, 4, 56, 70, 3, 3, 2, 1, (1, 1, 1, 1), None),
    "k5s1": (1, 12, 14, 14, 5, 5, 1, 1, (2, 2, 2, 2), None),
    "k5s2": (1, 12, 15, 15, 5, 5, 2, 1, (2, 2, 2, 2), None),
    "k7s1": (1, 6, 12, 19, 7, 7, 1, 1, (3, 3, 3, 3), None),
    "k7s1_wide_odd": (1, 8, 13, 40, 7, 7, 1, 1, (3, 3, 3, 3), None),
    "k7s1_7": (1, 8, 7, 7, 7, 7, 1, 1, (3, 3, 3, 3), None),
    "k3s3": (1, 6, 16, 16, 3, 3, 3, 1, (1, 1, 1, 1), None),
    "k4s4": (1, 6, 16, 18, 4, 4, 4, 1, (0, 0, 0, 2), None),
    "k3s1_dil2": (1, 8, 13, 13, 3, 3, 1, 2, (2, 2, 2, 2), None),
    "k3s2_dil2": (1, 8, 13, 16, 3, 3, 2, 2, (2, 2, 2, 2), None),
    "k1x5_1d": (1, 10, 1, 40, 1, 5, 1, 1, (0, 2, 0, 2), None),
    "k1x3_1d_s2": (1, 10, 1, 41, 1, 3, 2, 1, (0, 1, 0, 1), None),
    "k2x3": (1, 8, 9, 10, 2, 3, 1, 1, (0, 1, 1, 1), None),
    "k3s1_tall": (1, 3, 200, 9, 3, 3, 1, 1, (1, 1, 1, 1), None),
    "k3s1_wide": (1, 3, 3, 300, 3, 3, 1, 1, (1, 1, 1, 1), None),
    "batch2": (2, 8, 14, 14, 3, 3, 1, 1, (1, 1, 1, 1), None),
    "relu": (1, 16, 14, 14, 3, 3, 1, 1, (1, 1, 1, 1), "relu"),
    "relu_7": (1, 16, 7, 7, 3, 3, 1, 1, (1, 1, 1, 1), "relu"),
    "add_relu": (1, 16, 14, 13, 3, 3, 1, 1, (1, 1, 1, 1), "add_relu"),
    "add_7": (1, 16, 7, 7, 3, 3, 1, 1, (1, 1, 1, 1), "add"),
    "hardswish": (1, 16, 9, 9, 3, 3, 2, 1, (1, 1, 1, 1), "hardswish"),
    "clip6": (1, 16, 28, 28, 3, 3, 1, 1, (1, 1, 1, 1), "clip"),
    "clip_7": (1, 16, 7, 7, 3, 3, 2, 1, (1, 1, 1, 1), "clip"),
    "add_clip": (1, 16, 14, 15, 3, 3, 1, 1, (1, 1, 1, 1), "add_clip"),
    # a first unpadded convolution leaves data all over the scratch the
    # second one pads in: every pad must be written, never assumed zero
    "after_unpadded": (1, 8, 20, 22, 3, 3, 1, 1, (1, 1, 1, 1), "after_unpadded"),
    "after_unpadded_s2": (1, 8, 20, 22, 3, 3, 2, 1, (1, 1, 1, 1), "after_unpadded"),
    "c13_batch2": (2, 13, 14, 14, 3, 3, 1, 1, (1, 1, 1, 1), "clip"),
    "c5_7": (1, 5, 7, 7, 3, 3, 1, 1, (1, 1, 1, 1), None),
    "c3_3x5_s2": (3, 3, 3, 5, 3, 3, 2, 1, (1, 1, 1, 1), "relu"),
    "s2x1": (1, 9, 15, 17, 3, 3, (2, 1), 1, (1, 1, 1, 1), None),
    "s1x3": (1, 9, 15, 17, 3, 3, (1, 3), 1, (1, 1, 1, 1), None),
    "k5s5": (1, 8, 23, 24, 5, 5, 5, 1, (1, 2, 1, 0), None),
    "k9": (1, 10, 20, 21, 9, 9, 1, 1, (4, 4, 4, 4), None),
    "add_inplace": (1, 12, 9, 11, 3, 3, 1, 1, (1, 1, 1, 1), "add_inplace"),
    "add_inplace_7": (1, 11, 7, 7, 3, 3, 1, 1, (1, 1, 1, 1), "add_inplace"),
    "add_hardswish": (1, 16, 9, 10, 3, 3, 1, 1, (1, 1, 1, 1), "add_hardswish"),
}


def geometry(case):
    n, c, h, w, kh, kw, s, d, pads = case[:9]
    pt, pl, pb, pr = pads
    sh, sw = s if isinstance(s, tuple) else (s, s)
    oh = (h + pt + pb - d * (kh - 1) - 1) // sh + 1
    ow = (w + pl + pr - d * (kw - 1) - 1) // sw + 1
    return oh, ow


def build(case, rng):
    """The model, its feeds and the numpy reference.  A case of 11 values
    is a one-group convolution with case[10] output channels
    (conv_direct_test.py); of 10, depthwise."""
    n, c, h, w, kh, kw, s, d, pads, tail = case[:10]
    m, group = (case[10], 1) if len(case) > 10 else (c, c)
    s = s if isinstance(s, tuple) else (s, s)
    one_d = h == 1 and kh == 1
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((m, c // group, kh, kw)) * 0.5).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    ref = C.conv2d(x.astype(np.float64), wt.astype(np.float64), b.astype(np.float64),
                   strides=s, pads=pads, dilations=(d, d), group=group)
    oh, ow = geometry(case)
    attrs = dict(group=group, kernel_shape=[kh, kw], strides=list(s), dilations=[d, d],
                 pads=[pads[0], pads[1], pads[2], pads[3]])
    if one_d:
        attrs = dict(group=group, kernel_shape=[kw], strides=[s[1]], dilations=[d],
                     pads=[pads[1], pads[3]])
    xs, ys = list(x.shape), [n, m, oh, ow]
    if one_d:
        xs, ys = [n, c, w], [n, m, ow]
    feeds = {"x": x.reshape(xs)}
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], **attrs)]
    inits = []
    if tail == "after_unpadded":
        # x is first widened by an unpadded 1x1 depthwise conv of the same
        # plane size, then the case's conv reads its output
        w0 = (rng.standard_normal((c, 1, 1, 1)) + 1.0).astype(np.float32)
        b0 = rng.standard_normal(c).astype(np.float32)
        x0 = x.astype(np.float64) * w0.reshape(1, c, 1, 1) + b0.reshape(1, c, 1, 1)
        ref = C.conv2d(x0, wt.astype(np.float64), b.astype(np.float64), strides=s,
                       pads=pads, dilations=(d, d), group=group)
        nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["x0"], group=c,
                                  kernel_shape=[1, 1]),
                 helper.make_node("Conv", ["x0", "w", "b"], ["conv"], **attrs)]
        inits = [numpy_helper.from_array(w0, "w0"), numpy_helper.from_array(b0, "b0")]
    out = "conv"
    if tail in ("add_inplace", "add_hardswish"):
        # the residual an intermediate (Neg of an input) the sum may be
        # written over
        r = rng.standard_normal(ys).astype(np.float32)
        feeds["r"] = r
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, ys))
        nodes.append(helper.make_node("Neg", ["r"], ["nr"]))
        nodes.append(helper.make_node("Add", ["conv", "nr"], ["sum"]))
        ref = ref - r.astype(np.float64).reshape(ref.shape)
        out = "sum"
    if tail in ("add", "add_relu", "add_clip"):
        r = rng.standard_normal(ys).astype(np.float32)
        feeds["r"] = r
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, ys))
        nodes.append(helper.make_node("Add", ["conv", "r"], ["sum"]))
        ref = ref + r.astype(np.float64).reshape(ref.shape)
        out = "sum"
    if tail in ("relu", "add_relu"):
        nodes.append(helper.make_node("Relu", [out], ["y"]))
        ref = np.maximum(ref, 0.0)
        out = "y"
    if tail in ("clip", "add_clip"):
        lo, hi = (0.0, 6.0) if tail == "clip" else (-0.5, 0.7)
        inits.append(numpy_helper.from_array(np.array(lo, np.float32), "lo"))
        inits.append(numpy_helper.from_array(np.array(hi, np.float32), "hi"))
        nodes.append(helper.make_node("Clip", [out, "lo", "hi"], ["y"]))
        ref = np.clip(ref, lo, hi)
        out = "y"
    if tail in ("hardswish", "add_hardswish"):
        nodes.append(helper.make_node("HardSwish", [out], ["y"]))
        ref = ref * np.clip(ref / 6.0 + 0.5, 0.0, 1.0)
        out = "y"
    inits += [numpy_helper.from_array(wt.reshape(wt.shape[:2] + (kw,)) if one_d else wt, "w"),
              numpy_helper.from_array(b, "b")]
    g = helper.make_graph(nodes, "dw", inputs,
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, ys)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, feeds, ref.reshape(ys), out


def run_check(ort_run, model, feeds, ref, out, d, tol_scale=1.0):
    """model run by ort-run (2 threads) in the new folder d, its output out
    against ref within (1e-5 + 1e-5 |ref|) x tol_scale: None, or why not."""
    why = run_model(ort_run, model, feeds, d, "--iters", "2", "--threads", "2")
    if why:
        return why
    got = np.load(os.path.join(d, out + ".npy"))
    if got.shape != ref.shape:
        return "shape %s, expected %s" % (list(got.shape), list(ref.shape))
    err = np.abs(got.astype(np.float64) - ref)
    tol = (1e-5 + 1e-5 * np.abs(ref)) * tol_scale
    if not np.all(err <= tol):
        i = np.unravel_index(np.argmax(err - tol), err.shape)
        return "at %s got %r, expected %r" % (list(i), float(got[i]), float(ref[i]))
    return None


def run_case(ort_run, name, case, rng, tmp, tol_scale=1.0):
    """tol_scale widens the tolerance for sums of many products (a float
    sum's rounding grows with their count)."""
    model, feeds, ref, out = build(case, rng)
    return run_check(ort_run, model, feeds, ref, out, os.path.join(tmp, name), tol_scale)


def main():
    return run_cases(CASES, run_case, 7)


if __name__ == "__main__":
    sys.exit(main())
