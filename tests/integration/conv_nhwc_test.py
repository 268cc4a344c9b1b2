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
(Relu, Clip, HardSwish, a residual, one written in place), and filters fed
as inputs (laid out on each run instead of at load).
Prints one line per case, exit 1 on any mismatch.
"""
import math
import os
import sys

sys.dont_write_bytecode = True   # the modules beside this file: no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from onnx import helper, TensorProto  # noqa: E402

from case_runner import run_cases, run_model  # noqa: E402
from depthwise_test import build  # noqa: E402

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
}
# cases run a second time with the filter fed as an input
FED = ("k3s2_m17", "k1x7_add_relu", "s3_c17")


def run_case(ort_run, name, case, rng, tmp):
    """depthwise_test.run_case, the tolerance grown as sqrt(K / 160) past
    K = 160 input channels x taps (the sums are in float); with the filter
    an input of the model for the FED cases."""
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
    d = os.path.join(tmp, name)
    why = run_model(ort_run, model, feeds, d, "--iters", "2", "--threads", "2")
    if why:
        return why
    got = np.load(os.path.join(d, out + ".npy"))
    if got.shape != ref.shape:
        return "shape %s, expected %s" % (list(got.shape), list(ref.shape))
    k = case[1] * case[4] * case[5]
    err = np.abs(got.astype(np.float64) - ref)
    tol = (1e-5 + 1e-5 * np.abs(ref)) * max(1.0, math.sqrt(k / 160.0))
    if not np.all(err <= tol):
        i = np.unravel_index(np.argmax(err - tol), err.shape)
        return "at %s got %r, expected %r" % (list(i), float(got[i]), float(ref[i]))
    return None


if __name__ == "__main__":
    cases = dict(CASES)
    cases.update({n + "_fed": CASES[n] for n in FED})
    sys.exit(run_cases(cases, run_case, 13))
