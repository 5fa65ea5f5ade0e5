#!/bin/bash
# Stale-synchronous training (issue 47, "sync": {"mode": "stale_sync", "staleness": S} in the
# spec): each step's gradients are summed by a non-blocking allreduce and applied S steps
# later; every gradient in flight is applied at each epoch's end and at the last step, and a
# checkpoint elsewhere stores them. Checked here:
# - staleness 0 is synchronous training (the same sums; 2 and 3 ranks);
# - staleness 2 applies every step's gradient once (summary.json), trains another model, and
#   metrics.jsonl has every step's record in order with its loss; each rank steps with its own
#   gradients meanwhile (Delayed Gradient Averaging), and without them it is another model;
# - checkpoints do not change the run; a run stopped at step 50 (2 gradients in flight, in the
#   file) or by SIGTERM at any step and resumed ends bit-identical to the uninterrupted one;
#   the file holds every rank's own gradients in flight; a synchronous run and a 3-rank run
#   (stepping with the sums in flight) resume from such a file;
# - the example spec (Fashion-MNIST, batch norm and dropout) trains with it;
# - a bad "sync" gets one line naming the file and the field.
source "$(dirname "$0")/common.bash"

dlh-data synthetic --out "$WORK/data.h5" --shape 1x12x12 --classes 5 --train 1200 --test 200 --seed 4 >/dev/null
spec() {  # spec FILE SYNC_JSON: local_sgd.sh's network (no dropout, no batch norm)
  cat >"$1" <<JSON
{
  "name": "stale",
  "input": {"channels": 1, "height": 12, "width": 12},
  "classes": 5,
  "layers": [
    {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
    {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2},
    {"type": "flatten"},
    {"type": "dense", "units": 32},
    {"type": "relu"},
    {"type": "dense", "units": 5}
  ],
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.5, "weight_decay": 1e-4},
  "schedule": {"decay": "cosine"},
  "batch_size": 20,
  "epochs": ${EPOCHS:-2},
  "seed": 11,
  $2
  "dataset": "$WORK/data.h5"
}
JSON
}
spec "$WORK/sync.json" ""
spec "$WORK/s0.json" '"sync": {"mode": "stale_sync", "staleness": 0},'
spec "$WORK/s2.json" '"sync": {"mode": "stale_sync", "staleness": 2},'

run() {  # run SPEC RUN_DIR LOG [extra options]: 2 ranks, a checkpoint every CKPT_STEPS (20)
  local spec=$1 dir=$2 log=$3; shift 3
  mpirun -np 2 dlh-launch train "$spec" --run-dir "$dir" --progress plain --threads 1 \
    --checkpoint-steps "${CKPT_STEPS:-20}" --keep 20 "$@" 2>"$log" || { cat "$log" >&2; fail "run $dir failed"; }
}
crc() { json_field "$1/summary.json" param_crc32; }

echo "staleness 0 is synchronous training"
run "$WORK/sync.json" "$WORK/s" "$WORK/s.log"
run "$WORK/s0.json" "$WORK/z" "$WORK/z.log"
grep -q "stale-synchronous: each step's gradients are summed in the background and applied 0 step(s) later" "$WORK/z.log" ||
  { cat "$WORK/z.log"; fail "no line on stale-synchronous training"; }
# The same global sums (another MPI call adds them), the same updates: float32 rounding at most.
d=$(max_diff "$(final_ckpt "$WORK/s")" "$(final_ckpt "$WORK/z")")
within "$d" 1e-5 || fail "staleness 0: parameters differ by $d from the synchronous run's, more than 1e-5"
check "staleness 0: final /params within $d of the synchronous run's (tolerance 1e-5)"
run3() { mpirun -np 3 dlh-launch train "$1" --run-dir "$2" --progress none --threads 1 "${@:3}" 2>"$2.log" ||
  { cat "$2.log" >&2; fail "run $2 failed"; }; }
run3 "$WORK/sync.json" "$WORK/s3"
run3 "$WORK/s0.json" "$WORK/z3"
d=$(max_diff "$(final_ckpt "$WORK/s3")" "$(final_ckpt "$WORK/z3")")
within "$d" 1e-5 || fail "staleness 0 on 3 ranks: $d from the synchronous run, more than 1e-5"
check "staleness 0 on 3 ranks (batches 7, 7, 6): within $d of the synchronous run's"

echo "staleness 2"
run "$WORK/s2.json" "$WORK/u" "$WORK/u.log"
# Open MPI grants MPI_THREAD_MULTIPLE here: the sums run beside the compute, not in its pauses.
grep -q "the sums run on a thread of their own" "$WORK/u.log" ||
  { cat "$WORK/u.log"; fail "the sums do not run on a thread of their own"; }
