"""Shared helpers of the model generators: graph building shorthands and
straightforward numpy reference implementations of the ops.

The references are the independent expected values of the integration tests,
so they are written for obviousness, not speed, and share nothing with the C
kernels: every function takes and returns float64 arrays and follows the
ONNX operator definitions literally.  `self_test()` checks the non-trivial
ones (conv, pooling, normalisations) against direct loops on tiny cases.

Used by gen_example.py and gen_test_models.py.
"""
import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


# ---------------------------------------------------------------- building

def rand_weight(rng, shape, fan_in):
    """float32 weights uniform in +-sqrt(3/fan_in): unit-variance outputs
    for unit-variance inputs, so activations stay O(1) through the model."""
    bound = math.sqrt(3.0 / fan_in)
    return rng.uniform(-bound, bound, size=shape).astype(np.float32)


def rand_uniform(rng, shape, lo, hi):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def init(name, array):
    """A TensorProto initializer from a numpy array (dtype kept)."""
    return numpy_helper.from_array(np.asarray(array), name)


def const_node(name, array):
    """A Constant node producing `name`."""
    return helper.make_node("Constant", [], [name], name=name + "_const",
                            value=numpy_helper.from_array(np.asarray(array), name))


def value_info(name, elem_type, shape):
    """shape entries: int, symbolic str, or None (unknown)."""
    return helper.make_tensor_value_info(name, elem_type, shape)


def make_model(nodes, inputs, outputs, initializers, name, doc=""):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers, doc_string=doc)
    model = helper.make_model(graph, producer_name="ortmk-gen",
                              opset_imports=[helper.make_opsetid("", OPSET)])
    # Pin the IR version onnx 1.12 writes by default so that the bytes do
    # not change with the installed onnx version.
    model.ir_version = 8
    return model


FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64


# ----------------------------------------------------------- elementwise

def relu(x):
    return np.maximum(x, 0.0)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x):
    return _erf(np.asarray(x, dtype=np.float64))


def gelu_erf(x):
    """Gelu as exported by PyTorch: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    return x * 0.5 * (1.0 + erf(x / math.sqrt(2.0)))


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


# ---------------------------------------------------------------- linear

def matmul(a, b):
    return np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))


def gemm(a, b, c=None, alpha=1.0, beta=1.0, trans_a=0, trans_b=0):
    a = a.T if trans_a else a
    b = b.T if trans_b else b
    y = alpha * matmul(a, b)
    if c is not None:
        y = y + beta * np.asarray(c, np.float64)
    return y


# --------------------------------------------------------- normalisation

def batchnorm(x, scale, bias, mean, var, eps=1e-5):
    """Inference-mode BatchNormalization over axis 1 of NCHW."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return ((x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
            * scale.reshape(shape) + bias.reshape(shape))


