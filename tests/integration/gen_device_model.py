#!/usr/bin/python3
"""Writes the device/IO-binding test model and its numpy references.

step.onnx, one step of a decode loop:
    y       = Tanh(x @ W + b)                      float[1,8]
    present = Concat(past, Unsqueeze(y, 1), 1)     float[1,n+1,8] (grows)
    pos     = Compress(y, y[0] > 0, axis=1)        float[1,k]  (data-dependent)
Feeding y and present back as x and past gives a loop whose cache tensor
grows every step, and whose `pos` output has a shape nobody can plan.

References (numpy, float32), for STEPS steps from x0 and past0:
    x0.npy past0.npy  y_final.npy present_final.npy pos_final.npy  y_1.npy

small.onnx, y = Tanh(x @ W2 + b2) on float[1,64], every node one any
provider runs: the latency comparison and a loop fed back LOOP times
(small_x0.npy, small_y_loop.npy).
Usage: gen_device_model.py OUT_DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D = 8
STEPS = 5
S = 64
LOOP = 20


def model(w, b):
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["h2"]),
        helper.make_node("Tanh", ["h2"], ["y"]),
        helper.make_node("Unsqueeze", ["y", "ax1"], ["yu"]),
        helper.make_node("Concat", ["past", "yu"], ["present"], axis=1),
        helper.make_node("Reshape", ["y", "flat"], ["yf"]),
        helper.make_node("Greater", ["yf", "zero"], ["cond"]),
        helper.make_node("Compress", ["y", "cond"], ["pos"], axis=1),
    ]
    inits = [
        numpy_helper.from_array(w, "W"),
        numpy_helper.from_array(b, "b"),
        numpy_helper.from_array(np.array([1], np.int64), "ax1"),
        numpy_helper.from_array(np.array([D], np.int64), "flat"),
        numpy_helper.from_array(np.array(0, np.float32), "zero"),
    ]
    graph = helper.make_graph(
        nodes, "step",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, D]),
         helper.make_tensor_value_info("past", TensorProto.FLOAT, [1, "n", D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, D]),
         helper.make_tensor_value_info("present", TensorProto.FLOAT, [1, "m", D]),
         helper.make_tensor_value_info("pos", TensorProto.FLOAT, [1, "k"])],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    return m


def small(out, rng):
    w = (rng.standard_normal((S, S)) / np.sqrt(S)).astype(np.float32)
    b = (0.1 * rng.standard_normal(S)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["h2"]),
        helper.make_node("Tanh", ["h2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, S])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "small.onnx"))
    x = rng.standard_normal((1, S)).astype(np.float32)
    np.save(os.path.join(out, "small_x0.npy"), x)
    for _ in range(LOOP):
        x = np.tanh((x @ w + b).astype(np.float32)).astype(np.float32)
    np.save(os.path.join(out, "small_y_loop.npy"), x)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(9)
    w = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
    b = (0.1 * rng.standard_normal(D)).astype(np.float32)
    onnx.save(model(w, b), os.path.join(out, "step.onnx"))
    x = rng.standard_normal((1, D)).astype(np.float32)
    past = rng.standard_normal((1, 2, D)).astype(np.float32)
    np.save(os.path.join(out, "x0.npy"), x)
    np.save(os.path.join(out, "past0.npy"), past)
    for step in range(1, STEPS + 1):
        y = np.tanh((x @ w + b).astype(np.float32)).astype(np.float32)
        present = np.concatenate([past, y[:, None, :]], axis=1)
        pos = y[:, y[0] > 0]
        if step == 1:
            np.save(os.path.join(out, "y_1.npy"), y)
        x, past = y, present
    np.save(os.path.join(out, "y_final.npy"), y)
    np.save(os.path.join(out, "present_final.npy"), present)
    np.save(os.path.join(out, "pos_final.npy"), pos)
    small(out, rng)


if __name__ == "__main__":
    main()
