"""IOBinding over ortmk_io_binding: host inputs and outputs, outputs bound
into OrtValues, a loop whose output is the next step's input, and device
values (emulated device memory, so it runs without a GPU)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto, helper

import ortmk
from helpers import model, save, vi


@pytest.fixture
def step_model(tmp_path):
    """y = x * 2 + 1 and n = the sum of x, x of any length."""
    m = model([helper.make_node("Mul", ["x", "two"], ["m"]),
               helper.make_node("Add", ["m", "one"], ["y"]),
               helper.make_node("ReduceSum", ["x"], ["n"], keepdims=0)],
              [vi("x", TensorProto.FLOAT, ["len"])],
              [vi("y", TensorProto.FLOAT, ["len"]), vi("n", TensorProto.FLOAT, [])],
              [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
               helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    return save(m, tmp_path)


def test_cpu_binding(step_model):
    s = ortmk.InferenceSession(step_model)
    x = np.arange(5, dtype=np.float32)
    b = s.io_binding()
    b.bind_cpu_input("x", x)
    b.bind_output("y")
    b.bind_output("n", "cpu")
    s.run_with_iobinding(b)
    y, n = b.copy_outputs_to_cpu()
    np.testing.assert_array_equal(y, x * 2 + 1)
    assert n == x.sum()
    assert b.get_outputs_names() == ["y", "n"]
    ov = b.get_outputs()
    assert ov[0].device_name() == "cpu" and ov[0].shape() == [5]
    assert ov[0].data_type() == "tensor(float)"
    np.testing.assert_array_equal(ov[0].numpy(), y)
    # the same as run()
    np.testing.assert_array_equal(s.run(["y"], {"x": x})[0], y)


def test_loop_output_to_input(step_model):
    s = ortmk.InferenceSession(step_model)
    b = s.io_binding()
    b.bind_cpu_input("x", np.zeros(3, np.float32))
    b.bind_output("y")
    ref = np.zeros(3, np.float32)
    for _ in range(5):
        s.run_with_iobinding(b)
        b.bind_ortvalue_input("x", b.get_outputs()[0])
        ref = ref * 2 + 1
    np.testing.assert_array_equal(b.get_outputs()[0].numpy(), ref)


def test_bind_ortvalue_output(step_model):
    s = ortmk.InferenceSession(step_model)
    b = s.io_binding()
    out = ortmk.OrtValue.ortvalue_from_shape_and_type([4], np.float32)
    b.bind_ortvalue_input("x", ortmk.OrtValue.ortvalue_from_numpy(np.ones(4, np.float32)))
    b.bind_ortvalue_output("y", out)
    s.run_with_iobinding(b)
    np.testing.assert_array_equal(out.numpy(), [3, 3, 3, 3])
    assert b.get_outputs()[0].numpy().tolist() == [3, 3, 3, 3]


def test_clear_and_errors(step_model):
    s = ortmk.InferenceSession(step_model)
    b = s.io_binding()
    b.bind_cpu_input("x", np.ones(2, np.float32))
    b.bind_output("y")
    b.clear_binding_inputs()
    with pytest.raises(ortmk.OrtmkError, match="x"):
        s.run_with_iobinding(b)
    b.bind_cpu_input("x", np.ones(2, np.float32))
    b.clear_binding_outputs()
    b.bind_output("n")
    s.run_with_iobinding(b)
    assert b.copy_outputs_to_cpu() == [2.0]
    with pytest.raises(NotImplementedError):
        b.bind_input("x", "cpu", 0, np.float32, [2], 12345)
    with pytest.raises(NotImplementedError):
        b.bind_output("y", "cpu", 0, np.float32, [2], 12345)
    with pytest.raises(ortmk.InvalidArgument):
        b.bind_output("y", "tpu")


def test_device_values_emulated(step_model):
    """Outputs kept in a provider's memory (emulated in ort-ep-cpu's heap,
    ORTMK_EP_EMULATE_DEVICE) and copied back by copy_outputs_to_cpu."""
    code = textwrap.dedent("""
        import numpy as np, ortmk
        s = ortmk.InferenceSession(%r)
        b = s.io_binding()
        # "cpu" as a provider with device memory: the _ortmk layer
        x = ortmk.OrtValue(ortmk._ortmk.Value(np.arange(4, dtype=np.float32), 0, "cpu"))
        assert x.device_name() == "cpu" and x._v.location == "cpu", x._v.location
        b.bind_ortvalue_input("x", x)
        b._b.bind_output("y", "cpu")
        s.run_with_iobinding(b)
        y = b.get_outputs()[0]
        print(y._v.location, b.copy_outputs_to_cpu()[0].tolist(), y.numpy().tolist())
    """ % step_model)
    env = dict(os.environ, ORTMK_EP_EMULATE_DEVICE="cpu", ORTMK_LOG="error")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "cpu [1.0, 3.0, 5.0, 7.0] [1.0, 3.0, 5.0, 7.0]"
