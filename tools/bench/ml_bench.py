#!/usr/bin/python3
"""ml_bench: tree ensembles, ortmk against ONNX Runtime (onnxruntime-node).

  tools/bench/ml_bench.py [--build build] [--trees 500] [--depth 8]
                          [--features 20] [--rounds 5] [--threads 1]
                          [--node-modules DIR] [--work DIR]

Writes two models of --trees complete trees of --depth (every leaf at that
depth: the worst case for a walk), with random features and thresholds
(seeded): a TreeEnsembleRegressor (one target, SUM) and a
TreeEnsembleClassifier (three classes, a weight per class on every leaf,
as a random forest's).  Each runs at batch 1 and batch 1000 through
ort-run (--json, its median) and through ort_node_bench.js (the same
median definition), alternating the two runtimes for --rounds rounds so
that a disturbance hits both; the figure is the median of the rounds'
medians.  Both use --threads intra-op threads.  Prints a table, the CPU
model, and one JSON line.  docs/OPERATORS.md ("ai.onnx.ml") has figures.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
from bench_run import find_node_modules, ort_version, run_ort, run_ortmk  # noqa: E402


def complete_trees(rng, n_trees, depth, n_features, n_classes):
    """Attributes of n_trees complete trees (node ids in breadth-first
    order: children of i are 2i+1 and 2i+2)."""
    n_nodes = 2 ** (depth + 1) - 1
    inner = 2 ** depth - 1
    a = {k: [] for k in ("treeids", "nodeids", "featureids", "modes", "values", "truenodeids",
                         "falsenodeids")}
    w = {k: [] for k in ("ids", "nodeids", "treeids", "weights")}
    for t in range(n_trees):
        feats = rng.integers(0, n_features, inner)
        thr = rng.normal(size=inner) * 0.7
        for i in range(n_nodes):
            leaf = i >= inner
            for k, v in (("treeids", t), ("nodeids", i), ("featureids", 0 if leaf else feats[i]),
                         ("modes", "LEAF" if leaf else "BRANCH_LEQ"),
                         ("values", 0.0 if leaf else float(thr[i])),
                         ("truenodeids", 0 if leaf else 2 * i + 1),
                         ("falsenodeids", 0 if leaf else 2 * i + 2)):
                a[k].append(int(v) if k != "values" and k != "modes" else v)
            if leaf:
                p = rng.dirichlet(np.ones(n_classes)) if n_classes > 1 else rng.normal(size=1)
                for c in range(n_classes):
                    w["ids"].append(c)
                    w["nodeids"].append(i)
                    w["treeids"].append(t)
                    w["weights"].append(float(p[c]) / (n_trees if n_classes > 1 else 1))
    return a, w


def write_models(work, trees, depth, features, seed=8):
    rng = np.random.default_rng(seed)
    paths = {}
    for kind in ("regressor", "classifier"):
        nc = 1 if kind == "regressor" else 3
        a, w = complete_trees(rng, trees, depth, features, nc)
        attrs = {"nodes_" + k: v for k, v in a.items()}
        pre = "target" if kind == "regressor" else "class"
        attrs.update({"%s_%s" % (pre, k): v for k, v in w.items()})
        if kind == "regressor":
            node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml",
                                    n_targets=1, **attrs)
            outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 1])]
        else:
            node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "prob"],
                                    domain="ai.onnx.ml", classlabels_int64s=[0, 1, 2], **attrs)
            outs = [helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
                    helper.make_tensor_value_info("prob", TensorProto.FLOAT, [None, 3])]
        g = helper.make_graph([node], kind, [helper.make_tensor_value_info(
            "x", TensorProto.FLOAT, [None, features])], outs)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("ai.onnx.ml", 3)])
        m.ir_version = 8
        paths[kind] = os.path.join(work, "%s_%dx%d.onnx" % (kind, trees, depth))
        onnx.save(m, paths[kind])
    return paths


def write_input(work, batch, features, seed=9):
    x = np.random.default_rng(seed).normal(size=(batch, features)).astype(np.float32)
    npy = os.path.join(work, "x_%d.npy" % batch)
    raw = os.path.join(work, "x_%d.bin" % batch)
    np.save(npy, x)
    x.tofile(raw)
    return [{"name": "x", "shape": [batch, features], "npy": npy, "bin": raw}]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--trees", type=int, default=500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--node-modules")
    ap.add_argument("--work")
    args = ap.parse_args()
    ort_run = os.path.join(args.build, "tools", "ort-run")
    mods = find_node_modules(args.node_modules)
    if not os.access(ort_run, os.X_OK) or not mods:
        sys.exit("ml_bench: needs %s and onnxruntime-node (tools/dev.sh installs it)" % ort_run)
    work = args.work or tempfile.mkdtemp(prefix="ml_bench_")
    os.makedirs(work, exist_ok=True)
    models = write_models(work, args.trees, args.depth, args.features)
    configs = []
    for kind, path in models.items():
        for batch, iters in ((1, 300), (1000, 20)):
            configs.append({"model": kind, "batch": batch, "iters": iters,
                            "meta": {"model": path, "inputs": write_input(work, batch,
                                                                          args.features)},
                            "ortmk": [], "ort": []})
    for r in range(args.rounds):
        for c in configs:
            for who in ("ortmk", "ort"):
                if who == "ortmk":
                    res = run_ortmk(ort_run, c["meta"], args.threads, c["iters"], 10, None)
                else:
                    res = run_ort("node", mods, c["meta"], args.threads, c["iters"], 10, None)
                if "error" in res:
                    sys.exit("ml_bench: %s %s: %s" % (who, c["model"], res["error"]))
                c[who].append(res["median_ms"])
        print("round %d of %d done" % (r + 1, args.rounds), file=sys.stderr)
    cpu = cpu_model()
    print("ml_bench: %d trees of depth %d, %d features, %d thread(s), ONNX Runtime %s, %s" %
          (args.trees, args.depth, args.features, args.threads, ort_version(mods), cpu))
    print("%-11s %6s %12s %12s %8s" % ("model", "batch", "ortmk ms", "ORT ms", "ratio"))
    out = []
    for c in configs:
        a, b = statistics.median(c["ortmk"]), statistics.median(c["ort"])
        print("%-11s %6d %12.4f %12.4f %7.2fx" % (c["model"], c["batch"], a, b, b / a))
        out.append({"model": c["model"], "batch": c["batch"], "ortmk_ms": a, "ort_ms": b,
                    "ort_over_ortmk": b / a})
    print(json.dumps({"cpu": cpu, "threads": args.threads, "trees": args.trees,
                      "depth": args.depth, "results": out}))


if __name__ == "__main__":
    main()
