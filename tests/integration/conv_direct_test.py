"""One-group convolutions with short filters (conv_direct.c: input channels
x taps <= 160; on AVX2 also <= 1152 with at most 16 output channels; on
AVX2 not where conv_nhwc.c takes them, 16 input and output channels) of
every geometry that kernel distinguishes, against numpy
(float64), through depthwise_test.py's model builder and checks.

usage: conv_direct_test.py ORT_RUN

conv_direct.c pads the input rows of a band of output rows (a stride-2 row
split into even and odd columns), computes sixteen pixels a vector, two
vectors while more than sixteen remain, eight output channels a block,
and splits a batch by image or one image by bands of rows: the cases below
hit each edge (widths of 1 to 3 vectors with ragged tails, channel counts
that leave a partial block, strides 1 and 2 in either direction, odd
widths at stride 2, asymmetric and zero pads, 1x1 to 7x7 and 2x3 windows,
the largest filter it takes, the narrowest rows, 1-D images, batches split over the pool and
single images split into bands) and the fused tails (Relu, a residual,
one written in place, Clip and HardSwish after the block).  On a CPU
without AVX-512 the same cases run through the GEMM and must pass too.
Prints one line per case, exit 1 on any mismatch.
"""
import math
import os
import sys

sys.dont_write_bytecode = True   # the modules beside this file: no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_runner import run_cases  # noqa: E402
from depthwise_test import run_case  # noqa: E402

