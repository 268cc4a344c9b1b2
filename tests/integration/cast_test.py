"""Cast to and between floats on the CPU provider against numpy's astype,
bit for bit: int32 (with values a float cannot hold exactly), uint8, int8,
int16 and uint16 to float32, float64 to float32 and float32 to float64
(with NaN, infinities and -0).  These pairs take cast.c's vectorized loops;
numpy converts each element once, as they must.

usage: cast_test.py ORT_RUN
Prints one line per pair, exit 1 on any difference.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

PAIRS = [("int32", T.INT32, np.int32, T.FLOAT, np.float32),
         ("uint8", T.UINT8, np.uint8, T.FLOAT, np.float32),
         ("int8", T.INT8, np.int8, T.FLOAT, np.float32),
         ("int16", T.INT16, np.int16, T.FLOAT, np.float32),
         ("uint16", T.UINT16, np.uint16, T.FLOAT, np.float32),
         ("float64", T.DOUBLE, np.float64, T.FLOAT, np.float32),
         ("float32->float64", T.FLOAT, np.float32, T.DOUBLE, np.float64)]


def values(npdt, rng, n):
    if npdt in (np.float32, np.float64):
        x = (rng.standard_normal(n) * 1e10).astype(npdt)
        x[:4] = [np.nan, np.inf, -np.inf, -0.0]
        return x
    info = np.iinfo(npdt)
    x = rng.integers(info.min, info.max, n, dtype=np.int64, endpoint=True).astype(npdt)
    if npdt == np.int32:
        x[:4] = [16777217, -16777217, info.max, info.min]   # not exact in float32
    return x


def main():
    ort_run = sys.argv[1]
    rng = np.random.default_rng(7)
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for name, dt, npdt, to, npto in PAIRS:
            n = 1003   # a ragged tail after the vectors
            g = h.make_graph([h.make_node("Cast", ["x"], ["y"], to=to)], "cast",
                             [h.make_tensor_value_info("x", dt, [n])],
                             [h.make_tensor_value_info("y", to, [n])])
            m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
            m.ir_version = 8
            path, xp, out = (os.path.join(d, f) for f in ("m.onnx", "x.npy", "out"))
            onnx.save(m, path)
            x = values(npdt, rng, n)
            np.save(xp, x)
            p = subprocess.run([ort_run, path, "--input", "x=" + xp, "--output-dir", out],
                               capture_output=True, text=True, timeout=60)
            if p.returncode != 0:
                print("FAIL %s: ort-run: %s" % (name, p.stderr.strip()[-200:]))
                bad += 1
                continue
            y, want = np.load(os.path.join(out, "y.npy")), x.astype(npto)
            diff = int(np.sum(y.view(np.uint8).reshape(n, -1) != want.view(np.uint8).reshape(n, -1),
                              axis=1).astype(bool).sum())
            print("%s %s: %d of %d differ from numpy" % ("ok  " if not diff else "FAIL", name,
                                                         diff, n))
            bad += diff != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
