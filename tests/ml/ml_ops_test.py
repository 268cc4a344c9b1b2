#!/usr/bin/python3
"""Every attribute variant of the ai.onnx.ml ops on small hand-written
models, each run by ortmk and by ONNX Runtime (onnxruntime-node) and
compared: labels and integers identical, floats within 1e-5.  Where
ONNX Runtime has no kernel for a type the spec allows (Binarizer on
double, LinearRegressor on int64...), ortmk is checked against numpy.

Usage: ml_ops_test.py LIBORTMK WORK [NODE_MODULES]
Exits 77 (skip) when onnxruntime-node is not installed."""
import os
import sys

import numpy as np
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

sys.dont_write_bytecode = True
from ml_ref import Ortmk, Runner, Tally, ml_model, node_modules, same  # noqa: E402

F, D, I64, I32, S = TP.FLOAT, TP.DOUBLE, TP.INT64, TP.INT32, TP.STRING
rng = np.random.default_rng(19)
T = Tally()


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, domain="ai.onnx.ml", **attrs)


def one(R, work, name, op, x, out_type, out_shape=None, opset=3, ort_fails=False, **attrs):
    """A one-node model of op over input x, compared (or, ort_fails, both
    must refuse it)."""
    path = os.path.join(work, name.replace(" ", "_").replace("/", "_") + ".onnx")
    xt = {np.dtype(np.float32): F, np.dtype(np.float64): D, np.dtype(np.int64): I64,
          np.dtype(np.int32): I32}.get(x.dtype, S)
    ml_model([node(op, ["x"], ["y"], **attrs)], [("x", xt, list(x.shape))],
             [("y", out_type, out_shape)], path, opset=opset)
    R.add(name, path, {"x": x}, ["y"], ort_fails=ort_fails)
    return path


def elementwise(R, work):
    x = rng.normal(size=(6, 4)).astype(np.float32)
    for t in (np.float32, np.float64, np.int64, np.int32):
        xt = (x * 10).astype(t)
        one(R, work, "Scaler per-feature %s" % t.__name__, "Scaler", xt, F,
            scale=[0.5, 2.0, -1.0, 3.0], offset=[1.0, -2.0, 0.5, 0.0])
        one(R, work, "Scaler broadcast %s" % t.__name__, "Scaler", xt, F, scale=[0.25],
            offset=[1.5])
        for norm in ("MAX", "L1", "L2"):
            one(R, work, "Normalizer %s %s" % (norm, t.__name__), "Normalizer", xt, F,
                norm=norm)
    one(R, work, "Normalizer default", "Normalizer", x, F)
    one(R, work, "Normalizer L2 zeros", "Normalizer", np.zeros((2, 3), np.float32), F,
        norm="L2")
    one(R, work, "Normalizer L1 rank 3", "Normalizer",
        rng.normal(size=(2, 3, 4)).astype(np.float32), F, norm="L1")
    one(R, work, "Binarizer 0.3", "Binarizer", x, F, threshold=0.3)
    one(R, work, "Binarizer -1", "Binarizer", x, F, threshold=-1.0)
    xn = x.copy()
    xn[1, 2] = np.nan
    one(R, work, "Imputer NaN floats per feature", "Imputer", xn, F,
        imputed_value_floats=[1.0, 2.0, 3.0, 4.0], replaced_value_float=float("nan"))
    xr = np.round(x).astype(np.float32)
    one(R, work, "Imputer floats one value", "Imputer", xr, F, imputed_value_floats=[9.0],
        replaced_value_float=1.0)
    xi = (x * 3).astype(np.int64)
    one(R, work, "Imputer int64 per feature", "Imputer", xi, I64,
        imputed_value_int64s=[7, 8, 9, 10], replaced_value_int64=0)
    one(R, work, "Imputer int64 one value", "Imputer", xi, I64, imputed_value_int64s=[-5],
        replaced_value_int64=1)