/usr/bin/python3 - "$WORK/u" <<'PY' || fail "staleness 2's summary and records"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
sync = s["sync"]
assert sync["mode"] == "stale_sync" and sync["staleness"] == 2, sync
# Every step's gradient applied once; the pipeline emptied at both epochs' ends.
assert sync["applied"] == 120 and sync["drains"] == 2 and sync["in_flight_at_end"] == 0, sync
# Delayed Gradient Averaging, the default: each rank's own gradients of the 2 steps in flight
# applied on the agreed model every step but the first, the drains and the steps after them.
assert sync["own_gradient_first"] and 150 <= sync["own_updates"] <= 2 * 120, sync
assert s["finished"] and s["steps"] == 120, s
recs = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
start = [r for r in recs if r.get("event") == "start"]
assert start and start[0]["sync"] == {"mode": "stale_sync", "staleness": 2}, start
steps = [r["step"] for r in recs if "loss" in r]
assert steps == list(range(1, 121)), steps
print(f"  ok: 120 gradients applied, 2 drains, 120 step records in order; waited {sync['wait_s']:.4f} s for sums")
PY
dlh-report "$WORK/u" >/dev/null 2>&1 || fail "dlh-report of the stale-synchronous run"
grep -q "stale-synchronous, staleness 2 (120 gradients applied, own gradients first)" "$WORK/u/report.html" ||
  fail "the report does not say 'stale-synchronous, staleness 2 (120 gradients applied, own gradients first)'"
check "dlh-report: training: stale-synchronous, staleness 2 (120 gradients applied, own gradients first)"
d=$(max_diff "$(final_ckpt "$WORK/s")" "$(final_ckpt "$WORK/u")")
within "$d" 1e-4 && fail "staleness 2 ends within $d of the synchronous run: the gradients were not delayed"
check "staleness 2: another model than the synchronous run's (up to $d apart)"
spec "$WORK/s2p.json" '"sync": {"mode": "stale_sync", "staleness": 2, "own_gradient_first": false},'
run "$WORK/s2p.json" "$WORK/p" "$WORK/p.log"
[[ $(json_field "$WORK/p/summary.json" sync | tr -d ' ') == *"'own_updates':0"* ]] ||
  fail "own_gradient_first false: the ranks stepped with their own gradients"
d=$(max_diff "$(final_ckpt "$WORK/p")" "$(final_ckpt "$WORK/u")")
within "$d" 1e-4 && fail "own_gradient_first false ends within $d of the default: the own steps changed nothing"
check "own_gradient_first false: only the sums, late: another model (up to $d apart from the own steps' one)"
CKPT_STEPS=7 run "$WORK/s2.json" "$WORK/k" "$WORK/k.log"
[[ $(crc "$WORK/k") == $(crc "$WORK/u") ]] || fail "checkpoints every 7 steps changed the run's parameters"
check "checkpoints every 7 steps instead of 20: the same final parameters"

echo "resume with gradients in flight"
run "$WORK/s2.json" "$WORK/r" "$WORK/r1.log" --max-steps 50
ck50=$WORK/r/checkpoints/ckpt-000000050.h5
[[ $(h5ls -r "$ck50" | grep -c '^/in_flight/0000000[0-9]*/gradients') == 2 ]] &&
  h5ls -r "$ck50" | grep -q '^/in_flight/000000049/sums' ||
  { h5ls -r "$ck50"; fail "the checkpoint of step 50 does not hold the gradients of steps 48 and 49 in flight"; }
check "the checkpoint of step 50 holds the 2 summed gradients in flight (/in_flight/000000048, 000000049)"
[[ $(h5ls -r "$ck50" | grep -cE '^/in_flight/00000004[89]/own/[01] ') == 4 ]] ||
  { h5ls -r "$ck50"; fail "the checkpoint of step 50 does not hold both ranks' own gradients of steps 48 and 49"; }
check "and both ranks' own gradients of them (/in_flight/000000048/own/0 ... 000000049/own/1)"
run "$WORK/s2.json" "$WORK/r" "$WORK/r2.log"
[[ $(crc "$WORK/r") == $(crc "$WORK/u") ]] || fail "stopped at step 50 and resumed, the parameters differ"
h5diff "$(final_ckpt "$WORK/u")" "$(final_ckpt "$WORK/r")" /optimizer >/dev/null ||
  fail "stopped at step 50 and resumed, the optimizer state differs from the uninterrupted run's"
check "stopped at step 50 and resumed: the uninterrupted run's parameters and momenta, bit for bit"
# Another mode applies the gradients in flight at once; another rank count takes them as they are.
mkdir -p "$WORK/x/checkpoints" "$WORK/e/checkpoints"
cp "$ck50" "$WORK/x/checkpoints/"
cp "$ck50" "$WORK/e/checkpoints/"
run "$WORK/sync.json" "$WORK/x" "$WORK/x.log"
grep -q "applied the checkpoint's 2 gradient(s) in flight" "$WORK/x.log" ||
  { cat "$WORK/x.log"; fail "a synchronous run did not say it applied the gradients in flight"; }
[[ $(json_field "$WORK/x/summary.json" finished) == True ]] || fail "the synchronous resume did not finish"
check "a synchronous run resumed from it: applied the 2 gradients in flight, finished"
run3 "$WORK/s2.json" "$WORK/e"
grep -q "resumed from .*ckpt-000000050.h5 at step 50" "$WORK/e.log" &&
  [[ $(json_field "$WORK/e/summary.json" steps) == 120 ]] || { cat "$WORK/e.log"; fail "3 ranks did not resume from it"; }
