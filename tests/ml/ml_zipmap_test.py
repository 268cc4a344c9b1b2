#!/usr/bin/python3
"""ZipMap (issue 19): scikit-learn classifiers written as skl2onnx writes
them by default, the classifier followed by ZipMap over its probabilities
(output_probability: a sequence of maps from class label to probability),
run through ortmk and compared with ONNX Runtime (onnxruntime-node), which
cannot hand out a sequence of maps: it runs the same graph without ZipMap,
and each of ortmk's maps must hold, in the labels' order, exactly the
labels as keys and that row's probabilities (within 1e-5) as values; the
labels output must be identical.  Int64 labels (classlabels_int64s) and
string labels (classlabels_strings), multinomial and binary, at batch 1, a
few hundred and a few thousand rows.

Usage: ml_zipmap_test.py LIBORTMK WORK [NODE_MODULES]
Exits 77 (skip) when onnxruntime-node or scikit-learn is missing."""
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
from ml_ref import Ortmk, Tally, ml_model, node_modules, ort_run_many  # noqa: E402

try:
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler
except ImportError as e:
    print("scikit-learn missing (%s): skipped" % e)
    sys.exit(77)

import onnx  # noqa: E402
from onnx import helper  # noqa: E402

import ml_convert as mc  # noqa: E402

T = Tally()
SEED = 19


def seq_of_maps(key):
    """seq(map(key, tensor(float))) (older onnx.helper has no
    make_map_type_proto)."""
    m = onnx.TypeProto()
    m.map_type.key_type = key
    m.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(mc.FLOAT, []))
    return helper.make_sequence_type_proto(m)


def models(work, name, nodes, x_width, labels, nc):
    """(with ZipMap, without) for nodes ending in a classifier whose
    outputs are label and probabilities."""
    strings = isinstance(labels[0], str)
    lt = mc.STRING if strings else mc.INT64
    base = os.path.join(work, name)
    plain = ml_model(nodes, [("x", mc.FLOAT, [None, x_width])],
                     [("label", lt, [None]), ("probabilities", mc.FLOAT, [None, nc])],
                     base + "_probs.onnx")
    zkey = "classlabels_strings" if strings else "classlabels_int64s"
    zm = nodes + [mc.ml_node("ZipMap", ["probabilities"], ["output_probability"],
                             **{zkey: list(labels)})]
    g = helper.make_graph(zm, "ml", [helper.make_tensor_value_info("x", mc.FLOAT, [None, x_width])],
                          [helper.make_tensor_value_info("label", lt, [None]),
                           helper.make_value_info("output_probability", seq_of_maps(lt))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("ai.onnx.ml", 1)])
    m.ir_version = 8
    onnx.save(m, base + "_zipmap.onnx")
    return base + "_zipmap.onnx", plain


def cases(work):
    """(name, zipmap model, plain model, labels, X, sklearn probabilities or None)."""
    out = []
    X, y = make_classification(3000, 8, n_informative=5, n_classes=3, random_state=SEED)
    X = X.astype(np.float32)
    ints = np.array([10, -3, 70])[y]
    lr = LogisticRegression(max_iter=500).fit(X[:800], ints[:800])
    labels = [int(c) for c in lr.classes_]
    z, p = models(work, "lr_int", [mc.ml_node("LinearClassifier", ["x"],
                                               ["label", "probabilities"],
                                               **mc.logistic_regression(lr))], 8, labels, 3)
    out.append(("LogisticRegression int64 labels", z, p, labels, X, lr.predict_proba(X)))
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    rf = RandomForestClassifier(30, max_depth=8, random_state=SEED, n_jobs=1).fit(X[:800],
                                                                                  names[:800])
    labels = [str(c) for c in rf.classes_]
    attrs = dict(mc.random_forest_classifier(rf), classlabels_strings=labels)
    z, p = models(work, "rf_str", [mc.ml_node("TreeEnsembleClassifier", ["x"],
                                               ["label", "probabilities"], **attrs)], 8, labels, 3)
    out.append(("RandomForestClassifier string labels", z, p, labels, X, None))
    Xb, yb = make_classification(2000, 6, n_informative=4, random_state=SEED + 1)
    Xb = Xb.astype(np.float32)
    yes = np.array(["no", "yes"])[yb]
    sc = StandardScaler().fit(Xb[:600])
    lrb = LogisticRegression(max_iter=500).fit(sc.transform(Xb[:600]), yes[:600])
    labels = [str(c) for c in lrb.classes_]
    nodes = [mc.ml_node("Scaler", ["x"], ["scaled"], offset=sc.mean_.tolist(),
                        scale=(1.0 / sc.scale_).tolist()),
             mc.ml_node("LinearClassifier", ["scaled"], ["label", "probabilities"],
                        **mc.logistic_regression(lrb, labels=labels))]
    z, p = models(work, "pipe_bin", nodes, 6, labels, 2)
    out.append(("Scaler+LogisticRegression binary string labels", z, p, labels, Xb,
                lrb.predict_proba(sc.transform(Xb))))
    return out


def check(mk, name, zpath, labels, X, ref, skl):
    got = mk.run(zpath, {"x": X}, ["label", "output_probability"])
    maps = got["output_probability"]
    T.check(isinstance(maps, list) and len(maps) == len(X),
            "%s: one map a row (%d for %d)" % (name, len(maps), len(X)))
    keys_ok = all(list(m) == labels for m in maps)
    T.check(keys_ok, "%s: every map's keys are the labels in order" % name)
    vals = np.array([list(m.values()) for m in maps], dtype=np.float64).reshape(len(X), -1)
    want = ref["probabilities"].astype(np.float64)
    err = float(np.max(np.abs(vals - want))) if len(X) else 0.0
    T.check(vals.shape == want.shape and err <= 1e-5,
            "%s: map values vs ONNX Runtime's probabilities, max |diff| %.3g" % (name, err))
    same = got["label"].shape == ref["label"].shape and bool(np.all(got["label"] == ref["label"]))
    T.check(same, "%s: labels identical to ONNX Runtime's" % name)
    if skl is not None and len(X):
        serr = float(np.max(np.abs(vals - skl[:len(X)])))
        T.check(serr <= 1e-4, "%s: map values vs scikit-learn's predict_proba, max |diff| %.3g"
                % (name, serr))


def main():
    lib, work = sys.argv[1], sys.argv[2]
    mods = node_modules(sys.argv[3] if len(sys.argv) > 3 else None)
    if not mods:
        return 77
    os.makedirs(work, exist_ok=True)
    mk = Ortmk(lib)
    jobs, runs = [], []
    for name, z, p, labels, X, skl in cases(work):
        for n in (1, 257, len(X)):
            jobs.append((p, {"x": X[:n]}))
            runs.append(("%s n=%d" % (name, n), z, labels, X[:n], skl))
    for (name, z, labels, X, skl), ref in zip(runs, ort_run_many(mods, work, jobs)):
        if "error" in ref:
            T.check(False, "%s: ONNX Runtime failed: %s" % (name, ref["error"][:200]))
            continue
        try:
            check(mk, name, z, labels, X, ref, skl)
        except RuntimeError as e:
            T.check(False, "%s: ortmk failed: %s" % (name, str(e)[:300]))
    return T.result()


if __name__ == "__main__":
    sys.exit(main())
