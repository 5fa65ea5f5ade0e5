#!/bin/bash
# stop-cluster.sh DIR: stop the test cluster that start-cluster.sh started in DIR.
#
# Sends SIGTERM to exactly the daemons named by DIR/run/*.pid, all at once, waits for them,
# sends SIGKILL to those still there after 10 s (SLURM_TEST_STOP_WAIT), and removes the pid
# files. A pid is only signalled while its command line names DIR, so a reused pid or another
# cluster's daemon is never touched. Job steps still running (a slurmstepd that has a file in
# DIR open, i.e. its node's slurmd log, and the step's tasks below it) get SIGKILL at once,
# since they would outlive their slurmd. Node namespaces (SLURM_TEST_NETNS=1) and their
# bridge are removed last.
# Exits 0 when nothing of the cluster is left running (also when nothing was running).
set -euo pipefail

[[ $# -eq 1 && -n $1 ]] || { echo "usage: $0 DIR" >&2; exit 2; }
[[ -d $1 ]] || exit 0
D=$(cd "$1" && pwd -P)
WAIT=${SLURM_TEST_STOP_WAIT:-10}

ours() {  # ours PID: PID is running (not a zombie) and its command line names DIR
  local pid=$1 state
  [[ -r /proc/$pid/cmdline ]] || return 1
  state=$(cut -d' ' -f3 </proc/"$pid"/stat 2>/dev/null) || return 1
  [[ $state != Z ]] || return 1
  tr '\0' '\n' </proc/"$pid"/cmdline 2>/dev/null | grep -qF -- "$D/"
}

pids=()
files=()
for f in "$D"/run/*.pid; do
  [[ -e $f ]] || continue
  files+=("$f")
  pid=$(head -c 32 "$f" 2>/dev/null | tr -dc 0-9) || true
  [[ -n $pid ]] && ours "$pid" && pids+=("$pid")
done
((${#pids[@]})) && mapfile -t pids < <(printf '%s\n' "${pids[@]}" | sort -un)

# Job steps of this cluster: slurmstepd processes (they double-fork away from slurmd) with an
# open file under DIR, plus all their descendants.
steps=()
for p in /proc/[0-9]*; do
  [[ $(cat "$p/comm" 2>/dev/null) == slurmstepd ]] || continue
  for fd in "$p"/fd/*; do
    t=$(readlink "$fd" 2>/dev/null) || continue
    if [[ $t == "$D"/* ]]; then steps+=("${p#/proc/}"); break; fi
  done
done
if ((${#steps[@]})); then
  # add descendants, breadth first, from one snapshot of the parent links
  declare -A kids=()
  for st in /proc/[0-9]*/stat; do
    read -r line <"$st" 2>/dev/null || continue
    rest=${line##*) }                 # fields after "pid (comm) "
    read -r _ ppid _ <<<"$rest"
    pid=${st#/proc/}; pid=${pid%/stat}
    kids[$ppid]+=" $pid"
  done
  for ((i = 0; i < ${#steps[@]}; i++)); do
    for c in ${kids[${steps[i]}]:-}; do steps+=("$c"); done
  done
fi

running() {  # the pids in $pids that are still ours
  local p
  for p in "${pids[@]}"; do ours "$p" && echo "$p"; done
  return 0
}

if ((${#pids[@]})); then
  kill -TERM "${pids[@]}" 2>/dev/null || true
fi
((${#steps[@]} == 0)) || kill -KILL "${steps[@]}" 2>/dev/null || true
if ((${#pids[@]})); then
  for ((i = 0; i < WAIT * 20; i++)); do
    mapfile -t pids < <(running)
    ((${#pids[@]})) || break
    sleep 0.05
  done
  if ((${#pids[@]})); then
    echo "stop-cluster.sh: still running after ${WAIT} s, sending SIGKILL: ${pids[*]}" >&2
    kill -KILL "${pids[@]}" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      mapfile -t pids < <(running)
      ((${#pids[@]})) || break
      sleep 0.05
    done
  fi
fi

((${#files[@]} == 0)) || rm -f "${files[@]}"
# Node namespaces and their bridge (start-cluster.sh with SLURM_TEST_NETNS=1). Deleting a
# namespace's name frees it once its last process is gone; its veth pair goes with it.
if [[ -s $D/run/netns.txt ]]; then
  while read -r kind name _; do
    case $kind in
      netns) ip netns delete "$name" 2>/dev/null || true ;;
      bridge) ip link delete "$name" 2>/dev/null || true ;;
    esac
  done <"$D/run/netns.txt"
  rm -f "$D/run/netns.txt" "$D/hosts.txt"
fi
if ((${#pids[@]})); then
  echo "stop-cluster.sh: could not stop: ${pids[*]}" >&2
  exit 1
fi
exit 0