def layernorm(x, scale, bias, axis=-1, eps=1e-5):
    """LayerNormalization: normalise over axes [axis, rank)."""
    axis = axis % x.ndim
    axes = tuple(range(axis, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


# ----------------------------------------------------------- convolution

def _pads4(pads):
    return (0, 0, 0, 0) if pads is None else tuple(pads)


def conv2d(x, w, b=None, strides=(1, 1), pads=None, dilations=(1, 1), group=1):
    """ONNX Conv on NCHW.  pads = (top, left, bottom, right); w is
    [M, C/group, kH, kW].  Output = sum over the kernel taps of a strided
    slice of the padded input times the tap's weights, group by group."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    assert c == cg * group and m % group == 0
    pt, pl, pb, pr = _pads4(pads)
    sh, sw = strides
    dh, dw = dilations
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    mg = m // group
    y = np.zeros((n, m, oh, ow))
    for g in range(group):
        xg = xp[:, g * cg:(g + 1) * cg]
        wg = w[g * mg:(g + 1) * mg]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                           j * dw: j * dw + sw * (ow - 1) + 1: sw]
                # patch [n, cg, oh, ow], wg[:, :, i, j] [mg, cg]
                y[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, wg[:, :, i, j])
    if b is not None:
        y += np.asarray(b).reshape(1, -1, 1, 1)
    return y


def _pool_windows(x, kernel, strides, pads, fill):
    """Padded input and output size of a 2-D pool (ceil_mode 0)."""
    pt, pl, pb, pr = _pads4(pads)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    oh = (x.shape[2] + pt + pb - kernel[0]) // strides[0] + 1
    ow = (x.shape[3] + pl + pr - kernel[1]) // strides[1] + 1
    return xp, oh, ow


def maxpool2d(x, kernel, strides=None, pads=None):
    strides = strides or (1, 1)
    xp, oh, ow = _pool_windows(x, kernel, strides, pads, -np.inf)
    y = np.full(x.shape[:2] + (oh, ow), -np.inf)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            y = np.maximum(y, xp[:, :, i: i + strides[0] * (oh - 1) + 1: strides[0],
                                 j: j + strides[1] * (ow - 1) + 1: strides[1]])
    return y


def avgpool2d(x, kernel, strides=None, pads=None, count_include_pad=0):
    """AveragePool; padding counts in the divisor only if count_include_pad."""
    strides = strides or (1, 1)
    xp, oh, ow = _pool_windows(x, kernel, strides, pads, 0.0)
    ones, _, _ = _pool_windows(np.ones((1, 1) + x.shape[2:]), kernel, strides, pads, 0.0)
    total = np.zeros(x.shape[:2] + (oh, ow))
    count = np.zeros((1, 1, oh, ow))
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            sl = (slice(None), slice(None),
                  slice(i, i + strides[0] * (oh - 1) + 1, strides[0]),
                  slice(j, j + strides[1] * (ow - 1) + 1, strides[1]))
            total += xp[sl]
            count += ones[sl]
    if count_include_pad:
        count = np.full_like(count, kernel[0] * kernel[1])
    return total / count


def global_avgpool(x):
    return np.mean(x, axis=(2, 3), keepdims=True)


def flatten(x, axis=1):
    return x.reshape(int(np.prod(x.shape[:axis])), -1)


# -------------------------------------------------------------- self-test

def _conv_loops(x, w, b, strides, pads, dilations, group):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pl + pr - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    mg = m // group
    y = np.zeros((n, m, oh, ow))
    for b_ in range(n):
        for o in range(m):
            g = o // mg
            for p in range(oh):
                for q in range(ow):
                    s = b[o]
                    for ci in range(cg):
                        for i in range(kh):
                            for j in range(kw):
                                r = p * strides[0] - pt + i * dilations[0]
                                t = q * strides[1] - pl + j * dilations[1]
                                if 0 <= r < h and 0 <= t < wd:
                                    s += x[b_, g * cg + ci, r, t] * w[o, ci, i, j]
                    y[b_, o, p, q] = s
    return y


def _pool_loops(x, kernel, strides, pads, kind, count_include_pad=0):
    n, c, h, wd = x.shape
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - kernel[0]) // strides[0] + 1
    ow = (wd + pl + pr - kernel[1]) // strides[1] + 1
    y = np.zeros((n, c, oh, ow))
    for b_ in range(n):
        for ch in range(c):
            for p in range(oh):
                for q in range(ow):
                    vals = []
                    for i in range(kernel[0]):
                        for j in range(kernel[1]):
                            r, t = p * strides[0] - pt + i, q * strides[1] - pl + j
                            if 0 <= r < h and 0 <= t < wd:
                                vals.append(x[b_, ch, r, t])
                    if kind == "max":
                        y[b_, ch, p, q] = max(vals)
                    else:
                        div = kernel[0] * kernel[1] if count_include_pad else len(vals)
                        y[b_, ch, p, q] = sum(vals) / div
    return y


def self_test():
    """Checks the references against direct loops; raises on a mismatch."""
    rng = np.random.default_rng(123)
    cases = [  # (C, M, group, k, strides, pads, dilations)
        (2, 4, 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
        (4, 6, 2, (3, 2), (2, 1), (0, 1, 2, 0), (1, 1)),
        (3, 3, 3, (3, 3), (1, 2), (2, 2, 2, 2), (2, 2)),
        (4, 4, 4, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1)),
    ]
    for c, m, g, k, s, p, d in cases:
        x = rng.standard_normal((2, c, 7, 6))
        w = rng.standard_normal((m, c // g) + k)
        b = rng.standard_normal(m)
        got = conv2d(x, w, b, s, p, d, g)
        want = _conv_loops(x, w, b, s, p, d, g)
        assert got.shape == want.shape, (got.shape, want.shape)
        assert np.allclose(got, want, rtol=1e-12, atol=1e-12), "conv2d"
    x = rng.standard_normal((2, 3, 7, 8))
    for k, s, p in [((2, 2), (2, 2), (0, 0, 0, 0)), ((3, 3), (2, 2), (1, 1, 1, 1)),
                    ((3, 2), (1, 2), (0, 1, 1, 0))]:
        assert np.allclose(maxpool2d(x, k, s, p), _pool_loops(x, k, s, p, "max")), "maxpool"
        for cip in (0, 1):
            assert np.allclose(avgpool2d(x, k, s, p, cip),
                               _pool_loops(x, k, s, p, "avg", cip)), "avgpool"
    # Normalisations against their textbook formulas, element by element.
    x = rng.standard_normal((2, 3, 5))
    sc, bi = rng.standard_normal(5), rng.standard_normal(5)
    ln = layernorm(x, sc, bi)
    for i in range(2):
        for j in range(3):
            v = x[i, j]
            mu = sum(v) / 5
            sd = math.sqrt(sum((t - mu) ** 2 for t in v) / 5 + 1e-5)
            assert np.allclose(ln[i, j], [(t - mu) / sd * sc[k] + bi[k] for k, t in enumerate(v)])
    x = rng.standard_normal((2, 3, 2, 2))
    sc, bi, mu, var = (rng.standard_normal(3), rng.standard_normal(3),
                       rng.standard_normal(3), rng.uniform(0.5, 2, 3))
    bn = batchnorm(x, sc, bi, mu, var)
    assert np.isclose(bn[1, 2, 1, 0], (x[1, 2, 1, 0] - mu[2]) / math.sqrt(var[2] + 1e-5)
                      * sc[2] + bi[2]), "batchnorm"
    sm = softmax(x, axis=1)
    assert np.allclose(sm.sum(axis=1), 1.0) and np.isclose(
        sm[0, 1, 0, 1], math.exp(x[0, 1, 0, 1]) / sum(math.exp(x[0, c, 0, 1]) for c in range(3)))
    assert abs(erf(1.0) - 0.8427007929497149) < 1e-15
    assert abs(gelu_erf(np.array([1.0]))[0] - 0.8413447460685429) < 1e-12
    assert np.allclose(gemm(np.eye(2), np.ones((3, 2)), np.ones(3), 0.5, 2.0, trans_b=1),
                       np.full((2, 3), 2.5)), "gemm"