def encoders(R, work):
    xi = np.array([[1, 5, 3], [9, 1, 2]], np.int64)
    one(R, work, "OneHotEncoder int64", "OneHotEncoder", xi, F, cats_int64s=[1, 2, 3, 5, 9])
    one(R, work, "OneHotEncoder int64 unknown zeros=1", "OneHotEncoder", xi, F,
        cats_int64s=[1, 3, 4], zeros=1)
    one(R, work, "OneHotEncoder int64 unknown zeros=0", "OneHotEncoder", xi, F,
        cats_int64s=[1, 3], zeros=0, ort_fails=True)
    one(R, work, "OneHotEncoder int64 all known zeros=0", "OneHotEncoder", xi, F,
        cats_int64s=[1, 2, 3, 5, 9], zeros=0)
    one(R, work, "OneHotEncoder float", "OneHotEncoder",
        np.array([[1.0, 5.7], [2.2, -3.0]], np.float32), F, cats_int64s=[-3, 1, 2, 5])
    one(R, work, "OneHotEncoder double", "OneHotEncoder",
        np.array([[1.0, 5.0], [2.0, -3.0]], np.float64), F, cats_int64s=[-3, 1, 2, 5])
    xs = np.array([["a", "b"], ["zz", "c"]], dtype=object)
    one(R, work, "OneHotEncoder strings", "OneHotEncoder", xs, F, cats_strings=["c", "a", "b"])
    one(R, work, "OneHotEncoder strings zeros=0 known", "OneHotEncoder", xs, F,
        cats_strings=["c", "a", "b", "zz"], zeros=0)
    one(R, work, "OneHotEncoder strings zeros=0 unknown", "OneHotEncoder", xs, F,
        cats_strings=["c", "a"], zeros=0, ort_fails=True)

    keys = {"int64s": [3, -1, 7, 3], "floats": [0.5, -2.0, 7.25, 0.5],
            "strings": ["x", "yy", "", "x"]}
    vals = {"int64s": [10, 20, 30, 40], "floats": [1.5, 2.5, -3.5, 9.0],
            "strings": ["ten", "twenty", "thirty", "forty"]}
    inputs = {"int64s": np.array([3, 7, 5, -1], np.int64),
              "floats": np.array([0.5, 7.25, -0.0, 1.0], np.float32),
              "strings": np.array(["x", "", "q", "yy"], dtype=object)}
    otype = {"int64s": I64, "floats": F, "strings": S}
    for k in keys:
        for v in vals:
            one(R, work, "LabelEncoder %s->%s" % (k, v), "LabelEncoder", inputs[k], otype[v],
                opset=2, **{"keys_" + k: keys[k], "values_" + v: vals[v]})
            defaults = {"int64s": {"default_int64": 77}, "floats": {"default_float": 0.125},
                        "strings": {"default_string": "none"}}[v]
            one(R, work, "LabelEncoder %s->%s default" % (k, v), "LabelEncoder", inputs[k],
                otype[v], opset=2, **{"keys_" + k: keys[k], "values_" + v: vals[v]},
                **defaults)
    # repeated keys (first wins), NaN keys and X (never match)
    one(R, work, "LabelEncoder floats NaN and repeats", "LabelEncoder",
        np.array([np.nan, 1.0, 2.0, -0.0], np.float32), I64, opset=2,
        keys_floats=[float("nan"), 1.0, 2.0, 1.0], values_int64s=[5, 6, 7, 8])
    # repeated categories: the last wins
    one(R, work, "OneHotEncoder repeated category", "OneHotEncoder",
        np.array([3, 1, 2], np.int64), F, cats_int64s=[3, 1, 3])
    one(R, work, "CategoryMapper repeated category", "CategoryMapper",
        np.array(["a", "b", "c"], dtype=object), I64, cats_strings=["a", "b", "a"],
        cats_int64s=[1, 2, 3])
    one(R, work, "Binarizer default threshold", "Binarizer",
        np.array([-1, 0.0, 0.5, 2.0], np.float32), F)
    one(R, work, "LabelEncoder v1 strings->int64", "LabelEncoder",
        np.array(["b", "a", "q"], dtype=object), I64, opset=1, classes_strings=["a", "b", "c"])
    one(R, work, "LabelEncoder v1 int64->strings", "LabelEncoder",
        np.array([2, 0, 9], np.int64), S, opset=1, classes_strings=["a", "b", "c"],
        default_string="?")
    one(R, work, "CategoryMapper strings->int64", "CategoryMapper",
        np.array([["cat", "dog"], ["emu", "cat"]], dtype=object), I64,
        cats_strings=["cat", "dog", "cow"], cats_int64s=[4, 8, 15], default_int64=-7)
    one(R, work, "CategoryMapper int64->strings", "CategoryMapper",
        np.array([15, 4, 3, 8], np.int64), S, cats_strings=["cat", "dog", "cow"],
        cats_int64s=[4, 8, 15], default_string="unknown")


