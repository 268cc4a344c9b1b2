#!/usr/bin/python3
"""Feeds ort-run broken models and inputs and checks that it fails well.

usage: bad_inputs_test.py ORT_RUN WORKDIR

Each case is written under WORKDIR.  A case passes when ort-run
  - exits within 10 s with a non-zero status that is not a signal,
  - writes exactly one line to stderr, starting with "ort-run:",
  - and that line names the culprit: the file for an unparsable model;
    node, op, domain and opset for an unimplemented op; the input name for
    a bad input file; tensor name and path for bad external data.
A control case (a good model) must succeed, so that a runtime failing on
everything cannot pass.  Prints one line per case and 'N passed, M failed';
exit status 1 if any failed.
"""
import os
import re
import signal
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

TIMEOUT = 10.0
IN = "input_tensor_a"   # distinctive names, so a message naming them is no accident
BIAS = "bias_b"
OPSET_FOO = 3


def good_model(bias_external=None):
    """input_tensor_a [2,3] -> Relu -> Add bias_b -> out.  With
    bias_external = (location, offset, length) the bias is external data."""
    nodes = [helper.make_node("Relu", [IN], ["r"], name="relu_node"),
             helper.make_node("Add", ["r", BIAS], ["out"], name="add_node")]
    bias = numpy_helper.from_array(np.array([1, 2, 3], np.float32), BIAS)
    if bias_external:
        bias.ClearField("raw_data")
        bias.data_location = TensorProto.EXTERNAL
        for k, v in zip(("location", "offset", "length"), bias_external):
            e = bias.external_data.add()
            e.key, e.value = k, str(v)
    graph = helper.make_graph(nodes, "bad_inputs", [
        helper.make_tensor_value_info(IN, TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])], [bias])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def foo_model():
    m = good_model()
    m.graph.node.insert(1, helper.make_node("FooBar", ["r"], ["r2"], name="mystery_node",
                                            domain="com.example"))
    m.graph.node[2].input[0] = "r2"
    m.opset_import.append(helper.make_opsetid("com.example", OPSET_FOO))
    return m


def huge_input_model():
    """Relu on an input declared [2^31, 1024] float32: 8 TiB to generate."""
    g = helper.make_graph([helper.make_node("Relu", ["big"], ["out"])], "huge",
                          [helper.make_tensor_value_info("big", TensorProto.FLOAT, [2 ** 31, 1024])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2 ** 31, 1024])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def save(path, model):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def npy(path, array):
    np.save(path, array)
    return path


def make_cases(w):
    """[(name, args, required substrings or regexes, expect_success)]"""
    good = save(os.path.join(w, "good", "model.onnx"), good_model())
    ok_in = "%s=%s" % (IN, npy(os.path.join(w, "ok.npy"), np.ones((2, 3), np.float32)))
    bias = np.array([1, 2, 3], np.float32).tobytes()

    big = good_model()
    big.graph.initializer[0].CopyFrom(
        numpy_helper.from_array(np.arange(3000, dtype=np.float32), BIAS))
    raw = big.SerializeToString()
    trunc = os.path.join(w, "truncated.onnx")
    with open(trunc, "wb") as f:
        f.write(raw[:len(raw) // 2])
    junk = os.path.join(w, "not_onnx.onnx")
    with open(junk, "w") as f:
        f.write("this is not an ONNX model\n" * 20)

    with open(os.path.join(w, "w.bin"), "wb") as f:       # outside ext_escape/
        f.write(bias)
    os.makedirs(os.path.join(w, "ext_offset"), exist_ok=True)
    with open(os.path.join(w, "ext_offset", "short.bin"), "wb") as f:
        f.write(bias)
    abs_bin = os.path.join(os.path.abspath(w), "w.bin")

    corrupt = os.path.join(w, "corrupt.npy")
    with open(corrupt, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00garbage")
    return [
        ("control: good model runs", [good, "--input", ok_in], [], True),
        ("truncated model", [trunc], ["truncated.onnx"], False),
        ("not an ONNX file", [junk], ["not_onnx.onnx"], False),
        ("unimplemented op", [save(os.path.join(w, "foo", "model.onnx"), foo_model())],
         ["mystery_node", "FooBar", "com.example", re.compile(r"(?<!\d)%d(?!\d)" % OPSET_FOO)],
         False),
        ("input of the wrong dtype",
         [good, "--input", "%s=%s" % (IN, npy(os.path.join(w, "f64.npy"),
                                              np.ones((2, 3), np.float64)))], [IN], False),
        ("input of the wrong shape",
         [good, "--input", "%s=%s" % (IN, npy(os.path.join(w, "shape.npy"),
                                              np.ones((3, 2), np.float32)))], [IN], False),
        ("input of the wrong rank",
         [good, "--input", "%s=%s" % (IN, npy(os.path.join(w, "rank.npy"),
                                              np.ones((2, 3, 1), np.float32)))], [IN], False),
        ("corrupt input file", [good, "--input", "%s=%s" % (IN, corrupt)], [IN], False),
        ("--input names no input", [good, "--input", "no_such_input=" + corrupt],
         ["no_such_input"], False),
        ("external data outside the model directory",
         [save(os.path.join(w, "ext_escape", "model.onnx"),
               good_model(("../w.bin", 0, len(bias))))], [BIAS, "../w.bin"], False),
        ("external data at an absolute path",
         [save(os.path.join(w, "ext_abs", "model.onnx"),
               good_model((abs_bin, 0, len(bias))))], [BIAS, abs_bin], False),
        ("external data offset past the end of the file",
         [save(os.path.join(w, "ext_offset", "model.onnx"),
               good_model(("short.bin", 4096, len(bias))))], [BIAS, "short.bin"], False),
        ("a generated input larger than the machine's memory",
         [save(os.path.join(w, "huge", "model.onnx"), huge_input_model())],
         ["'big'", "8388608 MiB", "memory available"], False),
        ("external data file missing",
         [save(os.path.join(w, "ext_missing", "model.onnx"),
               good_model(("missing.bin", 0, len(bias))))], [BIAS, "missing.bin"], False),
    ]


def run_case(ort_run, args, required, expect_ok):
    """None when the case passes, else why not."""
    env = dict(os.environ)
    env.pop("ORTMK_LOG", None)  # quiet library: stderr is ort-run's alone
    p = subprocess.Popen([ort_run] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, start_new_session=True)
    try:
        _, err = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the group this test started
        p.communicate()
        return "no exit within %g s" % TIMEOUT
    if expect_ok:
        return None if p.returncode == 0 else "exit %d: %s" % (p.returncode, err.strip())
    if p.returncode < 0:
        return "killed by signal %d" % -p.returncode
    if p.returncode == 0:
        return "exit status 0"
    lines = err.splitlines()
    if len(lines) != 1 or not lines[0].startswith("ort-run:"):
        return "stderr is not one 'ort-run:' line: %r" % err
    absent = [r.pattern if hasattr(r, "pattern") else r for r in required
              if not (r.search(lines[0]) if hasattr(r, "search") else r in lines[0])]
    if absent:
        return "message %r does not name %s" % (lines[0], ", ".join(absent))
    return None


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ort_run, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    passed = failed = 0
    for name, args, required, expect_ok in make_cases(work):
        why = run_case(ort_run, args, required, expect_ok)
        if why:
            failed += 1
            print("FAIL %s: %s" % (name, why))
        else:
            passed += 1
            print("ok   %s" % name)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
