"""A large batch run as chunks of it (core/batch.c, core/run.c's run_chunks):
the outputs of a chunked run are the model's, computed by numpy, and a model
that mixes the images of its batch is never chunked.

- cnn: two conv branches concatenated, MaxPool, a Reshape to a shape
  computed from Shape (the batch size, steering a shape only), a constant
  token Expanded to the batch and Concatenated, GlobalAveragePool, Gemm,
  Softmax over axis 1; batch 5 in chunks of 2 (the last of one), forced
  with ORTMK_BATCH_CHUNK=2: chunked (the log says so) and against numpy.
- auto: a convolution whose batch of 16 takes 64 MiB of activations (4 MiB
  an image, weights of a few KiB): chunked without being asked, in chunks
  of about 8 MiB of activations per thread (2 images at 1 thread, 4 at 2).
- mixers: models whose images meet - Softmax over axis 0, x minus its mean
  over the batch, x @ x^T, x divided by the batch size, a Reshape fixed to
  the batch size, a Gather along the batch, Flatten at axis 0, MaxPool's
  indices, a Slice reversing the batch, BatchNormalization in training
  mode, a constant operand spanning the batch: each, with chunks forced, kept whole (the log names why) and
  against numpy (a chunked run gives other numbers or fails).

usage: batch_chunk_test.py ORT_RUN
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h, numpy_helper as nh

passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    passed += ok
    failed += not ok


def save(path, nodes, inputs, outputs, inits, opset=17):
    g = h.make_graph(nodes, "batch", inputs,
                     [h.make_tensor_value_info(o, T.FLOAT, None) if isinstance(o, str) else o
                      for o in outputs],
                     [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)


def fin(name, shape):
    return h.make_tensor_value_info(name, T.FLOAT, shape)


def run(ort_run, d, model, feeds, chunk, threads=1):
    out = os.path.join(d, "out")
    args = [ort_run, model, "--output-dir", out, "--threads", str(threads)]
    for k, v in feeds.items():
        p = os.path.join(d, k + ".npy")
        np.save(p, v)
        args += ["--input", "%s=%s" % (k, p)]
    env = dict(os.environ, ORTMK_LOG="debug")
    env.pop("ORTMK_BATCH_CHUNK", None)
    if chunk is not None:
        env["ORTMK_BATCH_CHUNK"] = str(chunk)
    if os.path.isdir(out):
        for f in os.listdir(out):
            os.unlink(os.path.join(out, f))
    p = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        raise RuntimeError("ort-run: " + p.stderr.strip()[-400:])
    log = [ln.split("debug: ", 1)[1] for ln in p.stderr.splitlines()
           if "debug: batch " in ln]
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out)}, log


def conv(x, w, b, pad):
    n, c, hh, ww = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = hh + 2 * pad - kh + 1, ww + 2 * pad - kw + 1
    y = np.zeros((n, m, oh, ow))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,mc->nmhw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return y + b[None, :, None, None]


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def close(a, b, tol=1e-4):
    return a.shape == b.shape and np.allclose(a, b, rtol=tol, atol=tol)


def cnn_case(ort_run, d, rng):
    n = 5
    x = rng.standard_normal((n, 3, 12, 12)).astype(np.float32)
    w1 = (rng.standard_normal((6, 3, 3, 3)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((2, 3, 1, 1)) * 0.3).astype(np.float32)
    b1 = rng.standard_normal(6).astype(np.float32)
    b2 = rng.standard_normal(2).astype(np.float32)
    tok = rng.standard_normal((1, 8, 1, 1)).astype(np.float32)
    fw = (rng.standard_normal((10, 16)) * 0.3).astype(np.float32)
    fb = rng.standard_normal(10).astype(np.float32)
    nodes = [
        h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c1"], ["r1"]),
        h.make_node("Conv", ["x", "w2", "b2"], ["c2"]),
        h.make_node("Concat", ["r1", "c2"], ["cat"], axis=1),
        h.make_node("MaxPool", ["cat"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        # the batch size from Shape steers a Reshape (to N x 8 x 6 x 6)
        h.make_node("Shape", ["mp"], ["shp"]),
        h.make_node("Gather", ["shp", "zero"], ["nb"], axis=0),
        h.make_node("Unsqueeze", ["nb", "zero1"], ["nb1"]),
        h.make_node("Concat", ["nb1", "rest"], ["newshape"], axis=0),
        h.make_node("Reshape", ["mp", "newshape"], ["rs"]),
        # a constant plane per channel for every image (Expand to N x 8 x 6 x 6)
        h.make_node("Concat", ["nb1", "tokrest"], ["tokshape"], axis=0),
        h.make_node("Expand", ["tok", "tokshape"], ["toks"]),
        h.make_node("Concat", ["rs", "toks"], ["withtok"], axis=1),
        h.make_node("GlobalAveragePool", ["withtok"], ["gap"]),
        h.make_node("Flatten", ["gap"], ["flat"], axis=1),
        h.make_node("Gemm", ["flat", "fw", "fb"], ["logits"], transB=1),
        h.make_node("Softmax", ["logits"], ["y"], axis=1),
    ]
    inits = {"w1": w1, "b1": b1, "w2": w2, "b2": b2, "tok": tok, "fw": fw, "fb": fb,
             "zero": np.array(0, np.int64), "zero1": np.array([0], np.int64),
             "rest": np.array([8, 6, 6], np.int64), "tokrest": np.array([8, 6, 6], np.int64)}
    model = os.path.join(d, "cnn.onnx")
    save(model, nodes, [fin("x", ["N", 3, 12, 12])], ["y"], inits)
    x64 = x.astype(np.float64)
    cat = np.concatenate([np.maximum(conv(x64, w1, b1, 1), 0), conv(x64, w2, b2, 0)], 1)
    mp = cat.reshape(n, 8, 6, 2, 6, 2).max(axis=(3, 5))
    gap = np.concatenate([mp.mean(axis=(2, 3)), tok.reshape(1, 8).repeat(n, 0)], 1)
    ref = softmax(gap @ fw.T.astype(np.float64) + fb, 1)
    return model, {"x": x}, ref


def auto_case(ort_run, d, rng):
    n = 16
    x = rng.standard_normal((n, 3, 128, 128)).astype(np.float32)
    w = (rng.standard_normal((32, 3, 3, 3)) * 0.3).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["r"]),
             h.make_node("GlobalAveragePool", ["r"], ["y"])]
    model = os.path.join(d, "auto.onnx")
    save(model, nodes, [fin("x", ["N", 3, 128, 128])], ["y"], {"w": w, "b": b})
    ref = np.maximum(conv(x.astype(np.float64), w, b, 1), 0).mean(axis=(2, 3))[:, :, None, None]
    return model, {"x": x}, ref


def mixers(n, rng):
    """[name, nodes, inputs, outputs, inits, feeds, reference] of models
    whose images meet."""
    x = rng.standard_normal((n, 4)).astype(np.float32)
    x3 = rng.standard_normal((n, 4, 2)).astype(np.float32)
    img = rng.standard_normal((n, 2, 4, 4)).astype(np.float32)
    wide = rng.standard_normal((n, 3, 2)).astype(np.float32)
    x23 = rng.standard_normal((n, 2, 3)).astype(np.float32)
    bn = {"s": np.array([1.5, 0.5], np.float32), "b": np.array([0.1, -0.2], np.float32),
          "m": np.zeros(2, np.float32), "v": np.ones(2, np.float32)}
    mu, var = img.mean(axis=(0, 2, 3), keepdims=True), img.var(axis=(0, 2, 3), keepdims=True)
    bn_ref = ((img - mu) / np.sqrt(var + 1e-5) * bn["s"].reshape(1, 2, 1, 1) +
              bn["b"].reshape(1, 2, 1, 1))
    big = np.iinfo(np.int64)
    mp = img.reshape(n, 2, 2, 2, 2, 2).max(axis=(3, 5))
    flat = img.reshape(n, 2, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, 2, 2, 2, 4)
    arg = flat.argmax(axis=-1)
    hh, ww = np.meshgrid(np.arange(2), np.arange(2), indexing="ij")
    rows = 2 * hh[None, None] + arg // 2
    cols = 2 * ww[None, None] + arg % 2
    base = (np.arange(n)[:, None, None, None] * 2 + np.arange(2)[None, :, None, None]) * 16
    idx = base + rows * 4 + cols
    xin = [fin("x", ["N", 4])]
    return [
        ["softmax over axis 0", [h.make_node("Softmax", ["x"], ["y"], axis=0)], xin, ["y"], {},
         {"x": x}, {"y": softmax(x.astype(np.float64), 0)}],
        ["minus the batch mean", [h.make_node("ReduceMean", ["x"], ["m"], axes=[0]),
                                  h.make_node("Sub", ["x", "m"], ["y"])],
         xin, ["y"], {}, {"x": x}, {"y": x - x.mean(0)}],
        ["x @ x^T", [h.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                     h.make_node("MatMul", ["x", "t"], ["y"])],
         xin, ["y"], {}, {"x": x}, {"y": x.astype(np.float64) @ x.T}],
        ["divided by the batch size", [h.make_node("Shape", ["x"], ["s"]),
                                       h.make_node("Gather", ["s", "zero"], ["nb"], axis=0),
                                       h.make_node("Cast", ["nb"], ["nf"], to=T.FLOAT),
                                       h.make_node("Div", ["x", "nf"], ["y"])],
         xin, ["y"], {"zero": np.array(0, np.int64)}, {"x": x}, {"y": x / n}],
        ["a Reshape fixed to the batch size", [h.make_node("Reshape", ["x3", "shape"], ["y"])],
         [fin("x3", ["N", 4, 2])], ["y"], {"shape": np.array([n, 8], np.int64)}, {"x3": x3},
         {"y": x3.reshape(n, 8)}],
        ["a Gather along the batch", [h.make_node("Gather", ["x", "pick"], ["y"], axis=0)],
         xin, ["y"], {"pick": np.arange(n) % 2}, {"x": x}, {"y": x[np.arange(n) % 2]}],
        ["Flatten at axis 0", [h.make_node("Flatten", ["x"], ["y"], axis=0)],
         xin, ["y"], {}, {"x": x}, {"y": x.reshape(1, -1)}],
        ["MaxPool's indices", [h.make_node("MaxPool", ["img"], ["y", "i"], kernel_shape=[2, 2],
                                           strides=[2, 2])],
         [fin("img", ["N", 2, 4, 4])], ["y", h.make_tensor_value_info("i", T.INT64, None)], {},
         {"img": img}, {"y": mp, "i": idx}],
        ["a Slice reversing the batch", [h.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
         xin, ["y"], {"st": np.array([-1], np.int64), "en": np.array([big.min], np.int64),
                      "ax": np.array([0], np.int64), "sp": np.array([-1], np.int64)},
         {"x": x}, {"y": x[::-1]}],
        ["BatchNormalization in training mode", [h.make_node("BatchNormalization",
                                                             ["img", "s", "b", "m", "v"], ["y"],
                                                             training_mode=1)],
         [fin("img", ["N", 2, 4, 4])], ["y"], bn, {"img": img}, {"y": bn_ref}],
        ["a constant operand spanning the batch", [h.make_node("MatMul", ["x23", "wide"], ["y"])],
         [fin("x23", ["N", 2, 3])], ["y"], {"wide": wide}, {"x23": x23},
         {"y": np.matmul(x23.astype(np.float64), wide)}],
    ]


def main():
    ort_run = sys.argv[1]
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as d:
        model, feeds, ref = cnn_case(ort_run, d, rng)
        outs, log = run(ort_run, d, model, feeds, 2)
        check(any("in chunks of 2" in ln for ln in log), "cnn: batch 5 chunked by 2 (%s)" % log)
        check(close(outs["y"], ref), "cnn: outputs against numpy")

        model, feeds, ref = auto_case(ort_run, d, rng)
        for t in (1, 2):
            outs, log = run(ort_run, d, model, feeds, None, threads=t)
            check(any("in chunks of %d" % (2 * t) in ln for ln in log),
                  "auto: batch 16 of 64 MiB chunked by %d at %d threads (%s)" % (2 * t, t, log))
            check(close(outs["y"], ref), "auto: outputs against numpy at %d threads" % t)

        for i, (name, nodes, ins, outs_, inits, feeds, ref) in enumerate(mixers(5, rng)):
            model = os.path.join(d, "mix%d.onnx" % i)
            save(model, nodes, ins, outs_, inits)
            outs, log = run(ort_run, d, model, feeds, 2)
            check(any("kept whole" in ln for ln in log) and
                  not any("chunks" in ln for ln in log), "%s: kept whole (%s)" % (name, log))
            check(all(close(outs[k], v.astype(outs[k].dtype)) for k, v in ref.items()),
                  "%s: outputs against numpy" % name)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
