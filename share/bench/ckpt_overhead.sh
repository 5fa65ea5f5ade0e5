#!/bin/bash
# make bench, "Checkpoints in the background": what frequent checkpoints of a model
# whose checkpoint is large cost a 2-rank training, written in the background (the default:
# rank 0 copies the state to host memory at a step boundary and one writer thread writes and
# fsyncs the HDF5 file while the loop goes on) and with --checkpoint-sync (the loop waits for
# the whole write).
#   ckpt_overhead.sh BINDIR WORK   (about 15 minutes on 2 cores; BENCH_CKPT_ROUNDS (3),
#                                   BENCH_CKPT_RUN_S (64, seconds a run should last))
# Writes WORK/ckpt_overhead/setup.json and WORK/ckpt_overhead/runs.jsonl (one line per run)
# for report.py's "ckpt_overhead" section, or WORK/ckpt_overhead/unavailable with the reason.
#
# The model is an MLP whose one wide layer (784 -> 10240) makes its parameters and Adam's two
# moments a checkpoint of about 100 MB. Adam rather than SGD: the same file from a third fewer
# parameters than with momentum, so shorter steps (each allreduces and updates every
# parameter), and the shorter the time between two checkpoints, the more each one's cost
# shows. On this machine two ranks' steps slow down far more than the size once the gradients
# pass some 30 MB (784 -> 16384 with momentum: 0.2-0.45 s a step, against 26 ms on one rank).
# 2 ranks x 1 thread under mpirun (one core each; rank 0's writer thread shares rank 0's
# core). Four modes, each run in every round, the order rotated from round to round: no
# checkpoints, every 100 steps in the background, every 100 steps with --checkpoint-sync, and
# every 30 s in the background. Every run does the same steps, as many as a short probe run
# says fill BENCH_CKPT_RUN_S seconds: enough for 2 checkpoints of the 30 s mode (its clock
# restarts after each), whatever this machine's speed. --max-steps ends every run, in every
# mode, with one more checkpoint, which waits for any write still running, so the figures are
# over the steps before the last, and no run ends within 10 steps after a periodic checkpoint.
set -euo pipefail
bindir=$(cd "$1" && pwd) work=$2
export PATH="$bindir:$PATH" LC_ALL=C
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
py=/usr/bin/python3
out=$work/ckpt_overhead
rm -rf "$out"
mkdir -p "$out"
rounds=${BENCH_CKPT_ROUNDS:-3}
run_s=${BENCH_CKPT_RUN_S:-64}
batch=32      # global: 16 samples per rank and step
units=10240   # the wide layer: 784 x 10240 weights, 32 MB, and twice that in Adam's moments
every_steps=100 every_seconds=30
unavailable() { echo "$*" >"$out/unavailable"; exit 0; }

# Not grep -q: its early exit would fail the pipeline (pipefail) with dlh-launch's SIGPIPE.
dlh-launch train --help 2>&1 | grep -- '--checkpoint-sync' >/dev/null ||
  unavailable "this dlh-launch has no --checkpoint-sync (checkpoints are not written in the background)"

cat >"$out/spec.json" <<JSON
{
  "name": "ckpt-overhead",
  "input": {"channels": 1, "height": 28, "width": 28},
  "classes": 10,
  "layers": [{"type": "flatten"}, {"type": "dense", "units": $units}, {"type": "relu"},
             {"type": "dense", "units": 10}],
  "optimizer": {"type": "adam", "lr": 0.001},
  "batch_size": $batch, "epochs": 1000, "seed": 1, "dataset": "data.h5"
}
JSON
# 200 steps an epoch: epochs end in every mode alike (no evaluation, no epoch checkpoint).
dlh-data synthetic --out "$out/data.h5" --shape 1x28x28 --classes 10 --train $((200 * batch)) \
  --test 100 >/dev/null

declare -A opts=(
  [none]="--checkpoint-seconds 0"
  [steps-background]="--checkpoint-seconds 0 --checkpoint-steps $every_steps"
  [steps-sync]="--checkpoint-seconds 0 --checkpoint-steps $every_steps --checkpoint-sync"
  [seconds-background]="--checkpoint-seconds $every_seconds"
)
modes=(none steps-background steps-sync seconds-background)

