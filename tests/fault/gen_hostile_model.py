#!/usr/bin/python3
"""The model ort-ep-hostile serves (tests/fault/hostile_ep.c): one NonZero
of a float[4] input, so its output "nz" (int64, shape [1, ?]) is dynamic
and the provider reports it in RESULT.  Usage: gen_hostile_model.py OUT"""
import sys

import onnx
from onnx import TensorProto, helper

g = helper.make_graph(
    [helper.make_node("NonZero", ["x"], ["nz"], name="nonzero")], "hostile",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
    [helper.make_tensor_value_info("nz", TensorProto.INT64, None)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="ortmk-tests")
m.ir_version = 8
onnx.save(m, sys.argv[1])
