#!/usr/bin/python3
"""Writes the reference fixtures for tests/unit/test_cpu_ops.c.

Each case is a set of .npy files tests/data/ops/<case>.<name>.npy: the
inputs the C test feeds to a kernel and the outputs numpy computes for them
(independently of the C code: plain numpy, explicit padding and loops).
Run with /usr/bin/python3 (needs numpy); the output is deterministic.
"""
import itertools
import math
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops")
rng = np.random.default_rng(20240611)


def save(case, **arrays):
    for name, a in arrays.items():
        np.save(os.path.join(OUT, f"{case}.{name}.npy"), np.ascontiguousarray(a))


def randf(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- convolution -------------------------------------------------------

def same_pads(in_sp, k, s, d, upper):
    pb, pe = [], []
    for i in range(len(in_sp)):
        out = -(-in_sp[i] // s[i])
        total = max(0, (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in_sp[i])
        lo = total // 2 if upper else total - total // 2
        pb.append(lo)
        pe.append(total - lo)
    return pb + pe


def conv_ref(x, w, b, strides, pads, dilations, group):
    n, c = x.shape[:2]
    m = w.shape[0]
    nsp = x.ndim - 2
    k = w.shape[2:]
    xp = np.pad(x.astype(np.float64),
                [(0, 0), (0, 0)] + [(pads[i], pads[i + nsp]) for i in range(nsp)])
    out_sp = [(xp.shape[2 + i] - ((k[i] - 1) * dilations[i] + 1)) // strides[i] + 1
              for i in range(nsp)]
    y = np.zeros((n, m, *out_sp))
    cg, mg = c // group, m // group
    for g in range(group):
        for kidx in np.ndindex(*k):
            sl = tuple(slice(kidx[i] * dilations[i],
                             kidx[i] * dilations[i] + (out_sp[i] - 1) * strides[i] + 1,
                             strides[i]) for i in range(nsp))
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            wk = w[(slice(g * mg, (g + 1) * mg), slice(None)) + kidx].astype(np.float64)
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", patch, wk)
    if b is not None:
        y += b.reshape(1, m, *([1] * nsp))
    return y.astype(np.float32)


def gen_conv():
    cases = [
        # name, x shape, w shape, group, strides, pads, dilations, bias, auto_pad
        ("conv_group", (2, 4, 7, 6), (6, 2, 3, 3), 2, [1, 1], [1, 1, 1, 1], [1, 1], True, None),
        ("conv_depthwise", (1, 3, 8, 8), (3, 1, 3, 3), 3, [2, 2], [1, 1, 1, 1], [1, 1], True, None),
        ("conv_dilated", (1, 2, 9, 9), (4, 2, 3, 3), 1, [1, 1], [0, 0, 0, 0], [2, 2], False, None),
        ("conv_same_upper", (1, 3, 7, 7), (2, 3, 4, 4), 1, [2, 2], None, [1, 1], True, "SAME_UPPER"),
        ("conv_same_lower", (1, 2, 6, 5), (3, 2, 2, 3), 1, [1, 2], None, [1, 1], False, "SAME_LOWER"),
        ("conv_1x1", (2, 8, 5, 5), (4, 8, 1, 1), 1, [1, 1], [0, 0, 0, 0], [1, 1], True, None),
        ("conv_1d", (2, 3, 10), (4, 3, 3), 1, [2], [1, 2], [1], True, None),
        ("conv_3d", (1, 2, 4, 5, 5), (3, 2, 2, 3, 3), 1, [1, 2, 1], [0, 1, 1, 1, 0, 1], [1, 1, 1], True, None),
        ("conv_asym", (1, 3, 9, 11), (5, 3, 3, 5), 1, [2, 3], [0, 2, 1, 0], [1, 2], True, None),
    ]
    for name, xs, ws, group, strides, pads, dil, bias, auto_pad in cases:
        x, w = randf(*xs), randf(*ws)
        b = randf(ws[0]) if bias else None
        if auto_pad:
            pads = same_pads(xs[2:], ws[2:], strides, dil, auto_pad == "SAME_UPPER")
        y = conv_ref(x, w, b, strides, pads, dil, group)
        arrays = dict(x=x, w=w, y=y)
        if bias:
            arrays["b"] = b
        save(name, **arrays)


# ---- pooling -------------------------------------------------------------

def pool_out(n, k, s, d, pb, pe, ceil):
    eff = (k - 1) * d + 1
    if ceil:
        out = int(math.ceil((n + pb + pe - eff) / s)) + 1
        if (out - 1) * s >= n + pb:
            out -= 1
    else:
        out = (n + pb + pe - eff) // s + 1
    return out


def pool_ref(x, kind, k, s, pads, d, ceil, count_include_pad=0, storage_order=0):
    nsp = x.ndim - 2
    sp = x.shape[2:]
    outs = [pool_out(sp[i], k[i], s[i], d[i], pads[i], pads[nsp + i], ceil) for i in range(nsp)]
    y = np.zeros(x.shape[:2] + tuple(outs), dtype=np.float32)
    ind = np.zeros(y.shape, dtype=np.int64)
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in np.ndindex(*outs):
            vals, idxs, padded = [], [], 0
            for t in np.ndindex(*k):
                coord = [o[i] * s[i] - pads[i] + t[i] * d[i] for i in range(nsp)]
                if all(-pads[i] <= coord[i] < sp[i] + pads[nsp + i] for i in range(nsp)):
                    padded += 1
                if all(0 <= coord[i] < sp[i] for i in range(nsp)):
                    vals.append(x[(n, c) + tuple(coord)])
                    if storage_order == 0:
                        flat = np.ravel_multi_index(coord, sp)
                    else:
                        flat = np.ravel_multi_index(coord, sp, order="F")
                    idxs.append(flat + (n * x.shape[1] + c) * int(np.prod(sp)))
            if kind == "max":
                j = int(np.argmax(vals))
                y[(n, c) + o] = vals[j]
                ind[(n, c) + o] = idxs[j]
            else:
                div = padded if count_include_pad else len(vals)
                y[(n, c) + o] = np.float32(np.sum(np.array(vals, dtype=np.float64)) / div)
    return y, ind


def gen_pool():
    x = randf(1, 2, 8, 8)
    y, _ = pool_ref(x, "max", [3, 3], [2, 2], [0, 0, 0, 0], [1, 1], True)
    save("maxpool_ceil", x=x, y=y)
    x = randf(1, 1, 5, 5)
    y, _ = pool_ref(x, "max", [2, 2], [2, 2], [1, 1, 1, 1], [1, 1], True)
    save("maxpool_ceil_drop", x=x, y=y)
    x = randf(2, 3, 9, 7)
    y, ind = pool_ref(x, "max", [3, 2], [2, 1], [1, 0, 1, 1], [2, 1], False)
    save("maxpool_dilated_idx", x=x, y=y, i=ind)
    _, ind_f = pool_ref(x, "max", [3, 2], [2, 1], [1, 0, 1, 1], [2, 1], False, storage_order=1)
    save("maxpool_dilated_idx_colmajor", i=ind_f)
    x = randf(1, 2, 7, 8)
    for cip in (0, 1):
        y, _ = pool_ref(x, "avg", [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], True, count_include_pad=cip)
        save(f"avgpool_ceil_cip{cip}", x=x, y=y)
    x = randf(2, 3, 5, 6)
    save("gap", x=x, y=x.mean(axis=(2, 3), keepdims=True).astype(np.float32))


# ---- linear algebra -----------------------------------------------------

def gen_linalg():
    a, b = randf(2, 1, 3, 4), randf(3, 4, 5)
    save("matmul_bcast", a=a, b=b, y=np.matmul(a, b))
    a, b = randf(4), randf(2, 4, 5)
    save("matmul_1d_a", a=a, b=b, y=np.matmul(a, b))
    a, b = randf(2, 3, 4), randf(4)
    save("matmul_1d_b", a=a, b=b, y=np.matmul(a, b))
    a, b = randf(3, 5, 17), randf(17, 33)
    save("matmul_fold", a=a, b=b, y=np.matmul(a, b))
    a, b, c = randf(7, 5), randf(9, 7), randf(9)
    y = 0.5 * (a.T @ b.T) + 2.0 * c
    save("gemm_t", a=a, b=b, c=c, y=y.astype(np.float32))


# ---- elementwise, normalisation, shape ops -----------------------------

def gen_misc():
    a, b = randf(2, 3, 4), randf(3, 1)
    save("add_bcast", a=a, b=b, y=a + b)
    x = randf(2, 3, 4)
    e = np.exp(x.reshape(2, 12) - x.reshape(2, 12).max(axis=1, keepdims=True))
    save("softmax_v11", x=x, y=(e / e.sum(axis=1, keepdims=True)).reshape(2, 3, 4))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    save("softmax_v13", x=x, y=e / e.sum(axis=1, keepdims=True))
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    save("softmax_v13_default", x=x, y=e / e.sum(axis=-1, keepdims=True))

    x, s, b = randf(2, 3, 8), randf(8), randf(8)
    mean = x.mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    save("layernorm", x=x, s=s, b=b, y=((x - mean) * inv * s + b).astype(np.float32),
         mean=mean.astype(np.float32), inv=inv.astype(np.float32))
    s2 = randf(3, 8)
    mean = x.reshape(2, 24).mean(axis=1).reshape(2, 1, 1)
    inv = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=(1, 2), keepdims=True) + 1e-3)
    save("layernorm_axis1", x=x, s=s2, y=((x - mean) * inv * s2).astype(np.float32))

    x = randf(2, 3, 4)
    save("transpose", x=x, y=np.transpose(x, (2, 0, 1)))
    save("reducemean", x=x, y1=x.mean(axis=1, keepdims=True),
         y02=x.mean(axis=(0, 2)), yall=np.array(x.mean(), dtype=np.float32).reshape(1, 1, 1))
    data = randf(5, 4)
    idx = np.array([[0, -1], [4, -5], [2, 1]], dtype=np.int64)
    save("gather", x=data, i=idx, y=np.take(data, idx, axis=0),
         y1=np.take(data, np.array([-1, 0, 3], dtype=np.int32), axis=1))

    xf = (rng.standard_normal(12) * 50).astype(np.float32)
    save("cast", x=xf, i32=xf.astype(np.int32), f16=xf.astype(np.float16),
         b=xf.astype(np.bool_), f64=xf.astype(np.float64),
         f16f32=xf.astype(np.float16).astype(np.float32))
    xi = np.array([-3, 0, 7, 2**40, -2**33], dtype=np.int64)
    save("cast_int", x=xi, f32=xi.astype(np.float32), i8=xi.astype(np.int8))


def main():
    os.makedirs(OUT, exist_ok=True)
    gen_conv()
    gen_pool()
    gen_linalg()
    gen_misc()


if __name__ == "__main__":
    main()
