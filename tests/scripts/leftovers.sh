#!/bin/bash
# tests/leftovers.sh, the check that ends `make check`, must be able to fail: a process that
# detached itself (setsid, its own session, reparented to init) under a run's tag is named,
# killed and makes it exit 1; with nothing left it exits 0; another run's tag is not its
# business.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
run="leftovers-test-$$-$RANDOM"

echo "a detached process under the run's tag"
DLH_CHECK_RUN=$run setsid -f bash -c 'cd "$1" && exec sleep 300' _ "$WORK" </dev/null >/dev/null 2>&1
other="leftovers-other-$$-$RANDOM"
DLH_CHECK_RUN=$other setsid sleep 300 </dev/null >/dev/null 2>&1 &
other_pid=$!
# Until the tagged bash has become `sleep 300` in $WORK (the untagged one may be first).
for _ in $(seq 300); do
  for p in $(pgrep -x sleep); do [[ $(readlink "/proc/$p/cwd") == "$WORK" ]] && break 2; done
  sleep 0.1
done
rc=0
env DLH_CHECK_RUN= bash "$ROOT/tests/leftovers.sh" "$run" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
[[ $rc -eq 1 ]] || { cat "$WORK/out.txt" "$WORK/err.txt"; kill "$other_pid"; fail "exited $rc with a process left, expected 1"; }
grep -q "sleep 300 (in $WORK)" "$WORK/err.txt" || { cat "$WORK/err.txt"; kill "$other_pid"; fail "the process left is not named"; }
check "$(head -1 "$WORK/err.txt") $(sed -n 2p "$WORK/err.txt" | sed 's/^ *//')"

echo "killed, so a second look finds nothing; another run's process is left alone"
bash "$ROOT/tests/leftovers.sh" "$run" >"$WORK/out.txt" 2>&1 || { cat "$WORK/out.txt"; fail "a second look still found a process"; }
check "$(cat "$WORK/out.txt")"
kill -0 "$other_pid" 2>/dev/null || fail "a process of another run was killed"
kill "$other_pid"
check "another run's process was not touched"
