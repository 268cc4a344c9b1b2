#!/bin/bash
# gpu_check.sh: what a lent GPU machine runs, once, from a bundle made by
# tests/cuda/gpu_bundle.sh (docs/CUDA.md, "On a lent GPU machine").  It
# builds nothing: the machine starts bare and has minutes.  Each stage has
# its own time limit and appends to OUT/summary.txt as it ends, so a run
# stopped early still reports what it reached.
#
#   tests/cuda/gpu_check.sh [BUNDLE_DIR [OUT_DIR]]      (from the repository root)
#
# Stages: the device and the libraries found; ort-ep-cuda --probe and the
# provider's HELLO; the allocator/stream and API tests; the zoo subset on
# cuda,cpu vs cpu with latencies at batch 1 and 32 (and ONNX Runtime's CPU
# figures when its Python package is there); the conformance cases on
# cuda,cpu (every case cpu passes, nodes on cuda per case) while the same
# runs on vulkan,cpu; the integration models (cuDNN and implicit-GEMM
# Conv); weight upload from a 1 GiB external-data file; the IO-binding
# decode loop; crash-to-ready after SIGKILL of ort-ep-cuda mid-run; the
# zoo subset and the IO-binding loop on vulkan,cpu (stage vk).
#
# Environment: STAGES (default "probe api zoo conf models ext ar soak vk")
# picks stages for a rerun; ZOO_ONLY (model names, comma-separated) limits
# the zoo stage and VK_ZOO_ONLY the vk stage's; CONF_SUITES and
# CONF_PROVIDERS (default all four suites, "cuda vulkan") limit the
# conformance stage, CONF_FILTER to the cases whose name holds it (then
# reported, not checked against the passing list).  Every CUDA process
# makes its own context and the driver makes them one at a time: the
# conformance stage costs about 0.25 s per case on an H200 whatever --jobs
# says.
set -u
STAGES=" ${STAGES:-probe api zoo conf models ext ar soak vk} "
want() { case "$STAGES" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
G=$(cd "${1:-.gpu}" && pwd)
OUT=${2:-${OUT:-gpu-results}}
mkdir -p "$OUT/w"
OUT=$(cd "$OUT" && pwd)
W=$OUT/w
SUM=$OUT/summary.txt
BIN=$G/bin
REPO=$(pwd)
PY=${PYTHON:-python3}   # the machine's python3 (numpy, onnx; onnxruntime if there)
T0=$(date +%s)
: > "$SUM"
say() { echo "$*" | tee -a "$SUM"; }
stage() { say ""; say "== $1 (t+$(( $(date +%s) - T0 )) s)"; }
# run LIMIT_S LOG CMD...: the command's output goes to LOG; its exit status
# (124 at the limit) is returned and said.
run() {
	local limit=$1 log=$2 rc
	shift 2
	timeout -k 5 "$limit" "$@" > "$log" 2>&1
	rc=$?
	[ $rc = 0 ] || say "  (exit $rc: $*)"
	return $rc
}

stage "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$SUM"
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc)"
export LD_LIBRARY_PATH=$G/lib
export ORTMK_EP_DIR=$BIN
# The CUDA libraries are the machine's: wherever its toolkit or its Python
# wheels put them.
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9; do
	if ! ldd "$BIN/ort-ep-cuda" | grep -q "$lib => /"; then
		d=$(find /usr/local /opt /usr/lib -name "$lib" -print -quit 2>/dev/null)
		[ -n "$d" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$d")
	fi
done
ldd "$BIN/ort-ep-cuda" | grep -E "cuda|cublas|cudnn|not found" | tee -a "$SUM"
# The NVIDIA Vulkan driver needs the GL vendor-neutral dispatch libraries,
# which a bare image lacks: the bundle carries Debian's (gpu_bundle.sh).
if ! ldconfig -p | grep -q libGLdispatch.so.0 && ls "$G"/gl/*.deb > /dev/null 2>&1; then
	for f in "$G"/gl/*.deb; do dpkg -x "$f" /; done
	ldconfig
	say "installed from the bundle: $(cd "$G/gl" && ls | tr '\n' ' ')"
fi
for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
	 /etc/vulkan/icd.d/nvidia_icd.json; do
	if [ -f "$f" ]; then
		export VK_DRIVER_FILES=$f VK_ICD_FILENAMES=$f
		say "vulkan ICD: $f"
		break
	fi
done
"$PY" -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" \
	2>&1 | tail -1 | tee -a "$SUM"

if want probe; then
	stage "probe and HELLO"
	run 60 "$W/probe.txt" "$BIN/ort-ep-cuda" --probe
	cat "$W/probe.txt" | tee -a "$SUM"
	ORTMK_LOG=info run 60 "$W/hello.txt" "$BIN/ort-run" "$BIN/cnn_example.onnx" --provider cuda,cpu --json
	grep -iE "hello|device|nodes_per_provider" "$W/hello.txt" | cut -c1-300 | tee -a "$SUM"
	run 60 "$W/vk_probe.txt" "$BIN/ort-ep-vulkan" --probe
	cat "$W/vk_probe.txt" | head -20 | tee -a "$SUM"
fi

if want api; then
	stage "allocator, streams and the C API on the GPU"
	run 60 "$W/cuda_mem.txt" "$BIN/test_cuda_mem"; tail -3 "$W/cuda_mem.txt" | tee -a "$SUM"
	run 90 "$W/cuda_api.txt" "$BIN/test_cuda_api" gpu "$BIN/cnn_example.onnx"; tail -3 "$W/cuda_api.txt" | tee -a "$SUM"
fi

if want zoo; then
	stage "zoo subset: cuda,cpu vs cpu (16 threads), batch 1 and 32"
	run 170 "$W/zoo.txt" "$PY" -u "$REPO/tests/cuda/gpu_zoo.py" "$BIN" "$G/models/zoo" "$W/zoo" --iters 20 --threads 16 \
		${ZOO_ONLY:+--only "$ZOO_ONLY"}
	cat "$W/zoo.txt" | tee -a "$SUM"
	cp "$W/zoo/zoo.json" "$OUT/" 2>/dev/null
fi

if want conf; then
	stage "conformance: cuda,cpu and vulkan,cpu (every case cpu passes)"
	mkdir -p "$W/data"
	tar -C "$W/data" -xJf "$G/onnx-testdata.tar.xz"
	suites=${CONF_SUITES:-node,pytorch-converted,pytorch-operator,simple}
	grep -E "^($(echo "$suites" | tr , '|'))/" "$REPO/tests/conformance/passing.txt" > "$W/passing.txt"
	pids=
	provs=${CONF_PROVIDERS:-cuda vulkan}
	for p in $provs; do
		jobs=12
		[ "$provs" != "$p" ] && [ $p = vulkan ] && jobs=4
		run 220 "$W/conf_$p.txt" "$BIN/ort-conformance" --data "$W/data" --suite "$suites" \
			--provider $p,cpu ${CONF_FILTER:+--filter "$CONF_FILTER" -v} \
			$([ -z "${CONF_FILTER:-}" ] && echo --expect "$W/passing.txt") --jobs $jobs \
			--tsv "$OUT/$p.tsv" &
		pids="$pids $!"
	done
	wait $pids
	for p in ${CONF_PROVIDERS:-cuda vulkan}; do
		f=$W/conf_$p.txt
		say "$p,cpu: $(tail -1 "$f")"
		grep -E "^ *(fail|error|not passing|[a-z]+/test_)" "$f" | head -30 | tee -a "$SUM"
		[ -f "$OUT/$p.tsv" ] && awk -F'\t' -v p="$p" 'NR > 1 && $3 == "pass" {
			n = 0; if (match($4, p " [0-9]+")) n = substr($4, RSTART + length(p) + 1, RLENGTH - length(p) - 1) + 0
			if (n > 0) on++; else off++ }
			END { printf "  passing cases with a node on %s: %d; run wholly on cpu: %d\n", p, on, off }' \
			"$OUT/$p.tsv" | tee -a "$SUM"
	done
fi

if want models; then
	stage "integration models (cuDNN and implicit-GEMM Conv, float16)"
	run 120 "$W/models.txt" "$PY" "$REPO/tests/cuda/models_test.py" "$BIN/ort-run" "$BIN/ort-ep-cuda" \
		"$G/models/integration" "$BIN/cnn_example.onnx" "$W/models"
	cat "$W/models.txt" | tail -20 | tee -a "$SUM"
fi

if want ext; then
	stage "weights from a 1 GiB external-data file"
	run 60 "$W/gen_ext.txt" "$PY" "$REPO/tests/cuda/gen_ext_model.py" "$W/ext" 1024
	cat "$W/gen_ext.txt" | tee -a "$SUM"
	for i in 1 2 3; do
		ORTMK_LOG=info run 60 "$W/ext-$i.txt" "$BIN/ort-run" "$W/ext/ext.onnx" --input "x=$W/ext/ext_x.npy" \
			--provider cuda,cpu --json
		grep -h "weights of subgraph" "$W/ext-$i.txt" | sed 's/^.*info: //' | tee -a "$SUM"
		grep -ho '"session_create_ms": [0-9.]*' "$W/ext-$i.txt" | tee -a "$SUM"
	done
	rm -rf "$W/ext"
fi

if want ar; then
	stage "IO-binding decode loop (autoregressive example, 256 steps, 1024-row prefill)"
	for p in cuda,cpu cpu; do
		run 60 "$W/ar-$p.txt" "$BIN/autoregressive" "$BIN/autoregressive.onnx" --provider $p --steps 256 \
			--repeat 3 --json
		say "$p: $(tail -2 "$W/ar-$p.txt" | tr '\n' ' ')"
	done
fi

if want vk; then
	stage "vulkan,cpu: zoo subset vs cpu, example CNN, IO-binding decode loop"
	run 150 "$W/vk_zoo.txt" "$PY" -u "$REPO/tests/cuda/gpu_zoo.py" "$BIN" "$G/models/zoo" "$W/vk_zoo" \
		--iters 20 --threads 16 --provider vulkan,cpu --no-ort ${VK_ZOO_ONLY:+--only "$VK_ZOO_ONLY"}
	sed 's/ cuda / vk   /' "$W/vk_zoo.txt" | tee -a "$SUM"
	cp "$W/vk_zoo/zoo.json" "$OUT/vk_zoo.json" 2>/dev/null
	for p in vulkan,cpu cpu; do
		run 60 "$W/vk-ex-$p.txt" "$BIN/ort-run" "$BIN/cnn_example.onnx" --provider $p --warmup 10 \
			--iters 100 --json
		say "example CNN $p: $(grep -o '"session_create_ms": [0-9.]*, "median_ms": [0-9.]*' "$W/vk-ex-$p.txt")"
	done
	run 60 "$W/vk-ar.txt" "$BIN/autoregressive" "$BIN/autoregressive.onnx" --provider vulkan,cpu \
		--steps 256 --repeat 3 --json
	say "vulkan,cpu: $(tail -2 "$W/vk-ar.txt" | tr '\n' ' ')"
fi

if want soak; then
	stage "crash-to-ready: SIGKILL of ort-ep-cuda during runs (ort-soak --retry)"
	run 90 "$W/soak.txt" "$BIN/ort-soak" "$BIN/cnn_example.onnx" --provider cuda,cpu --runs 200 --kills 5 --retry
	tail -2 "$W/soak.txt" | tee -a "$SUM"
fi

stage "done"
say "total $(( $(date +%s) - T0 )) s"
tar -C "$W" --exclude=data --exclude="*.npy" --exclude="*.onnx" -czf "$OUT/logs.tgz" . 2>/dev/null
rm -rf "$W"
