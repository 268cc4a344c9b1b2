#!/usr/bin/python3
"""Real models, fitted here on seeded generated data and written as
ai.onnx.ml graphs the way skl2onnx/onnxmltools shape them (ml_convert.py):
random forests, gradient boosting and XGBoost (classifiers and
regressors, trees of realistic depth and count), SVC with and without
probabilities on linear/rbf/poly kernels, SVR, logistic and linear
regression, and a StandardScaler + OneHotEncoder + LogisticRegression
pipeline with a string column.  Each runs through ortmk and ONNX Runtime
(onnxruntime-node) at batch 1, a few hundred and a few thousand rows
(the last splits over the pool): labels must be identical, scores within
1e-5 (regression values within 1e-5 relative; an SVR's, whose kernel
expansion sums large terms that cancel, within 1e-5 of its largest).

Usage: ml_models_test.py LIBORTMK WORK [NODE_MODULES]
Exits 77 (skip) when onnxruntime-node, scikit-learn or xgboost is missing."""
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
from ml_ref import Runner, Tally, node_modules  # noqa: E402

try:
    import sklearn  # noqa: F401
    import xgboost as xgb
    from sklearn.datasets import make_classification, make_regression
    from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,
                                  RandomForestClassifier, RandomForestRegressor)
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    from sklearn.svm import SVC, SVR
except ImportError as e:
    print("scikit-learn or xgboost missing (%s): skipped" % e)
    sys.exit(77)

import ml_convert as mc  # noqa: E402
from ml_ref import ml_model  # noqa: E402

T = Tally()
SEED = 19


def batches(X):
    """Batch 1, 13 (with the largest ensembles, over 2 threads, split by
    trees), a middle batch and the whole set (split by rows), as float32."""
    X = X.astype(np.float32)
    return [("n=1", X[:1]), ("n=13", X[:13]), ("n=%d" % min(len(X), 257), X[:257]),
            ("n=%d" % len(X), X)]


def classifier_case(R, work, name, attrs, X, label_type=mc.INT64, n_classes=None):
    path = os.path.join(work, name.replace(" ", "_") + ".onnx")
    f = X.shape[1]
    ml_model([mc.ml_node("TreeEnsembleClassifier" if "nodes_modes" in attrs else
                         ("SVMClassifier" if "kernel_type" in attrs else "LinearClassifier"),
                         ["x"], ["label", "probabilities"], **attrs)],
             [("x", mc.FLOAT, [None, f])],
             [("label", label_type, [None]), ("probabilities", mc.FLOAT, [None, n_classes])],
             path)
    for bname, xb in batches(X):
        R.add("%s %s" % (name, bname), path, {"x": xb}, ["label", "probabilities"])


def regressor_case(R, work, name, op, attrs, X, rtol=1e-5):
    path = os.path.join(work, name.replace(" ", "_") + ".onnx")
    ml_model([mc.ml_node(op, ["x"], ["variable"], **attrs)],
             [("x", mc.FLOAT, [None, X.shape[1]])], [("variable", mc.FLOAT, [None, 1])], path)
    for bname, xb in batches(X):
        R.add("%s %s" % (name, bname), path, {"x": xb}, ["variable"], rtol=rtol)


