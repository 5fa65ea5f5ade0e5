#!/bin/bash
# run_test.sh NAME CMD...: one test of `make check`, run as one target of a parallel make.
# Prints "== NAME", the test's own output, then its time, or "FAILED: NAME" and exits with
# the test's code; make's --output-sync keeps the lines of one test together. The times go
# to $DLH_CHECK_TIMES too (one "SECONDS NAME (CPU ...)" line a test) when that is set, so
# that the slowest tests can be listed and started first, and a failure with its reason to
# $DLH_CHECK_FAILURES, which make check lists last.
set -uo pipefail
name=$1
shift
start=$(date +%s.%N)

# The test's CPU time: where this machine lets root make a CPU-accounting cgroup, the test
# runs in one of its own, which counts everything it starts, the Slurm daemons and job
# steps included (the local cluster tracks processes by parent, so they stay in it). The
# shell's `times` sees only the processes the test waited for: under a Slurm test that
# missed most of the work, and `make check` is bound by its CPU, not by its waits.
cgroup=
for root in /sys/fs/cgroup/cpuacct /sys/fs/cgroup; do
  if [[ -f $root/cpuacct.usage || -f $root/cgroup.procs && ! -d $root/cpuacct ]]; then
    cgroup=$root/dlh-test.$$
    if mkdir "$cgroup" 2>/dev/null && echo "$BASHPID" >"$cgroup/cgroup.procs" 2>/dev/null; then
      break
    fi
    rmdir "$cgroup" 2>/dev/null
    cgroup=
  fi
done
cgroup_cpu_seconds() {  # cgroup v1's cpuacct.usage (ns) or v2's cpu.stat usage_usec
  if [[ -f $cgroup/cpuacct.usage ]]; then
    awk '{ printf "%.0f", $1 / 1e9 }' "$cgroup/cpuacct.usage"
  else
    awk '$1 == "usage_usec" { printf "%.0f", $2 / 1e6 }' "$cgroup/cpu.stat"
  fi
}

# A failing script's reason (common.bash's fail) comes back through this file.
DLH_TEST_FAIL_FILE=$(mktemp "${TMPDIR:-/tmp}/dlh-test-fail.XXXXXX")
export DLH_TEST_FAIL_FILE
echo "== $name"
"$@"
rc=$?
reason=$(head -c 600 "$DLH_TEST_FAIL_FILE" | tr '\n' ';' | sed 's/;$//; s/;/; /g')
rm -f "$DLH_TEST_FAIL_FILE"
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
if [[ -n $cgroup ]]; then
  cpu=$(cgroup_cpu_seconds)
  echo "$BASHPID" >"$(dirname "$cgroup")/cgroup.procs"
  rmdir "$cgroup" 2>/dev/null  # a process left running keeps it: tests/leftovers.sh names it
else
  times >"${TMPDIR:-/tmp}/run_test.$$.times"  # here, not in a pipeline: a subshell has no children
  cpu=$(tail -1 "${TMPDIR:-/tmp}/run_test.$$.times" | awk '{ gsub(/[ms]/, " "); split($0, f, " "); printf "%.0f", f[1] * 60 + f[2] + f[3] * 60 + f[4] }')
  rm -f "${TMPDIR:-/tmp}/run_test.$$.times"
fi
[[ -z ${DLH_CHECK_TIMES:-} ]] || echo "$took $name (CPU $cpu s)" >>"$DLH_CHECK_TIMES"
if ((rc != 0)); then
  echo "FAILED: $name (exit $rc, $took s, CPU $cpu s)${reason:+: $reason}"
  [[ -z ${DLH_CHECK_FAILURES:-} ]] ||
    echo "$name (exit $rc)${reason:+: $reason}" >>"$DLH_CHECK_FAILURES"
  exit "$rc"
fi
echo "   ($took s, CPU $cpu s)"
