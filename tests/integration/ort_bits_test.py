#!/usr/bin/python3
"""The float ops whose bits must be ONNX Runtime's, so that a quantizer or a
threshold after them decides as ONNX Runtime does (issue 17: in dynamically
quantized EfficientNet and MobileNetV3, one value off by an ulp before a
DynamicQuantizeLinear moves a whole quantization step): Sigmoid, SiLU
(Sigmoid then Mul), HardSigmoid, HardSwish, Exp, GlobalAveragePool, Softmax
and LogSoftmax over the last axis, and bilinear Resize (a detector's input
transform); the activations also at the end of the fused int8 chain (DynamicQuantizeLinear, ConvInteger,
Cast, Mul, Add) where ortmk runs them inside the convolution's epilogue.
Every output must equal ONNX Runtime's bit for bit.

Usage: ort_bits_test.py ORT_RUN WORK [NODE_MODULES]
Exits 77 (skip) when onnxruntime-node is not installed (tools/dev.sh
installs it)."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True   # ort_ref beside this file: no __pycache__ in the tree
from ort_ref import Tally, node_modules, run_js, write_js  # noqa: E402

T = Tally()
check = T.check
rng = np.random.default_rng(29)

# Float32 values travel as their bit patterns (uint32), both ways.
ORT_JS = r"""
const ort = require(process.argv[2] + '/onnxruntime-node');
const fs = require('fs');
(async () => {
  const job = JSON.parse(fs.readFileSync(process.argv[3]));
  const s = await ort.InferenceSession.create(job.model, {intraOpNumThreads: 1});
  const feeds = {};
  for (const [k, v] of Object.entries(job.inputs))
    feeds[k] = new ort.Tensor('float32', new Float32Array(new Uint32Array(v.bits).buffer), v.dims);
  const r = await s.run(feeds);
  const out = {};
  for (const k of Object.keys(r)) {
    const d = r[k].data, W = r[k].type === 'float16' ? Uint16Array : Uint32Array;
    out[k] = {dims: r[k].dims, type: r[k].type,
              bits: Array.from(new W(d.buffer, d.byteOffset, d.length))};
  }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e.message); process.exit(1); });
