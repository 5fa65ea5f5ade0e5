#!/bin/bash
# make bench, "Faults: time to detect" (issue 15): how long from a fault to the end of the
# job that met it.
#   faults.sh BINDIR WORK   (about 5 minutes on 2 cores; BENCH_FAULT_ROUNDS, default 3)
# Writes WORK/faults/runs.jsonl (one line per fault: where, fault, seconds, comm_timeout) for
# report.py's "faults" section, or WORK/faults/unavailable.
#
# Under mpirun on this machine, BENCH_FAULT_ROUNDS rounds, interleaved: 3 ranks train, rank 2
# is SIGSTOPped (the watchdog's verdict after --comm-timeout 5 ends the job) or SIGKILLed (its
# guard reports it, mpirun ends the job) after the first checkpoint; the time is from the
# signal to mpirun's exit. Across hosts: tests/slurm/faults_test.sh (two Slurm nodes that are
# network namespaces of their own, 2 ranks each, --comm-timeout 5, SlurmdTimeout=6) once, from
# the fault to the job attempt's end for a frozen rank, a killed rank, a link down and a
# slurmd lost; Slurm and root are needed for that part, and its absence is recorded.
set -euo pipefail
bindir=$(cd "$1" && pwd) work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH" LC_ALL=C
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
py=/usr/bin/python3
out=$work/faults
rm -rf "$out"
mkdir -p "$out"
rounds=${BENCH_FAULT_ROUNDS:-3}
unavailable() { echo "$*" >"$out/unavailable"; exit 0; }
record() { echo "{\"where\": \"$1\", \"fault\": \"$2\", \"seconds\": $3, \"comm_timeout\": 5}" >>"$out/runs.jsonl"; }

# 5000 epochs: the fault always lands mid-run (200 took about 10 s here once checkpoints went
# to the background, about when the first checkpoint is seen on a loaded machine).
dlh-data synthetic --out "$out/data.h5" --shape 1x12x12 --classes 4 --train 1200 --test 60 --seed 5 >/dev/null
cat >"$out/spec.json" <<'JSON'
{
  "name": "faults",
  "input": {"channels": 1, "height": 12, "width": 12},
  "classes": 4,
  "layers": [{"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1}, {"type": "relu"},
             {"type": "flatten"}, {"type": "dense", "units": 4}],
  "optimizer": {"type": "sgd", "lr": 0.02, "momentum": 0.9},
  "batch_size": 12, "epochs": 5000, "seed": 2, "dataset": "data.h5"
}
JSON

one() {  # one SIGNAL: a 3-rank run, SIGNAL to rank 2 after the first checkpoint; seconds to the end
  local run=$out/run job pid t0 i
  rm -rf "$run"
  setsid mpirun -np 3 dlh-launch train "$out/spec.json" --run-dir "$run" --threads 1 --no-eval \
    --checkpoint-steps 50 --comm-timeout 5 --progress none >"$out/last.log" 2>&1 &
  job=$!
  for ((i = 0; i < 1200; ++i)); do
    ls "$run"/checkpoints/*.h5 >/dev/null 2>&1 && [[ -f $run/heartbeat/rank-2.json ]] && break
    kill -0 $job 2>/dev/null || unavailable "a run ended before the fault: $(tail -1 "$out/last.log")"
    sleep 0.1
  done
  pid=$($py -c 'import json, sys; print(json.load(open(sys.argv[1]))["pid"])' "$run/heartbeat/rank-2.json")
  t0=$EPOCHREALTIME
  kill "-$1" "$pid"
  if ! timeout 180 tail --pid=$job -f /dev/null; then
    kill -CONT "$pid" 2>/dev/null || true
    kill -- -$job 2>/dev/null || true
    unavailable "mpirun still ran 180 s after $1 to rank 2"
  fi
  wait $job || true
  awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'
}

for ((r = 1; r <= rounds; ++r)); do
  for sig in STOP KILL; do
    s=$(one $sig)
    [[ -n $s ]] || exit 0  # one() wrote the reason to unavailable
    record mpirun "SIG$sig" "$s"
  done
done

# Across hosts: the Slurm test's own measurements ("the attempt ended X s later").
if [[ $(id -u) -ne 0 ]] || ! PATH=$PATH:/usr/sbin command -v slurmctld >/dev/null; then
  echo '{"where": "slurm", "unavailable": "needs root and Slurm"}' >>"$out/runs.jsonl"
  exit 0
fi
if ! BINDIR=$bindir bash "$root/tests/slurm/faults_test.sh" >"$out/slurm.log" 2>&1; then
  echo "{\"where\": \"slurm\", \"unavailable\": $($py -c 'import json, sys; print(json.dumps(sys.argv[1]))' "faults_test.sh failed: $(grep -m1 FAIL "$out/slurm.log" || tail -1 "$out/slurm.log")")}" >>"$out/runs.jsonl"
  exit 0
fi
while read -r fault seconds; do
  record namespace-hosts "$fault" "$seconds"
done < <(sed -nE 's/^  ok: (SIGSTOP|SIGKILL|link down|slurmd lost): the attempt ended ([0-9.]+) s later.*/\1 \2/p' "$out/slurm.log" |
  sed -E 's/^link down/link-down/; s/^slurmd lost/slurmd-lost/')
