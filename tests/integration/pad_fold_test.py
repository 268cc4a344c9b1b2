"""A zero Pad before a Conv or a counting AveragePool becomes the reader's
own pads (core/graph_fold.c): the Pad node goes, the pool counts the
padding, the output is the same.  Each case runs with ort-run and is
checked against numpy (float64) and by the node count ort-run reports:

- folded: Pad -> AveragePool (opset 13 pads input; none of the pool's
  own), Pad -> AveragePool with own pads already counted, Pad (opset 10
  attribute) -> Conv with own pads, a 1-D Pad -> Conv;
- kept: a Pad of another value, a reflect Pad, a Pad read twice, a Pad
  before a pool that does not count its own pads, a Pad before a ceil_mode
  pool, a Pad of the channel dim.

usage: pad_fold_test.py ORT_RUN
"""
import os
import sys
import tempfile

sys.dont_write_bytecode = True   # the modules beside this file: no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import view_alias_test  # noqa: E402


def save(path, nodes, shape, inits, opset):
    g = h.make_graph(nodes, "pad", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 7
    onnx.save(m, path)


def run(ort_run, d, model, x):
    """The nodes ort-run ran and output y (view_alias_test.py's runner)."""
    rep, outs = view_alias_test.run(ort_run, d, model, x)
    return sum(rep["nodes_per_provider"].values()), outs["y"]


def np_pad(x, pads, value=0.0, mode="constant"):
    r = x.ndim
    width = [(pads[i], pads[r + i]) for i in range(r)]
    if mode == "constant":
        return np.pad(x, width, constant_values=value)
    return np.pad(x, width, mode=mode)


def windows(x, k, s):
    """All k-windows at stride s of x's spatial dims: [..., out..., k...]."""
    v = np.lib.stride_tricks.sliding_window_view(x, k, axis=tuple(range(2, x.ndim)))
    sl = (slice(None), slice(None)) + tuple(slice(None, None, st) for st in s)
    return v[sl]


def avgpool(x, k, s, pads, count_pad, ceil=False):
    """ONNX AveragePool on float64 (2-D), by explicit windows."""
    n, c, hh, ww = x.shape
    pb, pe = pads[:2], pads[2:]
    out = []
    for i in range(2):
        size = (hh, ww)[i] + pb[i] + pe[i] - k[i]
        o = (-(-size // s[i]) if ceil else size // s[i]) + 1
        if ceil and (o - 1) * s[i] >= (hh, ww)[i] + pb[i]:
            o -= 1
        out.append(o)
    y = np.zeros((n, c, out[0], out[1]))
    for oh in range(out[0]):
        for ow in range(out[1]):
            h0, w0 = oh * s[0] - pb[0], ow * s[1] - pb[1]
            h1, w1 = h0 + k[0], w0 + k[1]
            a0, a1 = max(h0, 0), min(h1, hh)
            b0, b1 = max(w0, 0), min(w1, ww)
            if count_pad:
                cnt = (min(h1, hh + pe[0]) - h0) * (min(w1, ww + pe[1]) - w0)
            else:
                cnt = (a1 - a0) * (b1 - b0)
            y[:, :, oh, ow] = x[:, :, a0:a1, b0:b1].sum(axis=(2, 3)) / cnt
    return y


def conv(x, w, b, pads):
    r = x.ndim - 2
    xp = np_pad(x, [0, 0] + list(pads[:r]) + [0, 0] + list(pads[r:]))
    v = windows(xp, w.shape[2:], (1,) * r)
    axes = "xyz"[:r]
    return np.einsum("nc%s%s,mc%s->nm%s" % (axes, axes.upper(), axes.upper(), axes),
                     v, w) + b.reshape((1, -1) + (1,) * r)


def pads_init(p):
    return h.make_tensor("p", T.INT64, [len(p)], p)


def main():
    ort_run = sys.argv[1]
    rng = np.random.default_rng(5)
    x4 = rng.standard_normal((1, 8, 13, 11)).astype(np.float32)
    x3 = rng.standard_normal((1, 4, 40)).astype(np.float32)
    w4 = (rng.standard_normal((6, 8, 3, 3)) * 0.3).astype(np.float32)
    w3 = (rng.standard_normal((5, 4, 5)) * 0.3).astype(np.float32)
    b6 = rng.standard_normal(6).astype(np.float32)
    b5 = rng.standard_normal(5).astype(np.float32)
    wt4 = [h.make_tensor("w", T.FLOAT, w4.shape, w4.ravel()), h.make_tensor("b", T.FLOAT, [6], b6)]
    wt3 = [h.make_tensor("w", T.FLOAT, w3.shape, w3.ravel()), h.make_tensor("b", T.FLOAT, [5], b5)]
    X4, X3 = x4.astype(np.float64), x3.astype(np.float64)
    P = [0, 0, 1, 2, 0, 0, 2, 1]   # H begin 1, W begin 2, H end 2, W end 1
    pool = dict(kernel_shape=[3, 3], strides=[1, 2])
    cases = [
        # name, nodes, input, inits, opset, folded, numpy
        ("pool, no own pads", [h.make_node("Pad", ["x", "p"], ["t"]),
                               h.make_node("AveragePool", ["t"], ["y"], **pool)],
         x4, [pads_init(P)], 13, True, avgpool(np_pad(X4, P), [3, 3], [1, 2], [0] * 4, True)),
        ("pool, own pads counted", [h.make_node("Pad", ["x", "p"], ["t"]),
                                    h.make_node("AveragePool", ["t"], ["y"], pads=[1, 0, 0, 1],
                                                count_include_pad=1, **pool)],
         x4, [pads_init(P)], 13, True,
         avgpool(np_pad(X4, P), [3, 3], [1, 2], [1, 0, 0, 1], True)),
        ("conv, opset 10 attribute", [h.make_node("Pad", ["x"], ["t"], pads=P),
                                      h.make_node("Conv", ["t", "w", "b"], ["y"],
                                                  pads=[1, 1, 0, 1])],
         x4, wt4, 10, True, conv(np_pad(X4, P), w4.astype(np.float64), b6, [1, 1, 0, 1])),
        ("conv 1-D", [h.make_node("Pad", ["x", "p"], ["t"]),
                      h.make_node("Conv", ["t", "w", "b"], ["y"])],
         x3, wt3 + [pads_init([0, 0, 3, 0, 0, 2])], 13, True,
         conv(np_pad(X3, [0, 0, 3, 0, 0, 2]), w3.astype(np.float64), b5, [0, 0])),
        ("kept: value 0.5", [h.make_node("Pad", ["x", "p", "v"], ["t"]),
                             h.make_node("Conv", ["t", "w", "b"], ["y"])],
         x4, wt4 + [pads_init(P), h.make_tensor("v", T.FLOAT, [], [0.5])], 13, False,
         conv(np_pad(X4, P, 0.5), w4.astype(np.float64), b6, [0] * 4)),
        ("kept: reflect", [h.make_node("Pad", ["x", "p"], ["t"], mode="reflect"),
                           h.make_node("AveragePool", ["t"], ["y"], **pool)],
         x4, [pads_init(P)], 13, False,
         avgpool(np_pad(X4, P, mode="reflect"), [3, 3], [1, 2], [0] * 4, True)),
        ("kept: read twice", [h.make_node("Pad", ["x", "p"], ["t"]),
                              h.make_node("Conv", ["t", "w", "b"], ["c"]),
                              h.make_node("ReduceSum", ["t"], ["s"], keepdims=1),
                              h.make_node("Add", ["c", "s"], ["y"])],
         x4, wt4 + [pads_init(P)], 13, False,
         conv(np_pad(X4, P), w4.astype(np.float64), b6, [0] * 4) + np_pad(X4, P).sum()),
        ("kept: pool not counting own pads",
         [h.make_node("Pad", ["x", "p"], ["t"]),
          h.make_node("AveragePool", ["t"], ["y"], pads=[1, 1, 1, 1], **pool)],
         x4, [pads_init(P)], 13, False,
         avgpool(np_pad(X4, P), [3, 3], [1, 2], [1, 1, 1, 1], False)),
        ("kept: ceil_mode", [h.make_node("Pad", ["x", "p"], ["t"]),
                             h.make_node("AveragePool", ["t"], ["y"], ceil_mode=1, **pool)],
         x4, [pads_init(P)], 13, False,
         avgpool(np_pad(X4, P), [3, 3], [1, 2], [0] * 4, True, ceil=True)),
        ("kept: channel pads", [h.make_node("Pad", ["x", "p"], ["t"]),
                                h.make_node("AveragePool", ["t"], ["y"], **pool)],
         x4, [pads_init([0, 1, 1, 0, 0, 0, 0, 1])], 13, False,
         avgpool(np_pad(X4, [0, 1, 1, 0, 0, 0, 0, 1]), [3, 3], [1, 2], [0] * 4, True)),
    ]
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for name, nodes, x, inits, opset, folded, want in cases:
            path = os.path.join(d, "m.onnx")
            save(path, nodes, list(x.shape), inits, opset)
            nodes_run, y = run(ort_run, d, path, x)
            expect_nodes = len(nodes) - 1 if folded else len(nodes)
            err = np.abs(y - want).max() / max(1.0, np.abs(want).max()) if y.shape == want.shape \
                else float("inf")
            ok = err <= 1e-5 and nodes_run == expect_nodes
            print("%s %s: %d nodes run (%d expected), max error %.2g" %
                  ("ok  " if ok else "FAIL", name, nodes_run, expect_nodes, err))
            bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
