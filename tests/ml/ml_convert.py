"""Fitted scikit-learn and XGBoost models written as ai.onnx.ml graphs the
way skl2onnx and onnxmltools shape them (those converters are not
installed here): TreeEnsemble attributes from sklearn's tree_ arrays and
from XGBoost's JSON dump, SVMClassifier/SVMRegressor from libsvm's
fields, LinearClassifier/LinearRegressor from coef_ and intercept_."""
import json

import numpy as np
from onnx import TensorProto as TP
from onnx import helper


def ml_node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, domain="ai.onnx.ml", **attrs)


class TreeAttrs:
    """nodes_* and class_*/target_* lists, filled tree by tree."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.n = {k: [] for k in ("treeids", "nodeids", "featureids", "modes", "values",
                                  "truenodeids", "falsenodeids", "missing_value_tracks_true")}
        self.w = {k: [] for k in ("ids", "nodeids", "treeids", "weights")}

    def node(self, tree, nid, feat, mode, value, t, f, missing=0):
        for k, v in (("treeids", tree), ("nodeids", nid), ("featureids", feat), ("modes", mode),
                     ("values", value), ("truenodeids", t), ("falsenodeids", f),
                     ("missing_value_tracks_true", missing)):
            self.n[k].append(v)

    def weight(self, tree, nid, k, w):
        for key, v in (("ids", k), ("nodeids", nid), ("treeids", tree), ("weights", w)):
            self.w[key].append(v)

    def attrs(self, missing=False):
        a = {"nodes_" + k: v for k, v in self.n.items()
             if missing or k != "missing_value_tracks_true"}
        a.update({"%s_%s" % (self.prefix, k): v for k, v in self.w.items()})
        return a


def sklearn_tree(ta, tree_id, est, leaf_weights):
    """One sklearn tree; leaf_weights(value row) -> [(class or target, weight)]."""
    t = est.tree_
    for i in range(t.node_count):
        if t.children_left[i] < 0:
            ta.node(tree_id, i, 0, "LEAF", 0.0, 0, 0)
            for k, w in leaf_weights(t.value[i]):
                ta.weight(tree_id, i, k, float(w))
        else:
            ta.node(tree_id, i, int(t.feature[i]), "BRANCH_LEQ", float(t.threshold[i]),
                    int(t.children_left[i]), int(t.children_right[i]))


def random_forest_classifier(rf, binary_one_class=True):
    """RandomForestClassifier: averaged leaf probabilities (weights / n)."""
    ta, n = TreeAttrs("class"), len(rf.estimators_)
    nc = len(rf.classes_)

    def leaf(v):
        p = v[0] / v[0].sum()
        if nc == 2 and binary_one_class:
            return [(0, p[1] / n)]
        return [(k, p[k] / n) for k in range(nc)]
    for i, e in enumerate(rf.estimators_):
        sklearn_tree(ta, i, e, leaf)
    return ta.attrs()


def random_forest_regressor(rf):
    ta = TreeAttrs("target")
    for i, e in enumerate(rf.estimators_):
        sklearn_tree(ta, i, e, lambda v: [(0, v[0][0])])
    return dict(ta.attrs(), n_targets=1, aggregate_function="AVERAGE")


def gradient_boosting(gb, classifier):
    """GradientBoosting*: learning_rate * leaf values on top of the
    initial estimate (base_values); LOGISTIC or SOFTMAX for classifiers."""
    ta = TreeAttrs("class" if classifier else "target")
    k_trees = gb.estimators_.shape[1]
    tid = 0
    for stage in gb.estimators_:
        for k, e in enumerate(stage):
            sklearn_tree(ta, tid, e, lambda v, k=k: [(k, gb.learning_rate * v[0][0])])
            tid += 1
    init = gb._raw_predict_init(np.zeros((1, gb.n_features_in_)))[0]
    a = dict(ta.attrs(), base_values=[float(v) for v in init])
    if classifier:
        a["post_transform"] = "LOGISTIC" if k_trees == 1 else "SOFTMAX"
    else:
        a.update(n_targets=1, aggregate_function="SUM")
    return a


def xgboost_trees(booster, classifier, n_classes):
    """onnxmltools' shape: BRANCH_LT on split_condition, the missing
    branch as missing_value_tracks_true; tree i feeds class i % K."""
    ta = TreeAttrs("class" if classifier else "target")
    k = n_classes if classifier and n_classes > 2 else 1
    for tid, js in enumerate(booster.get_dump(dump_format="json")):
        stack = [json.loads(js)]
        while stack:
            nd = stack.pop()
            if "leaf" in nd:
                ta.node(tid, nd["nodeid"], 0, "LEAF", 0.0, 0, 0)
                ta.weight(tid, nd["nodeid"], tid % k, float(nd["leaf"]))
                continue
            ta.node(tid, nd["nodeid"], int(nd["split"][1:]), "BRANCH_LT",
                    float(nd["split_condition"]), nd["yes"], nd["no"],
                    int(nd.get("missing") == nd["yes"]))
            stack += nd["children"]
    cfg = json.loads(booster.save_config())
    base = float(cfg["learner"]["learner_model_param"]["base_score"])
    a = ta.attrs(missing=True)
    if not classifier:
        return dict(a, n_targets=1, base_values=[base], aggregate_function="SUM")
    if k == 1:
        margin = float(np.log(base / (1 - base)))
        return dict(a, post_transform="LOGISTIC", base_values=[margin])
    return dict(a, post_transform="SOFTMAX", base_values=[base] * k)


def svc(model):
    """SVC (libsvm): support vectors by class, dual coefficients, rho,
    Platt's prob_a/prob_b when probability=True."""
    a = dict(kernel_type=model.kernel.upper(),
             kernel_params=[float(model._gamma), float(model.coef0), float(model.degree)],
             vectors_per_class=[int(v) for v in model.n_support_],
             support_vectors=model.support_vectors_.ravel().tolist(),
             coefficients=model.dual_coef_.ravel().tolist(),
             rho=model.intercept_.tolist(), classlabels_ints=[int(c) for c in model.classes_])
    if model.probability:
        a.update(prob_a=model.probA_.tolist(), prob_b=model.probB_.tolist())
    return a


def svr(model):
    return dict(kernel_type=model.kernel.upper(),
                kernel_params=[float(model._gamma), float(model.coef0), float(model.degree)],
                n_supports=int(len(model.support_)),
                support_vectors=model.support_vectors_.ravel().tolist(),
                coefficients=model.dual_coef_.ravel().tolist(),
                rho=model.intercept_.tolist())


def logistic_regression(lr, labels=None):
    """skl2onnx's shape: binary as two rows [-w, w] under LOGISTIC,
    multinomial under SOFTMAX."""
    coef, b = lr.coef_, lr.intercept_
    if coef.shape[0] == 1:
        coef, b, post = np.vstack([-coef, coef]), np.array([-b[0], b[0]]), "LOGISTIC"
    else:
        post = "SOFTMAX"
    a = dict(coefficients=coef.ravel().tolist(), intercepts=b.tolist(), post_transform=post,
             multi_class=1 if post == "SOFTMAX" else 0)
    if labels is not None:
        a["classlabels_strings"] = list(labels)
    else:
        a["classlabels_ints"] = [int(c) for c in lr.classes_]
    return a


def graph_io(name, et, shape):
    return helper.make_tensor_value_info(name, et, shape)


FLOAT, INT64, STRING = TP.FLOAT, TP.INT64, TP.STRING
