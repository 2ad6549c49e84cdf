#!/bin/sh
# run_fuzzers.sh: time-boxed fuzzing of every libFuzzer harness (make check).
#
# For each corpus test/fuzz/corpus/<name>, runs the libFuzzer binary of that
# harness (test/fuzz/fuzz_<name>, or fuzz_<name>-libfuzzer) for FUZZ_SECONDS
# (default 30) on a copy of the corpus, with -max_total_time, -rss_limit_mb
# (FUZZ_RSS_MB, default 2048) and a per-input -timeout (FUZZ_TIMEOUT, default
# 20 s), and prints one line per harness:
#
#   fuzz_admin: 14383 runs in 30 s, 0 crashes
#
# A crash, leak, timeout or out-of-memory fails the test; the input that
# caused it is kept in $top_builddir/test/fuzz/crashes/ (its path is
# printed) with the end of libFuzzer's report.  Replay it with the plain
# program: test/fuzz/fuzz_<name>_replay <path> (fuzz_mlog for mlog).  The
# copies and full logs are in $top_builddir/test/fuzz/run/<name>/; the saved
# corpus is never modified (new inputs found stay in the copy).
#
# SKIPs (exit 77) when the build has no libFuzzer binaries (configure
# without --enable-fuzzers); fails when some corpus has none in a build that
# has the others.  FUZZ_SECONDS=0 skips the runs.
srcdir=${top_srcdir:-.}
builddir=${top_builddir:-.}
secs=${FUZZ_SECONDS:-30}
rss=${FUZZ_RSS_MB:-2048}
tmo=${FUZZ_TIMEOUT:-20}
work=$builddir/test/fuzz/run
crashdir=$builddir/test/fuzz/crashes

case $secs in
'' | *[!0-9]*) echo "run_fuzzers: FUZZ_SECONDS=$secs is not a number of seconds"; exit 1 ;;
esac
if [ "$secs" -eq 0 ]; then
	echo "run_fuzzers: FUZZ_SECONDS=0: not fuzzing"
	exit 77
fi

# 1 if $1 is a libFuzzer binary (the replay programs read -help=1 as a path).
is_libfuzzer() {
	[ -x "$1" ] && "$1" -help=1 2>&1 | grep -q 'max_total_time'
}

names=
missing=
found=0
for dir in "$srcdir"/test/fuzz/corpus/*/; do
	name=$(basename "$dir")
	bin=
	for cand in "$builddir/test/fuzz/fuzz_$name-libfuzzer" \
	    "$builddir/test/fuzz/fuzz_$name"; do
		if is_libfuzzer "$cand"; then
			bin=$cand
			break
		fi
	done
	if [ -n "$bin" ]; then
		found=$((found + 1))
		names="$names $name"
	else
		missing="$missing $name"
	fi
done
if [ "$found" -eq 0 ]; then
	echo "run_fuzzers: no libFuzzer binaries in $builddir/test/fuzz" \
	    "(configure --enable-fuzzers builds them)"
	exit 77
fi

mkdir -p "$work" "$crashdir" || exit 1
rc=0
total_runs=0
total_crashes=0
t_all=$(date +%s)
for name in $names; do
	bin=$builddir/test/fuzz/fuzz_$name-libfuzzer
	is_libfuzzer "$bin" || bin=$builddir/test/fuzz/fuzz_$name
	rm -rf "$work/$name"
	mkdir -p "$work/$name/corpus" "$work/$name/tmp" || exit 1
	cp -R "$srcdir/test/fuzz/corpus/$name/." "$work/$name/corpus/" || exit 1
	log=$work/$name/fuzz.log
	t0=$(date +%s)
	# Temporary files (fuzz_admin's metadata log) stay in the run's
	# directory even when a crash leaves them behind.
	TMPDIR=$work/$name/tmp "$bin" -max_total_time="$secs" -rss_limit_mb="$rss" -timeout="$tmo" \
	    -print_final_stats=1 -artifact_prefix="$crashdir/fuzz_$name-" \
	    "$work/$name/corpus" >"$log" 2>&1
	status=$?
	t1=$(date +%s)
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	[ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
	[ -n "$runs" ] || runs=0
	# libFuzzer stops at the first crash and names the input it kept.
	artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
	crashes=0
	if [ "$status" -ne 0 ] || [ -n "$artifact" ]; then
		crashes=1
	fi
	total_runs=$((total_runs + runs))
	total_crashes=$((total_crashes + crashes))
	word=crashes
	[ "$crashes" -eq 1 ] && word=crash
	echo "fuzz_$name: $runs runs in $((t1 - t0)) s, $crashes $word"
	if [ "$crashes" -ne 0 ]; then
		rc=1
		echo "fuzz_$name: exit status $status; input kept in" \
		    "${artifact:-(none written: see $log)}"
		echo "---- from $log ----"
		# The report from its first line (sanitizer, libFuzzer or ours).
		first=$(grep -n -m 1 -e 'ERROR: ' -e 'runtime error: ' \
		    -e '^fuzz_[a-z]*: ' "$log" | cut -d: -f1)
		if [ -n "$first" ]; then
			sed -n "$first,\$p" "$log" | grep -v '^#[0-9]' | head -n 40
		else
			grep -v '^#[0-9]' "$log" | tail -n 40
		fi
		echo "----"
	fi
done
if [ -n "$missing" ]; then
	for name in $missing; do
		echo "fuzz_$name: no libFuzzer binary (test/fuzz/fuzz_$name or" \
		    "fuzz_$name-libfuzzer) although the others are built"
	done
	rc=1
fi
echo "fuzzing: $found harnesses, $total_runs runs, $total_crashes crashes in" \
    "$(( $(date +%s) - t_all )) s (FUZZ_SECONDS=$secs each)"
exit $rc
