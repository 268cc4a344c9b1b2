"""Chains of 1x1 and depthwise convolutions on channel-blocked values
(cpu_layout.c decides which values, conv_blk.c runs the layers on a CPU
with AVX2 + FMA), against numpy (float64).

usage: conv_blk_test.py ORT_RUN

Each case is a small network: an input, then layers that each read the
output of the one before (or of the layer `src` names): 1x1 layers
("pw", output channels), depthwise layers ("dw", kernel, stride, pads
t, l, b, r), each with an optional residual (the output of an earlier
layer added) and activation, and nodes of other kinds that read a value
(so it must stay NCHW): Sigmoid, a squeeze-excite (GlobalAveragePool, 1x1,
HardSigmoid, Mul; the blocked Mul reads a blocked value or writes one
from plain operands), Add and Mul between blocked values or by constants, a
Tanh, a 3x3 one-group convolution, a graph output in the middle.  The cases cover NCHW inputs into a blocked chain, blocked values
into a last plain output, residuals blocked and not, an addend that
broadcasts ([N, C, 1, 1] from a 1x1 layer after a pooling: the plain
kernels then run and the output is blocked after), 24 and 40 output
channels (a last single block of 8), pixel counts that end inside a tile
of six, batches, strides 1 and 2, 3x3 and 5x5, asymmetric pads, Relu, Clip
HardSwish and HardSigmoid, and first layers of 1 or 3 plain input channels ("first",
3x3, stride 1 and 2) writing blocked values (a 7x7 one does not).  On such a CPU the provider's debug log must also say how
many values it kept blocked, the count worked out here from the graph;
elsewhere nothing is blocked and the outputs must match all the same.
Prints one line per case, exit 1 on any failure.
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True   # the modules beside this file: no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, numpy_helper, TensorProto  # noqa: E402

from case_runner import run_cases  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "models"))
import common as C  # noqa: E402

# name: (input N, C, H, W; layers; blocked values expected on an AVX2 CPU[;
# environment[; options: fp16, the model in float16]])
# layer: dict(op=pw|dw|sigmoid|se|conv3|w3|concat|output, ...) (conv3: a 3x3
# layer whose output is also a graph output; w3: a 3x3 layer; concat: of
# the layers `of`, on the channels; kxk: a one-group k x k layer); src: index of the
# layer read (default the one before; -1 the input), add: index of the
# layer whose output is added, act: relu|clip|hardswish|hardsigmoid.
CASES = {
    "inverted_residual": ((1, 16, 14, 14), [
        dict(op="pw", m=96, act="clip"),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), act="clip"),
        dict(op="pw", m=16),
        dict(op="pw", m=96, act="clip"),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), act="clip"),
        dict(op="pw", m=16, add=2),
    ], 4),
    # the same in float16 (weights, input, Clip's bounds): the layers run
    # widened, their values stay float32 and blocked between them
    "inverted_residual_fp16": ((1, 16, 14, 14), [
        dict(op="pw", m=96, act="clip"),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), act="clip"),
        dict(op="pw", m=16),
        dict(op="pw", m=96, act="clip"),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), act="clip"),
        dict(op="pw", m=16, add=2),
    ], 4, {}, {"fp16": True}),
    "strided_5x5_m24": ((1, 32, 23, 17), [
        dict(op="dw", k=5, s=2, pads=(2, 2, 2, 2), act="relu"),
        dict(op="pw", m=24),
        dict(op="dw", k=3, s=1, pads=(0, 1, 2, 0)),
        dict(op="pw", m=40, act="hardswish"),
    ], 3),
    # three and five blocks of output channels (AVX-512: a tile of two
    # pairs whose last block is missing, a pair left alone), each 1x1
    # with a residual, the pixels ending inside a tile of eight
    "odd_blocks_residual": ((1, 16, 9, 7), [
        dict(op="pw", m=24, act="relu"),
        dict(op="pw", m=24, add=0, act="clip"),
        dict(op="pw", m=40),
        dict(op="pw", m=40, add=2, act="relu"),
        dict(op="pw", m=16),
    ], 4),
    "batch3_tails": ((3, 8, 7, 9), [
        dict(op="pw", m=24, act="relu"),
        dict(op="dw", k=3, s=2, pads=(1, 1, 1, 1)),
        dict(op="pw", m=8, act="clip"),
        dict(op="pw", m=40),
    ], 3),
    "exits": ((1, 16, 10, 11), [
        dict(op="pw", m=32, act="relu"),
        dict(op="sigmoid"),                     # reads 0: 0 stays NCHW
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), src=0),
        dict(op="output"),                      # 2 is a graph output
        dict(op="pw", m=16, src=2),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1)),
        dict(op="conv3", m=16),                 # reads 5: 5 stays NCHW
        dict(op="pw", m=16, src=4, add=4),      # 4: read by 5, and by 7 twice
        dict(op="pw", m=8),                     # 7: blocked, so 4 is too
    ], 2),
    # HardSwish and HardSigmoid (alpha 0.25, beta 0.4) applied in the
    # store: after a 1x1 layer's residual (AVX-512: pw_run2), on depthwise
    # rows (their interior four pixels at a time and the edges), on a
    # strided 5x5; the pixels end inside a tile
    "hard_acts": ((1, 24, 13, 15), [
        dict(op="pw", m=40, act="hardswish"),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), act="hardsigmoid"),
        dict(op="pw", m=40, add=0, act="hardswish"),
        dict(op="dw", k=5, s=2, pads=(2, 2, 2, 2), act="hardswish"),
        dict(op="pw", m=24, act="hardsigmoid"),
        dict(op="pw", m=16),
    ], 5),
    # the last layers write plain outputs (graph outputs), computed into
    # blocked scratch: without a residual the activation is applied in
    # the store (HardSwish, Clip), with one after the unblocking adds it
    "plain_out_acts": ((1, 16, 11, 13), [
        dict(op="pw", m=32, act="relu"),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), act="clip"),
        dict(op="pw", m=16, act="hardswish"),
        dict(op="output"),
        dict(op="pw", m=24, src=1, act="clip"),
        dict(op="output"),
        dict(op="pw", m=32, src=1, add=0, act="hardsigmoid"),
    ], 1),                                      # 0 is a plain output's residual
    "squeeze_excite": ((1, 16, 12, 12), [
        dict(op="pw", m=32, act="hardswish"),
        dict(op="dw", k=5, s=1, pads=(2, 2, 2, 2), act="relu"),
        dict(op="se"),                          # GlobalAveragePool and Mul read 1
        dict(op="pw", m=24),
        dict(op="pw", m=24, add=3),
        dict(op="pw", m=16, act="relu"),
    ], 6),                                      # 0, 1, the scale, 2, 3, 4
    # element-wise nodes between blocked layers: an Add of two blocked
    # values (not fused: each has another reader, or its other operand
    # comes later), a Mul by a constant per channel, by a scalar, a Tanh
    "elementwise": ((1, 16, 10, 12), [
        dict(op="pw", m=32, act="relu"),
        dict(op="pw", m=32, src=-1),
        dict(op="add2", a=0, b=1),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), src=0),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), src=1),
        dict(op="mulc", src=2),
        dict(op="muls"),
        dict(op="tanh"),
        dict(op="add2", a=7, b=3),
        dict(op="add2", a=8, b=4),
        dict(op="pw", m=16),
    ], 10),
    # RegNet's pattern: a squeeze-excite (Mul(scale, x)) on a value no
    # blocked layer writes, then a 1x1 layer that reads the blocked product
    # and writes NCHW with a residual the core may place its output over
    "se_plain_trunk": ((1, 16, 11, 12), [
        dict(op="dw", k=3, s=1, pads=(2, 2, 2, 2), dil=2, act="relu"),
        dict(op="se", order="sx"),
        dict(op="pw", m=16, add=0, act="relu"),
        dict(op="dw", k=3, s=1, pads=(2, 2, 2, 2), dil=2),
    ], 2),                                      # the scale and 1
    "broadcast_addend": ((2, 16, 9, 8), [
        dict(op="pw", m=32),
        dict(op="gap", src=-1),                 # [N, 16, 1, 1]
        dict(op="pw", m=32),                    # [N, 32, 1, 1], only an addend
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), src=0, add=2, act="relu"),
        dict(op="pw", m=16),
    ], 3),
    # the same network through the plain kernels: the fused Add's addend
    # [N, C, 1, 1] dies where the core may place the output over it
    "broadcast_addend_plain": ((2, 16, 9, 8), [
        dict(op="pw", m=32),
        dict(op="gap", src=-1),
        dict(op="pw", m=32),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), src=0, add=2, act="relu"),
        dict(op="pw", m=16),
    ], 0, {"ORTMK_CPU_CONV_BLOCKED": "0"}),
    "first_3x3_s2_b2": ((2, 3, 20, 23), [
        dict(op="first", m=24, k=3, s=2, pads=(1, 1, 1, 1), act="clip"),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), act="clip"),
        dict(op="pw", m=16),
    ], 2),
    "first_3x3_s1_gray": ((1, 1, 31, 26), [
        dict(op="first", m=16, k=3, s=1, pads=(1, 0, 2, 1), act="relu"),
        dict(op="dw", k=3, s=2, pads=(1, 1, 1, 1)),
        dict(op="pw", m=32),
    ], 2),
    # first layers of five blocks (AVX-512, in_row512: a tile of two full
    # pairs, then one block alone) and of one block, rows ending inside a
    # tile of twelve pixels; HardSwish applied over the finished row
    "first_five_blocks": ((2, 3, 30, 41), [
        dict(op="first", m=40, k=3, s=2, pads=(1, 1, 1, 1), act="hardswish"),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), act="clip"),
        dict(op="pw", m=8),
    ], 2),
    "first_one_block": ((1, 3, 17, 29), [
        dict(op="first", m=8, k=3, s=1, pads=(1, 1, 1, 1), act="relu"),
        dict(op="pw", m=16),
    ], 1),
    # a 7x7 first layer runs as a GEMM (CONV_BLK_IN_MAX_K) and writes
    # NCHW; the depthwise layer after it blocks its input itself
    "first_7x7_s2_gemm": ((1, 3, 31, 26), [
        dict(op="first", m=16, k=7, s=2, pads=(3, 3, 2, 3), act="relu"),
        dict(op="dw", k=3, s=2, pads=(1, 1, 1, 1)),
        dict(op="pw", m=32),
    ], 1),
    # groups of 8 channels (RegNet's 3x3 layers, CONV_BLK_G8): from a plain
    # input at stride 2, then between blocked 1x1 layers with a residual
    "grouped8": ((1, 16, 13, 15), [
        dict(op="g8", k=3, s=2, pads=(1, 1, 1, 1), act="relu"),
        dict(op="pw", m=32),
        dict(op="g8", k=3, s=1, pads=(1, 0, 1, 2), add=1, act="relu"),
        dict(op="pw", m=16),
    ], 3),
    # a 1x1 layer reading NCHW with a residual: its input blocked into
    # scratch, its output and addend blocked (0, 2 and 3)
    "plain_in_residual": ((1, 16, 12, 12), [
        dict(op="pw", m=16, act="relu"),        # read only as 2's addend
        dict(op="conv3", m=16, src=-1),         # NCHW
        dict(op="pw", m=16, src=1, add=0),      # NCHW in, residual
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1)),
        dict(op="pw", m=8),
    ], 3),
    # 3x3 layers Winograd takes ("w3", CONV_BLK_W3: its transforms read and
    # write blocked values): after a 1x1 layer reading NCHW, with a
    # blocked residual, before a strided 1x1, with asymmetric pads and
    # HardSwish (after the store), sizes that end inside a tile; the
    # unbanded image and, on two threads, its columns in parts
    "winograd": ((1, 32, 13, 11), [
        dict(op="pw", m=64, act="relu"),
        dict(op="w3", m=64, act="relu"),
        dict(op="w3", m=64, add=0, act="relu"),
        dict(op="pw", m=32, s=2),
        dict(op="w3", m=48, pads=(0, 1, 2, 0), act="hardswish"),
        dict(op="pw", m=16),
    ], 5),
    # ... on an image in bands of tile rows (ResNet's 56 x 56 stage), two
    # images; then a blocked input into a plain output (4: the addend of
    # the plain last output, so NCHW)
    "winograd_bands": ((2, 64, 57, 56), [
        dict(op="pw", m=64, act="relu"),
        dict(op="w3", m=64, act="relu"),
        dict(op="w3", m=64, add=0, act="relu"),
        dict(op="pw", m=64),
        dict(op="w3", m=64, act="relu"),
        dict(op="w3", m=64, add=4),
    ], 4),
    # ... on an image Winograd does not take (fewer than 64 input channels,
    # more tiles x channels than its bound): conv_nhwc.c reading and
    # writing the blocked values, with Relu, a residual and HardSwish
    "winograd_large": ((1, 32, 132, 130), [
        dict(op="pw", m=32, act="relu"),
        dict(op="w3", m=48, act="relu"),
        dict(op="w3", m=48, add=1, act="hardswish"),
        dict(op="pw", m=16),
    ], 3),
    # Concat on the channels of blocked values (SqueezeNet's fire
    # modules: a 1x1 and a 3x3 expansion of one squeeze), then a pooling
    # and a 1x1 layer on the blocked result; two images
    "concat_channels": ((2, 32, 15, 13), [
        dict(op="pw", m=32, act="relu"),
        dict(op="pw", m=64, act="relu"),
        dict(op="w3", m=64, src=0, act="relu"),
        dict(op="concat", of=[1, 2]),
        dict(op="maxpool", k=3, s=2, ceil=1),
        dict(op="pw", m=32, act="relu"),
        dict(op="concat", of=[5, 4, 5]),
        dict(op="pw", m=16),
    ], 7),
    # ... with a part that is NCHW (a Tanh of the input): the Concat and
    # its other part stay NCHW
    "concat_plain_part": ((1, 32, 9, 11), [
        dict(op="pw", m=32, act="relu"),
        dict(op="tanh", src=-1),
        dict(op="concat", of=[0, 1]),
        dict(op="pw", m=16),
    ], 0),
    # an Add of a blocked value and an NCHW one of the same shape into a
    # blocked value (a feature pyramid's lateral 1x1 plus its upsampled
    # level): the NCHW operand blocked first
    "add_mixed": ((1, 32, 9, 11), [
        dict(op="pw", m=32, act="relu"),
        dict(op="tanh", src=-1),
        dict(op="add2", a=1, b=0),
        dict(op="pw", m=16),
    ], 2),
    # ... the same whose output is NCHW from the start (a graph output;
    # DenseNet's Concats, read by BatchNormalization): the blocked part
    # must not stay blocked
    "concat_plain_reader": ((1, 32, 9, 11), [
        dict(op="pw", m=32, act="relu"),
        dict(op="tanh", src=-1),
        dict(op="concat", of=[0, 1]),
        dict(op="output"),
        dict(op="pw", m=16),
    ], 0),
    # one-group layers conv_nhwc.c takes ("kxk", CONV_BLK_NHWC: its band
    # transposition and row stores on blocked values): a 3x3 of stride 2
    # (ResNet's), a 5x5 with HardSwish, 3x3 layers of 32 output channels
    # (DenseNet's; Winograd leaves them to it) with a residual
    "nhwc_layers": ((1, 32, 19, 17), [
        dict(op="pw", m=64, act="relu"),
        dict(op="kxk", k=3, s=2, m=64, pads=(1, 1, 1, 1), act="relu"),
        dict(op="kxk", k=5, m=48, pads=(2, 2, 2, 2), act="hardswish"),
        dict(op="kxk", k=3, m=32, pads=(1, 1, 1, 1), act="relu"),
        dict(op="kxk", k=3, m=32, pads=(1, 1, 1, 1), add=3, act="relu"),
        dict(op="pw", m=16),
    ], 5),
    # DenseNet's pre-activation layer: BatchNormalization (+ Relu) of a
    # Concat of blocked parts, on the blocked planes (norm.c), read by a
    # 1x1 layer; two images
    "batchnorm": ((2, 16, 9, 11), [
        dict(op="pw", m=32, act="relu"),
        dict(op="pw", m=16, src=-1),
        dict(op="concat", of=[0, 1]),
        dict(op="bn", act="relu"),
        dict(op="pw", m=24),
        dict(op="bn"),
        dict(op="pw", m=16),
    ], 5),
    # one-group layers of few input channels conv_direct.c takes plain
    # (CONV_BLK_KB: the first layers' tile over blocked input planes):
    # SqueezeNet's 16 -> 64 3x3 between its squeeze and the next 1x1, two
    # images, a residual into the 1x1 after
    "direct_layers": ((2, 16, 13, 15), [
        dict(op="pw", m=16, act="relu"),
        dict(op="kxk", k=3, m=64, pads=(1, 1, 1, 1), act="relu"),
        dict(op="pw", m=64, add=1, act="relu"),
        dict(op="pw", m=16),
    ], 3),
    # dilated 3x3 layers (FCN's and DeepLab's ResNet stages): Winograd on
    # the phases' sub-images side by side (conv_wino_dilated), gathered
    # from and scattered to blocked values, dilation 2 and 4, a residual
    "winograd_dilated": ((1, 32, 23, 21), [
        dict(op="pw", m=64, act="relu"),
        dict(op="w3", m=64, dil=2, pads=(2, 2, 2, 2), act="relu"),
        dict(op="w3", m=64, dil=4, pads=(4, 4, 4, 4), add=0, act="relu"),
        dict(op="pw", m=16),
    ], 3),
    # 1x1 layers of more than 256 input channels on more pixels than a
    # chunk of all of them: on AVX-512 the channels in slices, partial sums
    # between them (34 blocks: a slice and two blocks; 17 pairs: one left
    # to the ymm tile), a residual and HardSwish in the last slice's store
    "channel_slices": ((1, 272, 37, 36), [
        dict(op="pw", m=272, act="relu"),
        dict(op="pw", m=272, add=0, act="hardswish"),
        dict(op="pw", m=24),
    ], 2),
    # strided 1x1 layers (CONV_BLK_PWS: ResNet's and RegNet's projections)
    # on blocked input, stride 2 and 2 x 1, one with a residual after it;
    # a first layer of stride 1 x 2
    "strided_1x1": ((2, 3, 23, 19), [
        dict(op="first", m=16, k=3, s=(1, 2), pads=(1, 1, 1, 1), act="relu"),
        dict(op="pw", m=32, act="relu"),
        dict(op="pw", m=48, s=2),
        dict(op="dw", k=3, s=1, pads=(1, 1, 1, 1), act="relu"),
        dict(op="pw", m=48, add=2),
        dict(op="pw", m=24, s=(2, 1), act="relu"),
        dict(op="pw", m=8),
    ], 6),
    # a first layer, then MaxPool and AveragePool between blocked layers
    # (pool.c's blocked kernel): padded, strided, ceil_mode, an average
    # with and without the padding counted; two images
    "pools": ((2, 3, 33, 35), [
        dict(op="first", m=16, k=3, s=2, pads=(1, 1, 1, 1), act="relu"),
        dict(op="maxpool", k=3, s=2, pads=(1, 1, 1, 1)),
        dict(op="pw", m=24),
        dict(op="avgpool", k=3, s=1, pads=(1, 1, 1, 1)),
        dict(op="pw", m=24, add=2, act="relu"),
        dict(op="maxpool", k=2, s=2, ceil=1),
        dict(op="avgpool", k=3, s=2, pads=(1, 0, 1, 1), incl=1),
        dict(op="pw", m=8),
    ], 7),
    # NaN in the input: the first layer spreads it over a few pixels (every
    # channel), the blocked MaxPool must keep it in every window that holds
    # it, at any tap (its four-outputs path and the edges), and the 1x1
    # layer after it shows exactly which pixels are NaN
    "pools_nan": ((2, 3, 33, 35), [
        dict(op="first", m=16, k=3, s=2, pads=(1, 1, 1, 1)),
        dict(op="maxpool", k=3, s=2, pads=(1, 1, 1, 1)),
        dict(op="pw", m=8),
    ], 2, {}, {"nan": [(0, 1, 9, 12), (0, 2, 16, 21), (1, 0, 0, 34), (1, 2, 20, 3)]}),
    "large_plane_split": ((1, 16, 56, 57), [
        dict(op="pw", m=48, act="clip"),
        dict(op="dw", k=3, s=2, pads=(0, 0, 1, 1), act="clip"),
        dict(op="pw", m=24),
    ], 2),
}


def act_ref(x, act):
    if act == "relu":
        return np.maximum(x, 0.0)
    if act == "clip":
        return np.clip(x, 0.0, 6.0)
    if act == "hardswish":
        return x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)
    if act == "hardsigmoid":
        return np.clip(x * 0.25 + 0.4, 0.0, 1.0)
    return x


def pool_ref(x, k, s, pads, is_max, ceil, incl):
    """2-D MaxPool or AveragePool of x (pads t, l, b, r), ONNX's output
    size (ceil_mode rounding up); the average over the taps inside the
    image, or inside the padded image with count_include_pad."""
    t, l, b, r = pads
    n, c, h, w = x.shape
    rnd = np.ceil if ceil else np.floor
    oh = int(rnd((h + t + b - k) / s)) + 1
    ow = int(rnd((w + l + r - k) / s)) + 1
    y = np.empty((n, c, oh, ow))
    for i in range(oh):
        h0 = i * s - t
        for j in range(ow):
            w0 = j * s - l
            win = x[:, :, max(h0, 0):min(h0 + k, h), max(w0, 0):min(w0 + k, w)]
            if is_max:
                y[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = ((min(h0 + k, h + b) - max(h0, -t)) * (min(w0 + k, w + r) - max(w0, -l))
                       if incl else win.shape[2] * win.shape[3])
                y[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return y


def build(case, rng):
    """The model, its feeds, and the reference of every graph output."""
    shape, layers = case[:2]
    x = rng.standard_normal(shape).astype(np.float32)
    for at in (case[4].get("nan", ()) if len(case) > 4 else ()):
        x[at] = np.nan
    vals, refs = ["x"], [x.astype(np.float64)]   # index 0 is the input
    nodes, inits, outs = [], [], []

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))
        return name

    const("lo", 0.0)
    const("hi", 6.0)
    for i, L in enumerate(layers):
        src = L.get("src", i - 1) + 1
        xin, xr = vals[src], refs[src]
        name = "v%d" % i
        op = L["op"]
        if op in ("pw", "dw", "conv3", "w3", "kxk", "first", "g8"):
            c = xr.shape[1]
            m = L.get("m", c)
            k = 1 if op == "pw" else 3 if op in ("conv3", "w3") else L["k"]
            group = c if op == "dw" else c // 8 if op == "g8" else 1
            s = L.get("s", 1)
            sh, sw = s if isinstance(s, tuple) else (s, s)
            dil = L.get("dil", 1)
            pads = L.get("pads", (1, 1, 1, 1) if op in ("conv3", "w3") else (0, 0, 0, 0))
            w = (rng.standard_normal((m, c // group, k, k)) / np.sqrt(c // group * k * k))
            w = w.astype(np.float32)
            b = (rng.standard_normal(m) * 0.1).astype(np.float32)
            act = L.get("act")
            cur = name + "_c" if L.get("add") is not None or act else name
            nodes.append(helper.make_node(
                "Conv", [xin, const(name + "_w", w), const(name + "_b", b)], [cur],
                group=group, kernel_shape=[k, k], strides=[sh, sw], pads=list(pads),
                dilations=[dil, dil]))
            r = C.conv2d(xr, w.astype(np.float64), b.astype(np.float64), strides=(sh, sw),
                         pads=pads, dilations=(dil, dil), group=group)
            if L.get("add") is not None:
                to = name + "_a" if act else name
                nodes.append(helper.make_node("Add", [cur, vals[L["add"] + 1]], [to]))
                r = r + refs[L["add"] + 1]
                cur = to
            if act == "relu":
                nodes.append(helper.make_node("Relu", [cur], [name]))
            elif act == "clip":
                nodes.append(helper.make_node("Clip", [cur, "lo", "hi"], [name]))
            elif act == "hardswish":
                nodes.append(helper.make_node("HardSwish", [cur], [name]))
            elif act == "hardsigmoid":
                nodes.append(helper.make_node("HardSigmoid", [cur], [name], alpha=0.25, beta=0.4))
            r = act_ref(r, act)
            if op == "conv3":
                outs.append((name, r))
        elif op == "sigmoid":
            nodes.append(helper.make_node("Sigmoid", [xin], [name]))
            r = 1.0 / (1.0 + np.exp(-xr))
            outs.append((name, r))
        elif op == "concat":
            nodes.append(helper.make_node("Concat", [vals[i + 1] for i in L["of"]], [name],
                                          axis=1))
            r = np.concatenate([refs[i + 1] for i in L["of"]], axis=1)
        elif op == "add2":
            nodes.append(helper.make_node("Add", [vals[L["a"] + 1], vals[L["b"] + 1]], [name]))
            r = refs[L["a"] + 1] + refs[L["b"] + 1]
        elif op == "mulc":
            c = (rng.standard_normal((1, xr.shape[1], 1, 1)) + 1.0).astype(np.float32)
            nodes.append(helper.make_node("Mul", [xin, const(name + "_k", c)], [name]))
            r = xr * c.astype(np.float64)
        elif op == "muls":
            nodes.append(helper.make_node("Mul", [const(name + "_k", 0.5), xin], [name]))
            r = xr * 0.5
        elif op == "tanh":
            nodes.append(helper.make_node("Tanh", [xin], [name]))
            r = np.tanh(xr)
        elif op == "bn":
            c = xr.shape[1]
            sc, bi, mu = (rng.standard_normal((3, c)) * 0.5).astype(np.float32)
            var = (rng.random(c) + 0.5).astype(np.float32)
            cur = name + "_n" if L.get("act") else name
            nodes.append(helper.make_node(
                "BatchNormalization", [xin, const(name + "_s", sc), const(name + "_b", bi),
                                       const(name + "_m", mu), const(name + "_v", var)],
                [cur], epsilon=1e-5))
            if L.get("act") == "relu":
                nodes.append(helper.make_node("Relu", [cur], [name]))
            g = sc.astype(np.float64) / np.sqrt(var.astype(np.float64) + 1e-5)
            r = (xr - mu.astype(np.float64).reshape(1, c, 1, 1)) * g.reshape(1, c, 1, 1) + \
                bi.astype(np.float64).reshape(1, c, 1, 1)
            r = act_ref(r, L.get("act"))
        elif op in ("maxpool", "avgpool"):
            k, st, pads = L["k"], L.get("s", 1), L.get("pads", (0, 0, 0, 0))
            attrs = dict(kernel_shape=[k, k], strides=[st, st], pads=list(pads),
                         ceil_mode=int(L.get("ceil", 0)))
            if op == "avgpool":
                attrs["count_include_pad"] = int(L.get("incl", 0))
            nodes.append(helper.make_node("MaxPool" if op == "maxpool" else "AveragePool",
                                          [xin], [name], **attrs))
            r = pool_ref(xr, k, st, pads, op == "maxpool", L.get("ceil", 0), L.get("incl", 0))
        elif op == "gap":
            nodes.append(helper.make_node("GlobalAveragePool", [xin], [name]))
            r = xr.mean(axis=(2, 3), keepdims=True)
        elif op == "se":
            c = xr.shape[1]
            w = (rng.standard_normal((c, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
            nodes.append(helper.make_node("GlobalAveragePool", [xin], [name + "_p"]))
            nodes.append(helper.make_node("Conv", [name + "_p", const(name + "_w", w)],
                                          [name + "_s"], kernel_shape=[1, 1]))
            nodes.append(helper.make_node("HardSigmoid", [name + "_s"], [name + "_h"],
                                          alpha=1.0 / 6, beta=0.5))
            pair = [name + "_h", xin] if L.get("order") == "sx" else [xin, name + "_h"]
            nodes.append(helper.make_node("Mul", pair, [name]))
            p = xr.mean(axis=(2, 3), keepdims=True)
            sc = np.einsum("mc,ncij->nmij", w[:, :, 0, 0].astype(np.float64), p)
            r = xr * np.clip(sc / 6.0 + 0.5, 0.0, 1.0)
        elif op == "output":
            outs.append((vals[src], xr))
            vals.append(xin)
            refs.append(xr)
            continue
        vals.append(name)
        refs.append(r)
    outs.append((vals[-1], refs[-1]))
    g = helper.make_graph(
        nodes, "blk", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(r.shape)) for n, r in outs],
        inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    if len(case) > 4 and case[4].get("fp16"):
        return to_fp16(model, x, case)
    return model, {"x": x}, outs


def to_fp16(model, x, case):
    """The model with float16 initializers, input and outputs, and the
    reference recomputed from the float16-rounded input and weights."""
    for t in model.graph.initializer:
        a = numpy_helper.to_array(t)
        t.CopyFrom(numpy_helper.from_array(a.astype(np.float16), t.name))
    for v in list(model.graph.input) + list(model.graph.output):
        v.type.tensor_type.elem_type = TensorProto.FLOAT16
    x16 = x.astype(np.float16)
    return model, {"x": x16}, reference_fp16(case[1], x16, model)


def reference_fp16(layers, x16, model16):
    """The last output of a chain of pw/dw layers on input x16 with
    model16's float16 weights, in float64."""
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model16.graph.initializer}
    refs = [x16.astype(np.float64)]
    for i, L in enumerate(layers):
        name = "v%d" % i
        src = L.get("src", i - 1) + 1
        xr = refs[src]
        group = xr.shape[1] if L["op"] == "dw" else 1
        r = C.conv2d(xr, w[name + "_w"], w[name + "_b"], strides=(L.get("s", 1),) * 2,
                     pads=L.get("pads", (0, 0, 0, 0)), dilations=(1, 1), group=group)
        if L.get("add") is not None:
            r = r + refs[L["add"] + 1]
        refs.append(act_ref(r, L.get("act")))
    return [("v%d" % (len(layers) - 1), refs[-1])]


