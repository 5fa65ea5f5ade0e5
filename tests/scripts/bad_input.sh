#!/bin/bash
# Bad input to dlh-launch gets one clear line naming the file and field, a non-zero exit
# code, and leaves nothing behind (2 and 3 ranks under mpirun).
source "$(dirname "$0")/common.bash"

dlh-data synthetic --out "$WORK/data.h5" --shape 1x8x8 --classes 4 --train 200 --test 40 >/dev/null
good() {
  cat <<'JSON'
{
  "input": {"channels": 1, "height": 8, "width": 8},
  "classes": 4,
  "layers": [{"type": "conv2d", "filters": 4, "kernel": 3}, {"type": "relu"},
             {"type": "flatten"}, {"type": "dense", "units": 4}],
  "optimizer": {"type": "sgd", "lr": 0.1},
  "batch_size": 20, "epochs": 1, "dataset": "data.h5"
}
JSON
}
good >"$WORK/good.json"
good | sed 's/"kernel": 3/"kernel": -3/' >"$WORK/neg.json"
good | sed 's/"units": 4}/"units": 5}/' >"$WORK/classes.json"
good | sed 's/"data.h5"/"missing.h5"/' >"$WORK/nodata.json"
good | sed 's/"lr": 0.1/"lr": 0.1, "nesterov": "yes"/' >"$WORK/type.json"
printf '{"input": ' >"$WORK/broken.json"
# 100,000 levels of '[' crashed every tool (recursive printing); a FIFO with no writer hung
# the reader. Both must give one line and exit 2, at once (timeout: a hang fails the test).
python3 -c 'print("[" * 100000 + "]" * 100000)' >"$WORK/deep.json"
mkfifo "$WORK/fifo.json"

for np in 2 3; do
  echo "$np ranks"
  L="mpirun -np $np dlh-launch train"
  expect_fail 2 "neg.json: layers\[0\].kernel: must be a positive integer, got -3" $L "$WORK/neg.json" --run-dir "$WORK/r"
  [[ $(grep -c "^dlh-launch" "$WORK/err.txt") -eq 1 ]] || fail "more than one line for one error"
  expect_fail 2 "classes.json: layers: the last layer must output 4 values" $L "$WORK/classes.json" --run-dir "$WORK/r"
  expect_fail 2 "missing.h5" $L "$WORK/nodata.json" --run-dir "$WORK/r"
  expect_fail 2 "type.json: optimizer.nesterov" $L "$WORK/type.json" --run-dir "$WORK/r"
  expect_fail 2 "broken.json: not valid JSON" $L "$WORK/broken.json" --run-dir "$WORK/r"
  expect_fail 2 "nope.json: cannot read" $L "$WORK/nope.json" --run-dir "$WORK/r"
  expect_fail 2 "deep.json: not valid JSON: arrays and objects nested deeper than 64 levels" \
    timeout 60 $L "$WORK/deep.json" --run-dir "$WORK/r"
  expect_fail 2 "fifo.json: cannot read: not a regular file" timeout 60 $L "$WORK/fifo.json" --run-dir "$WORK/r"
  expect_fail 2 "unrecognised option '--bogus'" $L "$WORK/good.json" --bogus
  expect_fail 2 "keep: must be at least 1" $L "$WORK/good.json" --keep 0
  expect_fail 2 "progress: must be one of" $L "$WORK/good.json" --progress fancy
  # The batch is named where it came from: here the option, not the spec.
  expect_fail 2 "dlh-launch: error: --batch-size: 1 is smaller than the number of ranks" $L "$WORK/good.json" --batch-size 1 --run-dir "$WORK/r"
done
# A count given as 0 is refused: it was taken as "not given" (the spec's epochs and batch, no
# step limit), so a typo trained a whole run of another length; nan seconds were taken too.
for option in epochs batch-size max-steps; do
  expect_fail 2 "^dlh-launch: --$option: must be at least 1, got 0" \
    dlh-launch train "$WORK/good.json" --run-dir "$WORK/r0" --$option 0
done
expect_fail 2 "checkpoint-seconds: must be a number" \
  dlh-launch train "$WORK/good.json" --run-dir "$WORK/r0" --checkpoint-seconds nan
