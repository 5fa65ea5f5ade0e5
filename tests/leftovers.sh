#!/bin/bash
# leftovers.sh RUN_ID: the last step of `make check`. Every process a test starts inherits
# DLH_CHECK_RUN=RUN_ID from the Makefile (test clusters' daemons, their job steps and
# tasks, MPI ranks, servers a test puts in the background), also when it detaches itself
# with setsid or a double fork. Any such process still running now outlived the test that
# started it: each is named (pid, command line, working folder), killed, and the exit code
# is 1. Processes this script runs under (the make and shells above it) are not leftovers.
# Exit 0: none left. Needs to read /proc/PID/environ, so it sees every user's processes
# when run as root, and the caller's own otherwise.
set -uo pipefail
[[ $# -eq 1 && -n $1 ]] || { echo "usage: $0 RUN_ID" >&2; exit 2; }
tag="DLH_CHECK_RUN=$1"

declare -A mine=()
p=$$
while [[ $p =~ ^[0-9]+$ && $p -gt 1 ]]; do
  mine[$p]=1
  p=$(awk '{ print $4 }' "/proc/$p/stat" 2>/dev/null) || break
done

tagged() {  # the pids, other than this script's ancestors, whose environment holds the tag
  local e pid
  # One grep over every environment (-z: NUL-separated entries, -x: the whole entry).
  for e in $(grep -lzxF -- "$tag" /proc/[0-9]*/environ 2>/dev/null); do
    pid=${e#/proc/}
    pid=${pid%/environ}
    [[ -z ${mine[$pid]:-} && $pid != "$BASHPID" ]] || continue
    # Running: a command line (a zombie's, and a process's that ended since grep, is empty).
    [[ -n $(tr -d '\0' 2>/dev/null <"/proc/$pid/cmdline" | head -c 1) ]] || continue
    echo "$pid"
  done
  return 0
}

mapfile -t left < <(tagged)
# A process of the last test may still be on its way out: give it a moment.
for _ in $(seq 20); do
  ((${#left[@]})) || break
  sleep 0.1
  mapfile -t left < <(tagged)
done
if ((${#left[@]} == 0)); then
  echo "leftovers: no process of this check is left running"
  exit 0
fi
echo "leftovers: FAIL: ${#left[@]} process(es) of this check outlived their test:" >&2
for pid in "${left[@]}"; do
  printf '  pid %s: %s (in %s)\n' "$pid" "$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | sed 's/ $//')" \
    "$(readlink "/proc/$pid/cwd" 2>/dev/null)" >&2
done
kill -KILL "${left[@]}" 2>/dev/null
exit 1
