"""InferenceSession against ONNX Runtime and numpy: the example CNN, the
README's C example ported, bytes models, metadata, provider names, and
outputs that own their memory."""
import gc

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ortmk
from helpers import model, ort_run, save, vi


def test_version():
    assert ortmk.__version__ == ortmk.get_version() == "0.2.0"
    assert ortmk._ortmk.api_version() >= ortmk._ortmk.API_VERSION


def test_available_providers():
    avail = ortmk.get_available_providers()
    assert "CPUExecutionProvider" in avail
    assert set(avail) <= set(ortmk.get_all_providers())
    assert avail[-1] == "CPUExecutionProvider"          # priority order, as ONNX Runtime
    assert ortmk.get_device() == "CPU"


def test_installed_package_is_used():
    # run.sh runs these tests against the installed package, whose
    # providers are in ortmk/_providers beside the extension module.
    import os
    if os.environ.get("ORTMK_PY_INSTALLED") != "1":
        pytest.skip("not run by tests/python/run.sh")
    here = os.path.dirname(ortmk._ortmk.__file__)
    assert os.path.isfile(os.path.join(here, "_providers", "ort-ep-cpu"))
    assert "ORTMK_EP_DIR" not in os.environ


def test_example_cnn(example_model):
    path, image, probs = example_model
    s = ortmk.InferenceSession(path, providers=["CPUExecutionProvider"])
    batch = np.random.default_rng(3).standard_normal((4, 3, 32, 32)).astype(np.float32)
    y, = s.run(["probs"], {"image": batch})
    assert y.dtype == np.float32 and y.shape == (4, 10)
    ref = ort_run(path, {"image": batch})
    if ref is None:
        pytest.skip("onnxruntime-node not installed")
    np.testing.assert_allclose(y, ref["probs"], rtol=1e-5, atol=1e-6)
    # and the generator's own numpy reference for its seed-1 image
    y1, = s.run(None, {"image": image})
    np.testing.assert_allclose(y1, probs, rtol=1e-4, atol=1e-6)


def test_hello_port(example_model):
    """examples/hello.c in Python: the image (i % 7) / 7, p[0] printed."""
    path = example_model[0]
    s = ortmk.InferenceSession(path)
    x = ((np.arange(3 * 32 * 32) % 7) / 7.0).astype(np.float32).reshape(1, 3, 32, 32)
    y = s.run(["probs"], {"image": x})[0]
    print("p[0] = %f" % y[0, 0])
    ref = ort_run(path, {"image": x})
    if ref is None:
        pytest.skip("onnxruntime-node not installed")
    np.testing.assert_allclose(y, ref["probs"], rtol=1e-5, atol=1e-6)


def test_bytes_model(example_model):
    path, image, probs = example_model
    with open(path, "rb") as f:
        data = f.read()
    for blob in (data, bytearray(data), memoryview(data)):
        s = ortmk.InferenceSession(blob)
        np.testing.assert_allclose(s.run(None, {"image": image})[0], probs, rtol=1e-4, atol=1e-6)


def test_pathlike(example_model, tmp_path):
    import pathlib
    s = ortmk.InferenceSession(pathlib.Path(example_model[0]))
    assert s.get_inputs()[0].name == "image"


def test_noncontiguous_and_list_inputs(tmp_path):
    m = model([helper.make_node("Add", ["a", "b"], ["y"])],
              [vi("a", TensorProto.FLOAT, [2, 3]), vi("b", TensorProto.FLOAT, [2, 3])],
              [vi("y", TensorProto.FLOAT, [2, 3])])
    s = ortmk.InferenceSession(save(m, tmp_path))
    a = np.arange(18, dtype=np.float32).reshape(3, 6)[:2, ::2]
    assert not a.flags.c_contiguous
    b = [[1, 2, 3], [4, 5, 6]]                                          # a list
    y, = s.run(None, {"a": a, "b": b})
    np.testing.assert_array_equal(y, a + np.array(b, np.float32))
    swapped = np.ones((2, 3), dtype=">f4")                              # big-endian
    y, = s.run(None, {"a": swapped, "b": np.zeros((2, 3), np.float32)})
    np.testing.assert_array_equal(y, np.ones((2, 3), np.float32))


