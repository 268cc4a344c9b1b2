#!/usr/bin/python3
"""Writes DIR/api.onnx (+ DIR/api.bin, its external data) for test_api: a
model whose metadata, signature and weights the C API must report as
written here.
  inputs  x float ["batch", 3], s float scalar, q float of no declared rank,
          o optional(tensor(float)) ["k", 2]
  w       float [3] = 1, 2, 3, in api.bin (external data)
  y = x * Reshape(w, Shape(w))   ["batch", 3]   (Shape(w) folds away at
                                                 optimisation levels >= basic)
  z = s + s                      scalar
  qq = Identity(q)               rank unknown
  seq = SequenceConstruct(x)     seq(tensor(float))
  has = OptionalHasElement(o)    bool scalar
Usage: gen_api_model.py DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    w = numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w")
    nodes = [
        helper.make_node("Shape", ["w"], ["wsh"]),
        helper.make_node("Reshape", ["w", "wsh"], ["wr"]),
        helper.make_node("Mul", ["x", "wr"], ["y"]),
        helper.make_node("Add", ["s", "s"], ["z"]),
        helper.make_node("Identity", ["q"], ["qq"]),
        helper.make_node("SequenceConstruct", ["x"], ["seq"]),
        helper.make_node("OptionalHasElement", ["o"], ["has"]),
    ]
    opt = helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, ["k", 2]))
    graph = helper.make_graph(
        nodes, "api_graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("q", TensorProto.FLOAT, None),
         helper.make_value_info("o", opt)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("qq", TensorProto.FLOAT, None),
         helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("has", TensorProto.BOOL, [])],
        [w], doc_string="graph description")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)],
                              producer_name="api-test", producer_version="1.2",
                              domain="org.ortmk.test", model_version=7,
                              doc_string="model description")
    model.ir_version = 8
    helper.set_model_props(model, {"author": "ortmk tests", "license": "MIT"})
    onnx.save_model(model, os.path.join(out, "api.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="api.bin", size_threshold=0)


if __name__ == "__main__":
    main()
