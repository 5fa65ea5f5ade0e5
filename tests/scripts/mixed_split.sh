#!/bin/bash
# A plan on two GPU types gives each rank its part's batch (issue 14). Two ranks started as
# `mpirun -np 1 -x DLH_GPU_TYPE=beta ... : -np 1 -x DLH_GPU_TYPE=alpha ...` train 4 and 12
# samples a step, and summary.json and the first metrics record say so. An unknown type, an
# empty --gpu-type and a plan for another rank count get one line naming the source and
# field, exit code 2, and no run folder.
source "$(dirname "$0")/common.bash"

dlh-data synthetic --out "$WORK/data.h5" --shape 1x8x8 --classes 4 --train 320 --test 40 --seed 2 >/dev/null
cat >"$WORK/spec.json" <<'JSON'
{
  "name": "mixed",
  "input": {"channels": 1, "height": 8, "width": 8},
  "classes": 4,
  "layers": [{"type": "conv2d", "filters": 4, "kernel": 3}, {"type": "relu"},
             {"type": "flatten"}, {"type": "dense", "units": 4}],
  "optimizer": {"type": "sgd", "lr": 0.1},
  "batch_size": 20, "epochs": 1, "seed": 3, "dataset": "data.h5"
}
JSON
# What dlh-estimate recommend --json --mixed writes, cut to the fields the launcher reads.
export DLH_PLAN='{"format_version": 1, "global_batch": 16, "lr": 0.08, "warmup_epochs": 0,
  "allocation": {"parts": [
    {"node_type": "node-a", "gpu": "alpha", "nodes": 1, "gpus_per_node": 1, "per_gpu_batch": 12},
    {"node_type": "node-b", "gpu": "beta", "nodes": 1, "gpus_per_node": 1, "per_gpu_batch": 4}],
  "nodes": 2, "gpus": 2, "tasks_per_node": 1}, "why": "test mix"}'

two_types() {  # two_types TYPE0 TYPE1 RUN_DIR [options]: rank 0 of TYPE0, rank 1 of TYPE1
  local t0=$1 t1=$2 dir=$3; shift 3
  mpirun -np 1 -x DLH_PLAN -x DLH_GPU_TYPE="$t0" dlh-launch train "$WORK/spec.json" --run-dir "$dir" --progress none "$@" : \
    -np 1 -x DLH_PLAN -x DLH_GPU_TYPE="$t1" dlh-launch train "$WORK/spec.json" --run-dir "$dir" --progress none "$@"
}

# Beta first: each rank's type, not the order of the parts, picks its batch.
two_types beta alpha "$WORK/run" >"$WORK/log.txt" 2>&1 || { cat "$WORK/log.txt"; fail "mixed run failed"; }
grep -q "per-rank batches \[4, 12\] from the plan's parts (alpha 12, beta 4 per GPU)" "$WORK/log.txt" ||
  { cat "$WORK/log.txt"; fail "no per-rank batch line"; }
check "$(grep 'per-rank batches' "$WORK/log.txt")"
python3 - "$WORK/run" <<'PY' || fail "summary.json or metrics.jsonl lack the split"
import json, sys
run = sys.argv[1]
s = json.load(open(run + "/summary.json"))
assert s["finished"] and s["steps"] == 20, s
assert s["batch_split"] == "plan", s["batch_split"]
assert s["rank_batches"] == [4, 12], s["rank_batches"]
assert s["rank_gpu_types"] == ["beta", "alpha"], s["rank_gpu_types"]
steps = [json.loads(l) for l in open(run + "/metrics.jsonl") if '"event"' not in l]
assert steps[0]["step"] == 1 and steps[0]["rank_batches"] == [4, 12], steps[0]
assert all("rank_batches" not in r for r in steps[1:]), "only the first record has the split"
PY
check "summary.json: batch_split plan, rank_batches [4, 12], rank_gpu_types [beta, alpha]; first metrics record too"

# Without types the ranks take the parts in order (a heterogeneous Slurm job's components).
mpirun -np 2 dlh-launch train "$WORK/spec.json" --run-dir "$WORK/pos" --progress none --max-steps 3 >/dev/null 2>&1 ||
  fail "positional mixed run failed"
[[ $(json_field "$WORK/pos/summary.json" rank_batches) == "[12, 4]" ]] || fail "positions did not give [12, 4]"
check "no types: rank_batches [12, 4] by position"

# Resumed with another split (beta moved to the last rank): it continues, saying so.
two_types beta alpha "$WORK/move" --max-steps 5 >/dev/null 2>&1 || fail "first half failed"
mpirun -np 2 dlh-launch train "$WORK/spec.json" --run-dir "$WORK/move" --progress none --max-steps 9 >"$WORK/log.txt" 2>&1 ||
  { cat "$WORK/log.txt"; fail "resume with another split failed"; }
grep -q "warning: checkpoint was written with rank batches \[4, 12\], resuming with rank batches \[12, 4\] (training continues, but not bit-identically)" "$WORK/log.txt" ||
  { cat "$WORK/log.txt"; fail "no warning about the changed split"; }
[[ $(json_field "$WORK/move/summary.json" steps) == 9 ]] || fail "resumed run did not reach step 9"
check "$(grep -o 'warning: checkpoint was written with.*' "$WORK/log.txt")"

# No plan: the even split, recorded as such.
mpirun -np 2 dlh-launch train "$WORK/spec.json" --run-dir "$WORK/even" --progress none --max-steps 2 --no-plan >/dev/null 2>&1 ||
  fail "even run failed"
[[ $(json_field "$WORK/even/summary.json" batch_split) == even &&
   $(json_field "$WORK/even/summary.json" rank_batches) == "[10, 10]" ]] || fail "even split not recorded"
check "no plan: batch_split even, rank_batches [10, 10]"

expect_fail 2 "DLH_GPU_TYPE: 'gamma' (rank 1) is not a GPU type of DLH_PLAN allocation.parts (alpha, beta)" \
  two_types alpha gamma "$WORK/bad1"
[[ $(grep -c "^dlh-launch" "$WORK/err.txt") -eq 1 ]] || fail "more than one line for one error"
[[ ! -e "$WORK/bad1" ]] || fail "a failed start left $WORK/bad1"
expect_fail 2 "^dlh-launch: error: --gpu-type: must not be empty (rank 0)" \
  mpirun -np 2 dlh-launch train "$WORK/spec.json" --run-dir "$WORK/bad2" --gpu-type ""
[[ ! -e "$WORK/bad2" ]] || fail "a failed start left $WORK/bad2"
expect_fail 2 "DLH_PLAN: allocation.parts: the plan is for 2 GPUs (alpha 1, beta 1) but 3 ranks run" \
  mpirun -np 3 dlh-launch train "$WORK/spec.json" --run-dir "$WORK/bad3"
[[ ! -e "$WORK/bad3" ]] || fail "a failed start left $WORK/bad3"
expect_fail 2 "DLH_PLAN: allocation.parts\[1\].per_gpu_batch: must be a positive integer" \
  env DLH_PLAN="${DLH_PLAN/\"per_gpu_batch\": 4/\"per_gpu_batch\": -4}" \
  mpirun -np 2 dlh-launch train "$WORK/spec.json" --run-dir "$WORK/bad4"
[[ ! -e "$WORK/bad4" ]] || fail "a failed start left $WORK/bad4"
