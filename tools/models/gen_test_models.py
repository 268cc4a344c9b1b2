#!/usr/bin/python3
"""Writes the integration-test models with inputs and reference outputs.

usage: gen_test_models.py OUTDIR      write the models (deterministic)
       gen_test_models.py --self-test check the references, then exit

For each model NAME it writes OUTDIR/NAME/model.onnx, input_<k>.npy,
expected_<k>.npy (float64 numpy reference, stored as float32) and
manifest.json: {"inputs": {name: file}, "outputs": {name: file},
"rtol": r, "atol": a}.  tests/integration/run_model_test.py reads them.

  mlp          MatMul+Add+Relu x3, Gemm, Sigmoid; dynamic dim "batch"
  mlp_ext      the same model with every initializer in weights.bin
               (ONNX external data, 64-byte aligned offsets with gaps)
  cnn          grouped/depthwise/strided/dilated/asymmetric-padded Conv,
               BatchNormalization, pools, Concat, Gemm, Softmax
  transformer  one encoder block as PyTorch exports it: dynamic dim "seq",
               heads split by Shape/Gather/Unsqueeze/Concat/Reshape,
               erf Gelu, a hand-written ReduceMean/Pow/Sqrt layer norm

Between them the models use every op in REQUIRED_OPS (checked by the
self-test).  The self-test also evaluates each generated graph with
refgraph.py and compares it with the hand-written reference.
"""
import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

REQUIRED_OPS = {
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Erf",
    "Sqrt", "Pow", "Softmax", "LayerNormalization", "Conv", "MaxPool", "AveragePool",
    "GlobalAveragePool", "BatchNormalization", "Reshape", "Transpose", "Flatten",
    "Concat", "Gather", "Shape", "Unsqueeze", "Squeeze", "Constant", "Identity", "Cast",
    "ReduceMean",
}

node = helper.make_node


