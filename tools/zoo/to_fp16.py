#!/usr/bin/python3
"""to_fp16.py: convert a float32 ONNX model to float16 with float32 inputs
and outputs, as onnxconverter-common's convert_float_to_float16(...,
keep_io_types=True) does; written here so the zoo needs no extra package.
Used by gen.py; also a command:

    to_fp16.py IN.onnx OUT.onnx [--keep-fp32 OP,...] [--convert OP,...]

What it produces
  * every float32 initializer, Constant, ConstantOfShape value and Cast(to
    float) becomes float16 (values beyond +-65504 saturate there, infinities
    stay infinities), and so does every activation between the ops that
    are converted; If/Loop/Scan bodies are converted the same way;
  * each float32 graph input goes through Cast(to=float16) and each float
    output comes out of Cast(to=float): the model's interface is unchanged;
  * the ops of KEEP_FP32 run in float32: a Cast to float32 before each of
    their float inputs, a Cast back to float16 after each float output
    (a constant they alone use simply stays float32, no Cast);
  * the inputs of FP32_INPUTS stay float32 whatever their op: the ONNX
    spec types them tensor(float) only (Resize/Upsample scales);
  * non-float tensors (shape inputs, indices, int64 sizes, bool masks, the
    sample rate of an If) are left alone.

Why these ops stay float32 (KEEP_FP32): it is onnxconverter-common's
DEFAULT_OP_BLOCK_LIST for the ONNX domain, so the zoo's fp16 models are
what users get from the common converter:
  NonMaxSuppression   boxes, scores and thresholds are tensor(float) only
  Range               its T has no float16
  RoiAlign, TopK,     ONNX Runtime's CPU provider has no float16 kernel;
  CumSum              scores and ranks compared in float16 would tie
  Resize, Upsample    scales must be float32; ORT CPU resizes float32
  Min, Max            the block list keeps them (clamps of box coordinates)
and one of our own:
  MelWeightMatrix     ORT 1.30 cannot create a session when its
                      output_datatype is float16 (the Cast it inserts
                      around its float-only kernel mismatches the type)
plus the ML-domain ops of that list (none occur in the zoo).  --keep-fp32
adds ops; --convert removes ops from the list (FP32_INPUTS still hold).
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

VERSION = 4
FLOAT, FLOAT16 = TensorProto.FLOAT, TensorProto.FLOAT16
KEEP_FP32 = {"NonMaxSuppression", "Range", "RoiAlign", "TopK", "CumSum", "Resize", "Upsample",
             "Min", "Max", "MelWeightMatrix"}
# op -> input slots typed tensor(float) by the spec (Resize-10 has scales at 1).
FP32_INPUTS = {"Resize": {1, 2}, "Upsample": {1}}
# Producers whose float output can be made float16 or kept float32 at no
# cost: they are constants or a Cast whose target type we choose.
FLEXIBLE = {"Constant", "ConstantOfShape", "Cast"}
FP16_MAX = 65504.0


def to_half(arr):
    """float32 array -> float16, saturating finite values at +-65504."""
    a = np.asarray(arr, np.float32)
    fin = np.isfinite(a)
    return np.where(fin, np.clip(a, -FP16_MAX, FP16_MAX), a).astype(np.float16)


def retype_value_info(vi):
    """float -> float16 in a subgraph's declared input/output type, tensor
    or sequence of tensors (a scripted loop collects its steps in one)."""
    t = vi.type
    while t.HasField("sequence_type"):
        t = t.sequence_type.elem_type
    if t.HasField("tensor_type") and t.tensor_type.elem_type == FLOAT:
        t.tensor_type.elem_type = FLOAT16


def half_tensor(t, name=None):
    out = numpy_helper.from_array(to_half(numpy_helper.to_array(t)), name or t.name)
    return out


def subgraphs(node):
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def all_graphs(g):
    yield g
    for n in g.node:
        for sg in subgraphs(n):
            yield from all_graphs(sg)


# ------------------------------------------------------------------ element types

def collect_types(model):
    """name -> elem_type for every tensor of the model, subgraphs included,
    from ONNX shape inference with a simple propagation where it is silent."""
    types = {}
    try:
        inferred = shape_inference.infer_shapes(model, check_type=False, strict_mode=False)
    except Exception:  # noqa: BLE001 - fall back to propagation only
        inferred = model
    for g in all_graphs(inferred.graph):
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                types[vi.name] = vi.type.tensor_type.elem_type
        for t in g.initializer:
            types[t.name] = t.data_type
    for g in all_graphs(model.graph):
        _propagate(g, types)
    return types


BOOL_OPS = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or",
            "Xor", "IsNaN", "IsInf"}
INT64_OPS = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin", "NonMaxSuppression"}


def _propagate(g, types):
    for n in g.node:
        for i, o in enumerate(n.output):
            if not o or o in types:
                continue
            attrs = {a.name: a for a in n.attribute}
            if n.op_type == "Cast":
                types[o] = attrs["to"].i
            elif n.op_type == "Constant" and "value" in attrs:
                types[o] = attrs["value"].t.data_type
            elif n.op_type == "ConstantOfShape":
                types[o] = attrs["value"].t.data_type if "value" in attrs else FLOAT
            elif n.op_type in BOOL_OPS:
                types[o] = TensorProto.BOOL
            elif n.op_type in INT64_OPS or (n.op_type == "TopK" and i == 1):
                types[o] = TensorProto.INT64
            else:
                known = [types[x] for x in n.input if x and x in types]
                if known:
                    types[o] = known[0]


# ------------------------------------------------------------------ the conversion

class Converter:
    def __init__(self, model, keep):
        self.m = model
        self.keep = keep
        self.types = collect_types(model)
        self.uses = {}       # tensor -> set of needed types ("16", "32")
        self.producer = {}   # tensor -> node (any graph)
        self.consts = {}     # initializer name -> (graph, TensorProto)
        self.uid = 0
        for g in all_graphs(model.graph):
            for t in g.initializer:
                self.consts[t.name] = (g, t)
            for n in g.node:
                for o in n.output:
                    self.producer[o] = n
                for i, x in enumerate(n.input):
                    if x and self.is_float(x):
                        self.uses.setdefault(x, set()).add(self.need(n, i))
            for o in g.output:   # the main graph's outputs are Cast to float32 anyway
                if self.is_float(o.name):
                    self.uses.setdefault(o.name, set()).add("16" if g is not model.graph else "32")

    def is_float(self, name):
        return self.types.get(name) == FLOAT

    def need(self, node, slot):
        if node.op_type in self.keep or slot in FP32_INPUTS.get(node.op_type, ()):
            return "32"
        if node.op_type == "Cast":
            return "any"
        return "16"

    def native(self, name, graph_inputs):
        """The type the tensor has where it is produced, once converted."""
        if name in self.main_inputs:
            return "32"
        if name in graph_inputs:
            return "16"
        uses = self.uses.get(name, set()) - {"any"}
        flexible = name in self.consts or (
            name in self.producer and self.producer[name].op_type in FLEXIBLE)
        if flexible:
            return "16" if "16" in uses or not uses else "32"
        p = self.producer.get(name)
        if p is not None and p.op_type in self.keep:
            return "32"
        return "16"

    def fresh(self, base):
        self.uid += 1
        return "%s__%d" % (base, self.uid)

    def run(self):
        g = self.m.graph
        self.main_inputs = {i.name for i in g.input if self.is_float(i.name)}
        inits = {t.name for t in g.initializer}
        self.main_inputs -= inits
        # Float outputs produced in float16 are renamed so that a final Cast
        # can write the float32 value under the original name.
        renamed = {}
        for o in g.output:
            if self.is_float(o.name) and o.name not in self.main_inputs and \
                    self.native(o.name, self.main_inputs) == "16":
                renamed[o.name] = o.name + "__fp16"
        for old, new in renamed.items():
            self._rename(old, new)
        self.convert_graph(g, self.main_inputs)
        for o in g.output:
            if o.name in renamed:
                g.node.append(helper.make_node("Cast", [renamed[o.name]], [o.name],
                                               name=o.name + "__to_fp32", to=FLOAT))
        for gr in all_graphs(g):
            del gr.value_info[:]
        import to_int8
        to_int8.prune_initializers(g)
        return self.m

    def _rename(self, old, new):
        for gr in all_graphs(self.m.graph):
            for n in gr.node:
                n.input[:] = [new if x == old else x for x in n.input]
                n.output[:] = [new if x == old else x for x in n.output]
        for d in (self.types, self.uses, self.producer):
            if old in d:
                d[new] = d.pop(old)

    def convert_graph(self, g, graph_inputs):
        """Rewrites g's nodes in place; graph_inputs are the names whose
        native type is fixed by the enclosing node (subgraph inputs)."""
        made = {}            # (tensor, type) -> name, within this graph
        nodes = []
        for n in g.node:
            for sg in subgraphs(n):
                sub_inputs = {i.name for i in sg.input if self.is_float(i.name)}
                self.convert_graph(sg, sub_inputs)
                for vi in list(sg.input) + list(sg.output):
                    retype_value_info(vi)
            for i, x in enumerate(n.input):
                if not x or not self.is_float(x):
                    continue
                want = self.need(n, i)
                have = self.native(x, graph_inputs)
                if want != "any" and want != have:
                    n.input[i] = self._cast(g, x, want, made, nodes)
            self._retype_node(n, graph_inputs)
            nodes.append(n)
        if g is not self.m.graph:
            for o in g.output:
                if self.is_float(o.name) and self.native(o.name, graph_inputs) == "32":
                    o.name = self._cast(g, o.name, "16", made, nodes)
        self._retype_inits(g, graph_inputs)
        del g.node[:]
        g.node.extend(nodes)

    def _cast(self, g, x, want, made, nodes):
        key = (x, want)
        if key in made:
            return made[key]
        name = self.fresh(x + ("__fp16" if want == "16" else "__fp32"))
        if x in self.consts and want == "16":
            owner, t = self.consts[x]
            owner.initializer.append(half_tensor(t, name))
        elif x in self.consts:
            owner, t = self.consts[x]   # a float16 constant needed as float32
            owner.initializer.append(numpy_helper.from_array(
                numpy_helper.to_array(t).astype(np.float32), name))
        else:
            nodes.append(helper.make_node("Cast", [x], [name], name=name,
                                          to=FLOAT16 if want == "16" else FLOAT))
        made[key] = name
        return name

    def _retype_node(self, n, graph_inputs):
        """Attributes that fix an output type: float -> float16 where the
        output is float16 (always for SequenceEmpty: the tensors inserted
        into the sequence are float16)."""
        if n.op_type == "SequenceEmpty":
            for a in n.attribute:
                if a.name == "dtype" and a.i == FLOAT:
                    a.i = FLOAT16
            return
        out16 = any(self.is_float(o) and self.native(o, graph_inputs) == "16" for o in n.output)
        if not out16:
            return
        for a in n.attribute:
            if n.op_type in ("Constant", "ConstantOfShape") and a.name == "value" and \
                    a.t.data_type == FLOAT:
                a.t.CopyFrom(half_tensor(a.t))
            elif a.name in ("to", "dtype", "output_datatype") and a.type == onnx.AttributeProto.INT \
                    and a.i == FLOAT:
                a.i = FLOAT16
        if n.op_type == "ConstantOfShape" and not any(a.name == "value" for a in n.attribute):
            n.attribute.append(helper.make_attribute(
                "value", numpy_helper.from_array(np.zeros(1, np.float16), "value")))

    def _retype_inits(self, g, graph_inputs):
        for t in g.initializer:
            if t.data_type == FLOAT and t.name in self.consts and \
                    self.native(t.name, graph_inputs) == "16":
                t.CopyFrom(half_tensor(t))
        for vi in g.input:  # opset < 9 style initializers listed as inputs
            if vi.name not in self.main_inputs and vi.type.tensor_type.elem_type == FLOAT and \
                    any(t.name == vi.name and t.data_type == FLOAT16 for t in g.initializer):
                vi.type.tensor_type.elem_type = FLOAT16


def convert(model, keep=None):
    """Returns a new float16 ModelProto; the argument is not modified."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    Converter(m, set(KEEP_FP32 if keep is None else keep)).run()
    return m


def check(model):
    """The converted model must type-check: shape inference in strict mode
    finds a float16 value reaching a float32 input, or the reverse."""
    onnx.checker.check_model(model)
    shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--keep-fp32", default="", help="more ops to keep in float32")
    ap.add_argument("--convert", default="", help="ops of KEEP_FP32 to convert anyway")
    a = ap.parse_args(argv)
    keep = (KEEP_FP32 | set(filter(None, a.keep_fp32.split(",")))) - \
        set(filter(None, a.convert.split(",")))
    out = convert(onnx.load(a.src), keep)
    check(out)
    onnx.save(out, a.dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
