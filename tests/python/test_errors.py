"""Errors carry ortmk's status and message, as exception classes a Python
caller can catch by kind."""
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortmk
from helpers import matmul_model, model, save, vi


@pytest.fixture
def add_session(tmp_path):
    m = model([helper.make_node("Add", ["a", "b"], ["y"])],
              [vi("a", TensorProto.FLOAT, [2]), vi("b", TensorProto.FLOAT, [2])],
              [vi("y", TensorProto.FLOAT, [2])])
    return ortmk.InferenceSession(save(m, tmp_path))


def test_hierarchy():
    assert issubclass(ortmk.OrtmkError, RuntimeError)
    assert issubclass(ortmk.InvalidArgument, ValueError)
    assert issubclass(ortmk.InvalidInput, ValueError)
    assert issubclass(ortmk.NoMemory, MemoryError)
    assert issubclass(ortmk.IOFailure, OSError)
    assert ortmk.NotImplemented_ is ortmk.NotImplementedByProviders
    names = ["InvalidArgument", "ModelError", "NotImplementedByProviders", "InvalidInput",
             "ProviderDied", "ProviderError", "ProtocolError", "Timeout", "NoMemory",
             "IOFailure", "InternalError", "Unavailable"]
    for status, name in enumerate(names, 1):
        cls = getattr(ortmk, name)
        assert issubclass(cls, ortmk.OrtmkError)
        assert cls.status == status
        assert cls.status_name == ortmk._ortmk.status_name(status) and cls.status_name


def test_bad_input_name(add_session):
    x = np.ones(2, np.float32)
    with pytest.raises((ortmk.InvalidInput, ortmk.InvalidArgument), match="nosuch") as e:
        add_session.run(None, {"a": x, "b": x, "nosuch": x})
    assert e.value.status in (1, 4) and e.value.status_name


def test_missing_input(add_session):
    with pytest.raises((ortmk.InvalidInput, ortmk.InvalidArgument), match="'?b'?"):
        add_session.run(None, {"a": np.ones(2, np.float32)})


def test_wrong_dtype(add_session):
    with pytest.raises(ortmk.InvalidArgument, match="'a'.*double.*float"):
        add_session.run(None, {"a": np.ones(2), "b": np.ones(2, np.float32)})


def test_wrong_shape(add_session):
    x = np.ones(2, np.float32)
    with pytest.raises(ortmk.InvalidInput, match="a"):
        add_session.run(None, {"a": np.ones(3, np.float32), "b": x})


def test_bad_output_name(add_session):
    x = np.ones(2, np.float32)
    with pytest.raises((ortmk.InvalidInput, ortmk.InvalidArgument), match="nosuch"):
        add_session.run(["nosuch"], {"a": x, "b": x})


def test_unsupported_numpy_dtype(add_session):
    with pytest.raises(ortmk.InvalidArgument):
        add_session.run(None, {"a": np.ones(2, np.complex64), "b": np.ones(2, np.float32)})


def test_missing_file(tmp_path):
    with pytest.raises(ortmk.IOFailure) as e:
        ortmk.InferenceSession(str(tmp_path / "missing.onnx"))
    assert "missing.onnx" in str(e.value)
    assert isinstance(e.value, OSError) and e.value.status == 10


def test_malformed_model():
    with pytest.raises(ortmk.ModelError):
        ortmk.InferenceSession(b"this is not a model")


def test_unknown_option(tmp_path):
    o = ortmk.SessionOptions()
    o.add_session_config_entry("no_such_option", "1")
    with pytest.raises(ortmk.InvalidArgument, match="no_such_option"):
        ortmk.InferenceSession(save(matmul_model(4)[0], tmp_path), o)
    with pytest.raises(AttributeError):
        o.intra_op_threads = 2          # a typo is caught, as ONNX Runtime does


