#!/usr/bin/python3
"""float16 models on `--provider vulkan,cpu`: float16 storage on the device.

usage: fp16_test.py ORT_RUN ORT_EP_VULKAN WORKDIR

Generates two float16 models with onnx's helper (seeded weights):
  cnn16  Conv (pads, bias) Relu MaxPool Conv(1x1, stride 2) BatchNormalization
         Add Sigmoid AveragePool GlobalAveragePool Flatten Gemm(transB)
         Softmax
  tfm16  LayerNormalization MatMul Add Reshape Transpose MatMul(Q K^T) Div
         Softmax MatMul Transpose Reshape Gelu-by-Erf (Div Erf Add Mul Mul)
         Tanh Sub Pow Sqrt Abs Neg Concat Gather ReduceMean ReduceMax
and checks, for each:
  - with vulkan,cpu every node runs on vulkan (float16 stays float16 in
    device memory: the device has 16-bit storage) and the outputs match a
    numpy float32 evaluation of the same graph (float16 inputs and weights
    widened) within float16 tolerance (rtol 1e-2, atol 1e-2, relative to
    the output's scale), and are float16;
  - the tiled GEMM/convolution (ORTMK_VULKAN_GEMM/CONV=tiled) agree too;
  - with ORTMK_VULKAN_FP16=0 (16-bit storage off, as on a device without
    it) every node still runs on vulkan with float16 tensors kept as
    float32 on the device (widened and narrowed at the transfers, float16
    weights widened at load): the same outputs, and the weights take twice
    the device memory they take with 16-bit storage.
Exit 77 (skip) when ORT_EP_VULKAN --probe finds no Vulkan device.
"""
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F16 = TensorProto.FLOAT16
TIMEOUT = float(os.environ.get("ORTMK_TEST_TIMEOUT", "300"))
LOAD_RE = re.compile(r"vulkan\[\d+\] debug: subgraph \d+ loaded: (\d+) nodes:([^;]*); "
                     r"device memory (\d+) bytes")
MODE_RE = re.compile(r"float16 tensors are (\w+) in device memory")
ERF = np.vectorize(math.erf, otypes=[np.float32])


class G:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.vals = [], [], {}

    def w(self, name, shape, scale=None):
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        s = scale if scale is not None else math.sqrt(3.0 / max(fan, 1))
        a = self.rng.uniform(-s, s, shape).astype(np.float16)
        self.inits.append(numpy_helper.from_array(a, name))
        self.vals[name] = a.astype(np.float32)
        return name

    def const(self, name, a):
        self.inits.append(numpy_helper.from_array(a, name))
        self.vals[name] = a.astype(np.float32) if a.dtype == np.float16 else a
        return name

    def node(self, op, ins, outs, **attrs):
        self.nodes.append(helper.make_node(op, ins, outs, name="n%d_%s" % (len(self.nodes), op),
                                           **attrs))
        return outs[0]

    def save(self, path, inputs, outputs):
        g = helper.make_graph(self.nodes, os.path.basename(path),
                              [helper.make_tensor_value_info(n, F16, s) for n, s in inputs],
                              [onnx.ValueInfoProto(name=n, type=onnx.TypeProto(
                                  tensor_type=onnx.TypeProto.Tensor(elem_type=F16)))
                               for n in outputs],
                              self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, path)


# ---- numpy reference (float32) ---------------------------------------------

def conv(x, w, b, stride, pad):
    n, c, h, wd = x.shape
    co, ci, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, co, oh, ow), np.float32)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return y + b.reshape(1, -1, 1, 1)


