#!/bin/sh
# Prints one closing line for the whole `make check` run from automake's
# test-suite.log: "check: N passed, N failed, N skipped".
log="${1:-build}/test-suite.log"
[ -f "$log" ] || { echo "check: no test-suite.log (the build failed before tests ran)"; exit 0; }
get() { sed -n "s/^# $1: *\([0-9]*\).*/\1/p" "$log" | head -n 1; }
pass=$(get PASS); fail=$(get FAIL); skip=$(get SKIP); xfail=$(get XFAIL); xpass=$(get XPASS); err=$(get ERROR)
fail=$(( ${fail:-0} + ${err:-0} + ${xpass:-0} ))
pass=$(( ${pass:-0} + ${xfail:-0} ))
grep -h '^SKIP:' "$log" 2>/dev/null | sed 's/^/  /'
# The time-boxed fuzzing's executions and crashes (test/fuzz/run_fuzzers.sh).
fz="${1:-build}/test/fuzz/run_fuzzers.log"
[ -f "$fz" ] && grep -h -e '^fuzz_[a-z]*: [0-9]* runs in' -e '^fuzzing: ' "$fz" | sed 's/^/  /'
# The end of each failing test's own log, so a CI run that shows only this
# output still says what went wrong.
for t in $(sed -n 's/^\(FAIL\|ERROR\|XPASS\): \(.*\)/\2/p' "$log" | sort -u); do
	tl="${1:-build}/${t%.*}.log"
	[ -f "$tl" ] || tl="${1:-build}/$t.log"
	[ -f "$tl" ] || continue
	echo "--- last lines of $tl"
	tail -n 40 "$tl" | sed 's/^/  | /'
done
# The slowest ten tests of this run (timed.sh's line in each test's log;
# the run's tests are those whose result is newer than its start marker).
b="${1:-build}"
if [ -f "$b/.check-start" ]; then
	find "$b/test" -name '*.trs' -newer "$b/.check-start" 2>/dev/null |
	while read -r trs; do
		lg="${trs%.trs}.log"
		d=$(sed -n 's/^# duration: \([0-9.]*\) s$/\1/p' "$lg" 2>/dev/null | tail -n 1)
		[ -n "$d" ] && echo "$d ${lg#$b/}"
	done | sort -rn | head -n 10 > "$b/.check-slowest"
	if [ -s "$b/.check-slowest" ]; then
		echo "slowest tests:"
		awk '{ printf "  %7.1f s  %s\n", $1, substr($2, 1, length($2) - 4) }' "$b/.check-slowest"
	fi
	now=$(date +%s)
	began=$(cat "$b/.check-start" 2>/dev/null)
	[ -n "$began" ] && echo "check: wall time $(( now - began )) s"
fi
echo "check: ${pass} passed, ${fail} failed, ${skip:-0} skipped"
