"""The zoo's verdicts (docs/ZOO.md "Tolerances"): is ONNX Runtime's output a
usable reference, and does ortmk's output match it.  Used by ort-zoo.

Every check returns (ok, worst, reason): `worst` is scale free, the largest
error as a fraction of what the tolerance allows (<= 1 passes), so rows of
different models and variants read alike.

  float32   |a - b| <= 1e-4 * max|ref| + 1e-3 * |ref|, element-wise;
            worst = max |a - b| / that bound
  float16   |a - b| <= 1e-2 * (max(ref) - min(ref)); worst = max / bound
            (a one-element or constant output: max|ref| stands for the range)
  int8      |a - b| <= 2e-2 * range on at least 99% of the elements;
            worst = 99th percentile of |a - b| / bound
  integers, bools: equal; worst = the fraction of elements that differ
            (any difference fails)
  detection (outputs boxes, scores, labels): float32 as above, element for
            element (same count, same order, labels equal); float16 and
            int8 matched box to box (greedy in ORT's order, same label,
            IoU >= 0.9): at least 95% of each side's boxes matched, and
            matched scores within 2e-2 of the score range;
            worst = unmatched fraction / 0.05
A broken reference: any NaN/inf, an output with more than one element
whose std <= 1e-3 max|ref| (constant), a detector keeping fewer than 5 boxes.
"""
import os

import numpy as np

DET = ("boxes", "scores", "labels")


def load_dir(d):
    out = {}
    if os.path.isdir(d):
        for fn in sorted(os.listdir(d)):
            if fn.endswith(".npy"):
                out[fn[:-4]] = np.load(os.path.join(d, fn))
    return out


def is_float(a):
    return a.dtype.kind == "f"


def broken_reason(ref, kind):
    """Why an ORT output set is not a usable reference, or None."""
    for name, r in ref.items():
        if not is_float(r) or r.size == 0:
            continue
        if not np.all(np.isfinite(r)):
            return "ORT output %s has NaN/inf" % name
        r64 = r.astype(np.float64)
        if r.size > 1 and float(r64.std()) <= 1e-3 * float(np.abs(r64).max()):
            return "ORT output %s is constant (std %.3g, max|ref| %.3g)" % (
                name, float(r64.std()), float(np.abs(r64).max()))
        if r.size > 1 and not np.any(r64):
            return "ORT output %s is all zero" % name
    if kind == "detect":
        n = ref["boxes"].shape[0] if "boxes" in ref else 0
        if n < 5:
            return "ORT keeps %d boxes (fewer than 5)" % n
    return None


def _where(a, idx):
    return "[%s]" % ", ".join(str(int(i)) for i in np.unravel_index(idx, a.shape)) \
        if a.ndim else "[]"