def trees(R, work):
    Xc, yc = make_classification(3000, 12, n_informative=8, n_classes=3, random_state=SEED)
    Xb, yb = make_classification(3000, 10, n_informative=6, random_state=SEED + 1)
    Xr, yr = make_regression(3000, 10, n_informative=6, noise=5.0, random_state=SEED)
    fit = Xc[:800], yc[:800]
    rf = RandomForestClassifier(60, max_depth=10, random_state=SEED, n_jobs=1).fit(*fit)
    classifier_case(R, work, "RandomForestClassifier 3 classes",
                    dict(mc.random_forest_classifier(rf), classlabels_int64s=[0, 1, 2]), Xc)
    rfb = RandomForestClassifier(40, max_depth=8, random_state=SEED, n_jobs=1).fit(
        Xb[:800], yb[:800])
    classifier_case(R, work, "RandomForestClassifier binary",
                    dict(mc.random_forest_classifier(rfb), classlabels_int64s=[0, 1]), Xb)
    classifier_case(R, work, "RandomForestClassifier binary string labels",
                    dict(mc.random_forest_classifier(rfb), classlabels_strings=["no", "yes"]),
                    Xb, mc.STRING)
    gbc = GradientBoostingClassifier(n_estimators=40, max_depth=4, random_state=SEED).fit(*fit)
    classifier_case(R, work, "GradientBoostingClassifier 3 classes",
                    dict(mc.gradient_boosting(gbc, True), classlabels_int64s=[0, 1, 2]), Xc)
    gbb = GradientBoostingClassifier(n_estimators=60, max_depth=3, random_state=SEED).fit(
        Xb[:800], yb[:800])
    classifier_case(R, work, "GradientBoostingClassifier binary",
                    dict(mc.gradient_boosting(gbb, True), classlabels_int64s=[0, 1]), Xb)
    xc = xgb.XGBClassifier(n_estimators=50, max_depth=6, nthread=1, random_state=SEED).fit(*fit)
    classifier_case(R, work, "XGBClassifier 3 classes",
                    dict(mc.xgboost_trees(xc.get_booster(), True, 3), classlabels_int64s=[0, 1, 2]),
                    Xc)
    xb = xgb.XGBClassifier(n_estimators=300, max_depth=6, nthread=1, random_state=SEED).fit(
        Xb[:800], yb[:800])
    Xbn = Xb.copy()
    Xbn[::7, 3] = np.nan     # XGBoost's missing values take the learned branch
    classifier_case(R, work, "XGBClassifier binary with NaN",
                    dict(mc.xgboost_trees(xb.get_booster(), True, 2), classlabels_int64s=[0, 1]),
                    Xbn)
    rfr = RandomForestRegressor(50, max_depth=12, random_state=SEED, n_jobs=1).fit(
        Xr[:800], yr[:800])
    regressor_case(R, work, "RandomForestRegressor", "TreeEnsembleRegressor",
                   mc.random_forest_regressor(rfr), Xr)
    gbr = GradientBoostingRegressor(n_estimators=80, max_depth=5, random_state=SEED).fit(
        Xr[:800], yr[:800])
    regressor_case(R, work, "GradientBoostingRegressor", "TreeEnsembleRegressor",
                   mc.gradient_boosting(gbr, False), Xr)
    xr = xgb.XGBRegressor(n_estimators=300, max_depth=7, nthread=1, random_state=SEED).fit(
        Xr[:800], yr[:800])
    regressor_case(R, work, "XGBRegressor", "TreeEnsembleRegressor",
                   mc.xgboost_trees(xr.get_booster(), False, 1), Xr)


def svms(R, work):
    Xc, yc = make_classification(400, 6, n_informative=4, n_classes=3, random_state=SEED)
    Xb, yb = make_classification(400, 6, n_informative=4, random_state=SEED + 2)
    Xr, yr = make_regression(400, 6, noise=2.0, random_state=SEED)
    for kernel in ("linear", "rbf", "poly"):
        for proba in (False, True):
            for name, X, y, labels in (("3 classes", Xc, yc, [0, 1, 2]),
                                       ("binary", Xb, yb, [0, 1])):
                m = SVC(kernel=kernel, probability=proba, degree=3, coef0=0.5, random_state=SEED)
                m.fit(X[:200], y[:200])
                classifier_case(R, work, "SVC %s %s%s" % (kernel, name,
                                                           " probability" if proba else ""),
                                mc.svc(m), X[:300])
        m = SVR(kernel=kernel, degree=2, coef0=1.0, C=10.0).fit(Xr[:200], yr[:200])
        regressor_case(R, work, "SVR %s" % kernel, "SVMRegressor", mc.svr(m), Xr[:300],
                       rtol=-1e-5)