# A run folder that is a file, or that holds a folder where the run writes summary.json: one
# line naming the option before any step (it was the library's "filesystem error", or a
# failure at the end of the whole run).
touch "$WORK/afile"
expect_fail 2 "run folder $WORK/afile (--run-dir): cannot make $WORK/afile/checkpoints: Not a directory" \
  dlh-launch train "$WORK/good.json" --run-dir "$WORK/afile"
mkdir -p "$WORK/rsum/summary.json"
expect_fail 2 "run folder $WORK/rsum (--run-dir): $WORK/rsum/summary.json is a folder" \
  dlh-launch train "$WORK/good.json" --run-dir "$WORK/rsum"
[[ ! -e $WORK/r0 ]] || fail "a refused count made a run folder"
# A data set without a test split trains without evaluations, and says so once (its accuracy
# and loss were printed as "-nan%").
dlh-data synthetic --out "$WORK/notest.h5" --shape 1x8x8 --classes 4 --train 200 --test 0 >/dev/null
dlh-launch train "$WORK/good.json" --data "$WORK/notest.h5" --run-dir "$WORK/notest" --epochs 2 \
  --progress none >"$WORK/notest.txt" 2>&1 || { cat "$WORK/notest.txt"; fail "a data set without test samples"; }
[[ $(grep -c "has no test samples: no evaluation" "$WORK/notest.txt") -eq 1 ]] &&
  ! grep -qi "nan" "$WORK/notest.txt" || { cat "$WORK/notest.txt"; fail "no test split: not one note, or a NaN"; }
check "$(grep 'no test samples' "$WORK/notest.txt")"
# The plan reaches a job started with --export=NONE as SLURM_SPANK_DLH_PLAN (issue 11,
# finding 7): dlh-launch reads it when DLH_PLAN is absent, and names it when it is wrong.
expect_fail 2 "SLURM_SPANK_DLH_PLAN: not valid JSON" \
  env SLURM_SPANK_DLH_PLAN='{"global_batch":' mpirun -np 1 dlh-launch train "$WORK/good.json" --run-dir "$WORK/r"
expect_fail 2 "fifo.json: cannot read: not a regular file" \
  timeout 60 mpirun -np 1 dlh-launch train "$WORK/good.json" --plan "$WORK/fifo.json" --run-dir "$WORK/r"
[[ ! -e "$WORK/r/checkpoints" ]] || [[ -z $(ls "$WORK/r/checkpoints") ]] || fail "a failed start left checkpoints"
check "no checkpoints written by failed starts"

echo "checkpoint from another model"
mpirun -np 2 dlh-launch train "$WORK/good.json" --run-dir "$WORK/m" --progress none
good | sed 's/"filters": 4/"filters": 6/' >"$WORK/other.json"
expect_fail 3 "does not match .*other.json" mpirun -np 2 dlh-launch train "$WORK/other.json" --run-dir "$WORK/m"
# A plan made for one spec, given to a run of another: refused before anything is written
# (the run would take the planned batch and rate, and teach the store the wrong model); a
# copy of the planned spec is the same spec.
dlh-estimate recommend "$WORK/good.json" --samples 200 --cluster "$(dirname "$0")/../../share/cluster/local.json" --json \
  >"$WORK/good-plan.json" 2>/dev/null || fail "recommend --json for good.json"
expect_fail 2 "DLH_PLAN: spec: the plan was made for $WORK/good.json, but this run trains $WORK/other.json, a different spec" \
  env DLH_PLAN="$(cat "$WORK/good-plan.json")" dlh-launch train "$WORK/other.json" --run-dir "$WORK/p1"
[[ ! -e $WORK/p1 ]] || fail "the refused plan left a run folder"
cp "$WORK/good.json" "$WORK/good-copy.json"
env DLH_PLAN="$(cat "$WORK/good-plan.json")" dlh-launch train "$WORK/good-copy.json" --run-dir "$WORK/p2" \
  --max-steps 1 --progress none >"$WORK/p2.txt" 2>&1 || { cat "$WORK/p2.txt"; fail "a copy of the planned spec refused"; }
check "a copy of the planned spec trains under its plan"
