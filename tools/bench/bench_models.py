"""The models of issue #7's benchmark, generated deterministically.

Used by tools/bench/ort-bench; `bench_models.py DIR [NAME...]` writes them
without running anything.  Each model NAME becomes DIR/NAME.onnx plus its
inputs (DIR/NAME.in/<input>.npy for ort-run, <input>.bin raw float32 for
the Node script) and DIR/NAME.json (inputs, shapes, generator version).
A model whose .json names the current VERSION is not written again, so a
cache directory survives rebuilds; bump VERSION whenever a graph changes.

  tiny    [1,16] Add of an initializer: the per-run overhead
  mlp1    4 x (Gemm 1024x1024, transB as nn.Linear exports it) with Relu
          between them, batch 1
  mlp32   the same layers at batch 32
  cnn     ResNet-18 shape at 224x224 as torch.onnx.export writes it without
          BN folding: Conv (no bias) + BatchNormalization + Relu, residual
          Add, 1x1/2 downsample convs, GlobalAveragePool, Flatten, Gemm 1000
  bert    4 post-LN encoder layers, hidden 256, 4 heads, FFN 1024, seq 128,
          batch 1: MatMul+Add, Reshape/Transpose heads, MatMul, Div by
          sqrt(64), Softmax, MatMul, Gelu via Erf, LayerNormalization

All weights are uniform in +-sqrt(3/fan_in) (unit-variance activations), so
outputs stay O(1) and an rtol of 1e-3 is meaningful.
"""
import hashlib
import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VERSION = 1
OPSET = 17
FLOAT = TensorProto.FLOAT
MODELS = ("tiny", "mlp1", "mlp32", "cnn", "bert")