"""



def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def act_nodes(act, x, y):
    """Nodes computing y = act(x)."""
    if act == "SiLU":
        return [helper.make_node("Sigmoid", [x], [y + "_s"]),
                helper.make_node("Mul", [x, y + "_s"], [y])]
    if act == "HardSigmoid":
        return [helper.make_node("HardSigmoid", [x], [y], alpha=1.0 / 6.0, beta=0.5)]
    if act == "HardSigmoid_default":
        return [helper.make_node("HardSigmoid", [x], [y])]
    if act == "Clip6":   # ReLU6 as torch exports it: Clip with constant bounds
        return [helper.make_node("Constant", [], [y + "_lo"],
                                 value=numpy_helper.from_array(np.array(0.0, np.float32))),
                helper.make_node("Constant", [], [y + "_hi"],
                                 value=numpy_helper.from_array(np.array(6.0, np.float32))),
                helper.make_node("Clip", [x, y + "_lo", y + "_hi"], [y])]
    return [helper.make_node(act, [x], [y])]


def elementwise(path, act, shape):
    g = helper.make_graph(act_nodes(act, "x", "y"), act, [vi("x", shape)], [vi("y", shape)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def gap(path, shape):
    g = helper.make_graph([helper.make_node("GlobalAveragePool", ["x"], ["y"])], "gap",
                          [vi("x", shape)], [vi("y", shape[:2] + [1, 1])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def softmax(path, op, shape):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], axis=-1)], op, [vi("x", shape)],
                          [vi("y", shape)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def resize(path, shape, sizes, ctm):
    inits = [numpy_helper.from_array(np.array(sizes, np.int64), "sizes")]
    g = helper.make_graph([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
                                            coordinate_transformation_mode=ctm)],
                          "resize", [vi("x", shape)], [vi("y", sizes)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def f16_transform(path):
    """A float16 model's input transform as the keep_io_types converters
    write it: Cast of the float32 image to float16, Sub the mean, Div the
    std. ONNX Runtime has no float16 Sub/Div kernel on x86: it computes them
    in float32 from the Cast's float32 input (it drops that Cast with the
    one it inserts), and so must ortmk."""
    inits = [numpy_helper.from_array(np.array([0.485, 0.456, 0.406], np.float16).reshape(3, 1, 1),
                                     "mean"),
             numpy_helper.from_array(np.array([0.229, 0.224, 0.225], np.float16).reshape(3, 1, 1),
                                     "std")]
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("Sub", ["h", "mean"], ["c"]),
             helper.make_node("Div", ["c", "std"], ["y"])]
    g = helper.make_graph(nodes, "f16", [vi("x", [3, 40, 40])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [3, 40, 40])],
                          inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def int8_chain(path, act, c, m, hw, group):
    """DynamicQuantizeLinear -> ConvInteger (uint8 weights, 3x3, pad 1) ->
    Cast -> Mul (x scale times w scale) -> Add (bias) -> act ->
    GlobalAveragePool, as ONNX Runtime's dynamic quantizer writes it."""
    w = rng.integers(0, 256, (m, c // group, 3, 3)).astype(np.uint8)
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array(131, np.uint8), "wz"),
             numpy_helper.from_array(np.array(0.0123, np.float32), "ws"),
             numpy_helper.from_array(rng.uniform(-1, 1, (1, m, 1, 1)).astype(np.float32), "b")]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("ConvInteger", ["xq", "w", "xz", "wz"], ["ci"], pads=[1, 1, 1, 1],
                              group=group),
             helper.make_node("Cast", ["ci"], ["cf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["xs", "ws"], ["s"]),
             helper.make_node("Mul", ["cf", "s"], ["scaled"]),
             helper.make_node("Add", ["scaled", "b"], ["pre"])]
    nodes += act_nodes(act, "pre", "a")
    nodes += [helper.make_node("GlobalAveragePool", ["a"], ["y"])]
    g = helper.make_graph(nodes, "chain", [vi("x", [1, c, hw, hw])], [vi("a", [1, m, hw, hw]),
                                                                       vi("y", [1, m, 1, 1])],
                          inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def compare(name, ort_run, js, mods, d, path, x):
    xp = os.path.join(d, "x.npy")
    np.save(xp, x)
    out = os.path.join(d, "out")
    p = subprocess.run([ort_run, path, "--input", "x=" + xp, "--threads", "1",
                        "--output-dir", out], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "%s: ortmk runs (%s)" % (name, p.stderr.strip()[-200:]))
    job = os.path.join(d, "job.json")
    with open(job, "w") as f:
        json.dump({"model": path, "inputs": {"x": {"dims": list(x.shape),
                                                   "bits": x.view(np.uint32).ravel().tolist()}}},
                  f)
    q = run_js(js, mods, job)
    check(q.returncode == 0, "%s: ONNX Runtime runs (%s)" % (name, q.stderr.strip()[-200:]))
    if p.returncode or q.returncode:
        return
    ref = json.loads(q.stdout)
    for o, r in sorted(ref.items()):
        got = np.load(os.path.join(out, o + ".npy"))
        ut = np.uint16 if r.get("type") == "float16" else np.uint32
        want = np.array(r["bits"], ut).view(np.float16 if ut == np.uint16 else np.float32)
        want = want.reshape(r["dims"])
        same = got.shape == want.shape and got.dtype == want.dtype and \
            np.array_equal(got.view(ut), want.view(ut))
        diff = int((got.view(ut) != want.view(ut)).sum()) if same or (
            got.shape == want.shape and got.dtype == want.dtype) else -1
        check(same, "%s: %s %s bit-identical to ONNX Runtime's (%d of %d differ)" %
              (name, o, list(got.shape), diff, got.size))


def main():
    ort_run, work = sys.argv[1], sys.argv[2]
    mods = node_modules(sys.argv[3] if len(sys.argv) > 3 else None)
    if not mods:
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    js = write_js(work, ORT_JS)
    # Values across and beyond each function's range, NaN-free: logits from
    # -25 to 25, and activations around HardSwish's kinks at -3 and 3.
    x = np.concatenate([rng.uniform(-25, 25, 40000), rng.normal(0, 3, 40000),
                        rng.uniform(-3.5, 3.5, 20003)]).astype(np.float32)
    for act in ("Sigmoid", "SiLU", "HardSigmoid", "HardSigmoid_default", "HardSwish", "Exp"):
        d = os.path.join(work, act)
        os.makedirs(d)
        path = os.path.join(d, "m.onnx")
        elementwise(path, act, [x.size])
        compare(act, ort_run, js, mods, d, path, x)
    for shape in ([2, 3, 7, 7], [1, 4, 56, 56], [1, 5, 13, 17], [1, 2, 1, 3]):
        d = os.path.join(work, "gap_" + "x".join(map(str, shape)))
        os.makedirs(d)
        path = os.path.join(d, "m.onnx")
        gap(path, shape)
        compare("GlobalAveragePool %s" % shape, ort_run, js, mods, d, path,
                rng.normal(0.5, 2, shape).astype(np.float32))
    for op in ("Softmax", "LogSoftmax"):
        for n in (1, 7, 16, 17, 48, 91, 1000):
            d = os.path.join(work, "%s_%d" % (op, n))
            os.makedirs(d)
            path = os.path.join(d, "m.onnx")
            softmax(path, op, [5, n])
            compare("%s over %d" % (op, n), ort_run, js, mods, d, path,
                    rng.normal(0, 4, (5, n)).astype(np.float32))
        # masked scores (a causal mask's -inf, or the float minimum added):
        # exps below the lower clamp, whose scaling is subnormal
        d = os.path.join(work, "%s_masked" % op)
        os.makedirs(d)
        path = os.path.join(d, "m.onnx")
        softmax(path, op, [6, 128])
        x = rng.normal(0, 4, (6, 128)).astype(np.float32)
        x[:3] += np.triu(np.full((3, 128), -np.inf, np.float32), 2)
        x[3:] += np.triu(np.full((3, 128), -3.4e38, np.float32), 5)
        x[5, 7] = -100.0
        compare("%s masked over 128" % op, ort_run, js, mods, d, path, x)
    # an image shrunk and grown as detectors' transforms and FPNs do
    for shape, sizes, ctm in (([1, 3, 256, 352], [1, 3, 320, 440], "pytorch_half_pixel"),
                              ([1, 3, 480, 640], [1, 3, 320, 427], "pytorch_half_pixel"),
                              ([1, 4, 20, 30], [1, 4, 40, 60], "half_pixel"),
                              ([1, 2, 9, 13], [1, 2, 17, 25], "align_corners"),
                              ([1, 2, 9, 13], [1, 2, 20, 7], "asymmetric")):
        d = os.path.join(work, "resize_%s_%s" % ("x".join(map(str, sizes)), ctm))
        os.makedirs(d)
        path = os.path.join(d, "m.onnx")
        resize(path, shape, sizes, ctm)
        img = np.sin(np.arange(np.prod(shape), dtype=np.float64) * 0.013).reshape(shape)
        compare("Resize %s -> %s %s" % (shape[2:], sizes[2:], ctm), ort_run, js, mods, d, path,
                (img * 2.2 + rng.normal(0, 0.1, shape)).astype(np.float32))
    d = os.path.join(work, "f16_transform")
    os.makedirs(d)
    f16_transform(os.path.join(d, "m.onnx"))
    compare("float16 input transform", ort_run, js, mods, d, os.path.join(d, "m.onnx"),
            rng.uniform(0, 1, (3, 40, 40)).astype(np.float32))
    for act, group in (("SiLU", 1), ("HardSwish", 1), ("HardSigmoid", 1), ("Sigmoid", 1),
                       ("HardSwish", 8), ("Clip6", 1), ("Relu", 1)):
        d = os.path.join(work, "int8_%s_g%d" % (act, group))
        os.makedirs(d)
        path = os.path.join(d, "m.onnx")
        int8_chain(path, act, 8, 16, 20, group)
        xi = np.sin(np.arange(8 * 20 * 20, dtype=np.float32) * 0.37).reshape(1, 8, 20, 20) * 2
        compare("int8 chain, %s, group %d" % (act, group), ort_run, js, mods, d, path,
                xi.astype(np.float32))
    return T.result()


if __name__ == "__main__":
    sys.exit(main())