def linear(R, work):
    Xc, yc = make_classification(2000, 8, n_informative=5, n_classes=4, random_state=SEED)
    Xb, yb = make_classification(2000, 8, n_informative=5, random_state=SEED + 3)
    Xr, yr = make_regression(2000, 8, noise=1.0, random_state=SEED)
    lr = LogisticRegression(max_iter=500).fit(Xc[:500], yc[:500])
    classifier_case(R, work, "LogisticRegression 4 classes", mc.logistic_regression(lr), Xc)
    lrb = LogisticRegression(max_iter=500).fit(Xb[:500], yb[:500])
    classifier_case(R, work, "LogisticRegression binary", mc.logistic_regression(lrb), Xb)
    one_row = dict(coefficients=lrb.coef_.ravel().tolist(), intercepts=lrb.intercept_.tolist(),
                   post_transform="LOGISTIC", classlabels_ints=[0, 1])
    classifier_case(R, work, "LogisticRegression binary one row", one_row, Xb)
    lin = LinearRegression().fit(Xr[:500], yr[:500])
    regressor_case(R, work, "LinearRegression", "LinearRegressor",
                   dict(coefficients=lin.coef_.tolist(), intercepts=[float(lin.intercept_)]), Xr)


def pipeline(R, work):
    """StandardScaler on 3 numeric columns + OneHotEncoder on a string
    column, concatenated by FeatureVectorizer, then a multinomial
    LogisticRegression with string labels."""
    rng = np.random.default_rng(SEED)
    n = 1500
    num = rng.normal(size=(n, 3)) * [1.0, 5.0, 0.2] + [0.0, 10.0, -1.0]
    colors = np.array(["red", "green", "blue", "cyan"])
    cat = colors[rng.integers(0, 4, n)]
    score = num[:, 0] - 0.2 * num[:, 1] + (cat == "red") * 2.0 - (cat == "blue")
    y = np.digitize(score + rng.normal(scale=0.5, size=n), [-3.0, -1.0])
    labels = np.array(["low", "mid", "high"])[y]
    sc = StandardScaler().fit(num[:600])
    oh = OneHotEncoder(categories=[list(colors)]).fit(cat[:600, None])
    feats = np.hstack([sc.transform(num[:600]), oh.transform(cat[:600, None]).toarray()])
    lr = LogisticRegression(max_iter=500).fit(feats, labels[:600])
    nodes = [mc.ml_node("Scaler", ["num"], ["scaled"], offset=sc.mean_.tolist(),
                        scale=(1.0 / sc.scale_).tolist()),
             mc.ml_node("OneHotEncoder", ["cat"], ["onehot"], cats_strings=list(colors),
                        zeros=1),
             mc.ml_node("FeatureVectorizer", ["scaled", "onehot"], ["features"],
                        inputdimensions=[3, 4]),
             mc.ml_node("LinearClassifier", ["features"], ["label", "probabilities"],
                        **mc.logistic_regression(lr, labels=lr.classes_))]
    path = os.path.join(work, "pipeline.onnx")
    ml_model(nodes, [("num", mc.FLOAT, [None, 3]), ("cat", mc.STRING, [None, 1])],
             [("label", mc.STRING, [None]), ("probabilities", mc.FLOAT, [None, 3])], path)
    for bname, sl in (("n=1", slice(0, 1)), ("n=%d" % n, slice(0, n))):
        R.add("pipeline Scaler+OneHotEncoder+LogisticRegression %s" % bname, path,
              {"num": num[sl].astype(np.float32), "cat": cat[sl, None].astype(object)},
              ["label", "probabilities"])
    want = lr.predict(np.hstack([sc.transform(num), oh.transform(cat[:, None]).toarray()]))
    return path, {"num": num.astype(np.float32), "cat": cat[:, None].astype(object)}, want


def main():
    lib, work = sys.argv[1], sys.argv[2]
    mods = node_modules(sys.argv[3] if len(sys.argv) > 3 else None)
    if not mods:
        return 77
    os.makedirs(work, exist_ok=True)
    R = Runner(lib, mods, work, T)
    for part in (trees, svms, linear):
        part(R, work)
    path, inputs, want = pipeline(R, work)
    R.run()
    got = R.mk.run(path, inputs, ["label"])["label"]
    agree = float(np.mean(got == want))
    T.check(agree > 0.99, "pipeline labels agree with scikit-learn's predict (%.4f)" % agree)
    return T.result()


if __name__ == "__main__":
    sys.exit(main())
