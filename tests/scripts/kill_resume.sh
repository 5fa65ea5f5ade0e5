#!/bin/bash
# A run killed with SIGKILL and started again with the same command ends with the same
# parameters, bit for bit, as a run that was never interrupted (2 ranks under mpirun).
# Also: SIGTERM checkpoints and stops; a corrupt newest checkpoint is skipped.
source "$(dirname "$0")/common.bash"

dlh-data synthetic --out "$WORK/data.h5" --shape 1x16x16 --classes 6 --train 3000 --test 300 --seed 3 >/dev/null
cat >"$WORK/spec.json" <<'JSON'
{
  "name": "killtest",
  "input": {"channels": 1, "height": 16, "width": 16},
  "classes": 6,
  "layers": [
    {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1},
    {"type": "batchnorm"},
    {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2},
    {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1},
    {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2},
    {"type": "flatten"},
    {"type": "dropout", "rate": 0.2},
    {"type": "dense", "units": 64},
    {"type": "relu"},
    {"type": "dense", "units": 6}
  ],
  "optimizer": {"type": "adam", "lr": 0.002, "weight_decay": 0.0001},
  "schedule": {"warmup_epochs": 0.5, "decay": "cosine"},
  "batch_size": 20,
  "epochs": 4,
  "seed": 9,
  "dataset": "data.h5"
}
JSON

run() {  # run RUN_DIR [extra options]
  local dir=$1; shift
  mpirun -np 2 dlh-launch train "$WORK/spec.json" --run-dir "$dir" --progress plain "$@"
}

echo "uninterrupted run"
run "$WORK/a" --checkpoint-steps 25 2>"$WORK/a.log"
crc_a=$(json_field "$WORK/a/summary.json" param_crc32)
check "uninterrupted: param_crc32 $crc_a, test accuracy $(json_field "$WORK/a/summary.json" test_accuracy)"

echo "killed run"
setsid bash -c "$(declare -f run); WORK='$WORK'; run '$WORK/b' --checkpoint-steps 25" >"$WORK/b1.log" 2>&1 &
pid=$!
# Wait for the checkpoint of step 100, then kill the whole process group without warning.
for _ in $(seq 600); do
  [[ -e "$WORK/b/checkpoints/ckpt-000000100.h5" ]] && break
  sleep 0.05
done
[[ -e "$WORK/b/checkpoints/ckpt-000000100.h5" ]] || { cat "$WORK/b1.log"; fail "no checkpoint at step 100"; }
# Like a node failure or Slurm's final SIGKILL: every rank and the launcher die at once.
# (mpirun puts ranks in their own process groups, so name them as well.)
pattern="dlh-launch train $WORK/spec.json --run-dir $WORK/b"
kill -KILL -- -"$pid" 2>/dev/null || true
pkill -KILL -f "$pattern" || true
{ wait "$pid"; } 2>/dev/null || true
for _ in $(seq 100); do pgrep -f "$pattern" >/dev/null || break; sleep 0.05; done
[[ ! -e "$WORK/b/summary.json" ]] || fail "run finished before it could be killed (too fast)"
killed_at=$(ls "$WORK/b/checkpoints" | sort | tail -1)
check "killed with SIGKILL; newest checkpoint $killed_at"
if pgrep -f "$pattern" >/dev/null; then fail "ranks survived SIGKILL"; fi

run "$WORK/b" --checkpoint-steps 25 2>"$WORK/b2.log"
grep -q "resumed from .*ckpt-" "$WORK/b2.log" || { cat "$WORK/b2.log"; fail "did not resume"; }
check "$(grep -o 'resumed from .*' "$WORK/b2.log" | sed "s|$WORK/||")"
crc_b=$(json_field "$WORK/b/summary.json" param_crc32)
[[ "$crc_a" == "$crc_b" ]] || fail "resumed run param_crc32 $crc_b != uninterrupted $crc_a"
final=$(basename "$(json_field "$WORK/a/summary.json" last_checkpoint)")
h5diff "$WORK/a/checkpoints/$final" "$WORK/b/checkpoints/$final" /params >/dev/null \
  || fail "h5diff: /params differ between $final files"
h5diff "$WORK/a/checkpoints/$final" "$WORK/b/checkpoints/$final" /optimizer >/dev/null \
  || fail "h5diff: /optimizer differ"
check "resumed run is bit-identical: param_crc32 $crc_b, h5diff /params and /optimizer equal"

echo "SIGTERM"
setsid bash -c "$(declare -f run); WORK='$WORK'; run '$WORK/c'" >"$WORK/c1.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  grep -q "step [0-9]*/150" "$WORK/c1.log" 2>/dev/null && break
  grep -q "error" "$WORK/c1.log" 2>/dev/null && { cat "$WORK/c1.log"; fail "run c failed"; }
  sleep 0.05
done
pkill -TERM -f "dlh-launch train $WORK/spec.json --run-dir $WORK/c" || fail "no ranks to signal"
rc=0; wait "$pid" || rc=$?
[[ -e "$WORK/c/summary.json" ]] || { cat "$WORK/c1.log"; fail "no summary after SIGTERM"; }
[[ $(json_field "$WORK/c/summary.json" stop_signal) == 15 ]] || fail "stop_signal is not 15"
[[ $(json_field "$WORK/c/summary.json" finished) == False ]] || fail "run claims it finished"
grep -q "SIGTERM/SIGINT at step" "$WORK/c1.log" || fail "no SIGTERM message"
check "SIGTERM: $(grep -o 'SIGTERM/SIGINT at step [0-9]*' "$WORK/c1.log"), exit $rc"
run "$WORK/c" 2>"$WORK/c2.log"
[[ $(json_field "$WORK/c/summary.json" param_crc32) == "$crc_a" ]] || fail "run resumed after SIGTERM differs"
check "resumed after SIGTERM: bit-identical to the uninterrupted run"

echo "SIGUSR1 to one rank"
setsid bash -c "$(declare -f run); WORK='$WORK'; run '$WORK/d'" >"$WORK/d.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  grep -q "step [0-9]*/150" "$WORK/d.log" 2>/dev/null && break
  sleep 0.05
done
pkill -USR1 -n -f "dlh-launch train $WORK/spec.json --run-dir $WORK/d" || fail "no rank to signal"
wait "$pid" || { cat "$WORK/d.log"; fail "run d failed after SIGUSR1"; }
grep -q "SIGUSR1 at step [0-9]*: checkpoint written" "$WORK/d.log" || { cat "$WORK/d.log"; fail "no SIGUSR1 checkpoint"; }
[[ $(json_field "$WORK/d/summary.json" param_crc32) == "$crc_a" ]] || fail "SIGUSR1 checkpoint changed the result"
check "$(grep -o 'SIGUSR1 at step [0-9]*: checkpoint written' "$WORK/d.log"), run continued to the same result"

echo "corrupt newest checkpoint"
newest=$(ls "$WORK/b/checkpoints"/ckpt-*.h5 | sort | tail -1)
truncate -s 1000 "$newest"
run "$WORK/b" --checkpoint-steps 25 2>"$WORK/b3.log"
grep -q "warning: .*$(basename "$newest"): skipped" "$WORK/b3.log" || { cat "$WORK/b3.log"; fail "corrupt file not reported"; }
check "$(grep -o "warning: .*skipped[^(]*" "$WORK/b3.log" | head -1 | sed "s|$WORK/||")"
