#!/usr/bin/python3
"""Writes the .npy fixtures that tests/unit/test_npy.c reads.

Run from anywhere with /usr/bin/python3 (needs numpy); the files land in
tests/data/npy/ next to this script.  Values follow simple formulas of the
flat index i so the C test can check them without a second copy of the data:

  float (f2/f4/f8):       (i - 8) * 0.5
  signed ints (i1..i4):   i - 12
  int64:                  (i - 12) * 10**12
  unsigned (u1..u4):      i * 10
  uint64:                 i * 10**17
  bool:                   i % 3 == 0

Each of those is saved with shape (2, 3, 4).  The other files cover the
remaining header forms: a 0-d scalar, a 1-D array, an empty array, format
versions 2.0 and 3.0, and two layouts the reader must refuse (Fortran order
and big-endian).
"""
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "npy")
N = 24
SHAPE = (2, 3, 4)


def values(dtype):
    i = np.arange(N, dtype=np.int64)
    kind = np.dtype(dtype)
    if kind == np.bool_:
        v = i % 3 == 0
    elif kind.kind == "f":
        v = (i - 8) * 0.5
    elif kind == np.int64:
        v = (i - 12) * 10**12
    elif kind == np.uint64:
        v = i.astype(np.uint64) * np.uint64(10**17)
    elif kind.kind == "i":
        v = i - 12
    else:
        v = i * 10
    return np.asarray(v).astype(dtype).reshape(SHAPE)


def save(name, arr, version=None):
    path = os.path.join(OUT, name + ".npy")
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version, allow_pickle=False)


def main():
    os.makedirs(OUT, exist_ok=True)
    for dt in ["f2", "f4", "f8", "i1", "u1", "i2", "u2", "i4", "u4",
               "i8", "u8", "b1"]:
        save(dt, values(np.dtype(dt)))
    save("scalar_f4", np.array(3.5, dtype=np.float32))
    save("vec_i4", np.arange(5, dtype=np.int32))
    save("empty_f4", np.zeros((0, 3), dtype=np.float32))
    save("v2_f4", values(np.float32), version=(2, 0))
    save("v3_i8", values(np.int64), version=(3, 0))
    save("fortran_f4", np.asfortranarray(values(np.float32)))
    save("bigendian_f4", values(np.dtype(">f4")))


if __name__ == "__main__":
    main()