grep -q "the checkpoint holds no own gradients of these 3 ranks: they step with the 2 sum(s) in flight instead" "$WORK/e.log" ||
  { cat "$WORK/e.log"; fail "3 ranks did not say they step with the sums in flight"; }
check "3 ranks resumed from it and finished (stepping with the 2 sums in flight: the own gradients were 2 ranks')"

echo "a signal at any step"
# SIGTERM to one rank (Slurm's preemption) early in a longer run: the checkpoint holds the
# gradients in flight, the run stops, and resumed it ends with the uninterrupted run's
# parameters. Only a rank gets the signal: a rank is a dlh-launch whose parent is its guard.
EPOCHS=30 spec "$WORK/long.json" '"sync": {"mode": "stale_sync", "staleness": 3},'
run "$WORK/long.json" "$WORK/l" "$WORK/l.log"
# A try held within the run's last steps proves nothing (signal_one_rank): made again.
signalled_run() {  # one try: 0 when it was held early enough to judge, 1 to try again
  rm -rf "$WORK/t"
  setsid mpirun -np 2 dlh-launch train "$WORK/long.json" --run-dir "$WORK/t" --progress plain --threads 1 \
    --keep 5 2>"$WORK/t.log" &
  local pid=$!
  if ! signal_one_rank TERM "$WORK/t" $pid; then
    wait $pid || { cat "$WORK/t.log"; fail "the run to be signalled failed"; }
    return 1
  fi
  if wait $pid; then
    ((HELD_STEP < 1800 - 10)) && fail "the run went on after SIGTERM (held at step $HELD_STEP)"
    return 1
  fi
}
tries=0
until signalled_run; do
  ((++tries < 5)) || fail "in 5 tries the run was never held before its last steps"
done
at=$(sed -n "s/.*SIGTERM\/SIGINT at step \([0-9]*\): checkpoint written.*/\1/p" "$WORK/t.log" | head -1)
[[ -n $at ]] || { cat "$WORK/t.log"; fail "no SIGTERM checkpoint (the run ended first?)"; }
run "$WORK/long.json" "$WORK/t" "$WORK/t2.log"
[[ $(crc "$WORK/t") == $(crc "$WORK/l") ]] ||
  fail "stopped by SIGTERM at step $at and resumed, the run ended with other parameters"
check "SIGTERM at step $at: checkpoint with the gradients in flight; resumed, the uninterrupted run's parameters"

echo "the example spec"
dlh-data import-fashion-mnist --out "$WORK/fm.h5" >/dev/null
/usr/bin/python3 - share/examples/fashion-mnist.json "$WORK/fm.h5" >"$WORK/fm.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["sync"] = {"mode": "stale_sync", "staleness": 1}
s["dataset"] = sys.argv[2]
print(json.dumps(s))
PY
run "$WORK/fm.json" "$WORK/fm" "$WORK/fm.log" --max-steps 40
/usr/bin/python3 - "$WORK/fm" <<'PY' || fail "the example spec's run"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["steps"] == 40 and s["sync"]["applied"] == 39 and s["sync"]["in_flight_at_end"] == 1, s.get("sync")
recs = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"loss"' in l]
assert len(recs) == 40, len(recs)
first, last = recs[0]["loss"], sum(r["loss"] for r in recs[-5:]) / 5
assert last < first, (first, last)
print(f"  ok: fashion-mnist.json with staleness 1: 40 steps, 39 applied and 1 in flight at --max-steps, loss {first:.3f} -> {last:.3f}")
PY

echo "bad input"
bad() {  # bad SYNC_JSON EXPECTED
  spec "$WORK/bad.json" "$1"
  out=$(dlh-launch train "$WORK/bad.json" --run-dir "$WORK/bad" 2>&1) && fail "accepted $1"
  [[ $out == *"$2"* && $(wc -l <<<"$out") == 1 ]] || fail "for $1: '$out', not '$2'"
  check "$out"
}
bad '"sync": {"mode": "stale_sync"},' "bad.json: sync.staleness: required"
bad '"sync": {"mode": "stale_sync", "staleness": -1},' "bad.json: sync.staleness: must be a non-negative integer, got -1"
bad '"sync": {"mode": "stale_sync", "staleness": 65},' "bad.json: sync.staleness: must be at most 64, got 65"
bad '"sync": {"mode": "sync", "staleness": 2},' "bad.json: sync.staleness: only with \"mode\": \"stale_sync\""
bad '"sync": {"mode": "stale_sync", "staleness": 2, "period": 4},' "bad.json: sync.period: only with \"mode\": \"local_sgd\""
bad '"sync": {"mode": "stale_sync", "staleness": 2, "own_gradient_first": 1},' "bad.json: sync.own_gradient_first: must be true or false, got 1"
bad '"sync": {"mode": "local_sgd", "period": 2, "own_gradient_first": true},' "bad.json: sync.own_gradient_first: only with \"mode\": \"stale_sync\""
