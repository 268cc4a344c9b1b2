"""Every element type through the Python interface: an Identity graph gives
back what went in (numpy is the reference), a Cast graph gives numpy's
astype, strings go in as str, bytes or object arrays and come back as
object arrays of str."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import ortmk
from helpers import model, save, vi

TYPES = [(np.float32, TensorProto.FLOAT), (np.float64, TensorProto.DOUBLE),
         (np.float16, TensorProto.FLOAT16), (np.int8, TensorProto.INT8),
         (np.int16, TensorProto.INT16), (np.int32, TensorProto.INT32),
         (np.int64, TensorProto.INT64), (np.uint8, TensorProto.UINT8),
         (np.uint16, TensorProto.UINT16), (np.uint32, TensorProto.UINT32),
         (np.uint64, TensorProto.UINT64), (np.bool_, TensorProto.BOOL)]


def sample(dtype, shape=(2, 3, 4)):
    rng = np.random.default_rng(11)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype) * 100
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype,onnx_type", TYPES, ids=[t[0].__name__ for t in TYPES])
def test_identity_round_trip(tmp_path, dtype, onnx_type):
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", onnx_type, ["a", 3, 4])],
              [vi("y", onnx_type, ["a", 3, 4])])
    s = ortmk.InferenceSession(save(m, tmp_path))
    assert s.get_inputs()[0].type == "tensor(%s)" % {
        np.float32: "float", np.float64: "double", np.bool_: "bool"}.get(dtype, dtype.__name__)
    x = sample(dtype)
    y, = s.run(None, {"x": x})
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, x)
    # scalars and empty tensors too
    y, = s.run(None, {"x": x[:0]})
    assert y.shape == (0, 3, 4) and y.dtype == x.dtype


@pytest.mark.parametrize("dtype,onnx_type", TYPES, ids=[t[0].__name__ for t in TYPES])
def test_cast_from_float(tmp_path, dtype, onnx_type):
    m = model([helper.make_node("Cast", ["x"], ["y"], to=onnx_type)],
              [vi("x", TensorProto.FLOAT, [6])], [vi("y", onnx_type, [6])])
    s = ortmk.InferenceSession(save(m, tmp_path))
    x = np.array([0, 1.5, 2.25, 100, 3.75, 7], np.float32)    # in every type's range
    y, = s.run(None, {"x": x})
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y, x.astype(dtype))


def test_scalar_input(tmp_path):
    m = model([helper.make_node("Add", ["x", "x"], ["y"])], [vi("x", TensorProto.DOUBLE, [])],
              [vi("y", TensorProto.DOUBLE, [])])
    s = ortmk.InferenceSession(save(m, tmp_path))
    for x in (1.25, np.float64(1.25), np.array(1.25)):
        y, = s.run(None, {"x": x})
        assert y.shape == () and y.dtype == np.float64 and y == 2.5


def test_strings(tmp_path):
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", TensorProto.STRING, [None])],
              [vi("y", TensorProto.STRING, [None])])
    s = ortmk.InferenceSession(save(m, tmp_path))
    assert s.get_inputs()[0].type == "tensor(string)"
    words = ["a", "bé", "", "long " * 50]
    for x in (np.array(words, dtype=object), np.array(words), words):
        y, = s.run(None, {"x": x})
        assert y.dtype == object and y.tolist() == words
    y, = s.run(None, {"x": np.array([b"raw", b"bytes"])})
    assert y.tolist() == ["raw", "bytes"]
    with pytest.raises(TypeError):
        s.run(None, {"x": np.array([1, "a"], dtype=object)})


def test_string_ops(tmp_path):
    m = model([helper.make_node("Cast", ["x"], ["s"], to=TensorProto.STRING),
               helper.make_node("Cast", ["s"], ["y"], to=TensorProto.INT64)],
              [vi("x", TensorProto.INT64, [3])],
              [vi("s", TensorProto.STRING, [3]), vi("y", TensorProto.INT64, [3])])
    s = ortmk.InferenceSession(save(m, tmp_path))
    strs, y = s.run(None, {"x": np.array([1, -20, 300])})
    assert strs.tolist() == ["1", "-20", "300"]
    np.testing.assert_array_equal(y, [1, -20, 300])


def test_bfloat16_output_as_bits(tmp_path):
    m = model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16)],
              [vi("x", TensorProto.FLOAT, [3])], [vi("y", TensorProto.BFLOAT16, [3])])
    s = ortmk.InferenceSession(save(m, tmp_path))
    assert s.get_outputs()[0].type == "tensor(bfloat16)"
    y, = s.run(None, {"x": np.array([1.0, -2.0, 0.5], np.float32)})
    # numpy has no bfloat16: the bits, as uint16 (bfloat16 is float32's top half)
    assert y.dtype == np.uint16
    np.testing.assert_array_equal(y, [0x3F80, 0xC000, 0x3F00])
