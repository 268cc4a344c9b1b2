"""Find where ortmk first diverges from ONNX Runtime on a failing zoo row
(ort-zoo --locate): every value the main graph's nodes produce becomes a
graph output, both runtimes run that model on the failing input set, and
the first node in graph order whose output fails the row's tolerance while
all its inputs passed is the answer ("node NAME (OP) output X: ...").

Values inside If/Loop bodies cannot be exposed; a divergence there shows
at the control-flow node.  Making a value an output can stop a runtime from
fusing through it, so a mismatch that only a fusion causes may not
reproduce: then the answer says so.
"""
import os
import shutil

import onnx
from onnx import helper, shape_inference

import zoo_compare
from zoo_run import inputs_of, run_ort, run_ortmk

CHUNK = 1000   # values exposed per run: big graphs go in several runs


def _values(src):
    """The model and its main graph's (node, value, elem_type) in order."""
    m = onnx.load(src)
    try:
        inferred = shape_inference.infer_shapes(m, strict_mode=False)
    except Exception:  # noqa: BLE001 - fall back to what the model declares
        inferred = m
    types = {vi.name: vi.type.tensor_type.elem_type
             for vi in list(inferred.graph.value_info) + list(inferred.graph.output)
             if vi.type.HasField("tensor_type")}
    have = {o.name for o in m.graph.output}
    order = [(n, o, types[o]) for n in m.graph.node for o in n.output
             if o and o not in have and types.get(o)]
    return m, order


def safe(name):
    s = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    return s if s not in ("", ".", "..") else "_"


def locate(a, model, meta, set_name, variant, work):
    """The first diverging node, as text, or None when the exposed model
    does not run; the exposed values (often GBs) are deleted afterwards."""
    d = os.path.join(work, "locate")
    try:
        return _locate(a, model, meta, set_name, variant, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _locate(a, model, meta, set_name, variant, d):
    m, order = _values(model)
    feeds = inputs_of(a.cache_dir, meta, set_name)
    for start in range(0, len(order), CHUNK):
        chunk = order[start:start + CHUNK]
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        dbg = onnx.ModelProto()
        dbg.CopyFrom(m)
        for _, o, t in chunk:
            dbg.graph.output.append(helper.make_tensor_value_info(o, t, None))
        path = os.path.join(d, "model.onnx")
        onnx.save(dbg, path)
        ort = run_ort(a.node_modules, path, [(set_name, feeds, os.path.join(d, "ort"))],
                      [a.threads])
        if "error" in ort[(a.threads, set_name)]:
            return None
        _, err = run_ortmk(a.ort_run, path, feeds, os.path.join(d, "ortmk"), a.threads)
        if err:
            return None
        ref = zoo_compare.load_dir(os.path.join(d, "ort"))
        got = zoo_compare.load_dir(os.path.join(d, "ortmk"))
        for node, out, _ in chunk:
            key = safe(out)
            if key not in ref or key not in got:
                continue
            ok, _, why = zoo_compare.compare_tensor(out, got[key], ref[key],
                                                    "fp32" if variant == "int8" else variant)
            if not ok:
                return "node %s (%s) %s" % (node.name or "?", node.op_type, why)
    return "none with every value exposed (a fusion across a value may cause it)"
