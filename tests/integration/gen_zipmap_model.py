#!/usr/bin/python3
"""Writes DIR/zipmap_int.onnx and DIR/zipmap_str.onnx for test_zipmap: one
ai.onnx.ml ZipMap over a float x [N, 3], labels [5, -2, 40] and
["a", "", "long label"], output probs: seq(map(int64|string, float));
DIR/zipmap_bad.onnx, whose x [N, 4] does not fit its 3 labels (refused
at load by inference); DIR/zipmap_map_in.onnx, zipmap_int.onnx with an
unused input m: map(int64, tensor(float)) (maps are not fed).
Usage: gen_zipmap_model.py DIR"""
import os
import sys

import onnx
from onnx import TensorProto, helper


def seq_of_maps(key):
    """seq(map(key, tensor(float))), built by hand: older onnx.helper has
    no make_map_type_proto."""
    m = onnx.TypeProto()
    m.map_type.key_type = key
    m.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    return helper.make_sequence_type_proto(m)


def save(path, width, map_input=False, **labels):
    key = TensorProto.STRING if "classlabels_strings" in labels else TensorProto.INT64
    out = helper.make_value_info("probs", seq_of_maps(key))
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", width])]
    if map_input:
        ins.append(helper.make_value_info("m", seq_of_maps(key).sequence_type.elem_type))
    g = helper.make_graph([helper.make_node("ZipMap", ["x"], ["probs"], domain="ai.onnx.ml",
                                            **labels)], "zipmap", ins, [out])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("ai.onnx.ml", 1)])
    m.ir_version = 8
    onnx.save(m, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    save(os.path.join(out, "zipmap_int.onnx"), 3, classlabels_int64s=[5, -2, 40])
    save(os.path.join(out, "zipmap_str.onnx"), 3, classlabels_strings=["a", "", "long label"])
    save(os.path.join(out, "zipmap_bad.onnx"), 4, classlabels_int64s=[5, -2, 40])
    save(os.path.join(out, "zipmap_map_in.onnx"), 3, True, classlabels_int64s=[5, -2, 40])


if __name__ == "__main__":
    main()
