#!/bin/bash
# Elastic resume (issue 15): a checkpoint written by 2 ranks resumes on 3 and one written by
# 3 resumes on 2 (global batch 20: an uneven 7, 7, 6 split on 3 ranks), and both end with the
# parameters of the uninterrupted run on the first rank count within a float32 tolerance
# (below); the resumed run says so in one line, and no warning. A resume with another global
# batch (--batch-size, or a requeued job's DLH_PLAN of another shape) rescales the rate by
# linear scaling, says so in one line, keeps samples_seen exact and finishes; resumed again
# with that batch it keeps the rescaled rate.
source "$(dirname "$0")/common.bash"

dlh-data synthetic --out "$WORK/data.h5" --shape 1x12x12 --classes 5 --train 1200 --test 200 --seed 4 >/dev/null
# No dropout (its masks depend on the rank) and no batch norm (a rank normalises with its own
# slice's statistics): with neither, only the summation order depends on the rank count.
cat >"$WORK/spec.json" <<'JSON'
{
  "name": "elastic",
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
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
  "schedule": {"decay": "cosine"},
  "batch_size": 20,
  "epochs": 2,
  "seed": 11,
  "dataset": "data.h5"
}
JSON
# 1200 samples / 20 = 60 steps an epoch, 120 in all; the resumes start at step 100.
C=100

run() {  # run NP RUN_DIR LOG [extra options]
  local np=$1 dir=$2 log=$3; shift 3
  mpirun -np "$np" dlh-launch train "$WORK/spec.json" --run-dir "$dir" --progress plain \
    --threads 1 --checkpoint-steps 10 --keep 20 "$@" 2>"$log" || { cat "$log" >&2; fail "run $dir failed"; }
}
# final_ckpt, max_diff: common.bash.
# The tolerance, from float32 summation order. Another rank count regroups the global batch's
# per-sample gradients into other per-rank partial sums before the allreduce adds them, so a
# step's gradient is a reordered sum of n = 20 float32 terms: it may differ by up to about
# n x 2^-24 = 1.2e-6 of the sum of their magnitudes, and an update lr x g far smaller still
# (lr 0.05, |g| < 1 here). Each of the 20 steps after the resume then rounds parameters of
# magnitude below 1 (the largest is 0.55) to float32, 2^-24 x 1 = 6e-8 at most, so without
# amplification 20 steps drift apart by at most about 20 x 6e-8 = 1.2e-6; momentum and the
# loss's curvature amplify that over few steps only a little. Measured (this script, 2 cores,
# OpenBLAS 1 thread): 6.0e-8 (2 -> 3) and 3.0e-8 (3 -> 2) after 20 steps, one or two ulps of
# the largest parameters; resumed earlier on 3 ranks, 1.2e-7 after 60 steps and 6.3e-7 after
# 120. TOL = 1e-5 is 8x the unamplified bound and over 100x the measured difference, and
# still far below what a wrong resume gives (another cursor or rate: 1e-3 and more).
TOL=1e-5

elastic() {  # elastic FROM TO: FROM ranks uninterrupted, FROM ranks to step C then TO ranks
  local from=$1 to=$2 ref="$WORK/u$1" run="$WORK/e$1$2"
  [[ -d $ref ]] || run "$from" "$ref" "$ref.log"
  run "$from" "$run" "$run-1.log" --max-steps "$C"
  run "$to" "$run" "$run-2.log"
  grep -q "warning" "$run-2.log" && { cat "$run-2.log"; fail "$from -> $to: resume printed a warning"; }
  grep -q "checkpoint was written by $from ranks, resuming on $to with the same global batch 20" "$run-2.log" ||
    { cat "$run-2.log"; fail "$from -> $to: no line on the rank count"; }
  check "$(grep -o "checkpoint was written by.*" "$run-2.log" | cut -c1-110)..."
  [[ $(json_field "$run/summary.json" steps) == 120 && $(json_field "$run/summary.json" finished) == True ]] ||
    fail "$from -> $to: did not finish at step 120"
  local d
  d=$(max_diff "$(final_ckpt "$ref")" "$(final_ckpt "$run")")
  awk -v d="$d" -v t="$TOL" 'BEGIN { exit !(d <= t) }' ||
    fail "$from -> $to: parameters differ by up to $d from the $from-rank run, more than $TOL"
  check "$from -> $to: final /params within $d of the uninterrupted $from-rank run's (tolerance $TOL)"
}

echo "same global batch, another rank count"
elastic 2 3
elastic 3 2

attr() { h5dump -a "/$2" "$1" | sed -n 's/.*(0): *//p' | tr -d '"'; }  # attr FILE NAME

echo "another global batch"
# From the 2-rank run's checkpoint of step 100: epoch 2, step 40, 2000 samples seen.
mkdir -p "$WORK/b/checkpoints" "$WORK/p/checkpoints"
cp "$WORK/e23/checkpoints/ckpt-000000100.h5" "$WORK/b/checkpoints/"
cp "$WORK/e23/checkpoints/ckpt-000000100.h5" "$WORK/p/checkpoints/"
run 2 "$WORK/b" "$WORK/b1.log" --batch-size 30 --max-steps 105
# Position 40 x 20 = 800 of epoch 2; batch 30 next starts at 810: step 27 of 40 (step 100 is
# epoch 2's 67th of 80 at batch 30, so the run ends at step 100 + 13 = 113).
want="global batch 20 -> 30, lr 0.05 -> 0.075 (linear scaling, the plan's rule: lr x 30/20); cursor epoch 2 step 40 -> epoch 2 step 27, samples_seen kept"
grep -qF "$want" "$WORK/b1.log" || { cat "$WORK/b1.log"; fail "no line on the batch and rate"; }
check "$want"
# Resumed again with the new batch (a requeue of the same command): the rescaled rate stays.
run 2 "$WORK/b" "$WORK/b2.log" --batch-size 30
grep -q "global batch 20 ->" "$WORK/b2.log" && { cat "$WORK/b2.log"; fail "second resume changed the batch again"; }
grep -q "lr 0.075 kept from the checkpoint for global batch 30 (this run's own setting is 0.05" "$WORK/b2.log" ||
  { cat "$WORK/b2.log"; fail "second resume did not keep the rescaled rate"; }