# name: (N, C, H, W, kh, kw, stride (one, or rows and columns), dilation,
#        pads (t, l, b, r), tail, output channels)
CASES = {
    "cnn_conv1": (1, 3, 32, 32, 3, 3, 1, 1, (1, 1, 1, 1), "relu", 16),
    "cnn_conv2": (1, 16, 16, 16, 3, 3, 1, 1, (1, 1, 1, 1), "relu", 32),
    "cnn_conv1_b5": (5, 3, 32, 32, 3, 3, 1, 1, (1, 1, 1, 1), "relu", 16),
    "stem_s2_even": (1, 3, 40, 46, 3, 3, 2, 1, (1, 1, 1, 1), "hardswish", 32),
    "stem_s2_odd": (1, 3, 33, 35, 3, 3, 2, 1, (1, 1, 1, 1), None, 16),
    "stem_s2_nopad": (2, 3, 21, 50, 3, 3, 2, 1, (0, 0, 0, 0), "relu", 24),
    "k7s2": (1, 3, 30, 30, 7, 7, 2, 1, (3, 3, 3, 3), "relu", 64),
    "k5_m5": (1, 1, 17, 50, 5, 5, 1, 1, (2, 2, 2, 2), None, 5),
    "m17_nopad_b3": (3, 4, 9, 40, 3, 3, 1, 1, (0, 0, 0, 0), None, 17),
    "k2x3_s2x1": (1, 2, 11, 19, 2, 3, (2, 1), 1, (0, 1, 1, 1), None, 9),
    "s1x2": (1, 5, 12, 37, 3, 3, (1, 2), 1, (1, 1, 1, 1), None, 8),
    "asym": (1, 6, 13, 15, 3, 3, 1, 1, (0, 1, 2, 0), None, 12),
    "k4s2_k160": (1, 10, 18, 25, 4, 4, 2, 1, (1, 2, 1, 1), None, 16),
    "w8": (1, 8, 5, 8, 3, 3, 1, 1, (1, 1, 1, 1), None, 8),
    "w16": (1, 8, 5, 16, 3, 3, 1, 1, (1, 1, 1, 1), None, 8),
    "w17": (1, 8, 5, 17, 3, 3, 1, 1, (1, 1, 1, 1), None, 8),
    "w33": (1, 8, 5, 33, 3, 3, 1, 1, (1, 1, 1, 1), None, 8),
    "w48": (1, 8, 5, 48, 3, 3, 1, 1, (1, 1, 1, 1), None, 8),
    "tall_bands": (1, 3, 200, 9, 3, 3, 1, 1, (1, 1, 1, 1), None, 8),
    "b6_split": (6, 4, 20, 20, 3, 3, 1, 1, (1, 1, 1, 1), "relu", 16),
    "1d_s2": (1, 4, 1, 77, 1, 5, 2, 1, (0, 2, 0, 2), None, 12),
    "1d_s1": (2, 8, 1, 40, 1, 3, 1, 1, (0, 1, 0, 1), "relu", 10),
    "add_relu": (1, 8, 15, 33, 3, 3, 1, 1, (1, 1, 1, 1), "add_relu", 16),
    "add": (1, 3, 9, 20, 3, 3, 2, 1, (1, 1, 1, 1), "add", 11),
    "add_inplace": (1, 8, 9, 11, 3, 3, 1, 1, (1, 1, 1, 1), "add_inplace", 8),
    "add_hardswish": (1, 4, 9, 18, 3, 3, 1, 1, (1, 1, 1, 1), "add_hardswish", 16),
    "clip": (2, 3, 28, 28, 3, 3, 2, 1, (1, 1, 1, 1), "clip", 16),
    "add_clip": (1, 6, 14, 15, 3, 3, 1, 1, (1, 1, 1, 1), "add_clip", 13),
    "after_unpadded": (1, 8, 20, 22, 3, 3, 1, 1, (1, 1, 1, 1), "after_unpadded", 16),
    "after_unpadded_s2": (1, 8, 20, 22, 3, 3, 2, 1, (1, 1, 1, 1), "after_unpadded", 16),
    # on AVX2 also longer filters with fewer than 16 output channels (at
    # 16 and more conv_nhwc.c takes them): up to 1152 input channels x taps
    "few_relu": (1, 64, 20, 37, 3, 3, 1, 1, (1, 1, 1, 1), "relu", 15),
    "few_s2_add": (1, 48, 15, 22, 3, 3, 2, 1, (1, 1, 1, 1), "add", 12),
    "few_k1152_b2": (2, 128, 9, 17, 3, 3, 1, 1, (1, 1, 1, 1), None, 9),
    "few_k5_m3": (1, 24, 12, 30, 5, 5, 1, 1, (2, 2, 2, 2), "clip", 3),
    # dilated filters whose outer taps read the image for few outputs
    # (conv_taps.c: DeepLabV3's atrous pyramid), a product per tap
    "taps_aspp": (1, 64, 20, 20, 3, 3, 1, 12, (12, 12, 12, 12), "relu", 24),
    "taps_add_b2": (2, 16, 13, 17, 3, 3, 1, 6, (6, 6, 6, 6), "add", 8),
    "taps_s2_clip": (1, 8, 25, 25, 3, 3, 2, 10, (10, 10, 10, 10), "clip", 5),
    "taps_1d": (1, 4, 1, 40, 1, 3, 1, 30, (0, 30, 0, 30), None, 6),
    "taps_asym_hardswish": (1, 6, 11, 23, 3, 3, 1, 9, (9, 4, 9, 14), "hardswish", 7),
    # past conv_direct.c's limits: the other paths, same checks (on AVX2,
    # 16 input and output channels and more go to conv_nhwc.c: DBNet's
    # 64 -> 16, a 16 -> 16 with Relu, the example CNN's 16 -> 32)
    "nhwc_m16": (1, 64, 20, 37, 3, 3, 1, 1, (1, 1, 1, 1), "relu", 16),
    "nhwc_c16_b2": (2, 16, 9, 17, 3, 3, 1, 1, (1, 1, 1, 1), "add_relu", 16),
    "few_m17": (1, 64, 10, 20, 3, 3, 1, 1, (1, 1, 1, 1), None, 17),
    "few_k1161": (1, 129, 6, 12, 3, 3, 1, 1, (1, 1, 1, 1), None, 8),
    "dilated": (1, 3, 15, 20, 3, 3, 1, 2, (2, 2, 2, 2), None, 8),
    "s3": (1, 3, 16, 16, 3, 3, 3, 1, (1, 1, 1, 1), None, 8),
    "k_over": (1, 19, 10, 12, 3, 3, 1, 1, (1, 1, 1, 1), None, 8),
    "k1_wide": (1, 16, 10, 70, 1, 1, 1, 1, (0, 0, 0, 0), None, 8),
    "w1": (1, 3, 6, 1, 3, 3, 1, 1, (1, 1, 1, 1), None, 8),
    "w17_narrow": (1, 3, 6, 17, 3, 3, 2, 1, (1, 1, 1, 1), None, 8),
}


def run_case_k(ort_run, name, case, rng, tmp):
    """run_case with its tolerance grown as sqrt(K / 160) past K = 160
    input channels x taps (both the GEMM and conv_direct.c sum in float:
    the 1152-term case misses 1e-5 by ~2x on either path)."""
    k = case[1] * case[4] * case[5]
    return run_case(ort_run, name, case, rng, tmp, max(1.0, math.sqrt(k / 160.0)))


if __name__ == "__main__":
    sys.exit(run_cases(CASES, run_case_k, 11))
