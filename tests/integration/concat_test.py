"""Concat and Split against numpy (concat.c): large outputs (Split: inputs)
split over two threads by 64 KiB chunks of output (input) bytes (a chunk
may start or end inside any block, span rows, or fall inside one block),
small ones copied in one pass; axes 0 to the last, blocks of unequal sizes
and an empty one, float32, int64 and uint8.

usage: concat_test.py ORT_RUN

Each case is a model Concat(x0, x1, ...), or for split_* cases Split of
their concatenation into blocks of their sizes, run with --threads 2.  Prints one
line per case, exit 1 on any mismatch.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.dont_write_bytecode = True   # case_runner beside this file: no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_runner import run_cases, run_model  # noqa: E402

DT = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.uint8: TensorProto.UINT8}

# name: (input shapes, axis, dtype)
CASES = {
    # SqueezeNet's fire output: two blocks a row, 1 row
    "fire_axis1": ([(1, 64, 55, 55), (1, 64, 55, 55)], 1, np.float32),
    # many rows of uneven blocks (chunks end inside blocks and rows)
    "rows_axis2": ([(3, 5, 37, 33), (3, 5, 11, 33), (3, 5, 0, 33), (3, 5, 53, 33)], 2,
                   np.float32),
    "last_axis": ([(257, 301, 3), (257, 301, 7)], -1, np.float32),
    "axis0_int64": ([(40000,), (23001,), (5,)], 0, np.int64),
    "bytes_axis1": ([(2, 300001), (2, 70001)], 1, np.uint8),
    "small": ([(2, 3, 4), (2, 1, 4)], 1, np.float32),
    # Split: the same blocks the other way round (YOLO's channel split)
    "split_axis1": ([(1, 16, 160, 160), (1, 16, 160, 160)], 1, np.float32),
    "split_rows_axis2": ([(3, 5, 37, 33), (3, 5, 11, 33), (3, 5, 0, 33), (3, 5, 53, 33)], 2,
                         np.float32),
    "split_bytes_axis1": ([(2, 300001), (2, 70001)], 1, np.uint8),
    "split_small": ([(2, 3, 4), (2, 1, 4)], 1, np.int64),
}


def run_split(ort_run, name, xs, axis, dt, tmp):
    x = np.concatenate(xs, axis=axis)
    sizes = np.array([a.shape[axis] for a in xs], np.int64)
    outs = ["y%d" % i for i in range(len(xs))]
    node = helper.make_node("Split", ["x", "sizes"], outs, axis=axis)
    g = helper.make_graph([node], "split",
                          [helper.make_tensor_value_info("x", DT[dt], list(x.shape))],
                          [helper.make_tensor_value_info(o, DT[dt], None) for o in outs],
                          [helper.make_tensor("sizes", TensorProto.INT64, [len(xs)], sizes)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    d = os.path.join(tmp, name)
    why = run_model(ort_run, m, {"x": x}, d, "--threads", "2")
    if why:
        return why
    for o, want in zip(outs, xs):
        got = np.load(os.path.join(d, o + ".npy"))
        if got.shape != want.shape:
            return "%s: shape %s, expected %s" % (o, list(got.shape), list(want.shape))
        if not np.array_equal(got, want):
            i = np.argwhere(got != want)[0]
            return "%s at %s got %r, expected %r" % (o, list(i), got[tuple(i)], want[tuple(i)])
    return None


def run_case(ort_run, name, case, rng, tmp):
    shapes, axis, dt = case
    xs = [(rng.standard_normal(s) * 100).astype(dt) for s in shapes]
    if name.startswith("split"):
        return run_split(ort_run, name, xs, axis, dt, tmp)
    names = ["x%d" % i for i in range(len(xs))]
    node = helper.make_node("Concat", names, ["y"], axis=axis)
    g = helper.make_graph([node], "concat",
                          [helper.make_tensor_value_info(n, DT[dt], list(x.shape))
                           for n, x in zip(names, xs)],
                          [helper.make_tensor_value_info("y", DT[dt], None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    d = os.path.join(tmp, name)
    why = run_model(ort_run, m, dict(zip(names, xs)), d, "--threads", "2")
    if why:
        return why
    want = np.concatenate(xs, axis=axis)
    got = np.load(os.path.join(d, "y.npy"))
    if got.shape != want.shape:
        return "shape %s, expected %s" % (list(got.shape), list(want.shape))
    if not np.array_equal(got, want):
        i = np.argwhere(got != want)[0]
        return "at %s got %r, expected %r" % (list(i), got[tuple(i)], want[tuple(i)])
    return None


def main():
    return run_cases(CASES, run_case, 13)


if __name__ == "__main__":
    sys.exit(main())
