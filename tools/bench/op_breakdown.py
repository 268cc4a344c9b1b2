"""Where a model's time goes, op by op, in ortmk and in ONNX Runtime.

Used by `ort-bench --ops`.  Each node of a benchmark model becomes a
one-node model (its initializers kept, its other inputs graph inputs with
the shapes shape inference gives them); nodes with the same op, attributes
and input shapes are timed once and counted as many times as they occur.
Each one-node model runs with ortmk and ORT at one thread count next to a
baseline with the same inputs and outputs whose outputs come from
ConstantOfShape: the difference estimates the kernel's time without the
runtime's per-run and per-byte costs (ortmk's IPC and output copy out of
the arena, Node's copies into JavaScript), which differ a lot between the
two.  Neither runtime fuses anything in a one-node model, so the sum over
ops is not the whole model's time, but the ratios say which kernels are slow.
"""
import hashlib
import os

import numpy as np
import onnx
from onnx import helper, shape_inference

import bench_models
from bench_run import run_ort, run_ortmk


def _shapes(model):
    inferred = shape_inference.infer_shapes(model)
    g = inferred.graph
    out = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        out[vi.name] = (t.elem_type, [d.dim_value for d in t.shape.dim])
    return out


def _signature(node, shapes, inits):
    h = hashlib.sha256(node.op_type.encode())
    for a in node.attribute:
        h.update(a.SerializeToString())
    for name in node.input:
        if name in inits:
            h.update(b"I" + str(list(inits[name].dims)).encode())
        else:
            h.update(b"X" + str(shapes.get(name)).encode())
    return h.hexdigest()[:16]


def _baseline(node, vis, outs, shapes):
    """The node's inputs and outputs, the outputs filled by ConstantOfShape."""
    nodes, inits = [], []
    for o in node.output:
        et, shp = shapes[o]
        inits.append(helper.make_tensor(o + ".shape", onnx.TensorProto.INT64, [len(shp)], shp))
        nodes.append(helper.make_node(
            "ConstantOfShape", [o + ".shape"], [o],
            value=helper.make_tensor("v", et, [1], [0])))
    graph = helper.make_graph(nodes, "baseline",
                              [helper.make_tensor_value_info(n, e, s) for n, e, s in vis],
                              outs, inits)
    m = helper.make_model(graph, producer_name="ortmk-bench",
                          opset_imports=[helper.make_opsetid("", bench_models.OPSET)])
    m.ir_version = 8
    return m


def split(meta, out_dir):
    """One-node models of meta's model: [(op, count, desc, meta, baseline
    meta)] in graph order of first occurrence."""
    model = onnx.load(meta["model"])
    shapes = _shapes(model)
    inits = {i.name: i for i in model.graph.initializer}
    groups = {}
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(77)
    for node in model.graph.node:
        sig = _signature(node, shapes, inits)
        if sig in groups:
            groups[sig][1] += 1
            continue
        ins, vis, desc = [], [], []
        for name in node.input:
            if name in inits:
                ins.append(inits[name])
            elif name:
                et, shp = shapes[name]
                vis.append((name, et, shp))
                desc.append("x".join(map(str, shp)))
        outs = [helper.make_tensor_value_info(o, *shapes[o]) for o in node.output]
        graph = helper.make_graph(
            [node], node.op_type, [helper.make_tensor_value_info(n, e, s) for n, e, s in vis],
            outs, ins)
        one = helper.make_model(graph, producer_name="ortmk-bench",
                                opset_imports=[helper.make_opsetid("", bench_models.OPSET)])
        one.ir_version = 8
        path = os.path.join(out_dir, "%s_%s.onnx" % (node.op_type, sig))
        base_path = path[:-5] + ".base.onnx"
        inputs = []
        if not os.path.exists(base_path):
            onnx.save(one, path)
            onnx.save(_baseline(node, vis, outs, shapes), base_path)
        for name, et, shp in vis:
            if et != onnx.TensorProto.FLOAT:
                raise ValueError("%s: non-float input %s" % (node.name, name))
            base = os.path.join(out_dir, "%s_%s.%s" % (node.op_type, sig, name.replace("/", "_")))
            x = rng.uniform(-1.0, 1.0, shp).astype(np.float32)
            if not os.path.exists(base + ".bin"):
                np.save(base + ".npy", x)
                x.tofile(base + ".bin")
            inputs.append({"name": name, "shape": shp, "npy": base + ".npy", "bin": base + ".bin"})
        groups[sig] = [node.op_type, 1, " ".join(desc) or "-", {"model": path, "inputs": inputs},
                       {"model": base_path, "inputs": inputs}]
    return [tuple(v) for v in groups.values()]


def _time(rt, m, ort_run, node, mods, threads, iters):
    if rt == "ortmk":
        r = run_ortmk(ort_run, m, threads, iters, max(2, iters // 5), None)
    else:
        r = run_ort(node, mods, m, threads, iters, max(2, iters // 5), None)
    return r.get("error"), r.get("min_ms")


def breakdown(meta, out_dir, ort_run, node, mods, threads, iters):
    """Per-op totals of meta's model.  Returns {"ops": [{op, count,
    ortmk_ms, ort_ms}], "nodes": [{op, count, inputs, ortmk_ms, ort_ms,
    ortmk_base_ms, ort_base_ms}]}, times summed over occurrences."""
    nodes = []
    for op, count, desc, m, base in split(meta, out_dir):
        row = {"op": op, "count": count, "inputs": desc}
        for rt in ("ortmk", "ort") if mods else ("ortmk",):
            err, t = _time(rt, m, ort_run, node, mods, threads, iters)
            err_b, t_b = _time(rt, base, ort_run, node, mods, threads, iters)
            if err or err_b:
                row[rt + "_error"] = err or "baseline: " + err_b
                continue
            row[rt + "_ms"] = max(0.0, t - t_b) * count
            row[rt + "_base_ms"] = t_b
        nodes.append(row)
    ops = {}
    for n in nodes:
        o = ops.setdefault(n["op"], {"op": n["op"], "count": 0, "ortmk_ms": 0.0, "ort_ms": 0.0})
        o["count"] += n["count"]
        for rt in ("ortmk", "ort"):
            o[rt + "_ms"] += n.get(rt + "_ms", 0.0)
    return {"ops": sorted(ops.values(), key=lambda o: -o["ortmk_ms"]), "nodes": nodes}
