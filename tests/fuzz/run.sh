#!/bin/sh
# run.sh BUILD_DIR SECONDS [TARGET...]: runs each libFuzzer target (default:
# all) for SECONDS on a copy of its committed corpus (tests/fuzz/corpus/T),
# with ASan+UBSan halting on error.  A crash, leak, timeout or sanitizer
# report leaves its reproducer in tests/fuzz/crashers/T/ (commit it as a
# regression case once fixed: the next run replays it first) and makes the
# script fail.  Prints executions/s and coverage per target.
#   CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false -Dtests=false
#   ninja -C build-fuzz $(for t in envelope value_codec npy prepack trace external_path model http_head; do echo tests/fuzz/fuzz_$t; done)
#   tests/fuzz/run.sh build-fuzz 30
set -eu

build=$1
secs=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
targets=${*:-envelope value_codec npy prepack trace external_path model http_head}
work=$(mktemp -d "${TMPDIR:-/tmp}/ortmk-fuzz-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
failed=0
for t in $targets; do
	mkdir -p "$work/$t" "$here/crashers/$t"
	cp -r "$here/corpus/$t/." "$work/$t/" 2>/dev/null || true
	# Known crashers first: each must now pass.
	for c in "$here/crashers/$t"/*; do
		[ -f "$c" ] || continue
		if ! "$build/tests/fuzz/fuzz_$t" "$c" >"$work/$t.replay" 2>&1; then
			echo "fuzz_$t: regression case $(basename "$c") fails again"
			tail -20 "$work/$t.replay"
			failed=1
		fi
	done
	if "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-max_len=65536 -artifact_prefix="$here/crashers/$t/" "$work/$t" >"$work/$t.log" 2>&1; then
		echo "fuzz_$t: ok, $(grep -E '^#[0-9]+' "$work/$t.log" | tail -1 | sed 's/\t/ /g' | cut -c1-110)"
	else
		echo "fuzz_$t: FAILED (reproducer in tests/fuzz/crashers/$t/)"
		grep -E "ERROR|SUMMARY|runtime error|==[0-9]+==" "$work/$t.log" | head -10
		failed=1
	fi
done
exit $failed
