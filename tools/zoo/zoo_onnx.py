"""Zoo graphs written with onnx.helper rather than exported from torch
(torch 1.13 cannot export stft).  Used by zoo_models.py / gen.py.

stft_logmel: a speech front end as opset 17 spells it — HannWindow(400),
STFT (hop 160, onesided), power by ReduceSumSquare over the (re, im) axis,
MelWeightMatrix (80 bins, 16 kHz, 20-7600 Hz), MatMul, Log(x + 1e-6).
signal [1, samples, 1] -> logmel [1, frames, 80].
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _const(name, value, dtype):
    return helper.make_node("Constant", [], [name], name=name,
                            value=numpy_helper.from_array(np.array(value, dtype), name))


def stft_logmel(opset=17):
    if opset < 17:
        raise ValueError("STFT, HannWindow and MelWeightMatrix need opset 17")
    nodes = [
        _const("win_len", 400, np.int64),
        _const("hop", 160, np.int64),
        _const("mel_bins", 80, np.int64),
        _const("sample_rate", 16000, np.int64),
        _const("f_lo", 20.0, np.float32),
        _const("f_hi", 7600.0, np.float32),
        _const("eps", 1e-6, np.float32),
        helper.make_node("HannWindow", ["win_len"], ["window"], name="hann", periodic=1,
                         output_datatype=TensorProto.FLOAT),
        helper.make_node("STFT", ["signal", "hop", "window", "win_len"], ["spec"], name="stft",
                         onesided=1),
        helper.make_node("ReduceSumSquare", ["spec"], ["power"], name="power", axes=[-1],
                         keepdims=0),
        helper.make_node("MelWeightMatrix", ["mel_bins", "win_len", "sample_rate", "f_lo", "f_hi"],
                         ["mel_w"], name="mel", output_datatype=TensorProto.FLOAT),
        helper.make_node("MatMul", ["power", "mel_w"], ["mel_power"], name="mel_matmul"),
        helper.make_node("Add", ["mel_power", "eps"], ["mel_eps"], name="add_eps"),
        helper.make_node("Log", ["mel_eps"], ["logmel"], name="log"),
    ]
    graph = helper.make_graph(
        nodes, "stft_logmel",
        [helper.make_tensor_value_info("signal", TensorProto.FLOAT, [1, "samples", 1])],
        [helper.make_tensor_value_info("logmel", TensorProto.FLOAT, [1, "frames", 80])])
    model = helper.make_model(graph, producer_name="ortmk-zoo",
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