def pool(x, k, s, op):
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    win = np.stack([x[:, :, i:i + s * oh:s, j:j + s * ow:s] for i in range(k) for j in range(k)])
    return win.max(0) if op == "max" else win.mean(0)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def layernorm(x, s, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * s + b


def cnn16(path):
    g = G(16)
    v = g.vals
    g.node("Conv", ["x", g.w("w1", [8, 3, 3, 3]), g.w("b1", [8], 0.1)], ["c1"], pads=[1, 1, 1, 1])
    g.node("Relu", ["c1"], ["r1"])
    g.node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2])
    g.node("Conv", ["p1", g.w("w2", [8, 8, 1, 1]), g.w("b2", [8], 0.1)], ["c2"])
    g.const("bn_s", (1 + 0.1 * g.rng.standard_normal(8)).astype(np.float16))
    g.const("bn_b", (0.1 * g.rng.standard_normal(8)).astype(np.float16))
    g.const("bn_m", (0.1 * g.rng.standard_normal(8)).astype(np.float16))
    g.const("bn_v", (1 + 0.2 * g.rng.random(8)).astype(np.float16))
    g.node("BatchNormalization", ["c2", "bn_s", "bn_b", "bn_m", "bn_v"], ["n2"], epsilon=1e-5)
    g.node("Add", ["n2", "p1"], ["a2"])
    g.node("Sigmoid", ["a2"], ["s2"])
    g.node("AveragePool", ["s2"], ["q2"], kernel_shape=[2, 2], strides=[2, 2])
    g.node("GlobalAveragePool", ["q2"], ["gp"])
    g.node("Flatten", ["gp"], ["fl"])
    g.node("Gemm", ["fl", g.w("wf", [10, 8]), g.w("bf", [10], 0.1)], ["lg"], transB=1)
    g.node("Softmax", ["lg"], ["prob"], axis=-1)
    g.save(path, [("x", [2, 3, 16, 16])], ["prob", "s2"])

    def ref(x):
        c1 = conv(x, v["w1"], v["b1"], 1, 1)
        p1 = pool(np.maximum(c1, 0), 2, 2, "max")
        c2 = conv(p1, v["w2"], v["b2"], 1, 0)
        sh = (1, -1, 1, 1)
        n2 = (c2 - v["bn_m"].reshape(sh)) / np.sqrt(v["bn_v"].reshape(sh) + 1e-5) * \
            v["bn_s"].reshape(sh) + v["bn_b"].reshape(sh)
        s2 = sigmoid(n2 + p1)
        gp = pool(s2, 2, 2, "avg").mean((2, 3))
        return {"prob": softmax(gp @ v["wf"].T + v["bf"]), "s2": s2}
    return ref, {"x": [2, 3, 16, 16]}