def features(R, work):
    idx = numpy_helper.from_array(np.array([2, 0, 2], np.int64), "i")
    for name, x, xt in (("float 2-D", rng.normal(size=(3, 4)).astype(np.float32), F),
                        ("int64 3-D", rng.integers(-9, 9, size=(2, 3, 4)), I64),
                        ("double 1-D", rng.normal(size=4), D),
                        ("strings", np.array([["a", "b", "c"], ["d", "e", "f"]], object), S)):
        path = os.path.join(work, "afe_%s.onnx" % name.replace(" ", "_"))
        ml_model([node("ArrayFeatureExtractor", ["x", "i"], ["y"])],
                 [("x", xt, list(x.shape))], [("y", xt, None)], path, initializers=[idx])
        R.add("ArrayFeatureExtractor %s" % name, path, {"x": x}, ["y"])
    path = os.path.join(work, "afe_bad.onnx")
    ml_model([node("ArrayFeatureExtractor", ["x", "i"], ["y"])], [("x", F, [2, 2])],
             [("y", F, None)], path, initializers=[idx])
    R.add("ArrayFeatureExtractor index out of range", path,
          {"x": np.ones((2, 2), np.float32)}, ["y"], ort_fails=True)

    a = rng.normal(size=(3, 2)).astype(np.float32)
    b = rng.normal(size=(3, 4)).astype(np.float32)
    c = rng.normal(size=(3, 1)).astype(np.float32)
    path = os.path.join(work, "fv.onnx")
    # ONNX Runtime binds every input to one type: float here, mixed types
    # against numpy in numpy_checks
    ml_model([node("FeatureVectorizer", ["a", "b", "c"], ["y"], inputdimensions=[2, 3, 2])],
             [("a", F, [3, 2]), ("b", F, [3, 4]), ("c", F, [3, 1])], [("y", F, None)], path)
    R.add("FeatureVectorizer 3 inputs (cut, padded)", path, {"a": a, "b": b, "c": c}, ["y"])


def linear(R, work):
    x = rng.normal(size=(7, 3)).astype(np.float32)
    w3 = rng.normal(size=9).astype(np.float32).tolist()
    for post in ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"):
        xp = np.abs(x) / 4 if post == "PROBIT" else x
        for labels in ({"classlabels_ints": [4, 5, 6]}, {"classlabels_strings": ["a", "b", "c"]}):
            path = os.path.join(work, "lc_%s_%s.onnx" % (post, list(labels)[0]))
            lt = S if "classlabels_strings" in labels else I64
            ml_model([node("LinearClassifier", ["x"], ["y", "z"], coefficients=w3,
                           intercepts=[0.1, -0.2, 0.3], post_transform=post, **labels)],
                     [("x", F, [7, 3])], [("y", lt, [7]), ("z", F, [7, 3])], path)
            R.add("LinearClassifier 3 classes %s %s" % (post, list(labels)[0]), path,
                  {"x": xp}, ["y", "z"])
    for post in ("NONE", "LOGISTIC", "SOFTMAX"):
        path = os.path.join(work, "lc_bin_%s.onnx" % post)
        ml_model([node("LinearClassifier", ["x"], ["y", "z"], coefficients=w3[:3],
                       intercepts=[0.05], post_transform=post, classlabels_ints=[3, 9])],
                 [("x", F, [7, 3])], [("y", I64, [7]), ("z", F, [7, 2])], path)
        R.add("LinearClassifier binary one row %s" % post, path, {"x": x}, ["y", "z"])
    for t in (np.float32,):
        for post in ("NONE", "LOGISTIC", "SOFTMAX"):
            path = os.path.join(work, "lr_%s.onnx" % post)
            ml_model([node("LinearRegressor", ["x"], ["y"], coefficients=w3[:6], targets=2,
                           intercepts=[1.0, -1.0], post_transform=post)],
                     [("x", F, [7, 3])], [("y", F, [7, 2])], path)
            R.add("LinearRegressor 2 targets %s" % post, path, {"x": x.astype(t)}, ["y"])
        path = os.path.join(work, "lr_1.onnx")
        ml_model([node("LinearRegressor", ["x"], ["y"], coefficients=w3[:3], intercepts=[0.5])],
                 [("x", F, [7, 3])], [("y", F, [7, 1])], path)
        R.add("LinearRegressor 1 target", path, {"x": x}, ["y"])