def test_outputs_own_their_memory(example_model):
    path, image, probs = example_model
    s = ortmk.InferenceSession(path)
    outs = [s.run(None, {"image": image})[0] for _ in range(3)]
    view = outs[0][:, 2:5]
    del s
    gc.collect()
    for y in outs:
        np.testing.assert_allclose(y, probs, rtol=1e-4, atol=1e-6)
    assert view.base is not None
    first = outs.pop(0)
    del first
    gc.collect()
    np.testing.assert_allclose(view, probs[:, 2:5], rtol=1e-4, atol=1e-6)
    view[0, 0] = 7.0                     # the array is the caller's to write
    assert view[0, 0] == 7.0


def test_metadata(tmp_path):
    m = model([helper.make_node("Identity", ["x"], ["y"]),
               helper.make_node("Identity", ["s"], ["t"]),
               helper.make_node("Identity", ["u"], ["v"])],
              [vi("x", TensorProto.FLOAT, ["N", None, 3]), vi("s", TensorProto.INT64, []),
               vi("u", TensorProto.DOUBLE, None)],
              [vi("y", TensorProto.FLOAT, ["N", None, 3]), vi("t", TensorProto.INT64, []),
               vi("v", TensorProto.DOUBLE, None)],
              producer_name="ortmk-test", producer_version="1.2", domain="ai.test",
              doc_string="a model", model_version=7, graph_name="meta_graph",
              graph_doc="the graph")
    helper.set_model_props(m, {"author": "me", "license": "MIT"})
    s = ortmk.InferenceSession(save(m, tmp_path))
    ins = s.get_inputs()
    assert [i.name for i in ins] == ["x", "s", "u"]
    assert ins[0].shape == ["N", None, 3] and ins[0].type == "tensor(float)"
    assert ins[1].shape == [] and ins[1].type == "tensor(int64)"
    assert ins[2].shape == [] and ins[2].type == "tensor(double)"
    assert [o.name for o in s.get_outputs()] == ["y", "t", "v"]
    meta = s.get_modelmeta()
    assert meta.producer_name == "ortmk-test"
    assert meta.graph_name == "meta_graph"
    assert meta.domain == "ai.test"
    assert meta.description == "a model"
    assert meta.graph_description == "the graph"
    assert meta.version == 7
    assert meta.custom_metadata_map == {"author": "me", "license": "MIT"}


def test_sequence_and_optional_types(tmp_path):
    seq = helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)
    opt = helper.make_value_info("opt", helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))
    m = model([helper.make_node("SequenceConstruct", ["a", "b"], ["seq"]),
               helper.make_node("OptionalHasElement", ["opt"], ["has"])],
              [vi("a", TensorProto.FLOAT, [2]), vi("b", TensorProto.FLOAT, [3]), opt],
              [seq, vi("has", TensorProto.BOOL, [])], opset=18)
    s = ortmk.InferenceSession(save(m, tmp_path))
    assert s.get_inputs()[2].type == "optional(tensor(float))"
    assert s.get_outputs()[0].type == "seq(tensor(float))"
    a, b = np.array([1, 2], np.float32), np.array([3, 4, 5], np.float32)
    out, has = s.run(None, {"a": a, "b": b, "opt": None})
    assert isinstance(out, list) and len(out) == 2
    np.testing.assert_array_equal(out[0], a)
    np.testing.assert_array_equal(out[1], b)
    assert not bool(has)
    _, has = s.run(None, {"a": a, "b": b, "opt": a})
    assert bool(has)