def chain_model(layers=40, n=256):
    """x -> (MatMul, Tanh) x layers: many short nodes, ~10 ms a run."""
    rng = np.random.default_rng(11)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, "w%d" % i))
        nodes += [helper.make_node("MatMul", [prev, "w%d" % i], ["m%d" % i]),
                  helper.make_node("Tanh", ["m%d" % i], ["t%d" % i])]
        prev = "t%d" % i
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    return model(nodes, [vi("x", TensorProto.FLOAT, [n, n])], [vi("y", TensorProto.FLOAT, [n, n])],
                 inits)


def test_terminate(tmp_path):
    s = ortmk.InferenceSession(save(chain_model(), tmp_path))
    x = np.random.default_rng(2).standard_normal((256, 256)).astype(np.float32)
    ref = s.run(None, {"x": x})[0]
    r = ortmk.RunOptions()
    r.run_tag = "pytest-terminate"
    r.terminate = True
    with pytest.raises(ortmk.Cancelled):
        s.run(None, {"x": x}, r)
    r.terminate = False
    np.testing.assert_array_equal(s.run(None, {"x": x}, r)[0], ref)
    full = None
    for _ in range(3):   # the shortest of three: one slowed by a busy machine would cancel too late
        t0 = time.perf_counter()
        s.run(None, {"x": x}, r)
        full = min(full or 1e9, time.perf_counter() - t0)
    pid = s._provider_pids()

    def stop():
        time.sleep(full / 4)
        r.terminate = True

    th = threading.Thread(target=stop)
    th.start()
    with pytest.raises(ortmk.Cancelled, match="before node"):
        s.run(None, {"x": x}, r)
    th.join()
    r.terminate = False
    assert s._provider_pids() == pid      # the provider stayed up
    np.testing.assert_array_equal(s.run(None, {"x": x}, r)[0], ref)


def run_child(code, env):
    """code in a fresh interpreter (a fresh environment: provider variables
    apply to the providers it starts); env: variables to set (None: unset)."""
    full = dict(os.environ)
    full.update(env)
    full = {k: v for k, v in full.items() if v is not None}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                          capture_output=True, text=True, timeout=120)


def test_provider_died(tmp_path):
    path = save(matmul_model(64)[0], tmp_path)
    p = run_child("""
        import numpy as np, ortmk
        s = ortmk.InferenceSession(%r)
        x = np.ones((64, 64), np.float32)
        s.run(None, {"x": x})
        try:
            s.run(None, {"x": x})           # the provider crashes in this one
        except ortmk.ProviderDied as e:
            print("died", e.status, e.status_name, "|", e)
        y, = s.run(None, {"x": x})      # a new provider process: its first run
        print("again", y.shape)
    """ % path, {"ORTMK_EP_FAULT": "cpu/crash-after:run:2", "ORTMK_LOG": "error"})
    assert p.returncode == 0, p.stderr
    assert "died 5 PROVIDER_DIED" in p.stdout
    assert "again (64, 64)" in p.stdout


def test_timeout(tmp_path):
    path = save(matmul_model(64)[0], tmp_path)
    p = run_child("""
        import numpy as np, ortmk
        o = ortmk.SessionOptions()
        o.run_timeout_ms = 300
        s = ortmk.InferenceSession(%r, o)
        try:
            s.run(None, {"x": np.ones((64, 64), np.float32)})
        except ortmk.Timeout as e:
            print("timeout", e.status, isinstance(e, TimeoutError))
    """ % path, {"ORTMK_EP_FAULT": "cpu/hang-after:run:1", "ORTMK_LOG": "error"})
    assert p.returncode == 0, p.stderr
    assert "timeout 8 True" in p.stdout


def test_strict_placement(tmp_path):
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is present: cuda can run here")
    o = ortmk.SessionOptions()
    o.strict_placement = True
    with pytest.raises(ortmk.Unavailable, match="cuda"):
        ortmk.InferenceSession(save(matmul_model(4)[0], tmp_path), o,
                               providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