def tree_attrs(prefix, n_classes, modes=None, missing=False, seed=0):
    """Two small hand-made trees of depth 2 (tree 1 listed out of order),
    weights on every leaf for each class/target."""
    r = np.random.default_rng(seed)
    tree = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    nid = [0, 1, 2, 3, 4, 3, 0, 4, 1, 2]
    mode = modes or ["BRANCH_LEQ", "BRANCH_LT", "LEAF", "LEAF", "LEAF",
                     "LEAF", "BRANCH_GT", "LEAF", "LEAF", "BRANCH_GTE"]
    feat = [0, 1, 0, 0, 0, 0, 2, 0, 0, 1]
    thr = [0.1, -0.3, 0, 0, 0, 0, 0.2, 0, 0, 0.4]
    tid = [1, 3, 0, 0, 0, 0, 1, 0, 0, 3]
    fid = [2, 4, 0, 0, 0, 0, 2, 0, 0, 4]
    attrs = dict(nodes_treeids=tree, nodes_nodeids=nid, nodes_modes=mode, nodes_featureids=feat,
                 nodes_values=thr, nodes_truenodeids=tid, nodes_falsenodeids=fid)
    if missing:
        attrs["nodes_missing_value_tracks_true"] = [1, 0, 0, 0, 0, 0, 1, 0, 0, 1]
    leaves = [(t, n) for t, n, m in zip(tree, nid, mode) if m == "LEAF"]
    ids, nodes, trees, w = [], [], [], []
    for t, n in leaves:
        for k in range(n_classes):
            ids.append(k)
            nodes.append(n)
            trees.append(t)
            w.append(float(np.round(r.normal(), 3)))
    attrs.update({prefix + "_ids": ids, prefix + "_nodeids": nodes, prefix + "_treeids": trees,
                  prefix + "_weights": w})
    return attrs


