#!/bin/sh
# dev.sh: the two commands of the README.
#   tools/dev.sh example   install what is missing, build, run the example model
#   tools/dev.sh test      install what is missing, build, run every test
# BUILD_DIR (default: build) chooses the build directory.
set -eu

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

# Debian packages the build and the tests need.
PACKAGES="gcc pkg-config cmake meson ninja-build protobuf-c-compiler libprotobuf-c-dev
libnng-dev libcjson-dev libcmocka-dev libonnx-dev libonnx-testdata python3 python3-numpy python3-onnx
python3-torch python3-torchvision
python3-dev python3-venv python3-pip python3-mesonpy python3-pytest
clang-14 libfuzzer-14-dev python3-sklearn python3-xgboost python3-yaml wrk
mesa-vulkan-drivers libvulkan-dev glslc vulkan-tools libseccomp-dev"

install_missing() {
	missing=""
	for p in $PACKAGES; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	echo "dev.sh: installing$missing"
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
}

# ONNX Runtime (npm onnxruntime-node) is the reference some tests compare
# with (they skip without it); installed into node_modules/ when npm is
# there and the registry answers.
ORT_NODE_VERSION=1.30.0
install_ort_node() {
	[ -f node_modules/onnxruntime-node/package.json ] && return 0
	command -v npm >/dev/null 2>&1 || return 0
	echo "dev.sh: installing onnxruntime-node@$ORT_NODE_VERSION into node_modules/"
	npm install --no-save --no-audit --no-fund --ignore-scripts \
		"onnxruntime-node@$ORT_NODE_VERSION" >/dev/null 2>&1 ||
		echo "dev.sh: npm could not install onnxruntime-node; the tests that compare with it skip"
}

FUZZ_TARGETS="envelope value_codec npy prepack trace external_path model http_head"

build() {
	if [ ! -f "$BUILD_DIR/build.ninja" ]; then
		meson setup "$BUILD_DIR"
	fi
	meson compile -C "$BUILD_DIR"
}

case "${1:-}" in
example)
	install_missing
	build
	exec "$BUILD_DIR/tools/ort-run" "$BUILD_DIR/examples/cnn_example.onnx" --iters 20
	;;
test)
	install_missing
	install_ort_node
	build
	# The allocation-failure sweep (suite alloc) is too slow for CI yet
	# (docs/SECURITY.md).
	meson test -C "$BUILD_DIR" --no-suite alloc --print-errorlogs
	# meson install into a relocated prefix with the build tree moved away
	# (it moves the tree, so it runs after the suites, not inside them).
	tests/install/install_test.sh "$BUILD_DIR"
	# Fuzz smoke (docs/SECURITY.md): each libFuzzer target 30 s on its
	# corpus after replaying its committed crashers, in a clang build of
	# the targets alone.
	fuzz_dir="$BUILD_DIR-fuzz"
	[ -f "$fuzz_dir/build.ninja" ] || CC=clang meson setup "$fuzz_dir" -Dfuzz=true -Dtests=false \
		-Db_sanitize=address,undefined -Db_lundef=false -Dvulkan=disabled -Dcuda=disabled >/dev/null
	ninja -C "$fuzz_dir" $(for t in $FUZZ_TARGETS; do echo tests/fuzz/fuzz_$t; done) >/dev/null
	tests/fuzz/run.sh "$fuzz_dir" "${FUZZ_SECONDS:-30}" $FUZZ_TARGETS
	# The unit, integration, fault and lint suites again under
	# AddressSanitizer + UndefinedBehaviorSanitizer, halting on the first
	# report (docs/SECURITY.md says why the other suites are left out).
	asan_dir="$BUILD_DIR-asan"
	[ -f "$asan_dir/build.ninja" ] || meson setup "$asan_dir" -Db_sanitize=address,undefined \
		-Db_lundef=false -Dvulkan=disabled -Dcuda=disabled >/dev/null
	meson compile -C "$asan_dir" >/dev/null
	ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		meson test -C "$asan_dir" --suite unit --suite integration --suite fault --suite lint \
		--timeout-multiplier 4 --print-errorlogs
	;;
*)
	echo "usage: tools/dev.sh example|test" >&2
	exit 2
	;;
esac
