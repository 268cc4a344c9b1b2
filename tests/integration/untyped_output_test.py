#!/usr/bin/python3
"""A graph output with no declared type whose type shape inference cannot
infer (CenterCropPad is not in core/shape_ops.c): the core binds it as a
dynamic output with dtype 0.  This used to make the provider reject the
RUN on the ring without answering, and the run hung.  It must run, within
a timeout, and give the crop of its input.
Usage: untyped_output_test.py ORT_RUN WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def main():
    ort_run, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    node = helper.make_node("CenterCropPad", ["x", "s"], ["y"])
    graph = helper.make_graph(
        [node], "untyped",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [onnx.ValueInfoProto(name="y")],
        [helper.make_tensor("s", TensorProto.INT64, [2], [2, 2])])
    model = os.path.join(work, "model.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), model)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.save(os.path.join(work, "x.npy"), x)
    out = os.path.join(work, "out")
    try:
        r = subprocess.run([ort_run, model, "--input", "x=" + os.path.join(work, "x.npy"),
                            "--output-dir", out], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        print("untyped output: ort-run hung")
        print("0 passed, 1 failed")
        return 1
    ok = r.returncode == 0 and np.array_equal(np.load(os.path.join(out, "y.npy")), x[1:3, 1:3])
    print("untyped output:", "ok" if ok else "FAILED: " + r.stderr.strip())
    print("%d passed, %d failed" % (ok, not ok))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
