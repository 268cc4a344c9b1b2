#!/usr/bin/python3
"""The integration models, the example CNN and a float16 model on
`--provider cuda,cpu` (needs a GPU: exit 77, skipped, without one).

usage: models_test.py ORT_RUN ORT_EP_CUDA MODELS_DIR EXAMPLE_MODEL WORKDIR

Checks that:
  - mlp, mlp_ext (external data), cnn, transformer and the example CNN give
    cpu's outputs within rtol 1e-3 (atol 1e-5), with cuDNN convolutions
    (the default) and with the implicit-GEMM kernel (ORTMK_CUDA_CONV=gemm);
  - every Conv, MatMul and Gemm of each model is loaded on cuda (the
    provider's debug log lists the ops of each subgraph it loads) and the
    ops it loads add up to nodes_per_provider["cuda"];
  - a float16 model (MatMul, Add, Relu, Softmax, LayerNormalization,
    Transpose, ReduceMean) runs entirely on cuda and matches numpy's
    float32 reference on the same float16 inputs within rtol 1e-2;
  - outputs of unknown size made by steps alternating between cpu and
    cuda, outgrowing the dynamic region mid-run, arrive intact;
  - ORTMK_CUDA_DEVICE=0 picks device 0;
and prints the weight-loading rate ort-ep-cuda logged for mlp_ext.
"""
import os
import sys

import numpy as np

from cuda_common import GBS_RE, cases, compare, heavy_on_cuda, out_file, probe, run


def check_model(ort_run, name, model, inputs, outputs, work):
    cpu_dir = os.path.join(work, name, "cpu")
    run(ort_run, model, inputs, cpu_dir, "cpu")
    for mode, extra in (("cudnn", {}), ("gemm", {"ORTMK_CUDA_CONV": "gemm"})):
        d = os.path.join(work, name, mode)
        report, stderr = run(ort_run, model, inputs, d, "cuda,cpu",
                             dict(extra, ORTMK_LOG="debug"))
        why = compare(outputs, d, cpu_dir) or heavy_on_cuda(model, report, stderr)
        if why:
            return "%s (%s): %s" % (name, mode, why)
        rate = GBS_RE.findall(stderr)
        print("%s (%s): ok, nodes %s%s" % (name, mode, report["nodes_per_provider"],
                                           ", weights at %s GB/s" % rate[0] if rate else ""))
    return None


