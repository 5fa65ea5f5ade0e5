#!/bin/bash
# Local SGD (issue 47, "sync": {"mode": "local_sgd"} in the spec): every rank steps on its own
# batch and the models are averaged every `period` steps, at each epoch's end and at the last
# step. Checked here on 2 ranks:
# - period 1 is synchronous SGD in real arithmetic (SGD with momentum is linear in the
#   gradient, and the average is weighted by each rank's share): the final parameters of the
#   two runs agree within float32 rounding;
# - period 4 after 8 synchronous steps: as many averages as the cursor says, another model than
#   the synchronous run's, and a run stopped at step 100 and resumed ends bit-identical to the
#   uninterrupted one; a SIGTERM in the middle of a period waits for the period's end;
# - the example spec (Fashion-MNIST, batch norm and dropout) trains with it;
# - a bad "sync" gets one line naming the file and the field.
source "$(dirname "$0")/common.bash"

dlh-data synthetic --out "$WORK/data.h5" --shape 1x12x12 --classes 5 --train 1200 --test 200 --seed 4 >/dev/null
spec() {  # spec FILE SYNC_JSON: the elastic test's network (no dropout, no batch norm)
  cat >"$1" <<JSON
{
  "name": "local",
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
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4},
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
spec "$WORK/p1.json" '"sync": {"mode": "local_sgd", "period": 1},'
spec "$WORK/p4.json" '"sync": {"mode": "local_sgd", "period": 4, "warmup_steps": 8},'

run() {  # run SPEC RUN_DIR LOG [extra options]
  local spec=$1 dir=$2 log=$3; shift 3
  mpirun -np 2 dlh-launch train "$spec" --run-dir "$dir" --progress plain --threads 1 \
    --checkpoint-steps 20 --keep 20 "$@" 2>"$log" || { cat "$log" >&2; fail "run $dir failed"; }
}

echo "period 1 is synchronous SGD"
run "$WORK/sync.json" "$WORK/s" "$WORK/s.log"
run "$WORK/p1.json" "$WORK/l1" "$WORK/l1.log"
grep -q "local SGD: every rank steps on its own batch; the models are averaged every 1 step(s)" "$WORK/l1.log" ||
  { cat "$WORK/l1.log"; fail "no line on local SGD"; }
# 120 steps of float32 rounding apart (a rank's own mean gradient, then the weighted average of
# the updates, against one summed gradient): the elastic test's argument gives ~1e-6; a wrong
# weight or loss scale moves parameters by 1e-2 and more.
d=$(max_diff "$(final_ckpt "$WORK/s")" "$(final_ckpt "$WORK/l1")")
within "$d" 1e-5 || fail "period 1: parameters differ by $d from the synchronous run's, more than 1e-5"
check "period 1: final /params within $d of the synchronous run's (tolerance 1e-5)"
# On 3 ranks the batch of 20 splits 7, 7, 6: the average's weights are the shares.
run3() { mpirun -np 3 dlh-launch train "$1" --run-dir "$2" --progress none --threads 1 2>"$2.log" ||
  { cat "$2.log" >&2; fail "run $2 failed"; }; }
run3 "$WORK/sync.json" "$WORK/s3"
run3 "$WORK/p1.json" "$WORK/l3"
d=$(max_diff "$(final_ckpt "$WORK/s3")" "$(final_ckpt "$WORK/l3")")
within "$d" 1e-5 || fail "period 1 on 3 ranks (7, 7, 6): $d from the synchronous run, more than 1e-5"
check "period 1 on 3 ranks (batches 7, 7, 6: weights 0.35, 0.35, 0.3): within $d of the synchronous run's"

echo "period 4 after 8 synchronous steps"
run "$WORK/p4.json" "$WORK/u" "$WORK/u.log"
/usr/bin/python3 - "$WORK/u/summary.json" <<'PY' || fail "summary.json's sync"
import json, sys
s = json.load(open(sys.argv[1]))
sync = s["sync"]
# 60 steps an epoch; local from step 9; an average where the epoch's step count is a
# multiple of 4 (the epoch's end included) or at the last step.
want = sum(1 for step in range(9, 121) if (step - 1) % 60 + 1 in range(4, 61, 4) or step == 120)
assert sync["mode"] == "local_sgd" and sync["period"] == 4 and sync["warmup_steps"] == 8, sync
assert sync["averages"] == want, (sync["averages"], want)
assert s["finished"] and s["steps"] == 120, s
print(f"  ok: {want} model averages (every 4 steps of each epoch from step 9), {sync['average_s']:.3f} s in all")
PY
dlh-report "$WORK/u" >/dev/null 2>&1 || fail "dlh-report of the local SGD run"
grep -q "local SGD, period 4 (28 model averages)" "$WORK/u/report.html" ||
  fail "the report does not say 'local SGD, period 4 (28 model averages)'"
check "dlh-report: training: local SGD, period 4 (28 model averages)"
d=$(max_diff "$(final_ckpt "$WORK/s")" "$(final_ckpt "$WORK/u")")
within "$d" 1e-4 && fail "period 4 ends within $d of the synchronous run: the ranks did not step on their own"
check "period 4: another model than the synchronous run's (up to $d apart)"
run "$WORK/p4.json" "$WORK/r" "$WORK/r1.log" --max-steps 100
run "$WORK/p4.json" "$WORK/r" "$WORK/r2.log"
h5diff "$(final_ckpt "$WORK/u")" "$(final_ckpt "$WORK/r")" /params >/dev/null ||
  fail "stopped at step 100 and resumed, the parameters differ from the uninterrupted run's"
h5diff "$(final_ckpt "$WORK/u")" "$(final_ckpt "$WORK/r")" /optimizer >/dev/null ||
  fail "stopped at step 100 and resumed, the optimizer state differs from the uninterrupted run's"
check "stopped at step 100 and resumed: the final parameters and momenta are the uninterrupted run's, bit for bit"
# The checkpoint holds the whole model in the usual layout: a synchronous run resumes from it.
mkdir -p "$WORK/x/checkpoints"
cp "$WORK/r/checkpoints/ckpt-000000100.h5" "$WORK/x/checkpoints/"
run "$WORK/sync.json" "$WORK/x" "$WORK/x.log"
[[ $(json_field "$WORK/x/summary.json" steps) == 120 && $(json_field "$WORK/x/summary.json" finished) == True ]] ||
  fail "a synchronous run did not resume from the local SGD checkpoint of step 100"
check "a synchronous run resumed from the local SGD checkpoint of step 100 and finished"

echo "a signal inside a period"
# Period 7: averages where the epoch's step count (of 60) is a multiple of 7, and at its end.
# SIGUSR1 to one rank (as Slurm's warning before the time limit) early in the run: the checkpoint
# waits for the period's end, and the run goes on to the uninterrupted run's parameters, bit for
# bit. Only a rank gets the signal: a rank is a dlh-launch whose parent is its guard, also one.
EPOCHS=60 spec "$WORK/p7.json" '"sync": {"mode": "local_sgd", "period": 7},'
run "$WORK/p7.json" "$WORK/p7" "$WORK/p7.log"
# A try held within the run's last 3 periods proves nothing (signal_one_rank): made again.
signalled_run() {  # one try: 0 when it was held early enough to judge, 1 to try again
  rm -rf "$WORK/t"
  setsid mpirun -np 2 dlh-launch train "$WORK/p7.json" --run-dir "$WORK/t" --progress plain --threads 1 --keep 1000 \
    2>"$WORK/t.log" &
  local pid=$! rc=0
  signal_one_rank USR1 "$WORK/t" $pid || rc=1
  wait $pid || { cat "$WORK/t.log"; fail "the signalled run failed"; }
  ((rc == 0 && HELD_STEP < 3600 - 3 * 7))
}
tries=0
until signalled_run; do
  ((++tries < 5)) || fail "in 5 tries the run was never held before its last 3 periods"
done
at=$(sed -n "s/.*SIGUSR1 at step \([0-9]*\): checkpoint written.*/\1/p" "$WORK/t.log" | head -1)
[[ -n $at ]] || { cat "$WORK/t.log"; fail "no SIGUSR1 checkpoint (the run ended first?)"; }
(( at % 60 % 7 == 0 )) || fail "SIGUSR1's checkpoint at step $at, inside a period"
[[ $(json_field "$WORK/t/summary.json" param_crc32) == $(json_field "$WORK/p7/summary.json" param_crc32) ]] ||
  fail "the run with a SIGUSR1 checkpoint ended with other parameters than the uninterrupted run"
check "SIGUSR1 inside a period (held at step $HELD_STEP, try $((tries + 1))): checkpoint at step $at (the period's end); the run ended with the uninterrupted run's parameters"
# That checkpoint holds the averaged model: resumed from it, the run ends where the others did.
mkdir -p "$WORK/v/checkpoints"
cp "$WORK/t/checkpoints/ckpt-$(printf %09d "$at").h5" "$WORK/v/checkpoints/"
run "$WORK/p7.json" "$WORK/v" "$WORK/v.log"
[[ $(json_field "$WORK/v/summary.json" param_crc32) == $(json_field "$WORK/p7/summary.json" param_crc32) ]] ||
  fail "resumed from the SIGUSR1 checkpoint of step $at, the run ended with other parameters"
check "resumed from that checkpoint: the uninterrupted run's parameters"

echo "the example spec"
dlh-data import-fashion-mnist --out "$WORK/fm.h5" >/dev/null
/usr/bin/python3 - share/examples/fashion-mnist.json "$WORK/fm.h5" >"$WORK/fm.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["sync"] = {"mode": "local_sgd", "period": 8, "warmup_steps": 4}
s["dataset"] = sys.argv[2]
print(json.dumps(s))
PY
run "$WORK/fm.json" "$WORK/fm" "$WORK/fm.log" --max-steps 40
/usr/bin/python3 - "$WORK/fm" <<'PY' || fail "the example spec's run"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["steps"] == 40 and s["sync"]["averages"] == 5, s.get("sync")
recs = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"loss"' in l]
first, last = recs[0]["loss"], sum(r["loss"] for r in recs[-5:]) / 5
assert last < first, (first, last)
print(f"  ok: fashion-mnist.json with local SGD (period 8): 40 steps, 5 averages, loss {first:.3f} -> {last:.3f}")
PY

echo "bad input"
bad() {  # bad SYNC_JSON EXPECTED
  spec "$WORK/bad.json" "$1"
  out=$(dlh-launch train "$WORK/bad.json" --run-dir "$WORK/bad" 2>&1) && fail "accepted $1"
  [[ $out == *"$2"* && $(wc -l <<<"$out") == 1 ]] || fail "for $1: '$out', not '$2'"
  check "$out"
}
bad '"sync": {"mode": "local_sgd"},' "bad.json: sync.period: required"
bad '"sync": {"mode": "local_sgd", "period": 0},' "bad.json: sync.period: must be a positive integer, got 0"
bad '"sync": {"mode": "sync", "period": 4},' "bad.json: sync.period: only with \"mode\": \"local_sgd\""
bad '"sync": {"mode": "gossip"},' "bad.json: sync.mode: must be one of"
bad '"sync": {"mode": "local_sgd", "period": 2, "every": 3},' "bad.json: sync: unknown key \"every\""
