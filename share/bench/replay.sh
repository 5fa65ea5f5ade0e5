#!/bin/bash
# make bench, "A cluster replay" (issue 46): `dlh-estimate replay` of a generated trace of
# 100,000 jobs on share/cluster/replay.json (4,000 GPUs of 4 types and 1,000 CPU-only nodes), every policy; then the
# sensitivity of the DLH-against-users figures to what they depend on most: the deadline
# multiple's distribution, the offered load, and the seed (user and dlh-energy only).
#   replay.sh BINDIR WORK   (2-4 minutes on 2 cores; BENCH_REPLAY_JOBS=N for fewer jobs)
# Writes WORK/replay/main.json and replay.html (every policy), sens-*.json (one per setting)
# and settings.txt, or WORK/replay/unavailable with the reason.
set -euo pipefail
bindir=$(cd "$1" && pwd) work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH" LC_ALL=C
out=$work/replay
rm -rf "$out"
mkdir -p "$out"
unavailable() { echo "$*" >"$out/unavailable"; echo "unavailable: $*" >&2; exit 0; }
jobs=${BENCH_REPLAY_JOBS:-100000}
# Named from the checkout's root, so that the report names the file and not this machine's path.
cd "$root"
cluster=share/cluster/replay.json
replay() {  # replay NAME OPTIONS...: one replay, its JSON as NAME.json
  local name=$1
  shift
  dlh-estimate replay --cluster "$cluster" --generate "$jobs" --json "$out/$name.json" "$@" \
    >"$out/$name.txt" 2>&1 || unavailable "dlh-estimate replay $*: $(tail -1 "$out/$name.txt")"
  echo "== replay $name: $(grep -o "[0-9.]* s in all" "$out/$name.txt")" >&2
}
replay main --seed 1 --html "$out/replay.html"
# The defaults (deadlines 1.25-10, load 0.8, seed 1) are main's own user and dlh-energy rows.
: >"$out/settings.txt"
for setting in "deadlines 1.1,3" "deadlines 2,20" "load 0.5" "load 1.2" "seed 2"; do
  set -- $setting
  name="sens-$1-$2"
  replay "$name" --policies user,dlh-energy --"$1" "$2" $([[ $1 == seed ]] || echo --seed 1)
  echo "$name $1 $2" >>"$out/settings.txt"
done
