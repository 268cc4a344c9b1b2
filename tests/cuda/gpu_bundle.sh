#!/bin/sh
# gpu_bundle.sh: packs what a bare GPU machine needs to check and measure
# the GPU providers without building anything there (docs/CUDA.md, "On a
# lent GPU machine"): the binaries of a release build, the shared libraries
# a bare Ubuntu image lacks, the ONNX conformance data, the integration
# models, a subset of the zoo (op17 fp32 and fp16, input set a) and the
# Debian packages of the GL dispatch libraries the NVIDIA Vulkan driver
# needs.
#
#   tests/cuda/gpu_bundle.sh BUILD_DIR ZOO_CACHE [BUNDLE_DIR]
#
# BUNDLE_DIR (default .gpu, which .gitignore lists) is what
# travels; tests/cuda/gpu_check.sh BUNDLE_DIR runs there.  The CUDA
# libraries do not travel (cuBLAS alone is 500 MB): the check finds the
# machine's own (CUDA 13, like the toolkit here).
set -eu
B=${1:?usage: gpu_bundle.sh BUILD_DIR ZOO_CACHE [BUNDLE_DIR]}
ZOO=${2:?usage: gpu_bundle.sh BUILD_DIR ZOO_CACHE [BUNDLE_DIR]}
G=${3:-.gpu}
# Small models that together exercise convs (depthwise, grouped, 1x1),
# attention, RNN steps and control flow; sized so the bundle stays under
# the 64 MiB a lent machine takes.
ZOO_MODELS="squeezenet1_1 mnv3_cls_48x192 svtr_48x320 transformer_encoder gpt_decode_step
lstm_stream_step vad_step yolo_head dbnet_480x640"

rm -rf "$G"
mkdir -p "$G/bin" "$G/lib" "$G/models/zoo"
for f in tools/ort-run tools/ort-conformance tools/ort-trace tests/fault/ort-soak \
	 examples/autoregressive examples/autoregressive.onnx examples/cnn_example.onnx \
	 tests/cuda/test_cuda_api tests/cuda/test_cuda_mem \
	 providers/cpu/ort-ep-cpu providers/cuda/ort-ep-cuda providers/vulkan/ort-ep-vulkan; do
	cp "$B/$f" "$G/bin/"
done
for f in "$G"/bin/*; do
	case "$f" in *.onnx) ;; *) strip "$f" ;; esac
done
cp -L "$B/core/libortmk.so" "$G/lib/"
# The non-CUDA libraries the binaries link that a bare image may lack.
for f in "$G"/bin/ort-run "$G"/bin/ort-ep-cuda "$G"/bin/ort-ep-vulkan "$G"/bin/ort-ep-cpu; do
	ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | grep -E 'libnng|libmbed|libprotobuf-c|libvulkan' | while read -r lib; do
	cp -L "$lib" "$G/lib/"
done
cp -r "$B/tests/integration/models" "$G/models/integration"
tar -C /usr/share/libonnx-testdata/data -cJf "$G/onnx-testdata.tar.xz" node pytorch-converted pytorch-operator simple

# Zoo subset: model files and a manifest line per model and variant:
# name variant model --input NAME=FILE ...
/usr/bin/python3 - "$ZOO" "$G/models/zoo" $ZOO_MODELS <<'EOF'
import json, os, re, shutil, sys
zoo, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = []
for name in names:
    meta = json.load(open(os.path.join(zoo, name, "meta.json")))
    os.makedirs(os.path.join(out, name), exist_ok=True)
    args = []
    for inp in meta["inputs"]["a"]:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", inp["name"]) + ".npy"
        shutil.copy(os.path.join(zoo, name, "in", "a", safe), os.path.join(out, name, safe))
        args.append("--input %s=%s/%s" % (inp["name"], name, safe))
    for variant in ("fp32", "fp16"):
        shutil.copy(os.path.join(zoo, name, "op17", variant + ".onnx"),
                    os.path.join(out, name, variant + ".onnx"))
        lines.append("%s %s %s/%s.onnx %s" % (name, variant, name, variant, " ".join(args)))
open(os.path.join(out, "manifest.txt"), "w").write("\n".join(lines) + "\n")
EOF
# The GL vendor-neutral dispatch libraries and the Vulkan loader the NVIDIA
# Vulkan driver needs, as Debian packages gpu_check.sh unpacks there (an
# amd64 package list of its own, so the host's apt state is untouched).
mkdir -p "$G/gl" /tmp/gpu-bundle-apt/partial
apt_o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu-bundle-apt"
if apt-get $apt_o update > /dev/null 2>&1; then
	(cd "$G/gl" && apt-get $apt_o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 \
		libgles2 > /dev/null 2>&1) || echo "gpu_bundle: no GL packages (Vulkan may not load there)"
fi
du -sh "$G"
