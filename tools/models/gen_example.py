#!/usr/bin/python3
"""Writes the README's example model: a small CNN classifier.

    image [batch, 3, 32, 32]
      -> Conv 3x3 (16) -> BatchNormalization -> Relu -> MaxPool 2x2
      -> Conv 3x3 (32) -> BatchNormalization -> Relu -> MaxPool 2x2
      -> GlobalAveragePool -> Flatten -> Gemm (10) -> Softmax -> probs [batch, 10]

Weights come from a fixed seed, so the file is the same on every run.

usage: gen_example.py OUT.onnx [--reference DIR]
  --reference DIR  also write DIR/image.npy (seed 1 input) and DIR/probs.npy
                   (its numpy reference output)
"""
import argparse
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402


def build(seed=20240):
    rng = np.random.default_rng(seed)
    w = {}
    nodes = []
    chans = [3, 16, 32]
    x = "image"
    for i in range(2):
        cin, cout = chans[i], chans[i + 1]
        p = "block%d" % (i + 1)
        w[p + ".conv.w"] = C.rand_weight(rng, (cout, cin, 3, 3), cin * 9)
        w[p + ".conv.b"] = C.rand_uniform(rng, (cout,), -0.1, 0.1)
        w[p + ".bn.scale"] = C.rand_uniform(rng, (cout,), 0.8, 1.2)
        w[p + ".bn.bias"] = C.rand_uniform(rng, (cout,), -0.1, 0.1)
        w[p + ".bn.mean"] = C.rand_uniform(rng, (cout,), -0.1, 0.1)
        w[p + ".bn.var"] = C.rand_uniform(rng, (cout,), 0.5, 1.5)
        nodes += [
            onnx.helper.make_node("Conv", [x, p + ".conv.w", p + ".conv.b"], [p + ".conv"],
                                  name=p + "/conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
            onnx.helper.make_node("BatchNormalization",
                                  [p + ".conv", p + ".bn.scale", p + ".bn.bias",
                                   p + ".bn.mean", p + ".bn.var"], [p + ".bn"],
                                  name=p + "/bn", epsilon=1e-5),
            onnx.helper.make_node("Relu", [p + ".bn"], [p + ".relu"], name=p + "/relu"),
            onnx.helper.make_node("MaxPool", [p + ".relu"], [p + ".pool"], name=p + "/pool",
                                  kernel_shape=[2, 2], strides=[2, 2]),
        ]
        x = p + ".pool"
    w["fc.w"] = C.rand_weight(rng, (10, 32), 32)
    w["fc.b"] = C.rand_uniform(rng, (10,), -0.1, 0.1)
    nodes += [
        onnx.helper.make_node("GlobalAveragePool", [x], ["gap"], name="head/gap"),
        onnx.helper.make_node("Flatten", ["gap"], ["flat"], name="head/flatten", axis=1),
        onnx.helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="head/fc",
                              transB=1),
        onnx.helper.make_node("Softmax", ["logits"], ["probs"], name="head/softmax", axis=-1),
    ]
    model = C.make_model(
        nodes, [C.value_info("image", C.FLOAT, ["batch", 3, 32, 32])],
        [C.value_info("probs", C.FLOAT, ["batch", 10])],
        [C.init(k, v) for k, v in w.items()], "example_cnn",
        "ortmk example: a small CNN classifier with random weights")
    return model, w


def reference(w, image):
    x = image.astype(np.float64)
    for p in ("block1", "block2"):
        x = C.conv2d(x, w[p + ".conv.w"], w[p + ".conv.b"], pads=(1, 1, 1, 1))
        x = C.batchnorm(x, w[p + ".bn.scale"], w[p + ".bn.bias"], w[p + ".bn.mean"],
                        w[p + ".bn.var"])
        x = C.maxpool2d(C.relu(x), (2, 2), (2, 2))
    x = C.flatten(C.global_avgpool(x))
    return C.softmax(C.gemm(x, w["fc.w"], w["fc.b"], trans_b=1), axis=-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--reference", metavar="DIR")
    args = ap.parse_args()
    model, w = build()
    onnx.checker.check_model(model)
    onnx.save(model, args.out)
    if args.reference:
        os.makedirs(args.reference, exist_ok=True)
        image = np.random.default_rng(1).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
        np.save(os.path.join(args.reference, "image.npy"), image)
        np.save(os.path.join(args.reference, "probs.npy"),
                reference(w, image).astype(np.float32))


if __name__ == "__main__":
    main()