def test_sequence_input(tmp_path):
    seq = helper.make_tensor_sequence_value_info("seq", TensorProto.INT64, None)
    m = model([helper.make_node("SequenceLength", ["seq"], ["n"]),
               helper.make_node("ConcatFromSequence", ["seq"], ["cat"], axis=0)],
              [seq], [vi("n", TensorProto.INT64, []), vi("cat", TensorProto.INT64, [None])])
    s = ortmk.InferenceSession(save(m, tmp_path))
    n, cat = s.run(None, {"seq": [np.array([1, 2], np.int64), [3, 4, 5]]})
    assert int(n) == 2
    np.testing.assert_array_equal(cat, [1, 2, 3, 4, 5])
    # an empty list: a sequence of the declared element type
    m = model([helper.make_node("SequenceLength", ["seq"], ["n"])], [seq],
              [vi("n", TensorProto.INT64, [])])
    s = ortmk.InferenceSession(save(m, tmp_path, "len.onnx"))
    assert int(s.run(None, {"seq": []})[0]) == 0


def test_empty_optional_output(tmp_path):
    m = model([helper.make_node("Optional", [], ["o"],
                                type=helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))],
              [], [helper.make_value_info("o", helper.make_optional_type_proto(
                  helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))], opset=18)
    s = ortmk.InferenceSession(save(m, tmp_path))
    assert s.run(None, {}) == [None]


def test_provider_names(example_model):
    path = example_model[0]
    for providers in (["CPUExecutionProvider"], ["cpu"], [("CPUExecutionProvider", {})],
                      [("cpu", {"foo": 1})], None):
        s = ortmk.InferenceSession(path, providers=providers)
        assert s.get_providers() == ["CPUExecutionProvider"]
    s = ortmk.InferenceSession(path, providers=[("CPUExecutionProvider", {"a": 1})])
    assert s.get_provider_options() == {"CPUExecutionProvider": {"a": "1"}}
    with pytest.warns(UserWarning, match="TensorrtExecutionProvider"):
        s = ortmk.InferenceSession(path, providers=["TensorrtExecutionProvider",
                                                    "CPUExecutionProvider"])
    assert s.get_providers()[-1] == "CPUExecutionProvider"
    # a provider with no device here is skipped (cpu is the last fallback)
    s = ortmk.InferenceSession(path, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert s.get_providers()[-1] == "CPUExecutionProvider"
    s.set_providers(["cpu"])
    assert s.get_providers() == ["CPUExecutionProvider"]


def test_exit_cleans_up(example_model, tmp_path):
    """The one environment goes at exit, after the session and the arrays
    still alive then: its private directory is removed, its provider exits."""
    import os
    import time
    from test_errors import run_child
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    p = run_child("""
        import numpy as np, ortmk
        s = ortmk.InferenceSession(%r)
        y, = s.run(None, {"image": np.zeros((1, 3, 32, 32), np.float32)})
        keep = {"y": y[0], "s": s}
        keep["self"] = keep              # a cycle: freed by the last collection
        print(s._provider_pids()["cpu"])
    """ % example_model[0], {"XDG_RUNTIME_DIR": str(xdg)})
    assert p.returncode == 0, p.stderr
    assert os.listdir(str(xdg)) == []
    pid = int(p.stdout.split()[-1])
    for _ in range(100):
        if not os.path.exists("/proc/%d" % pid):
            break
        time.sleep(0.05)
    assert not os.path.exists("/proc/%d" % pid)


def test_bytes_with_external_data(tmp_path):
    import onnx
    from helpers import matmul_model
    m, w = matmul_model(64)
    path = str(tmp_path / "ext.onnx")
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.bin", size_threshold=0)
    with open(path, "rb") as f:
        data = f.read()
    x = np.eye(64, dtype=np.float32)
    s = ortmk.InferenceSession(data, external_data_dir=str(tmp_path))
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], w)
    with pytest.raises(ortmk.OrtmkError, match="external"):
        ortmk.InferenceSession(data)             # no directory: refused
