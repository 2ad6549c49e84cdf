#!/bin/sh
# timed.sh COMMAND [ARG...]: the tests' log compiler (Makefile.am): runs
# the test, then adds how long it took to its log, where test/tools/summary.sh
# finds it to name the slowest tests of a `make check`.
start=$(date +%s.%N)
"$@"
rc=$?
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" 'BEGIN { printf "# duration: %.1f s\n", e - s }'
exit $rc
