"""TopK on float32 (the heap selection of ops/tensor/tile.c) against numpy:
the order ONNX gives (largest first, or smallest; equal values by index)
with NaN after every number as the other dtypes' path orders it, any axis,
k from 0 to the whole axis, rows longer and shorter than k.

usage: topk_test.py ORT_RUN

Each case is a one-node model run by ort-run; prints one line per case,
exit 1 on any mismatch.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True   # case_runner beside this file: no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_runner import run_cases, run_model  # noqa: E402

# name: (shape, axis, k, largest, values: "ties", "nan" or "normal")
CASES = {
    "last_k5": ((3, 1000), -1, 5, 1, "normal"),
    "last_k5_small": ((3, 1000), 1, 5, 0, "normal"),
    "ties": ((4, 64), 1, 20, 1, "ties"),
    "ties_small": ((4, 64), 1, 20, 0, "ties"),
    "nan": ((2, 50), 1, 10, 1, "nan"),
    "nan_small": ((2, 50), 1, 48, 0, "nan"),
    "axis0": ((40, 7, 3), 0, 6, 1, "ties"),
    "axis1": ((5, 30, 4), 1, 30, 0, "nan"),
    "k0": ((3, 9), 1, 0, 1, "normal"),
    "k1": ((6, 300), 1, 1, 1, "ties"),
    "all": ((2, 257), 1, 257, 1, "ties"),
    "ssd": ((1, 3234), 1, 300, 1, "normal"),
}


def reference(x, axis, k, largest):
    """numpy: NaN after every number, equal values by index (stable)."""
    xm = np.moveaxis(x, axis, -1)
    n = xm.shape[-1]
    flat = xm.reshape(-1, n)
    vals = np.empty((flat.shape[0], k), np.float32)
    idx = np.empty((flat.shape[0], k), np.int64)
    for r, row in enumerate(flat):
        nan = np.isnan(row)
        key = np.where(nan, 0.0, row.astype(np.float64))
        pos = np.arange(n)
        if largest:
            order = np.lexsort((pos, -key, ~nan))   # NaN first, then descending
        else:
            order = np.lexsort((pos, key, nan))     # ascending, NaN last
        idx[r] = order[:k]
        vals[r] = row[order[:k]]
    shape = xm.shape[:-1] + (k,)
    return (np.moveaxis(vals.reshape(shape), -1, axis), np.moveaxis(idx.reshape(shape), -1, axis))


def values(rng, shape, kind):
    if kind == "ties":
        return rng.integers(0, 6, shape).astype(np.float32) - 2.0
    x = rng.standard_normal(shape).astype(np.float32)
    if kind == "nan":
        x[rng.random(shape) < 0.15] = np.nan
        x[rng.random(shape) < 0.1] = 0.5
    return x


def run_case(ort_run, name, case, rng, tmp):
    shape, axis, k, largest, kind = case
    x = values(rng, shape, kind)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    g = helper.make_graph([node], "topk", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("i", TensorProto.INT64, None)],
                          [numpy_helper.from_array(np.array([k], np.int64), "k")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 7
    d = os.path.join(tmp, name)
    why = run_model(ort_run, m, {"x": x}, d)
    if why:
        return why
    gv, gi = np.load(os.path.join(d, "v.npy")), np.load(os.path.join(d, "i.npy"))
    rv, ri = reference(x, axis, k, largest)
    if gv.shape != rv.shape or gi.shape != ri.shape:
        return "shapes %s %s, expected %s" % (gv.shape, gi.shape, rv.shape)
    if not np.array_equal(gi, ri):
        w = np.argwhere(gi != ri)[0]
        return "indices differ at %s: %d, expected %d" % (list(w), gi[tuple(w)], ri[tuple(w)])
    if not np.array_equal(gv, rv, equal_nan=True):
        return "values differ"
    return None


def main():
    return run_cases(CASES, run_case, 11)


if __name__ == "__main__":
    sys.exit(main())