def trees(R, work):
    x = rng.normal(size=(9, 3)).astype(np.float32)
    xn = x.copy()
    xn[::3, 0] = np.nan
    xn[1::3, 2] = np.nan
    cases = []
    for agg in ("SUM", "AVERAGE", "MIN", "MAX"):
        cases.append(("agg %s" % agg, 1, dict(aggregate_function=agg)))
        cases.append(("agg %s 3 targets" % agg, 3, dict(aggregate_function=agg)))
    for post in ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"):
        cases.append(("post %s 3 targets" % post, 3, dict(post_transform=post)))
    cases.append(("base_values 1 target", 1, dict(base_values=[0.75])))
    cases.append(("base_values 3 targets", 3, dict(base_values=[0.5, -1.0, 2.0])))
    cases.append(("base_values AVERAGE", 3, dict(base_values=[0.5, -1.0, 2.0],
                                                 aggregate_function="AVERAGE")))
    for name, k, extra in cases:
        path = os.path.join(work, "ter_%s.onnx" % name.replace(" ", "_"))
        ml_model([node("TreeEnsembleRegressor", ["x"], ["y"], n_targets=k,
                       **tree_attrs("target", k), **extra)],
                 [("x", F, [9, 3])], [("y", F, [9, k])], path)
        R.add("TreeEnsembleRegressor %s" % name, path, {"x": x}, ["y"])
    for mode in ("BRANCH_EQ", "BRANCH_NEQ"):
        modes = [mode, mode, "LEAF", "LEAF", "LEAF", "LEAF", mode, "LEAF", "LEAF", mode]
        path = os.path.join(work, "ter_%s.onnx" % mode)
        ml_model([node("TreeEnsembleRegressor", ["x"], ["y"], n_targets=1,
                       **tree_attrs("target", 1, modes))],
                 [("x", F, [9, 3])], [("y", F, [9, 1])], path)
        xe = np.round(x * 2) / 2
        xe[:, 0] = np.where(np.arange(9) % 2, 0.1, xe[:, 0]).astype(np.float32)
        R.add("TreeEnsembleRegressor %s" % mode, path, {"x": xe.astype(np.float32)}, ["y"])
    path = os.path.join(work, "ter_missing.onnx")
    ml_model([node("TreeEnsembleRegressor", ["x"], ["y"], n_targets=2,
                   **tree_attrs("target", 2, missing=True))],
             [("x", F, [9, 3])], [("y", F, [9, 2])], path)
    R.add("TreeEnsembleRegressor missing_value_tracks_true", path, {"x": xn}, ["y"])
    path = os.path.join(work, "ter_nomissing.onnx")
    ml_model([node("TreeEnsembleRegressor", ["x"], ["y"], n_targets=2,
                   **tree_attrs("target", 2))],
             [("x", F, [9, 3])], [("y", F, [9, 2])], path)
    R.add("TreeEnsembleRegressor NaN without tracks", path, {"x": xn}, ["y"])
    for t, tt in ((np.float64, D), (np.int64, I64), (np.int32, I32)):
        path = os.path.join(work, "ter_%s.onnx" % t.__name__)
        ml_model([node("TreeEnsembleRegressor", ["x"], ["y"], n_targets=2,
                       **tree_attrs("target", 2))],
                 [("x", tt, [9, 3])], [("y", F, [9, 2])], path)
        xt = (x * 2).astype(t)
        # ONNX Runtime has no integer kernel: the same trees over float X
        R.add("TreeEnsembleRegressor %s X" % t.__name__, path, {"x": xt}, ["y"],
              ref=None if t == np.float64 else (os.path.join(work, "ter_nomissing.onnx"),
                                                {"x": xt.astype(np.float32)}))
    path = os.path.join(work, "ter_as_tensor.onnx")
    a = tree_attrs("target", 2)
    for key in ("nodes_values", "target_weights"):
        a[key + "_as_tensor"] = numpy_helper.from_array(np.array(a.pop(key), np.float64), key)
    ml_model([node("TreeEnsembleRegressor", ["x"], ["y"], n_targets=2, **a)],
             [("x", D, [9, 3])], [("y", F, [9, 2])], path)
    R.add("TreeEnsembleRegressor *_as_tensor double", path, {"x": x.astype(np.float64)}, ["y"])

    for name, k, labels, extra in (
            ("3 classes ints", 3, {"classlabels_int64s": [7, 8, 9]}, {}),
            ("3 classes strings SOFTMAX", 3, {"classlabels_strings": ["a", "b", "c"]},
             {"post_transform": "SOFTMAX"}),
            ("3 classes base_values", 3, {"classlabels_int64s": [0, 1, 2]},
             {"base_values": [0.1, 0.2, -0.3]}),
            ("binary both classes", 2, {"classlabels_int64s": [0, 1]}, {}),
            ("binary both classes strings LOGISTIC", 2, {"classlabels_strings": ["no", "yes"]},
             {"post_transform": "LOGISTIC"})):
        path = os.path.join(work, "tec_%s.onnx" % name.replace(" ", "_"))
        lt = S if "classlabels_strings" in labels else I64
        ml_model([node("TreeEnsembleClassifier", ["x"], ["y", "z"],
                       **tree_attrs("class", k, seed=3), **labels, **extra)],
                 [("x", F, [9, 3])], [("y", lt, [9]), ("z", F, [9, k])], path)
        R.add("TreeEnsembleClassifier %s" % name, path, {"x": x}, ["y", "z"])
    # binary, weights of one class only (XGBoost's shape)
    for name, extra, pos in (("LOGISTIC", {"post_transform": "LOGISTIC"}, False),
                             ("NONE all positive", {}, True),
                             ("LOGISTIC all positive", {"post_transform": "LOGISTIC"}, True),
                             ("PROBIT all positive", {"post_transform": "PROBIT"}, True),
                             ("base_values 1", {"base_values": [0.3]}, False),
                             ("base_values 2", {"base_values": [0.3, 0.3]}, False)):
        a = tree_attrs("class", 1, seed=5)
        if pos:
            a["class_weights"] = [abs(w) for w in a["class_weights"]]
        for lab in ({"classlabels_int64s": [4, 6]}, {"classlabels_strings": ["n", "p"]}):
            path = os.path.join(work, "tec_bin1_%s_%s.onnx" % (name.replace(" ", "_"),
                                                               list(lab)[0]))
            lt = S if "classlabels_strings" in lab else I64
            ml_model([node("TreeEnsembleClassifier", ["x"], ["y", "z"], **a, **lab, **extra)],
                     [("x", F, [9, 3])], [("y", lt, [9]), ("z", F, [9, 2])], path)
            # under PROBIT ONNX Runtime writes column 0 and leaves column 1 unset
            R.add("TreeEnsembleClassifier binary one class %s %s" % (name, list(lab)[0]), path,
                  {"x": x}, ["y", "z"], first_column=("z",) if "PROBIT" in name else ())


