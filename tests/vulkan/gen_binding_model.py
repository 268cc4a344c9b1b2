#!/usr/bin/python3
"""Writes the model test_vk_binding runs: outputs whose shape depends on
data, so that binding them to the Vulkan device makes the provider allocate
them (TensorRef.buffer_id + dynamic).

    x float [n, m], s int64 [2]
      v = Reshape(x, s)           a view of x on the device
      y = Relu(Reshape(x, s))     computed into the output's buffer
    outputs y, v: float [a, b], known only once s is read

usage: gen_binding_model.py OUT.onnx
"""
import os
import sys

import onnx
from onnx import helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tools", "models"))
import common as C  # noqa: E402


def main():
    nodes = [
        helper.make_node("Reshape", ["x", "s"], ["v"], name="view"),
        helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
        helper.make_node("Relu", ["r"], ["y"], name="relu"),
    ]
    model = C.make_model(
        nodes,
        [C.value_info("x", C.FLOAT, ["n", "m"]), C.value_info("s", C.INT64, [2])],
        [C.value_info("y", C.FLOAT, ["a", "b"]), C.value_info("v", C.FLOAT, ["a", "b"])],
        [], "binding", "test_vk_binding: data-dependent output shapes")
    onnx.checker.check_model(model)
    onnx.save(model, sys.argv[1])


if __name__ == "__main__":
    main()
