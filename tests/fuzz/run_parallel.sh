#!/bin/sh
# run_parallel.sh BUILD_DIR SECONDS OUT_DIR [FORK]: the long fuzzing run on a
# machine with many cores (run.sh is the sequential one CI uses).  Every
# target runs at once for SECONDS in libFuzzer's fork mode with FORK
# processes (default 2), on a copy of its committed corpus after replaying
# its committed crashers; reproducers of new findings go to
# OUT_DIR/crashers/<target>/, each target's log to OUT_DIR/<target>.log, and
# OUT_DIR/summary.txt gets one line per target (executions, coverage,
# findings).  Exit status 1 when a target found something or a crasher
# fails again.  Binaries may come from elsewhere: LD_LIBRARY_PATH for their
# libraries, BUILD_DIR/tests/fuzz/fuzz_<target> for them; FUZZ_TARGETS picks
# some of the targets.
set -eu

build=$(cd "$1" && pwd)
secs=$2
mkdir -p "$3"
out=$(cd "$3" && pwd)
fork=${4:-2}
here=$(cd "$(dirname "$0")" && pwd)
targets=${FUZZ_TARGETS:-envelope value_codec npy prepack trace external_path model http_head}
work=$(mktemp -d "${TMPDIR:-/tmp}/ortmk-fuzz-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
: >"$out/summary.txt"
failed=0
for t in $targets; do
	mkdir -p "$work/$t" "$out/crashers/$t"
	cp -r "$here/corpus/$t/." "$work/$t/" 2>/dev/null || true
	for c in "$here/crashers/$t"/*; do
		[ -f "$c" ] || continue
		if ! "$build/tests/fuzz/fuzz_$t" "$c" >"$work/$t.replay" 2>&1; then
			echo "fuzz_$t: regression case $(basename "$c") fails again" >>"$out/summary.txt"
			failed=1
		fi
	done
	( cd "$work" && "$build/tests/fuzz/fuzz_$t" -fork="$fork" -ignore_crashes=1 \
		-ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$out/crashers/$t/" \
		"$work/$t" >"$out/$t.log" 2>&1; echo $? >"$out/$t.rc" ) &
done
wait
for t in $targets; do
	found=$(find "$out/crashers/$t" -type f | wc -l)
	last=$(grep -E '^#[0-9]+' "$out/$t.log" | tail -1 | sed 's/\t/ /g' | cut -c1-120)
	rc=$(cat "$out/$t.rc" 2>/dev/null || echo "?")
	if [ -z "$last" ]; then
		echo "fuzz_$t: did not run (exit $rc): $(tail -1 "$out/$t.log")" >>"$out/summary.txt"
		failed=1
		continue
	fi
	echo "fuzz_$t: exit $rc, ${found} new reproducers; ${last}" >>"$out/summary.txt"
	[ "$found" -eq 0 ] && [ "$rc" = 0 ] || failed=1
done
# one file for the reproducers, for machines that hand back few files
tar -C "$out" -czf "$out/crashers.tar.gz" crashers
cat "$out/summary.txt"
exit $failed
