#!/usr/bin/python3
"""Writes the autoregressive example model (examples/autoregressive.c): one
decoding step of a toy recurrent model with a growing cache.

    x [1, H], cache [1, T, H]  (T grows by one each step)
      m = ReduceMean(cache, axes=[1], keepdims=0)            [1, H]
      y = Tanh(MatMul(x, Wx) + MatMul(m, Wm) + b)             [1, H]
      new_cache = Concat(cache, Unsqueeze(y, axes=[1]), 1)   [1, T+1, H]
    outputs y and new_cache (declared [1, ?, H]: its length is unknown)

The application feeds y back as x and new_cache back as cache.  Every op
runs on the Vulkan provider (opset 17), so with IO binding the loop never
leaves the device.  Weights come from a fixed seed.

usage: gen_autoregressive.py OUT.onnx [--hidden H]
                             [--reference DIR --steps N --prefill T]
  --reference DIR  also write DIR/y.npy and DIR/cache.npy: the numpy
                   (float64) reference after N steps from the initial state
                   the example uses: x[i] = 0.5 sin(0.37 i),
                   cache[0, r, i] = 0.5 cos(0.11 i + 0.7 r) (float32) for
                   the T rows r
"""
import argparse
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402


def build(hidden, seed=9):
    rng = np.random.default_rng(seed)
    w = {
        "Wx": C.rand_weight(rng, (hidden, hidden), hidden),
        "Wm": C.rand_weight(rng, (hidden, hidden), hidden),
        "b": C.rand_uniform(rng, (hidden,), -0.1, 0.1),
        "axis1": np.array([1], dtype=np.int64),
    }
    mk = onnx.helper.make_node
    nodes = [
        mk("ReduceMean", ["cache"], ["m"], name="mean", axes=[1], keepdims=0),
        mk("MatMul", ["x", "Wx"], ["xw"], name="proj_x"),
        mk("MatMul", ["m", "Wm"], ["mw"], name="proj_m"),
        mk("Add", ["xw", "mw"], ["s"], name="add"),
        mk("Add", ["s", "b"], ["sb"], name="bias"),
        mk("Tanh", ["sb"], ["y"], name="tanh"),
        mk("Unsqueeze", ["y", "axis1"], ["y3"], name="unsqueeze"),
        mk("Concat", ["cache", "y3"], ["new_cache"], name="append", axis=1),
    ]
    model = C.make_model(
        nodes,
        [C.value_info("x", C.FLOAT, [1, hidden]),
         C.value_info("cache", C.FLOAT, [1, "T", hidden])],
        [C.value_info("y", C.FLOAT, [1, hidden]),
         C.value_info("new_cache", C.FLOAT, [1, None, hidden])],
        [C.init(k, v) for k, v in w.items()], "autoregressive",
        "ortmk example: an autoregressive step with a growing cache")
    return model, w


def initial_state(hidden, prefill):
    i = np.arange(hidden)
    r = np.arange(prefill)[:, None]
    x = (0.5 * np.sin(0.37 * i)).astype(np.float32).reshape(1, hidden)
    cache = (0.5 * np.cos(0.11 * i + 0.7 * r)).astype(np.float32).reshape(1, prefill, hidden)
    return x, cache


def reference(w, hidden, steps, prefill):
    x, cache = (a.astype(np.float64) for a in initial_state(hidden, prefill))
    wx, wm, b = (w[k].astype(np.float64) for k in ("Wx", "Wm", "b"))
    for _ in range(steps):
        m = cache.mean(axis=1)
        y = np.tanh(x @ wx + m @ wm + b)
        cache = np.concatenate([cache, y[:, None, :]], axis=1)
        x = y
    return x, cache


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--reference", metavar="DIR")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--prefill", type=int, default=1)
    args = ap.parse_args()
    model, w = build(args.hidden)
    onnx.checker.check_model(model)
    onnx.save(model, args.out)
    if args.reference:
        os.makedirs(args.reference, exist_ok=True)
        y, cache = reference(w, args.hidden, args.steps, args.prefill)
        np.save(os.path.join(args.reference, "y.npy"), y.astype(np.float32))
        np.save(os.path.join(args.reference, "cache.npy"), cache.astype(np.float32))


if __name__ == "__main__":
    main()
