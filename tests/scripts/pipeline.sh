#!/bin/bash
# Pipeline model parallelism (issue 47, "parallel": {"pipeline_stages": P, "micro_batches": M}
# in the spec): the layers cut into P stages, one rank each, the ranks replicas of the pipeline,
# GPipe's schedule. Checked here:
# - a network without dropout or batch norm ends with the unpipelined run's parameters within
#   1e-5: 2 stages on 2 ranks and 3 stages on 3 ranks against 1 rank, 2 stages x 2 replicas
#   against 2 ranks;
# - checkpoints hold the whole model in the usual layout: a pipelined run stopped at step 50
#   and resumed ends bit-identical; an unpipelined run resumes from a pipelined checkpoint and
#   the reverse; summary.json's param_crc32 is the whole model's;
# - the example spec (Fashion-MNIST, batch norm and dropout) trains pipelined;
# - bad input gets one line naming the file and the field.
source "$(dirname "$0")/common.bash"

dlh-data synthetic --out "$WORK/data.h5" --shape 1x12x12 --classes 5 --train 1200 --test 200 --seed 4 >/dev/null
spec() {  # spec FILE PARALLEL_JSON: local_sgd.sh's network with one more dense layer
  cat >"$1" <<JSON
{
  "name": "pipe",
  "input": {"channels": 1, "height": 12, "width": 12},
  "classes": 5,
  "layers": [
    {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
    {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2},
    {"type": "flatten"},
    {"type": "dense", "units": 32},
    {"type": "relu"},
    {"type": "dense", "units": 16},
    {"type": "relu"},
    {"type": "dense", "units": 5}
  ],
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4},
  "schedule": {"decay": "cosine"},
  "batch_size": 20,
  "epochs": 2,
  "seed": 11,
  $2
  "dataset": "$WORK/data.h5"
}
JSON
}
spec "$WORK/plain.json" ""
spec "$WORK/p2.json" '"parallel": {"pipeline_stages": 2, "micro_batches": 4},'
spec "$WORK/p3.json" '"parallel": {"pipeline_stages": 3, "micro_batches": 5},'

run() {  # run RANKS SPEC RUN_DIR [extra options]
  local n=$1 spec=$2 dir=$3; shift 3
  mpirun -np "$n" dlh-launch train "$spec" --run-dir "$dir" --progress plain --threads 1 \
    --checkpoint-steps 50 --keep 20 "$@" 2>"$dir.log" || { cat "$dir.log" >&2; fail "run $dir failed"; }
}
crc() { json_field "$1/summary.json" param_crc32; }

echo "pipelined runs end with the unpipelined run's parameters"
run 1 "$WORK/plain.json" "$WORK/one"
run 2 "$WORK/p2.json" "$WORK/two"
grep -q "pipeline: 2 stages x 1 replica(s), 4 micro-batches a step" "$WORK/two.log" ||
  { cat "$WORK/two.log"; fail "no line on the pipeline"; }
grep -q "rank 1 on .*cpu, pipeline stage 2 of 2 (layers [0-9]*-8)" "$WORK/two.log" ||
  { cat "$WORK/two.log"; fail "rank 1 does not say which stage it holds"; }
# The same global mean gradient, summed over 4 micro-batches of 5 instead of one batch of 20:
# float32 rounding; a wrong scale or a lost micro-batch moves parameters by 1e-2 and more.
d=$(max_diff "$(final_ckpt "$WORK/one")" "$(final_ckpt "$WORK/two")")
within "$d" 1e-5 || fail "2 stages: parameters differ by $d from the unpipelined run's, more than 1e-5"
check "2 stages, 4 micro-batches: final /params within $d of the 1-rank run's (tolerance 1e-5)"
run 3 "$WORK/p3.json" "$WORK/three"
d=$(max_diff "$(final_ckpt "$WORK/one")" "$(final_ckpt "$WORK/three")")
within "$d" 1e-5 || fail "3 stages: parameters differ by $d from the unpipelined run's"
check "3 stages, 5 micro-batches: within $d of the 1-rank run's"
run 2 "$WORK/plain.json" "$WORK/dp"
run 4 "$WORK/p2.json" "$WORK/four"
grep -q "pipeline: 2 stages x 2 replica(s)" "$WORK/four.log" || { cat "$WORK/four.log"; fail "no 2 replicas"; }
d=$(max_diff "$(final_ckpt "$WORK/dp")" "$(final_ckpt "$WORK/four")")
within "$d" 1e-5 || fail "2 stages x 2 replicas: $d from the 2-rank data-parallel run's"
check "2 stages x 2 replicas on 4 ranks: within $d of the 2-rank data-parallel run's"

