#!/usr/bin/python3
"""MatMulNBits (4-bit weights, block 32, uint8 zero points) timed in ortmk
and in ONNX Runtime (onnxruntime-node) on the same model: the batch-1
decode shape (1 x K @ K x N) and a batch of 64 rows, accuracy_level 0
(float A) and 4 (A quantized to int8 per block).

Each round runs ort-run --json (its median over --iters) and then the same
number of ONNX Runtime runs (their median), alternating, so both see the
same machine load; the figure reported is the median of the rounds.

Usage: nbits_bench.py [--ort-run build/tools/ort-run] [--K 4096] [--N 4096]
                      [--rounds 5] [--iters 20] [--threads 2] [--work DIR]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
from bench_run import find_node_modules  # noqa: E402

ORT_JS = r"""
const ort = require(process.argv[2] + '/onnxruntime-node');
(async () => {
  const [model, M, K, iters, threads] = process.argv.slice(3);
  const s = await ort.InferenceSession.create(model, {intraOpNumThreads: +threads});
  const a = new Float32Array(+M * +K).map((_, i) => Math.sin(i));
  const feeds = {A: new ort.Tensor('float32', a, [+M, +K])};
  for (let i = 0; i < 3; i++) await s.run(feeds);
  const t = [];
  for (let i = 0; i < +iters; i++) {
    const t0 = process.hrtime.bigint();
    await s.run(feeds);
    t.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  t.sort((x, y) => x - y);
  console.log(JSON.stringify({median_ms: t[t.length >> 1]}));
})().catch(e => { console.error(e.message); process.exit(1); });
"""


def model(path, M, K, N, acc, bs=32):
    rng = np.random.default_rng(7)
    nb = (K + bs - 1) // bs
    B = rng.integers(0, 256, (N, nb, bs // 2), dtype=np.uint8)
    sc = rng.uniform(0.001, 0.01, (N, nb)).astype(np.float32)
    zp = rng.integers(0, 256, (N, (nb + 1) // 2), dtype=np.uint8)
    node = helper.make_node("MatMulNBits", ["A", "B", "scales", "zp"], ["Y"],
                            domain="com.microsoft", K=K, N=N, bits=4, block_size=bs,
                            accuracy_level=acc)
    g = helper.make_graph([node], "nbits",
                          [helper.make_tensor_value_info("A", TensorProto.FLOAT, [M, K])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [M, N])],
                          [numpy_helper.from_array(B, "B"), numpy_helper.from_array(sc, "scales"),
                           numpy_helper.from_array(zp, "zp")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ort-run", default=os.path.join(HERE, "..", "..", "build", "tools",
                                                      "ort-run"))
    ap.add_argument("--K", type=int, default=4096)
    ap.add_argument("--N", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    mods = find_node_modules(None)
    if not mods:
        sys.exit("onnxruntime-node not found")
    work = a.work or tempfile.mkdtemp(prefix="nbits-bench-")
    js = os.path.join(work, "bench.js")
    with open(js, "w") as f:
        f.write(ORT_JS)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    print("CPU: %s, %d threads, K=%d N=%d, 4 bits, block 32" % (cpu, a.threads, a.K, a.N))
    print("%-26s %12s %12s %8s" % ("case", "ortmk ms", "ORT ms", "ratio"))
    for M in (1, 64):
        for acc in (0, 4):
            path = os.path.join(work, "nbits_M%d_acc%d.onnx" % (M, acc))
            model(path, M, a.K, a.N, acc)
            ours, theirs = [], []
            for _ in range(a.rounds):
                p = subprocess.run([a.ort_run, path, "--json", "--iters", str(a.iters),
                                    "--warmup", "3", "--threads", str(a.threads)],
                                   capture_output=True, text=True, check=True)
                ours.append(json.loads(p.stdout)["median_ms"])
                p = subprocess.run(["node", js, mods, path, str(M), str(a.K), str(a.iters),
                                    str(a.threads)], capture_output=True, text=True, check=True)
                theirs.append(json.loads(p.stdout)["median_ms"])
            mo, mt = statistics.median(ours), statistics.median(theirs)
            print("%-26s %12.3f %12.3f %8.2f" % ("M=%d accuracy_level=%d" % (M, acc), mo, mt,
                                                 mo / mt))


if __name__ == "__main__":
    main()
