#!/usr/bin/python3
"""The integration models and the example CNN on `--provider vulkan,cpu`.

usage: models_test.py ORT_RUN ORT_EP_VULKAN MODELS_DIR EXAMPLE_MODEL WORKDIR

For mlp, mlp_ext (external data), cnn, transformer (MODELS_DIR/NAME, the
inputs of their manifest) and the example CNN (a seeded input), checks that:
  - the outputs with vulkan,cpu equal cpu's within rtol 1e-3 (atol 1e-5),
    with the default kernels and with the tiled GEMM/convolution forced
    (ORTMK_VULKAN_GEMM=tiled ORTMK_VULKAN_CONV=tiled);
  - every Conv, MatMul and Gemm of the model is loaded on vulkan (the
    provider's debug log lists the ops of each subgraph it loads), and the
    ops it loads add up to nodes_per_provider["vulkan"] of ort-run --json;
  - ORTMK_VULKAN_DEVICE naming no device leaves every node to cpu, with the
    same outputs, and ORTMK_VULKAN_DEVICE=0 picks device 0;
  - hot swaps of ort-ep-vulkan between runs (ort-run --swap-every) fail no
    run and change no output;
  - outputs whose shape depends on data (a Reshape to a shape given as an
    input) come back through the dynamic region, also when they do not fit
    its first size (2.4 MB against 1 MiB: the core grows it and repeats).
Exit 77 (skip) when ORT_EP_VULKAN --probe finds no Vulkan device.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx

HEAVY = ("Conv", "MatMul", "Gemm")
LOAD_RE = re.compile(r"vulkan\[\d+\] debug: subgraph \d+ loaded: (\d+) nodes:([^;]*);")
TIMEOUT = float(os.environ.get("ORTMK_TEST_TIMEOUT", "300"))


def out_file(outdir, name):
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:255]
    return os.path.join(outdir, safe + ".npy")


def run(ort_run, model, inputs, outdir, provider, env_extra=None):
    """ort-run once; returns (report, stderr)."""
    os.makedirs(outdir, exist_ok=True)
    cmd = [ort_run, model, "--provider", provider, "--output-dir", outdir, "--json"]
    for name, path in inputs.items():
        cmd += ["--input", "%s=%s" % (name, path)]
    env = dict(os.environ)
    env.update(env_extra or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return json.loads(p.stdout), p.stderr


def compare(names, got_dir, want_dir):
    for name in names:
        got, want = np.load(out_file(got_dir, name)), np.load(out_file(want_dir, name))
        if got.shape != want.shape or got.dtype != want.dtype:
            return "output %s is %s%s, cpu gives %s%s" % (name, got.dtype, got.shape,
                                                          want.dtype, want.shape)
        if not np.allclose(got, want, rtol=1e-3, atol=1e-5) or not np.all(np.isfinite(got)):
            err = np.abs(got.astype(np.float64) - want)
            return "output %s differs from cpu's: worst |diff| %.3g" % (name, err.max())
    return None


def check_placement(model, report, stderr):
    loads = LOAD_RE.findall(stderr)
    ops = " ".join(o for _, o in loads).split()
    counts = sum(int(n) for n, _ in loads)
    if counts != report["nodes_per_provider"].get("vulkan", 0):
        return "vulkan loaded %d nodes, --json says %s" % (counts, report["nodes_per_provider"])
    graph_ops = [n.op_type for n in onnx.load(model, load_external_data=False).graph.node]
    for h in HEAVY:
        if ops.count(h) != graph_ops.count(h):
            return "%d of %d %s nodes run on vulkan" % (ops.count(h), graph_ops.count(h), h)
    return None


def dynamic_case(work):
    """y = Relu(Reshape(x, s)) and t = Transpose(y): shapes known only at
    run time, both graph outputs."""
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"]),
             helper.make_node("Transpose", ["y"], ["t"])]
    graph = helper.make_graph(
        nodes, "dynamic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    model = os.path.join(work, "dynamic.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    x = np.random.default_rng(9).uniform(-1, 1, 600000).astype(np.float32)
    np.save(os.path.join(work, "dyn_x.npy"), x)
    np.save(os.path.join(work, "dyn_s.npy"), np.array([1000, 600], np.int64))
    return ("dynamic", model, {"x": os.path.join(work, "dyn_x.npy"),
                               "s": os.path.join(work, "dyn_s.npy")}, ["y", "t"])


def cases(models_dir, example, work):
    for name in ("mlp", "mlp_ext", "cnn", "transformer"):
        d = os.path.join(models_dir, name)
        with open(os.path.join(d, "manifest.json")) as f:
            man = json.load(f)
        yield (name, os.path.join(d, "model.onnx"),
               {k: os.path.join(d, v) for k, v in man["inputs"].items()}, list(man["outputs"]))
    x = np.random.default_rng(5).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
    path = os.path.join(work, "example_image.npy")
    np.save(path, x)
    yield "example", example, {"image": path}, ["probs"]
    yield dynamic_case(work)


def check_model(ort_run, name, model, inputs, outputs, work):
    cpu_dir = os.path.join(work, name, "cpu")
    run(ort_run, model, inputs, cpu_dir, "cpu")
    modes = [("default", {}), ("tiled", {"ORTMK_VULKAN_GEMM": "tiled", "ORTMK_VULKAN_CONV": "tiled"})]
    for mode, extra in modes:
        vk_dir = os.path.join(work, name, mode)
        extra = dict(extra, ORTMK_LOG="debug")
        report, stderr = run(ort_run, model, inputs, vk_dir, "vulkan,cpu", extra)
        why = compare(outputs, vk_dir, cpu_dir) or check_placement(model, report, stderr)
        if why:
            return "%s (%s kernels): %s" % (name, mode, why)
        print("%s (%s): ok, nodes %s" % (name, mode, report["nodes_per_provider"]))
    return None


def check_device_choice(ort_run, model, inputs, outputs, work):
    cpu_dir = os.path.join(work, "choice", "cpu")
    run(ort_run, model, inputs, cpu_dir, "cpu")
    d = os.path.join(work, "choice", "none")
    report, stderr = run(ort_run, model, inputs, d, "vulkan,cpu",
                         {"ORTMK_VULKAN_DEVICE": "no-such-device", "ORTMK_LOG": "warn"})
    if report["nodes_per_provider"].get("vulkan", 0) != 0 or "no Vulkan device" not in stderr:
        return "ORTMK_VULKAN_DEVICE=no-such-device: %s / %s" % (report["nodes_per_provider"],
                                                                 stderr[-500:])
    why = compare(outputs, d, cpu_dir)
    if why:
        return "without a device: " + why
    d = os.path.join(work, "choice", "zero")
    report, _ = run(ort_run, model, inputs, d, "vulkan,cpu", {"ORTMK_VULKAN_DEVICE": "0"})
    if report["nodes_per_provider"].get("vulkan", 0) == 0:
        return "ORTMK_VULKAN_DEVICE=0 ran nothing on vulkan"
    print("device choice: ok")
    return compare(outputs, d, cpu_dir)


def check_swap(ort_run, model, inputs, outputs, work):
    cpu_dir = os.path.join(work, "choice", "cpu")
    d = os.path.join(work, "swap")
    os.makedirs(d, exist_ok=True)
    cmd = [ort_run, model, "--provider", "vulkan,cpu", "--iters", "10", "--swap-every", "3",
           "--output-dir", d, "--json"]
    for name, path in inputs.items():
        cmd += ["--input", "%s=%s" % (name, path)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    if p.returncode != 0:
        return "swap run failed: " + p.stderr[-1000:]
    report = json.loads(p.stdout)
    if report["failed_runs"] or report["swaps"] < 3:
        return "swaps: %d, failed runs: %d" % (report["swaps"], report["failed_runs"])
    print("hot swap: ok, %d swaps" % report["swaps"])
    return compare(outputs, d, cpu_dir)


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    ort_run, ep, models_dir, example, work = sys.argv[1:]
    probe = subprocess.run([ep, "--probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("skip: " + probe.stdout.strip())
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    failures = []
    all_cases = list(cases(models_dir, example, work))
    for name, model, inputs, outputs in all_cases:
        try:
            why = check_model(ort_run, name, model, inputs, outputs, work)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            why = "%s: %s" % (name, e)
        if why:
            failures.append(why)
            print("FAIL " + why)
    cnn = [c for c in all_cases if c[0] == "cnn"][0]
    for check in (check_device_choice, check_swap):
        why = check(ort_run, cnn[1], cnn[2], cnn[3], work)
        if why:
            failures.append(why)
            print("FAIL " + why)
    print("%d passed, %d failed" % (len(all_cases) + 2 - len(failures), len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
