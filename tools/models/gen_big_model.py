#!/usr/bin/python3
"""Writes issue #5's large external-data model and its numpy reference.

    x [1, D] -> MatMul w0 -> MatMul w1 -> ... -> MatMul w15 -> y [1, D]

16 float32 weights of D x D, opset 17, every weight external data in
OUTDIR/big.data at a page-aligned (4096) offset.  --size-mib 1024 (the
default) gives D = 4096, 64 MiB per weight, 1 GiB in all; --size-mib 64
gives D = 1024, the small variant the integration tests run.

Memory stays small however large the model: each weight is drawn from its
own seeded generator in blocks of 4 MiB and written as it is drawn, and the
reference reads the weights back through np.memmap, one block of rows at a
time, accumulating in float64.  Weights are N(0, 1/D), so activations stay
O(1) through the chain.  The same arguments give the same bytes.

usage: gen_big_model.py OUTDIR [--size-mib N] [--batch]
       gen_big_model.py OUTDIR --compare Y.npy

writes OUTDIR/big.onnx, big.data, input.npy (float32 [1, D], seeded),
expected.npy (the float64 reference, stored as float32) and manifest.json
({"model", "inputs", "outputs", "rtol", "atol", "dim", "size_mib"}, the
layout of tools/models/gen_test_models.py plus the model's file name).
--batch makes the first dim the symbol "batch" (the reference stays [1, D]).
--compare checks an output ort-run wrote (--output-dir) against
expected.npy with the manifest's tolerances: exit 0 when it matches.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

LAYERS = 16
SEED = 5005            # issue 5
ALIGN = 4096
BLOCK_BYTES = 4 << 20  # generation and reference work in blocks of this size
RTOL, ATOL = 1e-3, 1e-3


def dim_for(size_mib):
    """D such that LAYERS weights of D x D float32 take size_mib MiB."""
    d = math.isqrt(size_mib * (1 << 20) // (4 * LAYERS))
    if d < 16 or LAYERS * d * d * 4 != size_mib << 20:
        raise SystemExit("gen_big_model.py: --size-mib %d does not give %d square float32 weights "
                         "(try 64, 256, 1024, 4096)" % (size_mib, LAYERS))
    return d


def block_rows(d):
    return max(1, BLOCK_BYTES // (4 * d))


def write_weights(path, d):
    """Draws every weight block by block into `path`; returns the offsets."""
    offsets, rows, scale = [], block_rows(d), np.float32(1.0 / math.sqrt(d))
    with open(path, "wb") as f:
        for k in range(LAYERS):
            pos = (f.tell() + ALIGN - 1) // ALIGN * ALIGN
            f.seek(pos)
            offsets.append(pos)
            rng = np.random.default_rng([SEED, k])
            for r0 in range(0, d, rows):
                block = rng.standard_normal((min(rows, d - r0), d), dtype=np.float32)
                block *= scale
                block.astype("<f4", copy=False).tofile(f)
        f.truncate()
    return offsets


def external_weight(name, d, offset):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend([d, d])
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "big.data"), ("offset", offset), ("length", d * d * 4)):
        e = t.external_data.add()
        e.key, e.value = key, str(value)
    return t


def build_model(d, offsets, batch):
    nodes, inits, x = [], [], "x"
    for k in range(LAYERS):
        out = "y" if k == LAYERS - 1 else "h%d" % k
        nodes.append(helper.make_node("MatMul", [x, "w%d" % k], [out], name="mm%d" % k))
        inits.append(external_weight("w%d" % k, d, offsets[k]))
        x = out
    first = "batch" if batch else 1
    return C.make_model(nodes, [C.value_info("x", C.FLOAT, [first, d])],
                        [C.value_info("y", C.FLOAT, [first, d])], inits, "big",
                        "%d chained MatMuls of %dx%d float32, weights in big.data" % (LAYERS, d, d))


def reference(data_path, d, offsets, x):
    """y = x @ w0 @ ... @ w15 in float64, reading the weights back from the
    data file (so the reference checks the bytes ortmk reads)."""
    h, rows = x.astype(np.float64), block_rows(d)
    for off in offsets:
        w = np.memmap(data_path, dtype="<f4", mode="r", offset=off, shape=(d, d))
        nxt = np.zeros((h.shape[0], d), np.float64)
        for r0 in range(0, d, rows):
            nxt += h[:, r0:r0 + rows] @ np.asarray(w[r0:r0 + rows], dtype=np.float64)
        del w
        h = nxt
    return h


def generate(outdir, size_mib, batch):
    d = dim_for(size_mib)
    os.makedirs(outdir, exist_ok=True)
    data_path = os.path.join(outdir, "big.data")
    offsets = write_weights(data_path, d)
    with open(os.path.join(outdir, "big.onnx"), "wb") as f:
        f.write(build_model(d, offsets, batch).SerializeToString())
    x = np.random.default_rng([SEED, 1000]).standard_normal((1, d), dtype=np.float32)
    np.save(os.path.join(outdir, "input.npy"), x)
    y = reference(data_path, d, offsets, x)
    np.save(os.path.join(outdir, "expected.npy"), y.astype(np.float32))
    manifest = {"model": "big.onnx", "inputs": {"x": "input.npy"}, "outputs": {"y": "expected.npy"},
                "rtol": RTOL, "atol": ATOL, "dim": d, "size_mib": size_mib}
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("wrote %s/big.onnx and big.data (%d MiB, %d MatMuls of %dx%d), |y| max %.3g"
          % (outdir, size_mib, LAYERS, d, d, float(np.abs(y).max())))


def compare(outdir, got_path):
    with open(os.path.join(outdir, "manifest.json")) as f:
        manifest = json.load(f)
    want = np.load(os.path.join(outdir, manifest["outputs"]["y"]))
    got = np.load(got_path)
    if got.shape != want.shape or got.dtype != want.dtype:
        print("FAIL: output is %s%s, expected %s%s" % (got.dtype, list(got.shape),
                                                     want.dtype, list(want.shape)))
        return 1
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    bad = ~np.isclose(got, want, rtol=manifest["rtol"], atol=manifest["atol"])
    if bad.any() or not np.all(np.isfinite(got)):
        print("FAIL: %d of %d values off (max abs err %.3g)" % (bad.sum(), bad.size, err.max()))
        return 1
    print("PASS: %d values match the numpy reference (max abs err %.3g, rtol %g, atol %g)"
          % (got.size, err.max(), manifest["rtol"], manifest["atol"]))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--batch", action="store_true", help='first dim is the symbol "batch"')
    ap.add_argument("--compare", metavar="Y.npy", help="check an ort-run output, generate nothing")
    args = ap.parse_args()
    if args.compare:
        return compare(args.outdir, args.compare)
    generate(args.outdir, args.size_mib, args.batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
