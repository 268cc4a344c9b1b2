#!/usr/bin/python3
"""An empty initializer (shape [0], as ONNX Runtime's constant folding
leaves them in its optimized graphs) is a value like any other: Concat of
x and an empty int64 tensor gives x (numpy says so), with the empty tensor
stored as raw bytes and as a typed field.
Usage: empty_init_test.py ORT_RUN WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(typed):
    empty = (helper.make_tensor("empty", TensorProto.INT64, [0], []) if typed else
             numpy_helper.from_array(np.zeros((0,), np.int64), "empty"))
    g = helper.make_graph([helper.make_node("Concat", ["x", "empty"], ["y"], axis=0)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.INT64, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [3])], [empty])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def main():
    ort_run, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    x = np.array([5, -2, 9], np.int64)
    np.save(os.path.join(work, "x.npy"), x)
    failed = 0
    for typed in (False, True):
        path = os.path.join(work, "typed.onnx" if typed else "raw.onnx")
        onnx.save(model(typed), path)
        out = os.path.join(work, "out_typed" if typed else "out_raw")
        r = subprocess.run([ort_run, path, "--input", "x=" + os.path.join(work, "x.npy"),
                            "--output-dir", out], capture_output=True, text=True, timeout=60)
        ok = r.returncode == 0 and np.array_equal(np.load(os.path.join(out, "y.npy")),
                                                  np.concatenate([x, np.zeros(0, np.int64)]))
        print(("ok   " if ok else "FAIL ") + "Concat with an empty %s initializer%s" %
              ("typed" if typed else "raw", "" if ok else ": " + r.stderr.strip()))
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
