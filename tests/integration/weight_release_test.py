"""Weights every reader packed go back (providers/cpu/cpu_ep.c,
ep_subgraph_drop_weight): the CPU provider keeps a MatMul's constant B only
in its packed form once no node reads the weight as it is, so a model's
weights are not resident twice.

- released: 16 MatMuls in a chain, each with its own 4 MiB weight (64 MiB):
  the provider's peak RSS above a one-Relu model's stays under 96 MiB (the
  packed weights and one weight being packed; 128 MiB with every weight
  kept beside its pack); the output against numpy.
- external: the same model with its weights in a file `ort-model
  externalize` aligned (mapped, not copied): the same bound and output.
- conv: a 3-D convolution whose filter conv_nhwc.c packs (the filter goes
  back): an input of one frame, whose outer temporal taps read only
  padding (the kept taps come from the packed copy), and one of four
  frames (the packed filter), against numpy.
- shared: a weight two MatMuls pack, and one a MatMul packs and a Mul reads
  as it is at every run (it must stay): both outputs against numpy (a weight given back
  too early is read after it was unmapped: garbage or a crash).

usage: weight_release_test.py ORT_RUN ORT_MODEL
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h, numpy_helper as nh

MIB = 1 << 20
N = 1024        # 4 MiB weights of N x N floats
LAYERS = 16


def save(path, nodes, outputs, inits):
    g = h.make_graph(nodes, "weights", [h.make_tensor_value_info("x", T.FLOAT, [1, N])],
                     [h.make_tensor_value_info(o, T.FLOAT, None) for o in outputs], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, path)


def run(ort_run, d, model, x):
    xp, out = os.path.join(d, "x.npy"), os.path.join(d, "out")
    np.save(xp, x)
    # meson's MALLOC_PERTURB_ makes glibc fill the slack of every 2 MiB-
    # aligned allocation too (2 MiB a packed weight): peaks without it
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_PERTURB_"}
    p = subprocess.run([ort_run, model, "--input", "x=" + xp, "--output-dir", out, "--json",
                        "--iters", "2", "--threads", "1"],
                       capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        raise RuntimeError("ort-run: " + p.stderr.strip()[-300:])
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    return rep, {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out)}


def ep_peak(rep):
    return sum((rep.get("ep_peak_rss_mb") or {}).values())


def close(case, got, want):
    ok = got is not None and got.shape == want.shape and np.allclose(got, want, rtol=1e-4,
                                                                     atol=1e-4)
    err = float(np.max(np.abs(got - want))) if ok or (got is not None and
                                                      got.shape == want.shape) else -1
    print("%s %s: max |diff| from numpy %.3g" % ("ok  " if ok else "FAIL", case, err))
    return not ok


def chain_model(d, rng):
    ws = [(rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32) for _ in range(LAYERS)]
    nodes, prev = [], "x"
    for i in range(LAYERS):
        nodes.append(h.make_node("MatMul", [prev, "w%d" % i], ["m%d" % i]))
        nodes.append(h.make_node("Tanh", ["m%d" % i], ["t%d" % i]))
        prev = "t%d" % i
    nodes.append(h.make_node("Identity", [prev], ["y"]))
    path = os.path.join(d, "chain.onnx")
    save(path, nodes, ["y"], [nh.from_array(w, "w%d" % i) for i, w in enumerate(ws)])
    return path, ws


def chain_ref(x, ws):
    y = x.astype(np.float64)
    for w in ws:
        y = np.tanh(y @ w.astype(np.float64))
    return y


def conv3d_ref(x, w):
    """Conv, 3x3x3, pads 1, stride 1, float64."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)))
    D, H, W = x.shape[2:]
    y = np.zeros((x.shape[0], w.shape[0], D, H, W))
    for a in range(3):
        for b in range(3):
            for c in range(3):
                y += np.einsum("mc,ncdhw->nmdhw", w[:, :, a, b, c],
                               xp[:, :, a:a + D, b:b + H, c:c + W])
    return y


def conv_case(ort_run, d, rng):
    w = (rng.standard_normal((32, 32, 3, 3, 3)) / 16).astype(np.float32)
    path = os.path.join(d, "conv3d.onnx")
    g = h.make_graph([h.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 6)], "conv3d",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 32, "d", 6, 6])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [nh.from_array(w, "w")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, path)
    bad = 0
    for frames in (1, 4):
        x = rng.standard_normal((1, 32, frames, 6, 6)).astype(np.float32)
        _, outs = run(ort_run, d, path, x)
        bad += close("conv %d frame%s" % (frames, "s" if frames > 1 else ""), outs.get("y"),
                     conv3d_ref(x, w))
    return bad


def main():
    ort_run, ort_model = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(7)
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        x = rng.standard_normal((1, N)).astype(np.float32)
        base_path = os.path.join(d, "base.onnx")
        save(base_path, [h.make_node("Relu", ["x"], ["y"])], ["y"], [])
        base = ep_peak(run(ort_run, d, base_path, x)[0])
        path, ws = chain_model(d, rng)
        ext = os.path.join(d, "ext.onnx")
        p = subprocess.run([ort_model, "externalize", path, ext], capture_output=True, text=True,
                           timeout=120)
        if p.returncode != 0:
            print("FAIL ort-model externalize: " + p.stderr.strip()[-300:])
            return 1
        want = chain_ref(x, ws)
        for case, model in (("released", path), ("external", ext)):
            rep, outs = run(ort_run, d, model, x)
            above = ep_peak(rep) - base
            ok = 0 < above < 96
            print("%s %s: provider peak %.1f MiB above a one-Relu model's (packed weights "
                  "%d MiB; under 96 when the weights go back, ~128 when kept)" %
                  ("ok  " if ok else "FAIL", case, above, LAYERS * N * N * 4 // MIB))
            bad += not ok
            bad += close(case + " output", outs.get("y"), want)
        bad += conv_case(ort_run, d, rng)
        # shared: w0 packed by two MatMuls; w1 packed by one and read by a Mul
        # with the input (not folded at load)
        w0, w1 = ws[0], ws[1]
        path = os.path.join(d, "shared.onnx")
        save(path, [h.make_node("MatMul", ["x", "w0"], ["a"]),
                    h.make_node("Tanh", ["a"], ["b"]),
                    h.make_node("MatMul", ["b", "w0"], ["c"]),
                    h.make_node("MatMul", ["c", "w1"], ["y"]),
                    h.make_node("Reshape", ["x", "col"], ["xc"]),
                    h.make_node("Mul", ["w1", "xc"], ["w1x2"]),
                    h.make_node("ReduceSum", ["w1x2", "axes"], ["z"], keepdims=0)],
             ["y", "z"], [nh.from_array(w0, "w0"), nh.from_array(w1, "w1"),
                          nh.from_array(np.array([N, 1], np.int64), "col"),
                          nh.from_array(np.array([0], np.int64), "axes")])
        _, outs = run(ort_run, d, path, x)
        x64, w064, w164 = x.astype(np.float64), w0.astype(np.float64), w1.astype(np.float64)
        bad += close("shared y", outs.get("y"), np.tanh(x64 @ w064) @ w064 @ w164)
        bad += close("shared z (a weight a Mul reads)", outs.get("z"),
                     (w164 * x64.reshape(N, 1)).sum(axis=0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