class Model:
    """A model under construction: its nodes, float32 weights and the
    tolerances its test uses."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.w = {}

    def weight(self, name, shape, fan_in):
        self.w[name] = C.rand_weight(self.rng, shape, fan_in)
        return name

    def uniform(self, name, shape, lo, hi):
        self.w[name] = C.rand_uniform(self.rng, shape, lo, hi)
        return name

    def add(self, op, inputs, output, **attrs):
        self.nodes.append(node(op, inputs, [output], name=output + "/" + op, **attrs))
        return output

    def const(self, name, array):
        self.nodes.append(C.const_node(name, array))
        return name

    def finish(self, name, inputs, outputs, doc):
        return C.make_model(self.nodes, inputs, outputs,
                            [C.init(k, v) for k, v in self.w.items()], name, doc)


# ------------------------------------------------------------------- mlp

def build_mlp():
    m = Model(1001)
    x = "x"
    sizes = [64, 128, 96, 64]
    for i in range(3):
        w = m.weight("fc%d.w" % i, (sizes[i], sizes[i + 1]), sizes[i])
        b = m.uniform("fc%d.b" % i, (sizes[i + 1],), -0.1, 0.1)
        h = m.add("MatMul", [x, w], "fc%d.mm" % i)
        h = m.add("Add", [h, b], "fc%d.add" % i)
        x = m.add("Relu", [h], "fc%d.relu" % i)
    # Gemm with transB and non-default alpha/beta so both are exercised.
    w = m.weight("head.w", (10, 64), 64)
    b = m.uniform("head.b", (10,), -0.5, 0.5)
    h = m.add("Gemm", [x, w, b], "head.gemm", alpha=0.5, beta=2.0, transB=1)
    m.add("Sigmoid", [h], "y")
    model = m.finish("mlp", [C.value_info("x", C.FLOAT, ["batch", 64])],
                     [C.value_info("y", C.FLOAT, ["batch", 10])],
                     "3 x (MatMul+Add+Relu), Gemm, Sigmoid")
    return model, m.w


def ref_mlp(w, x):
    h = x.astype(np.float64)
    for i in range(3):
        h = C.relu(C.matmul(h, w["fc%d.w" % i]) + w["fc%d.b" % i])
    return {"y": C.sigmoid(C.gemm(h, w["head.w"], w["head.b"], 0.5, 2.0, trans_b=1))}


# ------------------------------------------------------------------- cnn

CNN_BN = ("scale", "bias", "mean", "var")


def _bn(m, x, name, ch):
    p = [m.uniform(name + ".scale", (ch,), 0.5, 1.5), m.uniform(name + ".bias", (ch,), -0.2, 0.2),
         m.uniform(name + ".mean", (ch,), -0.2, 0.2), m.uniform(name + ".var", (ch,), 0.5, 2.0)]
    return m.add("BatchNormalization", [x] + p, name, epsilon=1e-3)


def build_cnn():
    m = Model(2002)
    w1 = m.weight("conv1.w", (8, 4, 3, 3), 36)
    b1 = m.uniform("conv1.b", (8,), -0.1, 0.1)
    h = m.add("Conv", ["image", w1, b1], "conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    h = m.add("Relu", [_bn(m, h, "bn1", 8)], "relu1")                    # [2,8,16,16]
    # Branch a: grouped conv, stride 2.
    wa = m.weight("conva.w", (8, 4, 3, 3), 36)
    ba = m.uniform("conva.b", (8,), -0.1, 0.1)
    a = m.add("Conv", [h, wa, ba], "conva", group=2, strides=[2, 2], pads=[1, 1, 1, 1])
    a = m.add("Relu", [a], "relua")                                      # [2,8,8,8]
    # Branch b: depthwise dilated conv (no bias), then MaxPool.
    wb = m.weight("convb.w", (8, 1, 3, 3), 9)
    b = m.add("Conv", [h, wb], "convb", group=8, dilations=[2, 2], pads=[2, 2, 2, 2])
    b = m.add("MaxPool", [b], "poolb", kernel_shape=[2, 2], strides=[2, 2])
    # Branch c: padded AveragePool (padding excluded from the divisor).
    c = m.add("AveragePool", [h], "poolc", kernel_shape=[3, 3], strides=[2, 2],
              pads=[1, 1, 1, 1])
    h = m.add("Concat", [a, b, c], "concat", axis=1)                     # [2,24,8,8]
    w2 = m.weight("conv2.w", (16, 24, 3, 3), 216)
    b2 = m.uniform("conv2.b", (16,), -0.1, 0.1)
    h = m.add("Conv", [h, w2, b2], "conv2", kernel_shape=[3, 3], pads=[0, 1, 1, 0])
    h = m.add("Relu", [_bn(m, h, "bn2", 16)], "relu2")                   # [2,16,7,7]
    h = m.add("MaxPool", [h], "pool2", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    h = m.add("GlobalAveragePool", [h], "gap")                           # [2,16,1,1]
    h = m.add("Flatten", [h], "flat", axis=1)
    wf = m.weight("fc.w", (16, 10), 16)
    bf = m.uniform("fc.b", (10,), -0.1, 0.1)
    m.add("Gemm", [h, wf, bf], "logits")
    m.add("Softmax", ["logits"], "probs", axis=1)
    model = m.finish("cnn", [C.value_info("image", C.FLOAT, [2, 4, 16, 16])],
                     [C.value_info("logits", C.FLOAT, [2, 10]),
                      C.value_info("probs", C.FLOAT, [2, 10])],
                     "conv variants, batchnorm, pools, concat, gemm, softmax")
    return model, m.w


def ref_cnn(w, image):
    def bn(x, n):
        return C.batchnorm(x, *[w[n + "." + k] for k in CNN_BN], eps=1e-3)

    h = C.conv2d(image.astype(np.float64), w["conv1.w"], w["conv1.b"], pads=(1, 1, 1, 1))
    h = C.relu(bn(h, "bn1"))
    a = C.relu(C.conv2d(h, w["conva.w"], w["conva.b"], strides=(2, 2), pads=(1, 1, 1, 1),
                        group=2))
    b = C.conv2d(h, w["convb.w"], None, pads=(2, 2, 2, 2), dilations=(2, 2), group=8)
    b = C.maxpool2d(b, (2, 2), (2, 2))
    c = C.avgpool2d(h, (3, 3), (2, 2), (1, 1, 1, 1))
    h = np.concatenate([a, b, c], axis=1)
    h = C.relu(bn(C.conv2d(h, w["conv2.w"], w["conv2.b"], pads=(0, 1, 1, 0)), "bn2"))
    h = C.maxpool2d(h, (3, 3), (2, 2), (1, 1, 1, 1))
    logits = C.gemm(C.flatten(C.global_avgpool(h)), w["fc.w"], w["fc.b"])
    return {"logits": logits, "probs": C.softmax(logits, axis=1)}


# ----------------------------------------------------------- transformer

D, HEADS, FF = 64, 4, 128
HD = D // HEADS


def _linear(m, x, name, fin, fout):
    w = m.weight(name + ".w", (fin, fout), fin)
    b = m.uniform(name + ".b", (fout,), -0.1, 0.1)
    return m.add("Add", [m.add("MatMul", [x, w], name + ".mm"), b], name)


def _heads(m, x, name, perm):
    """[1, seq, D] -> heads, the way torch.onnx exports view()+transpose():
    the batch and seq sizes are read back with Shape/Gather at run time."""
    shp = m.add("Shape", [x], name + ".shape")
    n = m.add("Gather", [shp, "i0"], name + ".n", axis=0)
    s = m.add("Gather", [shp, "i1"], name + ".s", axis=0)
    n = m.add("Unsqueeze", [n, "ax0"], name + ".n1")
    s = m.add("Unsqueeze", [s, "ax0"], name + ".s1")
    shape = m.add("Concat", [n, s, "c_heads", "c_hd"], name + ".newshape", axis=0)
    h = m.add("Reshape", [x, shape], name + ".split")
    return m.add("Transpose", [h], name + ".heads", perm=perm), n, s


def build_transformer():
    m = Model(3003)
    m.const("i0", np.array(0, np.int64))
    m.const("i1", np.array(1, np.int64))
    m.const("i3", np.array(3, np.int64))
    m.const("ax0", np.array([0], np.int64))
    m.const("ax1", np.array([1], np.int64))
    m.const("c_heads", np.array([HEADS], np.int64))
    m.const("c_hd", np.array([HD], np.int64))
    m.const("c_d", np.array([D], np.int64))
    m.const("first", np.array([0], np.int64))
    m.const("half", np.array(0.5, np.float32))
    m.const("one", np.array(1.0, np.float32))
    m.const("two", np.array(2.0, np.float32))
    m.const("sqrt2", np.array(math.sqrt(2.0), np.float32))
    m.const("eps", np.array(1e-5, np.float32))

    ln1 = m.add("LayerNormalization", ["x", m.uniform("ln1.g", (D,), 0.8, 1.2),
                                       m.uniform("ln1.b", (D,), -0.1, 0.1)], "ln1",
                axis=-1, epsilon=1e-5)
    q = _linear(m, ln1, "q", D, D)
    k = _linear(m, ln1, "k", D, D)
    v = _linear(m, ln1, "v", D, D)
    qh, n, s = _heads(m, q, "qh", [0, 2, 1, 3])                         # [1,H,seq,hd]
    kh, _, _ = _heads(m, k, "kh", [0, 2, 3, 1])                         # [1,H,hd,seq]
    vh, _, _ = _heads(m, v, "vh", [0, 2, 1, 3])
    # sqrt(head dim) read from the shape at run time: Shape, Gather, Cast, Sqrt.
    hd = m.add("Gather", [m.add("Shape", [qh], "qh.shape4"), "i3"], "hd", axis=0)
    scale = m.add("Sqrt", [m.add("Cast", [hd], "hd.f", to=C.FLOAT)], "hd.sqrt")
    scores = m.add("Div", [m.add("MatMul", [qh, kh], "scores.raw"), scale], "scores")
    attn = m.add("Softmax", [scores], "attn", axis=-1)
    ctx = m.add("Transpose", [m.add("MatMul", [attn, vh], "ctx.heads")], "ctx.t",
                perm=[0, 2, 1, 3])
    ctx = m.add("Reshape", [ctx, m.add("Concat", [n, s, "c_d"], "ctx.shape", axis=0)], "ctx")
    h = m.add("Add", ["x", _linear(m, ctx, "o", D, D)], "res1")
    # A layer norm spelled out, as older exporters write it.
    mean = m.add("ReduceMean", [h], "ln2.mean", axes=[-1], keepdims=1)
    d = m.add("Sub", [h, mean], "ln2.d")
    var = m.add("ReduceMean", [m.add("Pow", [d, "two"], "ln2.sq")], "ln2.var", axes=[-1])
    std = m.add("Sqrt", [m.add("Add", [var, "eps"], "ln2.vareps")], "ln2.std")
    ln2 = m.add("Div", [d, std], "ln2.norm")
    ln2 = m.add("Mul", [ln2, m.uniform("ln2.g", (D,), 0.8, 1.2)], "ln2.scaled")
    ln2 = m.add("Add", [ln2, m.uniform("ln2.b", (D,), -0.1, 0.1)], "ln2")
    f = _linear(m, ln2, "ff1", D, FF)
    erf = m.add("Erf", [m.add("Div", [f, "sqrt2"], "gelu.div")], "gelu.erf")
    g = m.add("Mul", [m.add("Mul", [f, "half"], "gelu.half"),
                      m.add("Add", [erf, "one"], "gelu.add")], "gelu")
    h = m.add("Add", [h, _linear(m, g, "ff2", FF, D)], "res2")
    ln3 = m.add("LayerNormalization", [h, m.uniform("ln3.g", (D,), 0.8, 1.2),
                                       m.uniform("ln3.b", (D,), -0.1, 0.1)], "ln3",
                axis=-1, epsilon=1e-5)
    m.add("Identity", [ln3], "y")
    # Pooler: first token -> Linear -> Tanh.
    first = m.add("Squeeze", [m.add("Gather", [ln3, "first"], "tok0", axis=1), "ax1"], "cls")
    m.add("Tanh", [_linear(m, first, "pool", D, D)], "pooled")
    model = m.finish("transformer", [C.value_info("x", C.FLOAT, [1, "seq", D])],
                     [C.value_info("y", C.FLOAT, [1, "seq", D]),
                      C.value_info("pooled", C.FLOAT, [1, D])],
                     "one transformer encoder block, PyTorch-export style")
    return model, m.w


def ref_transformer(w, x):
    def lin(t, n):
        return C.matmul(t, w[n + ".w"]) + w[n + ".b"]

    x = x.astype(np.float64)
    seq = x.shape[1]
    ln1 = C.layernorm(x, w["ln1.g"], w["ln1.b"])
    q, k, v = (lin(ln1, n).reshape(1, seq, HEADS, HD).transpose(0, 2, 1, 3) for n in "qkv")
    attn = C.softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(HD), axis=-1)
    ctx = (attn @ v).transpose(0, 2, 1, 3).reshape(1, seq, D)
    h = x + lin(ctx, "o")
    h = h + lin(C.gelu_erf(lin(C.layernorm(h, w["ln2.g"], w["ln2.b"]), "ff1")), "ff2")
    y = C.layernorm(h, w["ln3.g"], w["ln3.b"])
    return {"y": y, "pooled": np.tanh(lin(y[:, 0, :], "pool"))}


# ---------------------------------------------------------------- output

def _inputs(name):
    rng = np.random.default_rng({"mlp": 11, "cnn": 22, "transformer": 33}[name])
    shape = {"mlp": (3, 64), "cnn": (2, 4, 16, 16), "transformer": (1, 5, D)}[name]
    feed = "image" if name == "cnn" else "x"
    return {feed: rng.uniform(-1, 1, shape).astype(np.float32)}


BUILDERS = {
    "mlp": (build_mlp, ref_mlp, 1e-5),
    "cnn": (build_cnn, ref_cnn, 1e-5),
    "transformer": (build_transformer, ref_transformer, 1e-4),
}


def _write_dir(d, model, feeds, expected, atol):
    os.makedirs(d, exist_ok=True)
    manifest = {"inputs": {}, "outputs": {}, "rtol": 1e-4, "atol": atol}
    for k, (n, a) in enumerate(feeds.items()):
        manifest["inputs"][n] = "input_%d.npy" % k
        np.save(os.path.join(d, manifest["inputs"][n]), a)
    for k, (n, a) in enumerate(expected.items()):
        manifest["outputs"][n] = "expected_%d.npy" % k
        np.save(os.path.join(d, manifest["outputs"][n]), a.astype(np.float32))
    onnx.save(model, os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


def externalize(model, bin_name):
    """Moves every initializer's bytes into one file at offsets chosen here
    (64-byte aligned, with a gap after each tensor so that an offset bug
    reads garbage rather than the neighbour).  Returns the file's bytes."""
    blob = bytearray(b"ORTMKEXT")  # nothing starts at offset 0
    for t in model.graph.initializer:
        raw = onnx.numpy_helper.to_array(t).tobytes()
        offset = (len(blob) + 63) // 64 * 64
        blob += b"\xa5" * (offset - len(blob)) + raw + b"\x5a" * 16
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        for key, val in (("location", bin_name), ("offset", offset), ("length", len(raw))):
            e = t.external_data.add()
            e.key, e.value = key, str(val)
    return bytes(blob)


