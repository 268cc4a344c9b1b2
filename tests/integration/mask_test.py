"""float32 comparisons (binary.c's bool rows) and NonZero on bool masks
(select.c's byte paths: a sparse mask skipped a word at a time, a dense one
row by row) against numpy, as detectors use them: scores over a threshold,
then the coordinates of the survivors.

usage: mask_test.py ORT_RUN

Each case is a model Cmp(x, t) -> m -> NonZero; both outputs are checked.
Prints one line per case, exit 1 on any mismatch.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True   # case_runner beside this file: no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_runner import run_cases, run_model  # noqa: E402

OPS = {"Greater": np.greater, "Less": np.less, "Equal": np.equal,
       "GreaterOrEqual": np.greater_equal, "LessOrEqual": np.less_equal}

# name: (x shape, t shape, op, threshold: scalar offset or "row")
CASES = {
    "sparse_2d": ((1, 3000, 91), (), "Greater", 2.9),
    "dense_2d": ((1, 3000, 91), (), "Greater", -1.0),
    "sparse_1d": ((100003,), (), "Greater", 3.5),
    "dense_3d": ((4, 37, 29), (), "Less", 0.3),
    "row_bcast": ((50, 33), (1, 33), "GreaterOrEqual", "row"),
    "equal_ties": ((7, 120), (), "Equal", 1.0),
    "le_nan": ((9, 200), (), "LessOrEqual", 0.0),
    "empty_hit": ((5, 64), (), "Greater", 100.0),
}


def run_case(ort_run, name, case, rng, tmp):
    xs, ts, op, thr = case
    x = rng.standard_normal(xs).astype(np.float32)
    if op == "Equal":
        x = np.round(x).astype(np.float32)
    x[rng.random(xs) < 0.02] = np.nan
    t = (rng.standard_normal(ts) if thr == "row" else np.full(ts, thr)).astype(np.float32)
    nodes = [helper.make_node(op, ["x", "t"], ["m"]), helper.make_node("NonZero", ["m"], ["nz"])]
    g = helper.make_graph(nodes, "mask", [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)],
                          [helper.make_tensor_value_info("m", TensorProto.BOOL, None),
                           helper.make_tensor_value_info("nz", TensorProto.INT64, None)],
                          [numpy_helper.from_array(t, "t")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    d = os.path.join(tmp, name)
    why = run_model(ort_run, m, {"x": x}, d)
    if why:
        return why
    want_m = OPS[op](x, t)
    want_nz = np.array(np.nonzero(want_m), np.int64)
    got_m, got_nz = np.load(os.path.join(d, "m.npy")), np.load(os.path.join(d, "nz.npy"))
    if got_m.shape != want_m.shape or not np.array_equal(got_m, want_m):
        return "mask differs (%d of %d)" % (int((got_m != want_m).sum()), want_m.size)
    if got_nz.shape != want_nz.shape or not np.array_equal(got_nz, want_nz):
        return "NonZero %s, expected %s" % (got_nz.shape, want_nz.shape)
    return None


def main():
    return run_cases(CASES, run_case, 5)


if __name__ == "__main__":
    sys.exit(main())