class Graph:
    """A graph under construction: nodes, float32 initializers, one rng."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []

    def tensor(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, name, shape, fan_in):
        bound = math.sqrt(3.0 / fan_in)
        return self.tensor(name, self.rng.uniform(-bound, bound, shape).astype(np.float32))

    def uniform(self, name, shape, lo, hi):
        return self.tensor(name, self.rng.uniform(lo, hi, shape).astype(np.float32))

    def op(self, op, inputs, output, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [output], name=output + "/" + op,
                                           **attrs))
        return output

    def model(self, name, inputs, outputs):
        vi = helper.make_tensor_value_info
        graph = helper.make_graph(self.nodes, name,
                                  [vi(n, FLOAT, s) for n, s in inputs],
                                  [vi(n, FLOAT, s) for n, s in outputs], self.inits)
        model = helper.make_model(graph, producer_name="ortmk-bench",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8   # what onnx 1.12 writes; keeps the bytes stable
        onnx.checker.check_model(model)
        return model


# ------------------------------------------------------------------ models

def build_tiny():
    g = Graph(701)
    g.op("Add", ["x", g.uniform("c", (1, 16), -1.0, 1.0)], "y")
    return g.model("tiny_add", [("x", [1, 16])], [("y", [1, 16])])


def build_mlp(batch):
    g = Graph(702)   # same seed: mlp1 and mlp32 share their weights
    h = "x"
    for i in range(4):
        w = g.weight(f"fc{i}.weight", (1024, 1024), 1024)   # [out, in]
        b = g.uniform(f"fc{i}.bias", (1024,), -0.1, 0.1)
        h = g.op("Gemm", [h, w, b], f"fc{i}", transB=1)
        if i < 3:
            h = g.op("Relu", [h], f"relu{i}")
    g.nodes[-1].output[0] = "y"
    return g.model(f"mlp_b{batch}", [("x", [batch, 1024])], [("y", [batch, 1024])])


def _conv_bn(g, x, name, cin, cout, k, stride, relu, gamma=(0.8, 1.2)):
    w = g.weight(name + ".weight", (cout, cin, k, k), cin * k * k)
    y = g.op("Conv", [x, w], name, kernel_shape=[k, k], strides=[stride, stride],
             pads=[k // 2] * 4)
    bn = name.replace("conv", "bn")
    y = g.op("BatchNormalization",
             [y, g.uniform(bn + ".weight", (cout,), *gamma),
              g.uniform(bn + ".bias", (cout,), -0.1, 0.1),
              g.uniform(bn + ".running_mean", (cout,), -0.1, 0.1),
              g.uniform(bn + ".running_var", (cout,), 0.8, 1.2)], bn, epsilon=1e-5)
    return g.op("Relu", [y], name + ".relu") if relu else y


def build_cnn():
    g = Graph(703)
    y = _conv_bn(g, "image", "conv1", 3, 64, 7, 2, True)
    y = g.op("MaxPool", [y], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    cin = 64
    for s, cout in enumerate((64, 128, 256, 512)):
        for b in range(2):
            p = f"layer{s + 1}.{b}"
            stride = 2 if (s > 0 and b == 0) else 1
            h = _conv_bn(g, y, p + ".conv1", cin, cout, 3, stride, True)
            # Residual branches end with a smaller gamma so the sum's variance
            # stays O(1) over 8 blocks (as trained ResNets end up).
            h = _conv_bn(g, h, p + ".conv2", cout, cout, 3, 1, False, (0.3, 0.5))
            if stride != 1 or cin != cout:
                y = _conv_bn(g, y, p + ".downsample.conv", cin, cout, 1, stride, False)
            y = g.op("Relu", [g.op("Add", [h, y], p + ".add")], p + ".relu")
            cin = cout
    y = g.op("Flatten", [g.op("GlobalAveragePool", [y], "avgpool")], "flatten", axis=1)
    g.op("Gemm", [y, g.weight("fc.weight", (1000, 512), 512),
                  g.uniform("fc.bias", (1000,), -0.1, 0.1)], "logits", transB=1)
    return g.model("resnet18", [("image", [1, 3, 224, 224])], [("logits", [1, 1000])])


def _linear(g, x, name, fin, fout):
    w = g.weight(name + ".weight", (fin, fout), fin)   # MatMul weights: [in, out]
    return g.op("Add", [g.op("MatMul", [x, w], name + ".mm"),
                        g.uniform(name + ".bias", (fout,), -0.1, 0.1)], name)


def _layernorm(g, x, name, d):
    return g.op("LayerNormalization", [x, g.uniform(name + ".weight", (d,), 0.8, 1.2),
                                       g.uniform(name + ".bias", (d,), -0.1, 0.1)],
                name, axis=-1, epsilon=1e-12)


def _encoder_layer(g, x, p, d, ff):
    q = g.op("Transpose", [g.op("Reshape", [_linear(g, x, p + ".q", d, d), "heads_shape"],
                                p + ".q.split")], p + ".q.heads", perm=[0, 2, 1, 3])
    k = g.op("Transpose", [g.op("Reshape", [_linear(g, x, p + ".k", d, d), "heads_shape"],
                                p + ".k.split")], p + ".k.heads", perm=[0, 2, 3, 1])
    v = g.op("Transpose", [g.op("Reshape", [_linear(g, x, p + ".v", d, d), "heads_shape"],
                                p + ".v.split")], p + ".v.heads", perm=[0, 2, 1, 3])
    s = g.op("Div", [g.op("MatMul", [q, k], p + ".scores.raw"), "sqrt_hd"], p + ".scores")
    a = g.op("Softmax", [s], p + ".probs", axis=-1)
    c = g.op("Transpose", [g.op("MatMul", [a, v], p + ".ctx.heads")], p + ".ctx.t",
             perm=[0, 2, 1, 3])
    c = g.op("Reshape", [c, "hidden_shape"], p + ".ctx")
    h = _layernorm(g, g.op("Add", [_linear(g, c, p + ".attn_out", d, d), x], p + ".res1"),
                   p + ".ln1", d)
    f = _linear(g, h, p + ".ffn1", d, ff)
    erf = g.op("Erf", [g.op("Div", [f, "sqrt2"], p + ".gelu.div")], p + ".gelu.erf")
    gelu = g.op("Mul", [g.op("Mul", [f, g.op("Add", [erf, "one"], p + ".gelu.add")],
                             p + ".gelu.mul"), "half"], p + ".gelu")
    out = g.op("Add", [_linear(g, gelu, p + ".ffn2", ff, d), h], p + ".res2")
    return _layernorm(g, out, p + ".ln2", d)


def build_bert(layers=4, seq=128, d=256, heads=4, ff=1024):
    g = Graph(704)
    g.tensor("heads_shape", np.array([1, seq, heads, d // heads], np.int64))
    g.tensor("hidden_shape", np.array([1, seq, d], np.int64))
    g.tensor("sqrt_hd", np.array(math.sqrt(d // heads), np.float32))
    g.tensor("sqrt2", np.array(math.sqrt(2.0), np.float32))
    g.tensor("one", np.array(1.0, np.float32))
    g.tensor("half", np.array(0.5, np.float32))
    x = "hidden"
    for i in range(layers):
        x = _encoder_layer(g, x, f"layer{i}", d, ff)
    g.op("Identity", [x], "y")
    return g.model("bert_like", [("hidden", [1, seq, d])], [("y", [1, seq, d])])


BUILDERS = {
    "tiny": build_tiny,
    "mlp1": lambda: build_mlp(1),
    "mlp32": lambda: build_mlp(32),
    "cnn": build_cnn,
    "bert": build_bert,
}


# ------------------------------------------------------------------- cache

def _input_shapes(model):
    out = []
    for vi in model.graph.input:
        out.append((vi.name, [d.dim_value for d in vi.type.tensor_type.shape.dim]))
    return out


def ensure(cache, name):
    """Writes model `name` into `cache` unless the current version is there.
    Returns its description: {"model", "inputs": [{name, shape, npy, bin}],
    "sha256"}; the paths are absolute."""
    meta_path = os.path.join(cache, name + ".json")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("version") == VERSION and os.path.exists(meta["model"]) and \
                all(os.path.exists(i["npy"]) and os.path.exists(i["bin"])
                    for i in meta["inputs"]):
            return meta
    except (OSError, ValueError, KeyError):
        pass
    os.makedirs(os.path.join(cache, name + ".in"), exist_ok=True)
    model = BUILDERS[name]()
    data = model.SerializeToString()
    path = os.path.abspath(os.path.join(cache, name + ".onnx"))
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)
    rng = np.random.default_rng(1000 + MODELS.index(name))
    inputs = []
    for iname, shape in _input_shapes(model):
        x = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
        base = os.path.abspath(os.path.join(cache, name + ".in", iname))
        np.save(base + ".npy", x)
        x.tofile(base + ".bin")
        inputs.append({"name": iname, "shape": shape, "npy": base + ".npy",
                       "bin": base + ".bin"})
    meta = {"version": VERSION, "model": path, "inputs": inputs,
            "sha256": hashlib.sha256(data).hexdigest()}
    with open(meta_path + ".tmp", "w") as f:
        json.dump(meta, f, indent=1)
    os.replace(meta_path + ".tmp", meta_path)
    return meta


def main():
    if len(sys.argv) < 2:
        print("usage: bench_models.py DIR [NAME...]  (names: %s)" % " ".join(MODELS),
              file=sys.stderr)
        return 2
    for name in sys.argv[2:] or MODELS:
        meta = ensure(sys.argv[1], name)
        print(name, meta["model"], meta["sha256"][:16])
    return 0


if __name__ == "__main__":
    sys.exit(main())
