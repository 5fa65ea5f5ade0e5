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
start() {  # start RUN_DIR LOG [extra options]: run in the background in its own session
  local dir=$1 log=$2; shift 2
  setsid bash -c "$(declare -f run); WORK='$WORK'; run '$dir' $*" >"$log" 2>&1 &
  pid=$!
}

# A signal must reach the ranks at a known point of training. The log cannot tell where that
# is: mpirun forwards it late under load (once a whole epoch and more behind, while the run
# takes seconds), and a run signalled after its last step simply finishes (stop_signal 0).
# Nor can a checkpoint file alone: under load the ranks may be hundreds of steps further on
# by the time this script looks. So pause_ranks lets the ranks run only in short bursts
# (SIGCONT, 20 ms, SIGSTOP) until, with both stopped, a checkpoint at or after STEP is on disk
# (rank 0 writes it itself), and it checks then that none is from step 575 or later: every rank
# still has a step boundary ahead, where a signal sent while they stand still takes effect
# once they are continued. Only the ranks get signals, as from Slurm: mpirun would forward
# SIGTERM itself and SIGKILL the ranks 2 s later (odls_base_sigkill_timeout), cutting short a
# checkpoint that is slow under load.
stop_ranks() {  # stop_ranks: SIGSTOP the ranks and wait until both stand still
  local r
  kill -STOP "${ranks[@]}"
  for r in "${ranks[@]}"; do
    for _ in $(seq 500); do [[ $(cut -d' ' -f3 "/proc/$r/stat" 2>/dev/null) != [RSD] ]] && break; sleep 0.01; done
    [[ $(cut -d' ' -f3 "/proc/$r/stat") == T ]] || fail "rank $r did not stop"
  done
}
newest_step() {  # newest_step RUN_DIR: the step of the newest checkpoint (0: none)
  ls "$1/checkpoints" 2>/dev/null | sed -n 's/^ckpt-0*\([0-9][0-9]*\)\.h5$/\1/p' | sort -n | tail -1 | grep . || echo 0
}
pause_ranks() {  # pause_ranks RUN_DIR LOG STEP: sets ranks to the pids of the stopped ranks
  local dir=$1 log=$2
  for _ in $(seq 1200); do
    # Each rank runs under its guard process (docs/reference/dlh-launch.md, "A rank that
    # dies"), also a dlh-launch: the ranks are the dlh-launch processes whose parent is one.
    # Telling them apart takes a few ps calls, which under make check's load once took the
    # whole run (it reached step 575 first): every dlh-launch of the session is held still
    # meanwhile, and the guards are let go once the ranks are known.
    local all=() p
    mapfile -t all < <(pgrep -s "$pid" -x dlh-launch)
    ((${#all[@]} >= 4)) && kill -STOP "${all[@]}" 2>/dev/null
    mapfile -t ranks < <(for p in "${all[@]}"; do
      [[ $(ps -o comm= -p "$(ps -o ppid= -p "$p" | tr -d ' ')" 2>/dev/null) == dlh-launch ]] && echo "$p"
    done)
    for p in "${all[@]}"; do [[ " ${ranks[*]} " == *" $p "* ]] || kill -CONT "$p" 2>/dev/null || true; done
    ((${#ranks[@]} == 2)) && break
    ((${#all[@]} == 0)) || kill -CONT "${all[@]}" 2>/dev/null || true
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "the run ended before it trained"; }
    sleep 0.05
  done
  ((${#ranks[@]} == 2)) || { cat "$log" >&2; fail "expected 2 ranks in session $pid, found ${ranks[*]:-none}"; }
  stop_ranks
  for _ in $(seq 3000); do
    (($(newest_step "$dir") >= $3)) && break
    kill -CONT "${ranks[@]}"
    sleep 0.02
    stop_ranks
  done
  (($(newest_step "$dir") >= $3)) || { cat "$log" >&2; fail "no checkpoint at step $3 or later"; }
  if (($(newest_step "$dir") >= 575)) || [[ -e $dir/summary.json ]]; then
    fail "the run reached step 575 of 600 before its ranks could be stopped"
  fi
}

echo "uninterrupted run"
run "$WORK/a" --checkpoint-steps 25 2>"$WORK/a.log"
crc_a=$(json_field "$WORK/a/summary.json" param_crc32)
check "uninterrupted: param_crc32 $crc_a, test accuracy $(json_field "$WORK/a/summary.json" test_accuracy)"

echo "killed run"
start "$WORK/b" "$WORK/b1.log" --checkpoint-steps 25
# After the checkpoint of step 100, kill everything without warning.
pause_ranks "$WORK/b" "$WORK/b1.log" 100
# Like a node failure or Slurm's final SIGKILL: every rank and the launcher die at once.
# (mpirun puts ranks in their own process groups, so name them as well.)
pattern="dlh-launch train $WORK/spec.json --run-dir $WORK/b"
kill -KILL -- -"$pid" "${ranks[@]}" 2>/dev/null || true
{ wait "$pid"; } 2>/dev/null || true
for _ in $(seq 100); do pgrep -f "$pattern" >/dev/null || break; sleep 0.05; done
[[ ! -e "$WORK/b/summary.json" ]] || fail "run finished before it could be killed (too fast)"
check "killed with SIGKILL; newest checkpoint at step $(newest_step "$WORK/b")"
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
start "$WORK/c" "$WORK/c1.log" --checkpoint-steps 25
pause_ranks "$WORK/c" "$WORK/c1.log" 25
kill -TERM "${ranks[@]}"
kill -CONT "${ranks[@]}"
rc=0; wait "$pid" || rc=$?
[[ -e "$WORK/c/summary.json" ]] || { cat "$WORK/c1.log"; fail "no summary after SIGTERM"; }
[[ $(json_field "$WORK/c/summary.json" stop_signal) == 15 ]] ||
  { cat "$WORK/c1.log" "$WORK/c/summary.json"; fail "stop_signal is not 15"; }
[[ $(json_field "$WORK/c/summary.json" finished) == False ]] || fail "run claims it finished"
grep -q "SIGTERM/SIGINT at step" "$WORK/c1.log" || fail "no SIGTERM message"
check "SIGTERM: $(grep -o 'SIGTERM/SIGINT at step [0-9]*' "$WORK/c1.log"), exit $rc"
run "$WORK/c" --checkpoint-steps 25 2>"$WORK/c2.log"
[[ $(json_field "$WORK/c/summary.json" param_crc32) == "$crc_a" ]] || fail "run resumed after SIGTERM differs"
check "resumed after SIGTERM: bit-identical to the uninterrupted run"

echo "SIGUSR1 to one rank"
start "$WORK/d" "$WORK/d.log" --checkpoint-steps 25
pause_ranks "$WORK/d" "$WORK/d.log" 25
kill -USR1 "${ranks[1]}"
kill -CONT "${ranks[@]}"
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

echo "every checkpoint corrupt"
for f in "$WORK/b/checkpoints"/ckpt-*.h5; do truncate -s 1000 "$f"; done
run "$WORK/b" --max-steps 1 2>"$WORK/b4.log" || { cat "$WORK/b4.log"; fail "the run over corrupt checkpoints failed"; }
line=$(grep -o "warning: no checkpoint in .* validates ([0-9]* skipped): starting from step 0" "$WORK/b4.log" || true)
[[ -n $line ]] || { cat "$WORK/b4.log"; fail "no line saying the run starts over"; }
! grep -q "resumed from" "$WORK/b4.log" || fail "resumed from a corrupt checkpoint"
check "${line//$WORK\//}"