echo "checkpoints hold the whole model"
n=$(h5ls -r "$(final_ckpt "$WORK/two")" | grep -c '^/params/.*Dataset')
[[ $n == 8 ]] || fail "the pipelined checkpoint holds $n parameter arrays, not the 8 of the network"
check "the 2-stage run's checkpoint holds all 8 parameter arrays (both stages)"
run 2 "$WORK/p2.json" "$WORK/r" --max-steps 50
run 2 "$WORK/p2.json" "$WORK/r"
[[ $(crc "$WORK/r") == $(crc "$WORK/two") ]] || fail "stopped at step 50 and resumed, the pipelined run ended elsewhere"
check "pipelined, stopped at step 50 and resumed: the uninterrupted run's parameters, bit for bit"
# A run resumed after its last step trains nothing: its checksum is the file's, over the whole
# model on one rank, which the pipeline's combined checksum must equal.
mkdir -p "$WORK/u/checkpoints" "$WORK/v/checkpoints"
cp "$(final_ckpt "$WORK/two")" "$WORK/u/checkpoints/"
run 1 "$WORK/plain.json" "$WORK/u"
[[ $(crc "$WORK/u") == $(crc "$WORK/two") ]] ||
  fail "param_crc32 $(crc "$WORK/two") of the pipelined run is not its model's ($(crc "$WORK/u") on one rank)"
check "summary.json's param_crc32 is the whole model's: $(crc "$WORK/two") on one rank too"
cp "$WORK/one/checkpoints/ckpt-000000050.h5" "$WORK/v/checkpoints/"
run 2 "$WORK/p2.json" "$WORK/v"
grep -q "resumed from .*ckpt-000000050.h5 at step 50" "$WORK/v.log" || fail "the pipeline did not resume an unpipelined checkpoint"
d=$(max_diff "$(final_ckpt "$WORK/one")" "$(final_ckpt "$WORK/v")")
within "$d" 1e-5 || fail "resumed pipelined from the unpipelined step 50: $d from the unpipelined run"
mkdir -p "$WORK/w/checkpoints"
cp "$WORK/r/checkpoints/ckpt-000000050.h5" "$WORK/w/checkpoints/"
run 1 "$WORK/plain.json" "$WORK/w"
d2=$(max_diff "$(final_ckpt "$WORK/one")" "$(final_ckpt "$WORK/w")")
within "$d2" 1e-5 || fail "resumed unpipelined from the pipelined step 50: $d2 from the unpipelined run"
check "unpipelined step 50 resumed as a pipeline ($d) and pipelined step 50 resumed on one rank ($d2): the unpipelined run's parameters"

echo "a network over a memory cap is planned as a pipeline, and the plan trains"
# The local cluster's GPUs capped at 300 kB (270 kB usable) and the job at 2 of them: the whole
# network needs 421 kB at batch 10 a GPU (dlh-estimate features --batch 10); a stage of the
# replica's 20 samples in 8 micro-batches fits.
dlh-estimate recommend "$WORK/plain.json" --cluster share/cluster/local.json --samples 1200 \
  --memory-cap 0.0003 --max-gpus 2 >"$WORK/rec.txt" 2>&1 || { cat "$WORK/rec.txt"; fail "recommend under the cap"; }
grep -q "^layout: pipeline of 2 stages, 8 micro-batches (bubble [0-9]*% of a step), .*no GPU holds the whole network with its batch" "$WORK/rec.txt" ||
  { cat "$WORK/rec.txt"; fail "recommend did not plan a pipeline under the memory cap"; }
check "$(grep '^layout:' "$WORK/rec.txt")"
dlh-estimate recommend "$WORK/plain.json" --cluster share/cluster/local.json --samples 1200 \
  --memory-cap 0.0003 --max-gpus 2 --json >"$WORK/plan.json"
