#!/bin/bash
# A rank that stops answering ends the job (issue 15, part 1): in a 3-rank run under mpirun,
# rank 2 is SIGSTOPped mid-training. Within --comm-timeout the two live ranks each print one
# line (the first to time out names rank 2, its host and pid, the step and the last good
# checkpoint; the other says who stopped the job and why), the job exits with code 4 and no
# rank lingers (MPI_Abort kills the stopped one too); the same command then resumes from the
# checkpoint the lines named. The heartbeats the verdict comes from are in the run folder.
# Then a rank killed outright: its guard process names it.
source "$(dirname "$0")/common.bash"

dlh-data synthetic --out "$WORK/data.h5" --shape 1x12x12 --classes 4 --train 1200 --test 60 --seed 5 >/dev/null
cat >"$WORK/spec.json" <<'JSON'
{
  "name": "stall",
  "input": {"channels": 1, "height": 12, "width": 12},
  "classes": 4,
  "layers": [{"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1}, {"type": "relu"},
             {"type": "flatten"}, {"type": "dense", "units": 4}],
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
  "batch_size": 12, "epochs": 5000, "seed": 2, "dataset": "data.h5"
}
JSON
run=$WORK/run
train=(mpirun -np 3 dlh-launch train "$WORK/spec.json" --run-dir "$run" --threads 1 --no-eval
  --checkpoint-steps 50 --comm-timeout 5)

setsid "${train[@]}" --progress none >"$WORK/out.log" 2>"$WORK/err.log" &
job=$!
# Wait until every rank's heartbeat names a checkpoint, then freeze rank 2. A rank learns
# that a background checkpoint is on disk some steps after the file appears (from a later
# step's control allreduce), and the verdict names what the judging rank knew.
knows_checkpoint() { [[ -f $run/heartbeat/rank-$1.json ]] && heartbeat_field "$run/heartbeat/rank-$1.json" checkpoint >/dev/null; }
for ((i = 0; i < 1200; ++i)); do
  knows_checkpoint 0 && knows_checkpoint 1 && knows_checkpoint 2 && break
  kill -0 $job 2>/dev/null || { cat "$WORK/err.log" >&2; fail "the run ended before rank 2 was stopped"; }
  sleep 0.1
done
[[ -f $run/heartbeat/rank-0.json && -f $run/heartbeat/rank-1.json ]] || fail "no heartbeats in $run/heartbeat"
# What the job was doing, for a failure below.
diagnose() { cat "$WORK/err.log" "$run"/heartbeat/*.json >&2; ps -o pid,stat,wchan:20,args -C dlh-launch >&2 || true; }
victim=$(heartbeat_field "$run/heartbeat/rank-2.json" pid)
host=$(heartbeat_field "$run/heartbeat/rank-2.json" host)
kill -STOP "$victim"
t0=$SECONDS
check "rank 2 (pid $victim on $host) stopped"

# A guard, not a timing claim: a job still there after 120 s hangs, which is the bug.
rc=0
timeout 120 tail --pid=$job -f /dev/null ||
  { diagnose; kill -CONT "$victim" 2>/dev/null; kill -- -$job 2>/dev/null; fail "the job still runs 120 s after rank 2 stopped"; }
wait $job || rc=$?
took=$((SECONDS - t0))
[[ $rc -eq 4 ]] || { cat "$WORK/err.log" >&2; fail "mpirun exited $rc, expected 4 (a peer stopped answering)"; }
check "the job ended with exit code 4, $took s after rank 2 stopped (--comm-timeout 5)"
for ((i = 0; i < 100; ++i)); do kill -0 "$victim" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$victim" 2>/dev/null || { grep State /proc/$victim/status >&2; kill -9 "$victim"; fail "the stopped rank $victim lingers"; }
check "no rank lingers"

judge=$(grep -E '^dlh-launch \[rank [01]/3 [^]]*\]: error: waited [0-9]+ s in MPI_[A-Za-z]+ at step [0-9]+: stopped answering: rank 2 \(' "$WORK/err.log" || true)
[[ $(grep -c . <<<"$judge") -eq 1 ]] || { cat "$WORK/err.log" >&2; fail "no single verdict naming rank 2"; }
grep -q "rank 2 ($host), pid $victim, silent for [0-9]* s; last good checkpoint $run/checkpoints/.*\.h5; aborting the job (--comm-timeout 5)" <<<"$judge" ||
  { echo "$judge" >&2; fail "the verdict lacks the host, pid, step or checkpoint"; }
check "verdict: ${judge#*error: }"
judge_rank=$(sed -E 's/^dlh-launch \[rank ([01])\/3.*/\1/' <<<"$judge")
other=$((1 - judge_rank))
second=$(grep -E "^dlh-launch \[rank $other/3 [^]]*\]: error: stopping at step [0-9]+: rank $judge_rank \(.*\) timed out waiting for its peers: stopped answering: rank 2 \(.*; last good checkpoint $run/checkpoints/" "$WORK/err.log" || true)
[[ -n $second ]] || { cat "$WORK/err.log" >&2; fail "rank $other printed no line of its own"; }
check "rank $other: ${second#*error: }"
named=$(sed -E 's/.*last good checkpoint ([^;]*);.*/\1/' <<<"$judge")
[[ -f $named ]] || fail "the checkpoint named, $named, does not exist"

# The same command resumes from that checkpoint, or from a newer one (--max-steps: a few
# steps are enough): the line names the newest file every rank knew to be on disk, and a
# background write that ended after the last step's control allreduce is newer still.
"${train[@]}" --max-steps 400 --progress plain >"$WORK/out2.log" 2>"$WORK/err2.log" ||
  { cat "$WORK/err2.log" >&2; fail "the run did not resume"; }
named_step=$(sed -E 's/.*ckpt-0*([0-9]+)\.h5$/\1/' <<<"$named")
resumed_step=$(cat "$WORK/out2.log" "$WORK/err2.log" |
  sed -nE 's/.*resumed from .*ckpt-0*([0-9]+)\.h5 at step.*/\1/p' | head -n 1)
[[ -n $resumed_step && $resumed_step -ge $named_step ]] ||
  { cat "$WORK/out2.log" "$WORK/err2.log" >&2; fail "the rerun did not resume from $named or a newer checkpoint"; }
check "the rerun resumed from step $resumed_step (the line named $(basename "$named"))"
for r in 0 1 2; do
  finished=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["finished"])' "$run/heartbeat/rank-$r.json")
  [[ $finished == True ]] || fail "rank $r's last heartbeat does not say it finished"
done
check "each rank's last heartbeat says it finished"

# A rank killed outright (SIGKILL, as the out-of-memory killer does) cannot speak: its guard
# process (launcher/comm/rank_guard.hpp) says which rank died, where it was and the last
# good checkpoint, and mpirun ends the job with the guard's exit code, 128 + 9.
# The guard names the checkpoint its rank knew of: wait for rank 1's heartbeat to name one.
rm -rf "$run"
setsid "${train[@]}" --progress none >"$WORK/out3.log" 2>"$WORK/err3.log" &
job=$!
for ((i = 0; i < 1200; ++i)); do
  knows_checkpoint 1 && break
  kill -0 $job 2>/dev/null || { cat "$WORK/err3.log" >&2; fail "the run ended before rank 1 was killed"; }
  sleep 0.1
done
victim=$(heartbeat_field "$run/heartbeat/rank-1.json" pid)
kill -KILL "$victim"
rc=0
timeout 120 tail --pid=$job -f /dev/null || { kill -- -$job 2>/dev/null; fail "the job still runs 120 s after rank 1 was killed"; }
wait $job || rc=$?
[[ $rc -eq 137 ]] || { cat "$WORK/err3.log" >&2; fail "mpirun exited $rc, expected 137 (a rank killed by SIGKILL)"; }
line=$(grep -E "^dlh-launch \[rank 1/3 [^]]*\]: error: rank 1 \(pid $victim\) was killed by SIGKILL at step [0-9]+ \(by hand, or by the kernel's out-of-memory killer\); last good checkpoint $run/checkpoints/ckpt-[0-9]+\.h5; its peers cannot go on without it: the job ends$" "$WORK/err3.log" || true)
[[ -n $line ]] || { cat "$WORK/err3.log" >&2; fail "no line from rank 1's guard"; }
check "SIGKILL: ${line#*error: }; exit code 137"
sleep 1
! pgrep -f "dlh-launch train $WORK/spec.json" >/dev/null || { pgrep -af "dlh-launch train $WORK/spec.json" >&2; fail "ranks or guards linger"; }
check "no rank or guard lingers"

# Bad value: one line, exit code 2.
expect_fail 2 "comm-timeout: must be positive" dlh-launch train "$WORK/spec.json" --comm-timeout 0