# note KEY=VALUE...: adds JSON values to setup.json; the value "load" stands for the load
# average now (the machine is shared: say how busy it was).
note() {
  $py - "$out/setup.json" "$@" <<'PY'
import json, os, sys
path = sys.argv[1]
s = json.load(open(path)) if os.path.exists(path) else {}
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    s[k] = open("/proc/loadavg").read().split()[:3] if v == "load" else json.loads(v)
json.dump(s, open(path, "w"))
PY
}
# train MODE STEPS: one training into $out/run (the previous run's files deleted and flushed
# before, not during, it); sets wall to its seconds.
train() {
  local mode=$1 steps=$2 run=$out/run t0 rc
  rm -rf "$run"
  sync
  t0=$EPOCHREALTIME
  # shellcheck disable=SC2086  # the mode's options are words
  mpirun -np 2 dlh-launch train "$out/spec.json" --data "$out/data.h5" --run-dir "$run" \
    --batch-size $batch --max-steps "$steps" --no-eval --progress none --no-resume \
    --no-epoch-checkpoints --keep 2 --threads 1 ${opts[$mode]} >"$out/last.log" 2>&1 || {
    rc=$?
    unavailable "mpirun -np 2 dlh-launch train (mode $mode) failed with exit code $rc: $(tail -1 "$out/last.log")"
  }
  wall=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
}

# The probe: 60 steps without checkpoints; the median step after the first 10 sets the steps
# of every run.
train none 60
steps=$($py - "$out/run/metrics.jsonl" "$run_s" <<'PY'
import json, statistics, sys
t = statistics.median(r["time"]["total"] for r in map(json.loads, open(sys.argv[1]))
                      if "event" not in r and r["step"] > 10)
n = max(150, round(float(sys.argv[2]) / t))
print(n + 10 if n % 100 < 10 else n)
PY
)
note "steps=$steps" "run_s=$run_s" global_batch=$batch ranks=2 threads=1 units=$units \
  "rounds=$rounds" every_steps=$every_steps every_seconds=$every_seconds load_before=load

# one MODE ROUND: one run; appends its figures to runs.jsonl.
one() {
  train "$1" "$steps"
  $py - "$out/run" "$1" "$2" "$steps" "$wall" >>"$out/runs.jsonl" <<'PY'
import glob, json, os, sys
run, mode, round_, steps, wall = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
recs = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
step = [r for r in recs if "event" not in r]
assert [r["step"] for r in step] == list(range(1, steps + 1)), "steps missing in metrics.jsonl"
timed = step[:-1]  # the last step's checkpoint (--max-steps) is every mode's
files = glob.glob(os.path.join(run, "checkpoints", "ckpt-*.h5"))
print(json.dumps({
    "mode": mode, "round": round_, "timed_steps": len(timed),
    "loop_s": sum(r["time"]["total"] for r in timed),
    "blocked_s": [r["time"]["checkpoint"] for r in timed if r["time"]["checkpoint"] > 0],
    "blocked_steps": [r["step"] for r in timed if r["time"]["checkpoint"] > 0],
    # write_cpu_s, write_sys_s: the writer's and checksum's threads' CPU seconds (absent
    # from builds before they were measured).
    "writes": [{k: r[k] for k in ("step", "write_s", "bytes", "background", "write_cpu_s",
                                  "write_sys_s") if k in r}
               for r in recs if r.get("event") == "checkpoint"],
    "last_step_s": step[-1]["time"]["total"],
    "file_bytes": max((os.path.getsize(f) for f in files), default=0),
    "summary": json.load(open(os.path.join(run, "summary.json")))["checkpoints"],
    "wall_s": wall}))
PY
}

for ((r = 0; r < rounds; ++r)); do
  for ((k = 0; k < ${#modes[@]}; ++k)); do
    one "${modes[(r + k) % ${#modes[@]}]}" $((r + 1))
  done
done
rm -rf "$out/run"
note load_after=load
