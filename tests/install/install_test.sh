#!/bin/sh
# install_test.sh BUILD_DIR: `meson install` works from a clean prefix
# (issue 20).  Installs BUILD_DIR into a temporary directory, moves the
# prefix elsewhere (nothing may hold an absolute path into it or into the
# build tree), moves the build tree itself away, then:
#   - checks the layout: libortmk.so.<major> (its SONAME), ortmk.h, ortmk.pc,
#     the tools in bin/, every provider built in libexec/ortmk/;
#   - compiles the README's C example (examples/hello.c) and a version check
#     with `pkg-config --cflags --libs ortmk`, runs them: the providers they
#     start are the installed ones;
#   - runs the installed ort-run (no LD_LIBRARY_PATH: its RUNPATH is
#     relative) on the example model.
# The build tree is moved back on exit, whatever happens.  Run by
# tools/dev.sh test after the meson suites (it cannot run inside them: it
# moves their build tree).
set -eu

build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/ortmk-install.XXXXXX)
away="$build.away.$$"
restore() {
	[ -d "$away" ] && mv "$away" "$build"
	rm -rf "$work"
}
trap restore EXIT
trap 'exit 1' INT TERM
fail() {
	echo "install_test: FAIL: $*" >&2
	exit 1
}

opt() {
	meson introspect --buildoptions "$build" |
		/usr/bin/python3 -c "import json,sys; print([o['value'] for o in json.load(sys.stdin) if o['name'] == '$1'][0])"
}
prefix=$(opt prefix)
libdir=$(opt libdir)
bindir=$(opt bindir)
libexecdir=$(opt libexecdir)
major=$(meson introspect --projectinfo "$build" |
	/usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['version'].split('.')[0])")

meson install -C "$build" --destdir "$work/dest" --quiet >/dev/null
# Relocate: the prefix may live anywhere.
mv "$work/dest$prefix" "$work/prefix"
root="$work/prefix"
lib="$root/$libdir"

# The layout.
[ -f "$lib/libortmk.so.$major" ] || fail "no $libdir/libortmk.so.$major"
soname=$(objdump -p "$lib/libortmk.so.$major" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = "libortmk.so.$major" ] || fail "SONAME is '$soname'"
[ -f "$root/include/ortmk/ortmk.h" ] || fail "no include/ortmk/ortmk.h"
[ -f "$lib/pkgconfig/ortmk.pc" ] || fail "no $libdir/pkgconfig/ortmk.pc"
for t in ort-run ort-trace ort-model ort-serve; do
	[ -x "$root/$bindir/$t" ] || fail "no $bindir/$t"
done
for ep in cpu vulkan cuda; do
	if [ -x "$build/providers/$ep/ort-ep-$ep" ]; then
		[ -x "$root/$libexecdir/ortmk/ort-ep-$ep" ] || fail "no $libexecdir/ortmk/ort-ep-$ep"
	fi
done
# No path into the build tree in what the code reads (its strings, its
# RUNPATH); debug information may keep its compile directory.
for f in "$lib/libortmk.so.$major" "$root/$bindir"/ort-* "$root/$libexecdir"/ortmk/ort-ep-*; do
	for sec in .rodata .data .dynstr; do
		if readelf -p "$sec" "$f" 2>/dev/null | grep -qF "$build"; then
			fail "$f names the build tree in $sec"
		fi
	done
done

# The example model, generated here (the build tree goes away next).
mkdir -p "$work/run/build/examples"
/usr/bin/python3 "$src/tools/models/gen_example.py" "$work/run/build/examples/cnn_example.onnx"
mv "$build" "$away"

export PKG_CONFIG_PATH="$lib/pkgconfig"
pc="pkg-config --define-variable=prefix=$root"
cat > "$work/version.c" <<'C'
#include <ortmk/ortmk.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
	printf("%s %d\n", ortmk_version(), ortmk_api_version());
	return strcmp(ortmk_version(), ORTMK_VERSION_STRING) != 0 ||
	       ortmk_api_version() < ORTMK_API_VERSION;
}
C
for prog in "$src/examples/hello.c" "$work/version.c"; do
	name=$(basename "$prog" .c)
	# shellcheck disable=SC2046
	cc -std=c11 -Wall -o "$work/$name" "$prog" $($pc --cflags --libs ortmk) \
		-Wl,-rpath,"$($pc --variable=libdir ortmk)" || fail "$name.c does not compile with pkg-config"
done
"$work/version" || fail "version mismatch"
cd "$work/run"
env -u ORTMK_EP_DIR -u LD_LIBRARY_PATH ORTMK_LOG=info "$work/hello" >"$work/hello.out" 2>"$work/hello.err" ||
	fail "hello: $(cat "$work/hello.err")"
grep -q "^p\[0\] = " "$work/hello.out" || fail "hello printed: $(cat "$work/hello.out")"
grep -qF "($root/$libexecdir/ortmk/ort-ep-cpu)" "$work/hello.err" ||
	fail "hello did not start the installed provider: $(grep started "$work/hello.err")"
env -u ORTMK_EP_DIR -u LD_LIBRARY_PATH "$root/$bindir/ort-run" build/examples/cnn_example.onnx \
	--iters 3 >"$work/run.out" 2>&1 || fail "installed ort-run: $(cat "$work/run.out")"
grep -q "provider cpu: 12 nodes" "$work/run.out" || fail "installed ort-run printed: $(cat "$work/run.out")"
echo "install_test: ok (prefix relocated, build tree moved away; $(cat "$work/hello.out"))"
