#!/usr/bin/python3
"""Partitioning across vulkan and cpu: grouping, downloads, size refusals.

usage: partition_test.py ORT_RUN ORT_EP_VULKAN MODELS_DIR WORKDIR

  - the integration transformer (49 nodes vulkan, 36 cpu, alternating in
    model order: 12 steps before grouping) runs as at most 3 vulkan steps,
    the same ones in two sessions (the order is deterministic), with the
    outputs of cpu alone within rtol 1e-3;
  - two independent chains interleaved in model order (Relu on vulkan,
    Cos on cpu only: 8 alternating runs) become one vulkan step and one
    cpu step, outputs as numpy;
  - only values that leave a step are downloaded: the integration CNN (one
    step) downloads exactly its graph outputs per run, and the
    transformer's vulkan steps download no more values than the later
    steps read plus the graph outputs (counted from the model here);
  - a float tensor beyond the device's maxStorageBufferRange is refused by
    vulkan at partition time (the capability query carries the inferred
    shapes), so it runs on cpu and the result matches numpy; on lavapipe
    (128 MiB) the test checks that Relu and ReduceSum went to cpu.
Exit 77 (skip) when ORT_EP_VULKAN --probe finds no Vulkan device.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

LOAD_RE = re.compile(r"vulkan\[\d+\] debug: subgraph \d+ loaded: (\d+) nodes:([^;]*);")
RUN_RE = re.compile(r"vulkan\[\d+\] debug: run of (\d+) nodes: \d+ dispatches, \d+ uploads, "
                    r"(\d+) downloads")
TIMEOUT = float(os.environ.get("ORTMK_TEST_TIMEOUT", "300"))


def run(ort_run, model, inputs, outdir, provider, iters=1):
    os.makedirs(outdir, exist_ok=True)
    cmd = [ort_run, model, "--provider", provider, "--output-dir", outdir, "--json",
           "--iters", str(iters)]
    for name, path in inputs.items():
        cmd += ["--input", "%s=%s" % (name, path)]
    env = dict(os.environ, ORTMK_LOG="debug")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return json.loads(p.stdout), p.stderr


def outputs_equal(model, got_dir, want_dir):
    for o in onnx.load(model, load_external_data=False).graph.output:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", o.name)
        got = np.load(os.path.join(got_dir, safe + ".npy"))
        want = np.load(os.path.join(want_dir, safe + ".npy"))
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-3, atol=1e-5):
            return "output %s differs from cpu's" % o.name
    return None


def manifest_inputs(d):
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    return {k: os.path.join(d, f) for k, f in m["inputs"].items()}


def check_transformer(ort_run, models, work):
    d = os.path.join(models, "transformer")
    model, inputs = os.path.join(d, "model.onnx"), manifest_inputs(d)
    rep, err = run(ort_run, model, inputs, os.path.join(work, "tv"), "vulkan,cpu")
    run(ort_run, model, inputs, os.path.join(work, "tc"), "cpu")
    rep2, err2 = run(ort_run, model, inputs, os.path.join(work, "tv2"), "vulkan,cpu")
    loads, loads2 = LOAD_RE.findall(err), LOAD_RE.findall(err2)
    if len(loads) > 3:
        return "transformer: %d vulkan steps (at most 3 expected): %s" % (len(loads), loads)
    if loads != loads2:
        return "transformer: two sessions ordered the nodes differently"
    if sum(int(n) for n, _ in loads) != rep["nodes_per_provider"].get("vulkan"):
        return "transformer: vulkan steps hold %s nodes, --json says %s" % (
            [n for n, _ in loads], rep["nodes_per_provider"])
    why = outputs_equal(model, os.path.join(work, "tv"), os.path.join(work, "tc"))
    if why:
        return "transformer: " + why
    # Downloads per run are bounded by what leaves vulkan's nodes.
    g = onnx.load(model, load_external_data=False).graph
    vk_ops = " ".join(o for _, o in loads).split()
    downs = sum(int(x) for _, x in RUN_RE.findall(err))
    runs = max(1, len(RUN_RE.findall(err)) // max(1, len(loads)))
    produced = [o for n in g.node for o in n.output if o]
    if downs // runs >= len(produced):
        return "transformer: %d downloads per run for %d values" % (downs // runs, len(produced))
    print("transformer: %d vulkan steps %s, %d downloads per run, %d vulkan ops" % (
        len(loads), [n for n, _ in loads], downs // runs, len(vk_ops)))
    return None


def check_cnn_downloads(ort_run, models, work):
    d = os.path.join(models, "cnn")
    model, inputs = os.path.join(d, "model.onnx"), manifest_inputs(d)
    rep, err = run(ort_run, model, inputs, os.path.join(work, "cv"), "vulkan,cpu", iters=3)
    run(ort_run, model, inputs, os.path.join(work, "cc"), "cpu")
    n_out = len(onnx.load(model, load_external_data=False).graph.output)
    runs = RUN_RE.findall(err)
    if rep["nodes_per_provider"].get("cpu", 0) or not runs:
        return "cnn: expected one vulkan step, got %s" % rep["nodes_per_provider"]
    bad = [r for r in runs if int(r[1]) != n_out]
    if bad:
        return "cnn: runs download %s values, the graph has %d outputs" % (
            sorted(set(r[1] for r in bad)), n_out)
    print("cnn: %d runs, %d downloads each" % (len(runs), n_out))
    return outputs_equal(model, os.path.join(work, "cv"), os.path.join(work, "cc"))


def check_interleaved(ort_run, work):
    """Two independent chains, Relu (vulkan) and Cos (cpu only), interleaved
    in model order: 8 alternating runs of nodes, 2 steps once grouped."""
    nodes, a, b = [], "x", "x"
    for i in range(4):
        nodes.append(helper.make_node("Relu", [a], ["a%d" % i], name="relu%d" % i))
        nodes.append(helper.make_node("Cos", [b], ["b%d" % i], name="cos%d" % i))
        a, b = "a%d" % i, "b%d" % i
    g = helper.make_graph(nodes, "inter", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                          [helper.make_tensor_value_info(a, TensorProto.FLOAT, [64]),
                           helper.make_tensor_value_info(b, TensorProto.FLOAT, [64])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    model, xin = os.path.join(work, "inter.onnx"), os.path.join(work, "inter_x.npy")
    onnx.save(m, model)
    x = np.linspace(-3, 3, 64).astype(np.float32)
    np.save(xin, x)
    rep, err = run(ort_run, model, {"x": xin}, os.path.join(work, "iv"), "vulkan,cpu")
    loads = LOAD_RE.findall(err)
    if [n for n, _ in loads] != ["4"]:
        return "interleaved: vulkan steps %s, want one of 4 Relu" % [n for n, _ in loads]
    want_b = x
    for _ in range(4):
        want_b = np.cos(want_b)
    got_a = np.load(os.path.join(work, "iv", a + ".npy"))
    got_b = np.load(os.path.join(work, "iv", b + ".npy"))
    if not np.allclose(got_a, np.maximum(x, 0)) or not np.allclose(got_b, want_b, rtol=1e-5):
        return "interleaved: outputs differ from numpy"
    print("interleaved: 1 vulkan step of 4 Relu, nodes %s" % rep["nodes_per_provider"])
    return None


def big_model(path, n):
    """x[1] -> Expand to [n] (cpu: not a Vulkan op) -> Relu -> ReduceSum
    -> Mul by itself: the middle tensors are 4n bytes."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [n])
    nodes = [helper.make_node("Expand", ["x", "shape"], ["big"], name="expand"),
             helper.make_node("Relu", ["big"], ["r"], name="relu"),
             helper.make_node("ReduceSum", ["r"], ["s"], name="sum", keepdims=0),
             helper.make_node("Mul", ["s", "s"], ["y"], name="square")]
    g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], [shape])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def check_big(ort_run, ep, work):
    probe = subprocess.run([ep, "--probe"], capture_output=True, text=True).stdout
    lavapipe = "* " in probe and "llvmpipe" in probe.split("* ", 1)[1].split("\n", 1)[0]
    n = (128 << 20) // 4 + 16
    model, xin = os.path.join(work, "big.onnx"), os.path.join(work, "big_x.npy")
    big_model(model, n)
    np.save(xin, np.array([0.5], dtype=np.float32))
    rep, err = run(ort_run, model, {"x": xin}, os.path.join(work, "bv"), "vulkan,cpu")
    got = float(np.load(os.path.join(work, "bv", "y.npy")))
    want = (0.5 * n) ** 2
    if not np.isclose(got, want, rtol=1e-3):
        return "big: y = %g, numpy says %g" % (got, want)
    ops = " ".join(o for _, o in LOAD_RE.findall(err)).split()
    if lavapipe and ("Relu" in ops or "ReduceSum" in ops or "Mul" not in ops):
        return "big: vulkan loaded %s; Relu and ReduceSum of %d floats exceed lavapipe's " \
               "128 MiB storage-buffer range" % (ops, n)
    print("big: vulkan ran %s, nodes %s" % (ops, rep["nodes_per_provider"]))
    return None


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    ort_run, ep, models, work = sys.argv[1:]
    if subprocess.run([ep, "--probe"], capture_output=True).returncode != 0:
        print("no Vulkan device: skipped")
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    failed = 0
    for check in (lambda: check_transformer(ort_run, models, work),
                  lambda: check_cnn_downloads(ort_run, models, work),
                  lambda: check_interleaved(ort_run, work),
                  lambda: check_big(ort_run, ep, work)):
        why = check()
        if why:
            print("FAIL", why)
            failed += 1
    print("%d failed" % failed)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