def numpy_checks(lib, work):
    """Types ONNX Runtime has no kernel for, against numpy."""
    mk = Ortmk(lib)
    x = rng.normal(size=(4, 3))
    p = one(_Null(), work, "bin_double", "Binarizer", x, D, threshold=0.2)
    got = mk.run(p, {"x": x}, ["y"])["y"]
    T.check(np.array_equal(got, (x > np.float32(0.2)).astype(np.float64)),
            "Binarizer double against numpy")
    xi = rng.integers(-5, 5, size=(4, 3)).astype(np.int32)
    p = one(_Null(), work, "imp_i32", "Imputer", xi, I32, imputed_value_int64s=[42],
            replaced_value_int64=0)
    got = mk.run(p, {"x": xi}, ["y"])["y"]
    T.check(np.array_equal(got, np.where(xi == 0, 42, xi).astype(np.int32)),
            "Imputer int32 against numpy")
    xl = rng.integers(-5, 5, size=(4, 3)).astype(np.int64)
    p = os.path.join(work, "linreg_i64.onnx")
    ml_model([node("LinearRegressor", ["x"], ["y"], coefficients=[1.0, 2.0, -1.0],
                   intercepts=[0.5])], [("x", I64, [4, 3])], [("y", F, [4, 1])], p)
    got = mk.run(p, {"x": xl}, ["y"])["y"]
    ok, why = same(got, (xl @ np.array([1.0, 2.0, -1.0]) + 0.5).astype(np.float32)[:, None])
    T.check(ok, "LinearRegressor int64 against numpy: " + why)
    a = rng.normal(size=(3, 2)).astype(np.float32)
    b = rng.integers(-5, 5, size=(3, 4)).astype(np.int64)
    c = rng.normal(size=(3, 3))
    d = rng.integers(0, 9, size=(3, 1)).astype(np.int32)
    p = os.path.join(work, "fv_mixed.onnx")
    ml_model([node("FeatureVectorizer", ["a", "b", "c", "d"], ["y"],
                   inputdimensions=[2, 3, 5, 1])],
             [("a", F, [3, 2]), ("b", I64, [3, 4]), ("c", D, [3, 3]), ("d", I32, [3, 1])],
             [("y", F, None)], p)
    got = mk.run(p, {"a": a, "b": b, "c": c, "d": d}, ["y"])["y"]
    want = np.concatenate([a, b[:, :3], c, np.zeros((3, 2)), d], axis=1).astype(np.float32)
    T.check(np.array_equal(got, want), "FeatureVectorizer mixed types against numpy")
    for bad, attrs in (("unknown mode", dict(tree_attrs("target", 1), n_targets=1)),):
        attrs["nodes_modes"] = ["BRANCH_SET"] + attrs["nodes_modes"][1:]
        p = os.path.join(work, "ter_badmode.onnx")
        ml_model([node("TreeEnsembleRegressor", ["x"], ["y"], **attrs)], [("x", F, [2, 3])],
                 [("y", F, [2, 1])], p)
        try:
            mk.run(p, {"x": np.zeros((2, 3), np.float32)}, ["y"])
            T.check(False, "TreeEnsembleRegressor %s refused" % bad)
        except RuntimeError as e:
            T.check("BRANCH_SET" in str(e), "TreeEnsembleRegressor %s refused: %s" %
                    (bad, str(e)[:160]))


class _Null:
    """A Runner stand-in for one(): builds the model, compares nothing."""

    def add(self, *a, **k):
        pass


def main():
    lib, work = sys.argv[1], sys.argv[2]
    mods = node_modules(sys.argv[3] if len(sys.argv) > 3 else None)
    if not mods:
        return 77
    os.makedirs(work, exist_ok=True)
    R = Runner(lib, mods, work, T)
    for part in (elementwise, encoders, features, linear, trees):
        part(R, work)
    R.run()
    numpy_checks(lib, work)
    return T.result()


if __name__ == "__main__":
    sys.exit(main())
