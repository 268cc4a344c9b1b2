#!/bin/sh
# run_on_gpu.sh: what a machine with an NVIDIA GPU runs to validate and
# measure ort-ep-cuda (docs/CUDA.md), building there.  A lent machine that
# starts bare and cannot build runs tests/cuda/gpu_check.sh on a bundle
# made here instead (that is what ran on the H200).
#
#   tests/cuda/run_on_gpu.sh [BUILD_DIR [OUT_DIR]]
#
# From the repository root: configures BUILD_DIR (default build-gpu) if
# needed, builds, then
#   1. ort-ep-cuda --probe and nvidia-smi (the device);
#   2. meson test --suite cuda: allocator/streams, device values and IO
#      binding, models vs cpu (rtol 1e-3; cuDNN and implicit-GEMM Conv;
#      float16), the no-device fallback, the conformance runner with
#      --provider cuda,cpu over every case cpu passes;
#   3. latencies of the test CNN, the transformer (BERT-like block) and the
#      example CNN on cpu and on cuda,cpu (ort-run --json, 10 warm-up and
#      100 timed runs), outputs compared with cpu's (rtol 1e-3);
#   4. weight loading from a 512 MiB external-data file: the GB/s
#      ort-ep-cuda logs (pread into pinned chunks overlapped with the copy),
#      cold-ish (first run) and warm (page cache), three times each.
# Everything goes to OUT_DIR (default cuda-gpu-results): summary.txt and
# the raw logs.  Exit status: 77 without a GPU, 1 when a check failed.
set -u
B=${1:-build-gpu}
OUT=${2:-cuda-gpu-results}
PY=/usr/bin/python3
mkdir -p "$OUT"
SUM="$OUT/summary.txt"
: > "$SUM"
fail=0
say() { echo "$*" | tee -a "$SUM"; }

[ -f "$B/build.ninja" ] || meson setup "$B" . > "$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log"; exit 1; }
ninja -C "$B" > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
EP="$B/providers/cuda/ort-ep-cuda"
[ -x "$EP" ] || { echo "ort-ep-cuda was not built (is nvcc found?)"; exit 1; }

say "== device"
"$EP" --probe > "$OUT/probe.txt" 2>&1
probe=$?
cat "$OUT/probe.txt" | tee -a "$SUM"
if [ $probe != 0 ]; then
	say "no usable CUDA device (--probe exit $probe): nothing to measure"
	exit 77
fi
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
	--format=csv,noheader | tee -a "$SUM"

say "== meson test --suite cuda"
meson test -C "$B" --suite cuda --print-errorlogs > "$OUT/tests.log" 2>&1 || fail=1
grep -E "^ *[0-9]+/[0-9]+ " "$OUT/tests.log" | tee -a "$SUM"
grep -E "^(all cases|--filter conv|[a-z0-9_]+ \((cudnn|gemm)\)|fp16|[0-9]+ passed)" \
	"$B/meson-logs/testlog.txt" | tee -a "$SUM"

say "== latency (ms; median / p90 / min of 100 runs after 10 warm-up)"
M="$B/tests/integration/models"
$PY -c "import numpy as np; np.save('$OUT/example_image.npy', np.random.default_rng(5).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32))"
for spec in "cnn:$M/cnn/model.onnx:image=$M/cnn/input_0.npy" \
	    "transformer:$M/transformer/model.onnx:x=$M/transformer/input_0.npy" \
	    "example:$B/examples/cnn_example.onnx:image=$OUT/example_image.npy"; do
	name=${spec%%:*}; rest=${spec#*:}; model=${rest%%:*}; input=${rest#*:}
	for p in cpu cuda,cpu; do
		d="$OUT/$name-$(echo $p | tr , _)"
		"$B/tools/ort-run" "$model" --input "$input" --provider "$p" --threads 4 \
			--warmup 10 --iters 100 --output-dir "$d" --json > "$d.json" 2> "$d.err" || fail=1
		$PY - "$d.json" "$name" "$p" <<'PYEOF' | tee -a "$SUM"
import json, sys
r = json.load(open(sys.argv[1]))
print("%-12s %-9s create %7.1f  median %8.3f  p90 %8.3f  min %8.3f  nodes %s" % (
    sys.argv[2], sys.argv[3], r["session_create_ms"], r["median_ms"], r["p90_ms"],
    r["min_ms"], r["nodes_per_provider"]))
PYEOF
	done
	$PY - "$OUT/$name-cpu" "$OUT/$name-cuda_cpu" <<'PYEOF' | tee -a "$SUM" || fail=1
import glob, os, sys
import numpy as np
bad = 0
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.npy"))):
    want, got = np.load(f), np.load(os.path.join(sys.argv[2], os.path.basename(f)))
    ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-5)
    bad += not ok
    print("  %s: %s (worst |diff| %.3g)" % (os.path.basename(f), "ok" if ok else "DIFFERS",
          float(np.abs(got.astype(np.float64) - want).max()) if got.shape == want.shape else -1))
sys.exit(1 if bad else 0)
PYEOF
done

say "== external data: weight loading rate"
$PY tests/cuda/gen_ext_model.py "$OUT/ext" 512 | tee -a "$SUM"
for i in 1 2 3; do
	ORTMK_LOG=info "$B/tools/ort-run" "$OUT/ext/ext.onnx" --input "x=$OUT/ext/ext_x.npy" \
		--provider cuda,cpu --json > "$OUT/ext-$i.json" 2> "$OUT/ext-$i.err" || fail=1
	grep -h "weights of subgraph" "$OUT/ext-$i.err" | sed 's/^.*info: //' | tee -a "$SUM"
done

say "== result: $([ $fail = 0 ] && echo all checks passed || echo SOME CHECKS FAILED)"
exit $fail