def fp16_case(ort_run, work):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w = rng.uniform(-0.5, 0.5, (64, 48)).astype(np.float16)
    b = rng.uniform(-0.5, 0.5, (48,)).astype(np.float16)
    g = rng.uniform(0.5, 1.5, (48,)).astype(np.float16)
    x = rng.uniform(-1, 1, (4, 8, 64)).astype(np.float16)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("LayerNormalization", ["r", "g"], ["n"], axis=-1),
             helper.make_node("Softmax", ["n"], ["s"], axis=-1),
             helper.make_node("Transpose", ["s"], ["t"], perm=[0, 2, 1]),
             helper.make_node("ReduceMean", ["t"], ["y"], axes=[2], keepdims=0)]
    graph = helper.make_graph(
        nodes, "fp16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4, 8, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [4, 48])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(g, "g")])
    model = os.path.join(work, "fp16.onnx")
    import onnx
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    xp = os.path.join(work, "fp16_x.npy")
    np.save(xp, x)
    a = np.maximum(x.astype(np.float32) @ w.astype(np.float32) + b.astype(np.float32), 0)
    mu = a.mean(-1, keepdims=True)
    n = (a - mu) / np.sqrt(a.var(-1, keepdims=True) + 1e-5) * g.astype(np.float32)
    e = np.exp(n - n.max(-1, keepdims=True))
    want = (e / e.sum(-1, keepdims=True)).transpose(0, 2, 1).mean(2)
    d = os.path.join(work, "fp16")
    report, stderr = run(ort_run, model, {"x": xp}, d, "cuda,cpu", {"ORTMK_LOG": "debug"})
    if report["nodes_per_provider"].get("cpu", 0) != 0:
        return "fp16: nodes %s (want all on cuda)" % report["nodes_per_provider"]
    got = np.load(out_file(d, "y"))
    if got.dtype != np.float16 or got.shape != (4, 48):
        return "fp16: output is %s%s" % (got.dtype, got.shape)
    if not np.allclose(got.astype(np.float32), want, rtol=1e-2, atol=1e-3):
        return "fp16: worst |diff| %.3g" % np.abs(got.astype(np.float32) - want).max()
    print("fp16: ok, all %d nodes on cuda" % report["nodes_per_provider"]["cuda"])
    return None


def dynamic_steps_case(ort_run, work):
    """Outputs whose size only the run knows, made by several steps that
    alternate between cpu and cuda and together outgrow the 1 MiB dynamic
    region: the core grows it while earlier steps' outputs live there (the
    zoo's yolo_head and dbnet failed so on the H200)."""
    from onnx import TensorProto, helper
    import onnx
    x = np.random.default_rng(4).uniform(-1, 1, 400000).astype(np.float32)
    x[::7] = 0
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]),                # cpu
             helper.make_node("Cast", ["nz"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Relu", ["f"], ["g"]),                     # cuda
             helper.make_node("Tile", ["g", "reps"], ["h"]),             # cpu
             helper.make_node("Sqrt", ["h"], ["y"])]                     # cuda
    graph = helper.make_graph(
        nodes, "dynamic_steps", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [400000])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None])],
        [helper.make_tensor("reps", TensorProto.INT64, [2], [1, 8])])
    model = os.path.join(work, "dynamic_steps.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    xp = os.path.join(work, "dynamic_steps_x.npy")
    np.save(xp, x)
    want = np.sqrt(np.tile(np.nonzero(x)[0].astype(np.float32)[None, :], (1, 8)))
    d = os.path.join(work, "dynamic_steps")
    report, _ = run(ort_run, model, {"x": xp}, d, "cuda,cpu")
    if report["nodes_per_provider"].get("cuda", 0) != 2:
        return "dynamic steps: nodes %s (want Relu and Sqrt on cuda)" % report["nodes_per_provider"]
    got = np.load(out_file(d, "y"))
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-6):
        return "dynamic steps: output %s, want %s" % (got.shape, want.shape)
    print("dynamic steps: ok, nodes %s, output %s" % (report["nodes_per_provider"], got.shape))
    return None


def check_device_zero(ort_run, case, work):
    name, model, inputs, outputs = case
    d = os.path.join(work, "device0")
    report, _ = run(ort_run, model, inputs, d, "cuda,cpu", {"ORTMK_CUDA_DEVICE": "0"})
    if report["nodes_per_provider"].get("cuda", 0) == 0:
        return "ORTMK_CUDA_DEVICE=0 ran nothing on cuda"
    return compare(outputs, d, os.path.join(work, name, "cpu"))


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    ort_run, ep, models_dir, example, work = sys.argv[1:]
    has_gpu, text = probe(ep)
    if not has_gpu:
        print("skip: " + text)
        sys.exit(77)
    print(text)
    os.makedirs(work, exist_ok=True)
    failures = []
    all_cases = list(cases(models_dir, example, work))
    checks = [lambda c=c: check_model(ort_run, *c, work) for c in all_cases]
    checks.append(lambda: fp16_case(ort_run, work))
    checks.append(lambda: dynamic_steps_case(ort_run, work))
    checks.append(lambda: check_device_zero(ort_run, all_cases[2], work))
    for check in checks:
        try:
            why = check()
        except (RuntimeError, OSError) as e:
            why = str(e)
        if why:
            failures.append(why)
            print("FAIL " + why)
    print("%d passed, %d failed" % (len(checks) - len(failures), len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
