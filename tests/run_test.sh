#!/bin/bash
# run_test.sh NAME CMD...: one test of `make check`, run as one target of a parallel make.
# Prints "== NAME", the test's own output, then its time, or "FAILED: NAME" and exits with
# the test's code; make's --output-sync keeps the lines of one test together. The times go
# to $DLH_CHECK_TIMES too (one "SECONDS NAME" line a test) when that is set, so that the
# slowest tests can be listed and started first.
set -uo pipefail
name=$1
shift
start=$(date +%s.%N)
echo "== $name"
"$@"
rc=$?
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
# The CPU time of the test's processes that it waited for (daemons that detach are not in it).
times >"${TMPDIR:-/tmp}/run_test.$$.times"  # here, not in a pipeline: a subshell has no children
cpu=$(tail -1 "${TMPDIR:-/tmp}/run_test.$$.times" | awk '{ gsub(/[ms]/, " "); split($0, f, " "); printf "%.0f", f[1] * 60 + f[2] + f[3] * 60 + f[4] }')
rm -f "${TMPDIR:-/tmp}/run_test.$$.times"
[[ -z ${DLH_CHECK_TIMES:-} ]] || echo "$took $name (CPU $cpu s)" >>"$DLH_CHECK_TIMES"
if ((rc != 0)); then
  echo "FAILED: $name (exit $rc, $took s, CPU $cpu s)"
  exit "$rc"
fi
echo "   ($took s, CPU $cpu s)"