def blocking_cpu():
    """Whether cpu_layout.c blocks values here: AVX2 and FMA (with or
    without AVX-512, whose 1x1 layers take two pairs of blocks a tile)."""
    try:
        flags = open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0].split()
    except (OSError, IndexError):
        return False
    return "avx2" in flags and "fma" in flags


def run_case(ort_run, name, case, rng, tmp):
    model, feeds, outs = build(case, rng)
    d = os.path.join(tmp, name)
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    np.save(os.path.join(d, "in_x.npy"), feeds["x"])
    cmd = [ort_run, path, "--output-dir", d, "--iters", "2", "--threads", "2",
           "--input", "x=" + os.path.join(d, "in_x.npy")]
    env = dict(os.environ, ORTMK_LOG="debug", **(case[3] if len(case) > 3 else {}))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    if p.returncode:
        return "ort-run failed: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    for out, ref in outs:
        got = np.load(os.path.join(d, out + ".npy")).astype(np.float64)
        if got.shape != ref.shape:
            return "%s: shape %s, expected %s" % (out, list(got.shape), list(ref.shape))
        err = np.abs(got - ref)
        err[np.isnan(got) & np.isnan(ref)] = 0.0   # NaN where numpy has NaN
        # float16: the output's rounding and the stored values' between
        # layers that are not kept float32
        mag = np.abs(np.nan_to_num(ref))
        tol = (1e-5 + 1e-5 * mag) if feeds["x"].dtype == np.float32 else (2e-3 + 2e-3 * mag)
        if not np.all(err <= tol):
            i = np.unravel_index(np.argmax(err - tol), err.shape)
            return "%s at %s got %r, expected %r" % (out, list(i), got[i], ref[i])
    want = case[2] if blocking_cpu() else 0
    lines = [ln for ln in p.stderr.splitlines() if "values kept channel-blocked" in ln]
    got_n = int(lines[0].split("debug:")[1].split()[0]) if lines else 0
    if got_n != want:
        return "%d values kept blocked, expected %d" % (got_n, want)
    return None


def main():
    return run_cases(CASES, run_case, 11)


if __name__ == "__main__":
    sys.exit(main())
