"""ai.onnx.ml ZipMap through the Python interface: its output, a sequence
of maps, comes back as a list of dicts (int or str keys, float values) the
way onnxruntime's Python API gives it.  The reference is ONNX Runtime's
probabilities for the same classifier without ZipMap (onnxruntime-node
returns no maps), and the NodeArg type is onnxruntime's."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ortmk
from helpers import model, ort_run, save, vi

def seq_of_maps(key):
    """seq(map(key, tensor(float))) (older onnx.helper has no
    make_map_type_proto)."""
    m = onnx.TypeProto()
    m.map_type.key_type = key
    m.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    return helper.make_sequence_type_proto(m)


COEF = [[0.5, -1.0], [-0.25, 0.75], [1.5, 0.1]]
INTER = [0.1, -0.2, 0.05]


def classifier(labels, zipmap):
    """LinearClassifier (softmax) over 2 features with 3 classes, then
    ZipMap on the probabilities when zipmap (skl2onnx's layout)."""
    key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_ints"
    nodes = [helper.make_node("LinearClassifier", ["x"], ["label", "probabilities"],
                              domain="ai.onnx.ml", coefficients=sum(COEF, []),
                              intercepts=INTER, post_transform="SOFTMAX", **{key: labels})]
    ltype = TensorProto.STRING if key == "classlabels_strings" else TensorProto.INT64
    # Without ZipMap only the probabilities: the reference (helpers.ort_run)
    # reads numeric tensors only.
    outs = [vi("label", ltype, [None])] if zipmap else []
    if zipmap:
        zkey = "classlabels_strings" if ltype == TensorProto.STRING else "classlabels_int64s"
        nodes.append(helper.make_node("ZipMap", ["probabilities"], ["output_probability"],
                                      domain="ai.onnx.ml", **{zkey: labels}))
        kt = TensorProto.STRING if ltype == TensorProto.STRING else TensorProto.INT64
        outs.append(helper.make_value_info("output_probability", seq_of_maps(kt)))
    else:
        outs.append(vi("probabilities", TensorProto.FLOAT, [None, 3]))
    m = model(nodes, [vi("x", TensorProto.FLOAT, [None, 2])], outs, opset=17)
    m.opset_import.append(helper.make_opsetid("ai.onnx.ml", 1))
    return m


@pytest.mark.parametrize("labels", [[3, 7, -11], ["cat", "dog", "é"]])
def test_zipmap_list_of_dicts(tmp_path, labels):
    x = np.random.default_rng(3).normal(size=(6, 2)).astype(np.float32)
    s = ortmk.InferenceSession(save(classifier(labels, True), tmp_path, "z.onnx"))
    kt = "string" if isinstance(labels[0], str) else "int64"
    assert s.get_outputs()[1].type == "seq(map(%s,tensor(float)))" % kt
    label, maps = s.run(None, {"x": x})
    assert isinstance(maps, list) and len(maps) == 6
    ref = ort_run(save(classifier(labels, False), tmp_path, "p.onnx"), {"x": x})
    for i, d in enumerate(maps):
        assert isinstance(d, dict) and list(d) == labels
        assert all(type(v) is float for v in d.values())
        if ref is not None:
            np.testing.assert_allclose(list(d.values()), ref["probabilities"][i],
                                       rtol=1e-5, atol=1e-6)
        # the label is the class of the largest probability
        assert label[i] == max(d, key=d.get)
    # one row, and no rows: an empty list
    assert len(s.run(["output_probability"], {"x": x[:1]})[0]) == 1
    assert s.run(["output_probability"], {"x": x[:0]})[0] == []


def test_zipmap_wrong_width(tmp_path):
    m = model([helper.make_node("ZipMap", ["x"], ["y"], domain="ai.onnx.ml",
                                classlabels_int64s=[1, 2])],
              [vi("x", TensorProto.FLOAT, [None, None])],
              [helper.make_value_info("y", seq_of_maps(TensorProto.INT64))])
    m.opset_import.append(helper.make_opsetid("ai.onnx.ml", 1))
    s = ortmk.InferenceSession(save(m, tmp_path))
    with pytest.raises(Exception, match="3 columns for 2 labels"):
        s.run(None, {"x": np.zeros((2, 3), np.float32)})
