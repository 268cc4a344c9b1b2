"""A tiny ONNX graph evaluator built on common.py's references.

Used only by `gen_test_models.py --self-test`: each test model has a
hand-written numpy reference, and evaluating the generated graph node by
node here checks that the graph wires up what that reference computes (a
wrong perm, axis or input order in the graph would otherwise go unnoticed,
since both the graph and the expected values come from the same script).

Supports exactly the ops the generated models use, with the attributes
they use; anything else raises.
"""
import numpy as np
from onnx import helper, numpy_helper

import common as C


def _attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _f(x):
    return np.asarray(x, dtype=np.float64)


def _conv(a, x, w, b=None):
    k = len(w.shape) - 2
    return C.conv2d(_f(x), _f(w), None if b is None else _f(b),
                    strides=tuple(a.get("strides", [1] * k)),
                    pads=tuple(a.get("pads", [0] * 2 * k)),
                    dilations=tuple(a.get("dilations", [1] * k)),
                    group=a.get("group", 1))


def _pads(a):
    p = a.get("pads", [0, 0, 0, 0])
    return (p[0], p[1], p[2], p[3])


def _reshape(x, shape):
    shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape.tolist())]
    return x.reshape(shape)


def _gather(a, x, idx):
    return np.take(x, idx, axis=a.get("axis", 0))


_CAST = {1: np.float64, 6: np.int32, 7: np.int64, 9: np.bool_, 11: np.float64}

OPS = {
    "MatMul": lambda a, x, y: C.matmul(x, y),
    "Gemm": lambda a, x, y, c=None: C.gemm(_f(x), _f(y), c, a.get("alpha", 1.0),
                                           a.get("beta", 1.0), a.get("transA", 0),
                                           a.get("transB", 0)),
    "Add": lambda a, x, y: x + y,
    "Sub": lambda a, x, y: x - y,
    "Mul": lambda a, x, y: x * y,
    "Div": lambda a, x, y: x / y,
    "Pow": lambda a, x, y: np.power(x, y),
    "Relu": lambda a, x: C.relu(x),
    "Sigmoid": lambda a, x: C.sigmoid(x),
    "Tanh": lambda a, x: np.tanh(x),
    "Erf": lambda a, x: C.erf(x),
    "Sqrt": lambda a, x: np.sqrt(x),
    "Softmax": lambda a, x: C.softmax(x, a.get("axis", -1)),
    "LayerNormalization": lambda a, x, s, b: C.layernorm(_f(x), s, b, a.get("axis", -1),
                                                          a.get("epsilon", 1e-5)),
    "BatchNormalization": lambda a, x, s, b, m, v: C.batchnorm(_f(x), s, b, m, v,
                                                                a.get("epsilon", 1e-5)),
    "Conv": _conv,
    "MaxPool": lambda a, x: C.maxpool2d(x, a["kernel_shape"], a.get("strides"), _pads(a)),
    "AveragePool": lambda a, x: C.avgpool2d(x, a["kernel_shape"], a.get("strides"), _pads(a),
                                            a.get("count_include_pad", 0)),
    "GlobalAveragePool": lambda a, x: C.global_avgpool(x),
    "Flatten": lambda a, x: C.flatten(x, a.get("axis", 1)),
    "Reshape": lambda a, x, s: _reshape(x, s),
    "Transpose": lambda a, x: np.transpose(x, a.get("perm")),
    "Concat": lambda a, *xs: np.concatenate(xs, axis=a["axis"]),
    "Gather": _gather,
    "Shape": lambda a, x: np.array(x.shape, dtype=np.int64),
    "Unsqueeze": lambda a, x, ax: np.expand_dims(x, tuple(ax.tolist())),
    "Squeeze": lambda a, x, ax: np.squeeze(x, tuple(ax.tolist())),
    "Identity": lambda a, x: x,
    "Cast": lambda a, x: x.astype(_CAST[a["to"]]),
    "ReduceMean": lambda a, x: np.mean(x, axis=tuple(a["axes"]),
                                       keepdims=bool(a.get("keepdims", 1))),
}


def _value(t):
    v = numpy_helper.to_array(t)
    return v.astype(np.float64) if v.dtype.kind == "f" else v


def run(model, feeds):
    """Evaluates `model` (nodes in topological order) on numpy feeds and
    returns {output name: array}; floats are computed in float64."""
    env = {k: _value(t) for k, t in ((t.name, t) for t in model.graph.initializer)}
    env.update({k: (_f(v) if v.dtype.kind == "f" else v) for k, v in feeds.items()})
    for node in model.graph.node:
        a = _attrs(node)
        if node.op_type == "Constant":
            out = _value(a["value"])
        else:
            out = OPS[node.op_type](a, *[env[i] for i in node.input if i])
        env[node.output[0]] = out
    return {o.name: env[o.name] for o in model.graph.output}