[[ $(json_field "$WORK/b/summary.json" lr) == 0.075 ]] || fail "lr $(json_field "$WORK/b/summary.json" lr), not 0.075"
[[ $(json_field "$WORK/b/summary.json" finished) == True && $(json_field "$WORK/b/summary.json" steps) == 113 ]] ||
  fail "did not finish at step 113: $(json_field "$WORK/b/summary.json" steps)"
last=$(final_ckpt "$WORK/b")
[[ $(attr "$last" samples_seen) == 2390 && $(attr "$last" global_batch) == 30 ]] ||
  fail "samples_seen $(attr "$last" samples_seen), global_batch $(attr "$last" global_batch) at the end"
check "finished at step 113 with lr 0.075 (kept on the second resume), samples_seen 2000 + 13 x 30 = 2390"

# A requeued --dlh-auto job whose plan has another shape: 3 ranks, global batch 40, and the
# plan's linear scaling of the spec (0.05 x 40/20 = 0.1), which the rescale agrees with.
plan='{"format_version": 1, "global_batch": 40, "lr": 0.1, "allocation": {"parts": [{"gpu": "cpu", "nodes": 1, "gpus_per_node": 3, "per_gpu_batch": 14}], "nodes": 1, "gpus": 3, "tasks_per_node": 3}}'
DLH_PLAN=$plan run 3 "$WORK/p" "$WORK/p.log"
want="global batch 20 -> 40, lr 0.05 -> 0.1 (linear scaling, the plan's rule: lr x 40/20)"
grep -qF "$want" "$WORK/p.log" || { cat "$WORK/p.log"; fail "no line on the plan's batch and rate"; }
grep -q "checkpoint was written by 2 ranks, resuming on 3 (and another global batch" "$WORK/p.log" ||
  { cat "$WORK/p.log"; fail "no line on the rank count"; }
[[ $(json_field "$WORK/p/summary.json" finished) == True && $(json_field "$WORK/p/summary.json" steps) == 110 ]] ||
  fail "plan resume did not finish at step 110"
[[ $(attr "$(final_ckpt "$WORK/p")" samples_seen) == 2400 ]] || fail "plan resume: samples_seen is not 2000 + 10 x 40"
check "DLH_PLAN of 3 ranks x batch 40: $want; finished at step 110"

echo "another seed, another data set"
# The seed orders every epoch's samples: resumed with another one, the run would go on as a
# different run. The checkpoint's is kept and said, and the run ends as the uninterrupted
# 2-rank one (the step-100 checkpoint of e23 is that run's, written by its 2 ranks).
mkdir -p "$WORK/s/checkpoints" "$WORK/d/checkpoints"
cp "$WORK/e23/checkpoints/ckpt-000000100.h5" "$WORK/s/checkpoints/"
cp "$WORK/e23/checkpoints/ckpt-000000100.h5" "$WORK/d/checkpoints/"
sed 's/"seed": 11/"seed": 12/' "$WORK/spec.json" >"$WORK/spec12.json"
mpirun -np 2 dlh-launch train "$WORK/spec12.json" --run-dir "$WORK/s" --progress plain --threads 1 \
  2>"$WORK/s.log" || { cat "$WORK/s.log" >&2; fail "resume with another seed failed"; }
grep -q "seed 11 kept from the checkpoint (this run's own setting is 12" "$WORK/s.log" ||
  { cat "$WORK/s.log"; fail "no line on the seed kept"; }
d=$(max_diff "$(final_ckpt "$WORK/u2")" "$(final_ckpt "$WORK/s")")
awk -v d="$d" -v t="$TOL" 'BEGIN { exit !(d <= t) }' ||
  fail "resumed with spec seed 12: parameters differ by up to $d from the uninterrupted run's"
check "seed 11 kept from the checkpoint; final /params within $d of the uninterrupted run's"
# A training set with fewer steps an epoch than the checkpoint's cursor: another data set.
# Refused (exit 3, the checkpoint's), where it once counted the epoch done and "finished".
dlh-data synthetic --out "$WORK/small.h5" --shape 1x12x12 --classes 5 --train 200 --test 40 --seed 4 >/dev/null
expect_fail 3 "ckpt-000000100.h5: its loader stands at step 41 of epoch 2, but .*small.h5 has 200 training samples, 10 steps of 20 an epoch: not the data set the run trained on" \
  mpirun -np 2 dlh-launch train "$WORK/spec.json" --run-dir "$WORK/d" --progress plain --threads 1 \
  --data "$WORK/small.h5"
[[ ! -e $WORK/d/summary.json ]] || fail "the refused resume wrote a summary"
echo "elastic: all checks passed"