def generate(outdir):
    for name, (build, ref, atol) in BUILDERS.items():
        model, w = build()
        onnx.checker.check_model(model)
        feeds = _inputs(name)
        expected = ref(w, *feeds.values())
        _write_dir(os.path.join(outdir, name), model, feeds, expected, atol)
        if name == "mlp":
            ext_dir = os.path.join(outdir, "mlp_ext")
            blob = externalize(model, "weights.bin")
            _write_dir(ext_dir, model, feeds, expected, atol)
            with open(os.path.join(ext_dir, "weights.bin"), "wb") as f:
                f.write(blob)
            # Checked by path so that the checker resolves weights.bin;
            # then the bytes are loaded back and compared.
            onnx.checker.check_model(os.path.join(ext_dir, "model.onnx"))
            back = onnx.load(os.path.join(ext_dir, "model.onnx"))
            for t in back.graph.initializer:
                assert np.array_equal(onnx.numpy_helper.to_array(t), w[t.name]), t.name


def self_test():
    C.self_test()
    used = set()
    for name, (build, ref, _) in BUILDERS.items():
        model, w = build()
        onnx.checker.check_model(model)
        used |= {n.op_type for n in model.graph.node}
        import refgraph
        feeds = _inputs(name)
        want = ref(w, *feeds.values())
        got = refgraph.run(model, feeds)
        for out, val in want.items():
            assert got[out].shape == val.shape, (name, out, got[out].shape, val.shape)
            err = np.max(np.abs(got[out] - val))
            # Both sides are float64; the graph uses float32 constants
            # (0.5, sqrt 2, eps), hence not bit-exact.
            assert err < 1e-6, (name, out, err)
            assert np.all(np.isfinite(val)) and np.std(val) > 1e-3, (name, out)
        if name == "transformer":  # a second seq length, through the dynamic path
            feeds = {"x": np.random.default_rng(5).uniform(-1, 1, (1, 9, D)).astype(np.float32)}
            got = refgraph.run(model, feeds)
            assert np.max(np.abs(got["y"] - ref(w, feeds["x"])["y"])) < 1e-6
    missing = REQUIRED_OPS - used
    assert not missing, "ops not covered: %s" % sorted(missing)
    print("self-test passed: references match loops and graphs; %d ops covered" % len(used))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--self-test":
        self_test()
    else:
        generate(sys.argv[1])


if __name__ == "__main__":
    main()
