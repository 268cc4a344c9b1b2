#!/usr/bin/python3
"""to_int8.py: dynamic int8 quantization of a float32 ONNX model, emitting
what ONNX Runtime's quantize_dynamic emits (QOperator format, per-tensor,
reduce_range off); written here so the zoo needs no extra package.  Used
by gen.py; also a command:

    to_int8.py IN.onnx OUT.onnx

For each Conv whose weight is an initializer:
    x_q, x_scale, x_zp = DynamicQuantizeLinear(x)          (uint8, once per x)
    y_i = ConvInteger(x_q, W_q, x_zp, W_zp)  same attributes as the Conv
    y   = Mul(Cast(y_i, to=float), Mul(x_scale, W_scale))
    y   = Add(y, bias reshaped to [1, C, 1, ...])          (when it had one)
  W_q is uint8, asymmetric (scale (max - min) / 255 over a range that
  includes 0, zero point round(-min / scale)): ONNX Runtime's CPU
  ConvInteger accepts only uint8 weights, so that is what users emit
  (quantize_dynamic(weight_type=QUInt8)).  ORT reshapes the bias with a
  Reshape node; the reshaped initializer here is the same values.
For each MatMul:
    y = Mul(Cast(MatMulInteger(x_q, B_q, x_zp, B_zp), float), x_scale * B_scale)
  a constant B is int8, symmetric (scale max|B| / 127, zero point 0:
  ORT's default weight_type=QInt8 with WeightSymmetric); a B computed at
  run time (attention's Q.K^T and P.V) goes through DynamicQuantizeLinear
  like A, as ORT does unless MatMulConstBOnly is set.
Left in float, as ORT leaves them: Gemm (torch's nn.Linear on 2-D input),
ConvTranspose, LSTM/GRU (ORT would use its contrib DynamicQuantizeLSTM,
com.microsoft, which is not ONNX), Gather (embeddings), Conv with a
computed weight.  If/Loop/Scan bodies are quantized the same way.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

VERSION = 5


def subgraphs(node):
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def quant_uint8(w):
    rmin, rmax = min(float(w.min()), 0.0), max(float(w.max()), 0.0)
    scale = (rmax - rmin) / 255.0 or 1.0
    zp = int(np.clip(round(-rmin / scale), 0, 255))
    q = np.clip(np.round(w / scale) + zp, 0, 255).astype(np.uint8)
    return q, np.float32(scale), np.uint8(zp)


def quant_int8_sym(w):
    absmax = float(np.abs(w).max())
    scale = absmax / 127.0 or 1.0
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    return q, np.float32(scale), np.int8(0)


class Quantizer:
    def __init__(self, model):
        self.m = model
        self.count = 0
        self.inits = {}
        self.aliases = {}
        self.done = {}
        self._collect(model.graph)

    def _collect(self, g):
        for t in g.initializer:
            self.inits[t.name] = t
        for n in g.node:
            if n.op_type in ("Identity", "Constant"):
                self.aliases[n.output[0]] = n
            for sg in subgraphs(n):
                self._collect(sg)

    def const(self, name):
        """The value of an initializer, or of an Identity of one (torch
        deduplicates equal initializers that way: zero biases) or of a
        Constant; None for a value computed at run time."""
        for _ in range(16):
            if name in self.inits:
                return numpy_helper.to_array(self.inits[name])
            n = self.aliases.get(name)
            if n is None:
                return None
            if n.op_type == "Constant":
                v = [a for a in n.attribute if a.name == "value"]
                return numpy_helper.to_array(v[0].t) if v else None
            name = n.input[0]
        return None

    def run(self):
        self.quantize_graph(self.m.graph)
        return self.m

    def quantize_graph(self, g):
        out, dql = [], {}
        new_inits = []
        for n in g.node:
            for sg in subgraphs(n):
                self.quantize_graph(sg)
            w = self.const(n.input[1]) if len(n.input) > 1 else None
            if n.op_type == "Conv" and w is not None and w.dtype == np.float32:
                out += self.conv(n, w, dql, new_inits)
            elif n.op_type == "MatMul" and (w is None or w.dtype == np.float32):
                out += self.matmul(n, w, dql, new_inits)
            else:
                out.append(n)
        del g.node[:]
        g.node.extend(out)
        g.initializer.extend(new_inits)
        del g.value_info[:]

    def activation(self, x, dql, nodes):
        if x not in dql:
            names = (x + "_quantized", x + "_scale", x + "_zero_point")
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(names),
                                          name=x + "_QuantizeLinear"))
            dql[x] = names
        return dql[x]

    def weight(self, name, arr, quant, inits):
        """Quantized once per weight: FPN heads and RAFT's unrolled update
        block share their weights across many Convs."""
        if name in self.done:
            return self.done[name]
        self.done[name] = (name + "_quantized", name + "_scale", name + "_zero_point")
        q, scale, zp = quant(arr)
        inits += [numpy_helper.from_array(q, name + "_quantized"),
                  numpy_helper.from_array(np.array(scale), name + "_scale"),
                  numpy_helper.from_array(np.array(zp), name + "_zero_point")]
        return name + "_quantized", name + "_scale", name + "_zero_point"

    def rescale(self, n, y_int, x_scale, w_scale, y):
        """int32 -> float, times x_scale * w_scale, as ORT writes it."""
        base = n.output[0]
        return [
            helper.make_node("Cast", [y_int], [base + "_output_quantized_cast"],
                             name=base + "_cast", to=TensorProto.FLOAT),
            helper.make_node("Mul", [x_scale, w_scale], [base + "_scales_mul"],
                             name=base + "_scales_mul"),
            helper.make_node("Mul", [base + "_output_quantized_cast", base + "_scales_mul"], [y],
                             name=base + "_output_scale_mul"),
        ]

    def conv(self, n, w, dql, inits):
        nodes = []
        xq, xs, xz = self.activation(n.input[0], dql, nodes)
        wq, ws, wz = self.weight(n.input[1], w, quant_uint8, inits)
        base = n.output[0]
        attrs = [a for a in n.attribute]
        ci = helper.make_node("ConvInteger", [xq, wq, xz, wz], [base + "_output_quantized"],
                              name=(n.name or base) + "_quant")
        ci.attribute.extend(attrs)
        nodes.append(ci)
        has_bias = len(n.input) > 2 and n.input[2]
        y = base + "_scaled" if has_bias else base
        nodes += self.rescale(n, base + "_output_quantized", xs, ws, y)
        if has_bias:
            b = self.const(n.input[2])
            if b is None:
                raise ValueError("Conv %s: bias is not an initializer" % n.name)
            shape = [1, -1] + [1] * (w.ndim - 2)
            if n.input[2] + "_reshaped" not in self.done:
                self.done[n.input[2] + "_reshaped"] = True
                inits.append(numpy_helper.from_array(b.reshape(shape).astype(np.float32),
                                                     n.input[2] + "_reshaped"))
            nodes.append(helper.make_node("Add", [y, n.input[2] + "_reshaped"], [base],
                                          name=base + "_bias_add"))
        self.count += 1
        return nodes

    def matmul(self, n, w, dql, inits):
        nodes = []
        aq, as_, az = self.activation(n.input[0], dql, nodes)
        if w is not None:
            bq, bs, bz = self.weight(n.input[1], w, quant_int8_sym, inits)
        else:
            bq, bs, bz = self.activation(n.input[1], dql, nodes)
        base = n.output[0]
        nodes.append(helper.make_node("MatMulInteger", [aq, bq, az, bz],
                                      [base + "_output_quantized"],
                                      name=(n.name or base) + "_quant"))
        nodes += self.rescale(n, base + "_output_quantized", as_, bs, base)
        self.count += 1
        return nodes


def unsupported(model):
    """Why a model cannot be quantized here, or None: DynamicQuantizeLinear
    is opset 11 and raising an opset-9 model's version would change the
    meaning of its other ops (Upsample is gone at 10)."""
    v = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    return None if v >= 11 else "opset %d: DynamicQuantizeLinear needs opset 11" % v


def quantize(model):
    """(new ModelProto, number of ops quantized); the argument is not modified."""
    why = unsupported(model)
    if why:
        raise ValueError(why)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    q = Quantizer(m)
    q.run()
    prune_initializers(m.graph)
    return m, q.count


def _names_used(g, used):
    for n in g.node:
        used.update(n.input)
        for sg in subgraphs(n):
            _names_used(sg, used)
            used.update(o.name for o in sg.output)
    used.update(o.name for o in g.output)
    return used


def prune_initializers(g):
    """Drops the float weights the quantized ops replaced (any graph level)."""
    used = _names_used(g, set())

    def prune(gr):
        keep = [t for t in gr.initializer if t.name in used]
        del gr.initializer[:]
        gr.initializer.extend(keep)
        for n in gr.node:
            for sg in subgraphs(n):
                prune(sg)
    prune(g)


def check(model):
    onnx.checker.check_model(model)
    shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: to_int8.py IN.onnx OUT.onnx", file=sys.stderr)
        return 2
    m, n = quantize(onnx.load(argv[0]))
    check(m)
    onnx.save(m, argv[1])
    print("%d ops quantized" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