def tfm16(path):
    g = G(17)
    v = g.vals
    S, D, H = 5, 32, 4
    g.node("LayerNormalization", ["x", g.w("ln_s", [D], 1.0), g.w("ln_b", [D], 0.1)], ["ln"],
           axis=-1, epsilon=1e-5)
    g.node("MatMul", ["ln", g.w("wq", [D, D])], ["q0"])
    g.node("Add", ["q0", g.w("bq", [D], 0.1)], ["q"])
    g.const("sh4", np.array([1, S, H, D // H], np.int64))
    g.node("Reshape", ["q", "sh4"], ["q4"])
    g.node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3])
    g.node("Transpose", ["q4"], ["kt"], perm=[0, 2, 3, 1])
    g.node("MatMul", ["qh", "kt"], ["sc0"])
    g.const("scale", np.array(math.sqrt(D // H), np.float16))
    g.node("Div", ["sc0", "scale"], ["sc"])
    g.node("Softmax", ["sc"], ["at"], axis=-1)
    g.node("MatMul", ["at", "qh"], ["ctx"])
    g.node("Transpose", ["ctx"], ["ct"], perm=[0, 2, 1, 3])
    g.const("sh3", np.array([1, S, D], np.int64))
    g.node("Reshape", ["ct", "sh3"], ["h"])
    g.const("sqrt2", np.array(math.sqrt(2.0), np.float16))
    g.const("one", np.array(1.0, np.float16))
    g.const("half", np.array(0.5, np.float16))
    g.node("Div", ["h", "sqrt2"], ["e0"])
    g.node("Erf", ["e0"], ["e1"])
    g.node("Add", ["e1", "one"], ["e2"])
    g.node("Mul", ["h", "e2"], ["e3"])
    g.node("Mul", ["e3", "half"], ["gelu"])
    g.node("Tanh", ["gelu"], ["t"])
    g.node("Sub", ["t", "ln"], ["d"])
    g.const("two", np.array(2.0, np.float16))
    g.node("Pow", ["d", "two"], ["d2"])
    g.node("Sqrt", ["d2"], ["sq"])
    g.node("Abs", ["d"], ["ad"])
    g.node("Neg", ["ad"], ["nd"])
    g.node("Concat", ["sq", "nd"], ["cc"], axis=-1)
    g.const("idx", np.array([0, 3, 4], np.int64))
    g.node("Gather", ["cc", "idx"], ["ga"], axis=1)
    g.node("ReduceMean", ["ga"], ["rm"], axes=[-1], keepdims=1)
    g.node("ReduceMax", ["cc"], ["rx"], axes=[1], keepdims=0)
    g.save(path, [("x", [1, S, D])], ["rm", "rx", "gelu"])

    def ref(x):
        ln = layernorm(x, v["ln_s"], v["ln_b"])
        q4 = (ln @ v["wq"] + v["bq"]).reshape(1, S, H, D // H)
        qh, kt = q4.transpose(0, 2, 1, 3), q4.transpose(0, 2, 3, 1)
        at = softmax((qh @ kt) / np.float32(np.float16(math.sqrt(D // H))))
        h = (at @ qh).transpose(0, 2, 1, 3).reshape(1, S, D)
        gelu = h * (ERF(h / np.float32(np.float16(math.sqrt(2.0)))) + 1) * 0.5
        d = np.tanh(gelu) - ln
        cc = np.concatenate([np.sqrt(d * d), -np.abs(d)], -1)
        return {"rm": cc[:, [0, 3, 4]].mean(-1, keepdims=True), "rx": cc.max(1), "gelu": gelu}
    return ref, {"x": [1, S, D]}


# ---- running ----------------------------------------------------------------

def run(ort_run, model, inputs, outdir, provider, env_extra=None):
    os.makedirs(outdir, exist_ok=True)
    cmd = [ort_run, model, "--provider", provider, "--output-dir", outdir, "--json"]
    for name, path in inputs.items():
        cmd += ["--input", "%s=%s" % (name, path)]
    env = dict(os.environ, ORTMK_LOG="debug")
    env.update(env_extra or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT)
    return p


def check_outputs(want, outdir):
    for name, w in want.items():
        got = np.load(os.path.join(outdir, name + ".npy"))
        if got.dtype != np.float16 or got.shape != w.shape:
            return "%s is %s%s, want float16%s" % (name, got.dtype, got.shape, w.shape)
        g32 = got.astype(np.float32)
        scale = max(1.0, float(np.abs(w).max()))
        err = np.abs(g32 - w) / scale
        if not np.all(np.isfinite(g32)) or not np.allclose(g32, w, rtol=1e-2, atol=1e-2 * scale):
            return "%s differs from numpy: worst |diff|/scale %.3g" % (name, err.max())
    return None


def check_model(ort_run, name, make, work):
    model = os.path.join(work, name + ".onnx")
    ref, shapes = make(model)
    rng = np.random.default_rng(7)
    inputs, want_in = {}, {}
    for k, s in shapes.items():
        x = rng.standard_normal(s).astype(np.float16)
        path = os.path.join(work, "%s_%s.npy" % (name, k))
        np.save(path, x)
        inputs[k] = path
        want_in[k] = x.astype(np.float32)
    want = ref(*want_in.values())
    n_nodes = len(onnx.load(model).graph.node)
    fails, mem, modes = [], {}, {}
    for label, env in (("default", {}),
                       ("tiled", {"ORTMK_VULKAN_GEMM": "tiled", "ORTMK_VULKAN_CONV": "tiled"}),
                       ("fp16 off", {"ORTMK_VULKAN_FP16": "0"})):
        out = os.path.join(work, name + "_" + label.replace(" ", "_"))
        p = run(ort_run, model, inputs, out, "vulkan,cpu", env)
        if p.returncode != 0:
            fails.append("%s (%s): ort-run failed: %s" % (name, label, p.stderr[-1500:]))
            continue
        rep = json.loads(p.stdout)
        if rep["nodes_per_provider"].get("vulkan", 0) != n_nodes:
            fails.append("%s (%s): %s of %d nodes on vulkan" % (
                name, label, rep["nodes_per_provider"], n_nodes))
        mode = MODE_RE.findall(p.stderr)
        modes[label] = mode
        # A device without 16-bit storage says float32 in every mode.
        if len(mode) != 1 or (label == "fp16 off" and mode != ["float32"]):
            fails.append("%s (%s): the provider says float16 is %s on the device" % (
                name, label, mode))
        mem[label] = sum(int(m) for _, _, m in LOAD_RE.findall(p.stderr)[:1])
        why = check_outputs(want, out)
        if why:
            fails.append("%s (%s): %s" % (name, label, why))
    if modes.get("default") == ["float16"] and mem.get("fp16 off") and \
            not mem["default"] < 0.75 * mem["fp16 off"]:
        fails.append("%s: weights take %d bytes on the device with float16 storage, %d without" % (
            name, mem["default"], mem["fp16 off"]))
    note = "weights %s bytes on the device (fp16 storage) vs %s (off)" % (
        mem.get("default"), mem.get("fp16 off"))
    print("%s: %d nodes on vulkan; %s; %s" % (name, n_nodes, note, "FAIL" if fails else "ok"))
    return fails


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    ort_run, ep, work = sys.argv[1:]
    if subprocess.run([ep, "--probe"], capture_output=True).returncode != 0:
        print("no Vulkan device: skipped")
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    fails = check_model(ort_run, "cnn16", cnn16, work) + check_model(ort_run, "tfm16", tfm16, work)
    for f in fails:
        print("FAIL", f)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