def compare_tensor(name, a, b, variant):
    """a: ortmk, b: ORT.  (ok, worst, reason)."""
    if a.shape != b.shape:
        return False, float("inf"), "output %s: shape %s, ORT %s" % (
            name, list(a.shape), list(b.shape))
    if a.dtype != b.dtype:
        return False, float("inf"), "output %s: dtype %s, ORT %s" % (name, a.dtype, b.dtype)
    if a.size == 0:
        return True, 0.0, ""
    if not is_float(b):
        bad = a != b
        frac = float(bad.mean())
        if not frac:
            return True, 0.0, ""
        i = int(np.flatnonzero(bad)[0])
        return False, frac, "output %s: %d of %d elements differ, first %s: %s vs ORT %s" % (
            name, int(bad.sum()), a.size, _where(a, i), a.flat[i], b.flat[i])
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    # Equal infinities and NaN against NaN match (intermediate values).
    same = (a64 == b64) | (np.isnan(a64) & np.isnan(b64))
    odd = ~np.isfinite(a64) & ~same
    if np.any(odd):
        i = int(np.flatnonzero(odd)[0])
        return False, float("inf"), "output %s: ortmk has %s at %s (ORT %.6g)" % (
            name, a64.flat[i], _where(a, i), b64.flat[i])
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(a64 - b64))
    b64 = np.where(np.isfinite(b64), b64, 0.0)
    diff = np.where(np.isnan(diff), np.inf, diff)
    if variant == "fp32":
        tol = 1e-4 * float(np.abs(b64).max()) + 1e-3 * np.abs(b64)
        tol = np.maximum(tol, 1e-30)
        r = diff / tol
        i = int(np.argmax(r))
        worst = float(r.flat[i])
        ok = worst <= 1.0
        what = "tol %.3g" % float(tol.flat[i])
    else:
        rng = float(b64.max() - b64.min()) or float(np.abs(b64).max())
        tol = (1e-2 if variant == "fp16" else 2e-2) * rng or 1e-30
        if variant == "fp16":
            i = int(np.argmax(diff))
            worst = float(diff.flat[i]) / tol
            ok = worst <= 1.0
            what = "tol %.3g = %s of range %.3g" % (tol, "1e-2", rng)
        else:
            frac_bad = float((diff > tol).mean())
            worst = float(np.quantile(diff, 0.99)) / tol
            ok = frac_bad <= 0.01
            i = int(np.argmax(diff))
            what = "%.2f%% of elements beyond 2e-2 of range %.3g" % (100 * frac_bad, rng)
    if ok:
        return True, worst, ""
    return False, worst, "output %s%s: %.6g vs ORT %.6g (|diff| %.3g, %s)" % (
        name, _where(a, i), a64.flat[i], b64.flat[i], diff.flat[i], what)


def iou(box, boxes):
    x1 = np.maximum(box[0], boxes[:, 0])
    y1 = np.maximum(box[1], boxes[:, 1])
    x2 = np.minimum(box[2], boxes[:, 2])
    y2 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    return inter / np.maximum(area + areas - inter, 1e-12)


def compare_boxes(got, ref):
    """fp16/int8 detections: box-to-box matching."""
    gb, rb = got["boxes"].astype(np.float64), ref["boxes"].astype(np.float64)
    gl, rl = got["labels"], ref["labels"]
    gs, rs = got["scores"].astype(np.float64), ref["scores"].astype(np.float64)
    used = np.zeros(len(gb), bool)
    matched, score_bad = 0, 0
    srange = float(rs.max() - rs.min()) if rs.size else 0.0
    for i in range(len(rb)):
        cand = np.flatnonzero(~used & (gl == rl[i]))
        if not cand.size:
            continue
        ious = iou(rb[i], gb[cand])
        j = int(np.argmax(ious))
        if ious[j] >= 0.9:
            used[cand[j]] = True
            matched += 1
            if abs(gs[cand[j]] - rs[i]) > 2e-2 * srange:
                score_bad += 1
    f_ref = matched / max(len(rb), 1)
    f_got = matched / max(len(gb), 1)
    worst = (1.0 - min(f_ref, f_got)) / 0.05
    ok = f_ref >= 0.95 and f_got >= 0.95 and score_bad <= 0.05 * max(matched, 1)
    if ok:
        return True, worst, ""
    return False, max(worst, 1.0 + 1e-9), (
        "detections: %d boxes vs ORT %d, %d matched at IoU >= 0.9 (%.0f%% / %.0f%%), "
        "%d matched scores off by > 2e-2 of range" % (
            len(gb), len(rb), matched, 100 * f_ref, 100 * f_got, score_bad))


def compare_outputs(got, ref, variant, kind):
    """All outputs of one input set.  (ok, worst, reason)."""
    worst, reasons = 0.0, []
    missing = [n for n in ref if n not in got]
    if missing:
        return False, float("inf"), "ortmk wrote no output %s" % ", ".join(missing)
    if kind == "detect" and variant != "fp32" and all(k in ref for k in DET):
        ok, w, why = compare_boxes(got, ref)
        return ok, w, why
    ok_all = True
    for name, b in ref.items():
        ok, w, why = compare_tensor(name, got[name], b, variant)
        worst = max(worst, w)
        if not ok:
            ok_all = False
            reasons.append(why)
    return ok_all, worst, "; ".join(reasons[:2])
