#!/usr/bin/python3
"""A model whose weights are a large external-data file, to measure how fast
ort-ep-cuda loads weights (tests/cuda/run_on_gpu.sh).

usage: gen_ext_model.py OUTDIR [MIB]

Writes OUTDIR/ext.onnx and OUTDIR/ext.bin: y = tanh(...tanh(x W1)... Wk)
with x [1, D] and k float32 [D, D] weights (D = 4096, 64 MiB each) adding
up to about MIB mebibytes (default 512), and OUTDIR/ext_x.npy.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

D = 4096


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = sys.argv[1]
    mib = int(sys.argv[2]) if len(sys.argv) == 3 else 512
    k = max(1, mib // 64)
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(11)
    inits, nodes, prev, offset = [], [], "x", 0
    with open(os.path.join(out, "ext.bin"), "wb") as f:
        for i in range(k):
            w = (rng.standard_normal((D, D), dtype=np.float32) / np.sqrt(D)).astype(np.float32)
            f.write(w.tobytes())
            t = onnx.TensorProto()
            t.name = "w%d" % i
            t.data_type = TensorProto.FLOAT
            t.dims.extend([D, D])
            t.data_location = TensorProto.EXTERNAL
            for key, val in (("location", "ext.bin"), ("offset", str(offset)),
                             ("length", str(w.nbytes))):
                e = t.external_data.add()
                e.key, e.value = key, val
            offset += w.nbytes
            inits.append(t)
            nodes.append(helper.make_node("MatMul", [prev, "w%d" % i], ["m%d" % i]))
            nodes.append(helper.make_node("Tanh", ["m%d" % i], ["h%d" % i]))
            prev = "h%d" % i
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "ext",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, D])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, D])],
                              inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              os.path.join(out, "ext.onnx"))
    np.save(os.path.join(out, "ext_x.npy"), rng.uniform(-1, 1, (1, D)).astype(np.float32))
    print("%s: %d weights, %d MiB external" % (os.path.join(out, "ext.onnx"), k, offset >> 20))


if __name__ == "__main__":
    main()
