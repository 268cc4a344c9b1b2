"""SessionOptions and RunOptions: ONNX Runtime's attributes mapped on
ortmk's session options, ortmk's own options passed through, the log
severity of the process-wide environment."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import ortmk
from helpers import matmul_model, model, save, vi
from test_errors import run_child


def relu_conv_model():
    w = np.random.default_rng(2).standard_normal((4, 3, 3, 3)).astype(np.float32)
    m = model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
               helper.make_node("Relu", ["c"], ["y"])],
              [vi("x", TensorProto.FLOAT, [1, 3, 8, 8])], [vi("y", TensorProto.FLOAT, None)],
              [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())])
    return m


def test_entries():
    o = ortmk.SessionOptions()
    o.intra_op_num_threads = 2
    o.graph_optimization_level = ortmk.GraphOptimizationLevel.ORT_ENABLE_BASIC
    o.retry = True
    o.run_timeout_ms = 5000
    o.add_session_config_entry("crash_loop_n", 3)
    e = dict(o.entries())
    assert e["threads"] == "2" and e["graph_optimization_level"] == "basic"
    assert e["retry"] == "1" and e["run_timeout_ms"] == "5000" and e["crash_loop_n"] == "3"
    assert o.get_session_config_entry("crash_loop_n") == "3"
    with pytest.raises(ortmk.InvalidArgument):
        o.graph_optimization_level = 5
    with pytest.raises(ortmk.InvalidArgument):
        o.log_severity_level = 7
    with pytest.warns(UserWarning, match="session.intra_op.allow_spinning"):
        o.add_session_config_entry("session.intra_op.allow_spinning", "0")
    assert "session.intra_op.allow_spinning" not in dict(o.entries())


@pytest.mark.parametrize("level", list(ortmk.GraphOptimizationLevel))
def test_optimization_levels_same_result(tmp_path, level):
    path = save(relu_conv_model(), tmp_path)
    x = np.random.default_rng(4).standard_normal((1, 3, 8, 8)).astype(np.float32)
    ref, = ortmk.InferenceSession(path).run(None, {"x": x})
    o = ortmk.SessionOptions()
    o.graph_optimization_level = level
    o.intra_op_num_threads = 1
    y, = ortmk.InferenceSession(path, o).run(None, {"x": x})
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    assert (y >= 0).all()


def test_run_options(tmp_path):
    s = ortmk.InferenceSession(save(matmul_model(8)[0], tmp_path))
    r = ortmk.RunOptions()
    r.run_tag = "tagged"
    r.log_severity_level = 3
    y, = s.run(None, {"x": np.eye(8, dtype=np.float32)}, r)
    assert y.shape == (8, 8)
    with pytest.raises(ortmk.InvalidArgument):
        s.run(None, {"x": np.eye(8, dtype=np.float32)}, run_options="fast")


def test_retry_passes_through(tmp_path):
    path = save(matmul_model(32)[0], tmp_path)
    p = run_child("""
        import numpy as np, ortmk
        o = ortmk.SessionOptions()
        o.add_session_config_entry("retry", "1")
        s = ortmk.InferenceSession(%r, o)
        x = np.ones((32, 32), np.float32)
        for i in range(3):
            s.run(None, {"x": x})               # the second crashes: retried
        print("ok")
    """ % path, {"ORTMK_EP_FAULT": "cpu/crash-after:run:2", "ORTMK_LOG": None})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok"


WARN = """
    import ortmk
    %s
    ortmk.InferenceSession(%r, %s providers=["vulkan", "cuda", "cpu"])
"""


@pytest.mark.parametrize("how,quiet", [("", False),
                                       ("ortmk.set_default_logger_severity(3)", True)])
def test_log_severity(tmp_path, how, quiet):
    """A provider that cannot run here is a warning at severity 2 (the
    default), silent at 3."""
    import os
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is present: cuda can run here")
    path = save(matmul_model(4)[0], tmp_path)
    p = run_child(WARN % (how, path, ""), {"ORTMK_LOG": None})
    assert p.returncode == 0, p.stderr
    if quiet:
        assert "unavailable" not in p.stderr, p.stderr
    else:
        assert "unavailable" in p.stderr


def test_session_log_severity(tmp_path):
    """log_severity_level of the first session's options: the environment's."""
    import os
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is present: cuda can run here")
    path = save(matmul_model(4)[0], tmp_path)
    p = run_child(WARN % ("o = ortmk.SessionOptions(); o.log_severity_level = 3", path, "o,"),
                  {"ORTMK_LOG": None})
    assert p.returncode == 0, p.stderr
    assert "unavailable" not in p.stderr, p.stderr