/usr/bin/python3 - "$WORK/plan.json" <<'PY' || fail "the plan's stage times"
import json, sys
busy = json.load(open(sys.argv[1]))["parallel"]["stage_busy_s"]
assert len(busy) == 2 and min(busy) > 0, busy
PY
run 2 "$WORK/plain.json" "$WORK/planned" --plan "$WORK/plan.json" --max-steps 20
grep -q "pipeline: 2 stages x 1 replica(s), 8 micro-batches a step" "$WORK/planned.log" ||
  { cat "$WORK/planned.log"; fail "the planned pipeline was not trained"; }
check "the plan's pipeline trained: $(grep -o 'pipeline: 2 stages.*a step' "$WORK/planned.log")"

echo "the example spec"
dlh-data import-fashion-mnist --out "$WORK/fm.h5" >/dev/null
/usr/bin/python3 - share/examples/fashion-mnist.json "$WORK/fm.h5" >"$WORK/fm.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["parallel"] = {"pipeline_stages": 2, "micro_batches": 4}
s["dataset"] = sys.argv[2]
print(json.dumps(s))
PY
run 2 "$WORK/fm.json" "$WORK/fm" --max-steps 30
/usr/bin/python3 - "$WORK/fm" <<'PY' || fail "the example spec's run"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
par = s["parallel"]
assert s["steps"] == 30 and (par["pipeline_stages"], par["micro_batches"], par["replicas"]) == (2, 4, 1), par
assert par["bubble_predicted"] == 0.2 and 0 < par["bubble_measured"] < 1, par
assert s["threads_per_rank"] == 1, s["threads_per_rank"]  # --threads 1
# Each stage's own work a step: the first stage holds both convolutions, several times the
# second's dense layers (the bubble above GPipe's is this imbalance).
busy = par["stage_busy_s_per_step"]
assert len(busy) == 2 and busy[0] > 2 * busy[1] > 0, busy
recs = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"loss"' in l]
first, last = recs[0]["loss"], sum(r["loss"] for r in recs[-5:]) / 5
assert last < first, (first, last)
print(f"  ok: fashion-mnist.json in 2 stages: 30 steps, loss {first:.3f} -> {last:.3f}; "
      f"bubble {par['bubble_measured']:.2f} measured, {par['bubble_predicted']:.2f} predicted; "
      f"stages busy {busy[0] * 1e3:.1f} / {busy[1] * 1e3:.1f} ms a step")
PY
dlh-report "$WORK/fm" >/dev/null 2>&1 || fail "dlh-report of the pipelined run"
grep -q "pipeline of 2 stages x 1 replica(s), 4 micro-batches (bubble [0-9]*% measured, 20% predicted), stages busy [0-9.]* / [0-9.]* ms a step" "$WORK/fm/report.html" ||
  fail "the report does not say 'pipeline of 2 stages x 1 replica(s), 4 micro-batches (bubble ...)'"
check "dlh-report: training: $(grep -o 'pipeline of 2 stages[^<]*ms a step' "$WORK/fm/report.html" | head -1)"

echo "bad input"
bad() {  # bad PARALLEL_JSON EXPECTED [RANKS]
  spec "$WORK/bad.json" "$1"
  # The lines of the ranks, not mpirun's own report of the exit code.
  out=$(mpirun -np "${3:-1}" dlh-launch train "$WORK/bad.json" --run-dir "$WORK/bad" 2>&1 | grep '^dlh-launch' | sort -u) && true
  [[ $out == *"$2"* && $(wc -l <<<"$out") == 1 ]] || fail "for $1: '$out', not '$2'"
  [[ ! -e $WORK/bad/checkpoints ]] || fail "for $1: a run folder with checkpoints was left"
  check "$out"
}
bad '"parallel": {"pipeline_stages": 0},' "bad.json: parallel.pipeline_stages: must be a positive integer, got 0"
bad '"parallel": {"pipeline_stages": 10},' "bad.json: parallel.pipeline_stages: must be at most the number of layers (9), got 10"
bad '"parallel": {"pipeline_stages": 2, "micro_batches": 21},' "bad.json: parallel.micro_batches: must be at most batch_size (20), got 21"
bad '"parallel": {"stages": 2},' "bad.json: parallel: unknown key \"stages\""
bad '"parallel": {"pipeline_stages": 2}, "sync": {"mode": "local_sgd", "period": 4},' "bad.json: parallel.pipeline_stages: only with synchronous training"
bad '"parallel": {"pipeline_stages": 2},' "bad.json: parallel.pipeline_stages: 2 does not divide the 3 ranks" 3
