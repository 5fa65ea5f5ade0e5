#!/bin/bash
# Adaptive batch balancing end to end (issue 14): a mixed alpha+beta job (two ranks under
# mpirun, real HDF5 files, the real Fashion-MNIST data) starts with the plan's split and then
# balances it from the ranks' measured compute times; summary.json, metrics.jsonl and the
# checkpoints record every split; a run replaying that history (from summary.json or from a
# checkpoint) ends with bit-identical parameters, as does a replay interrupted and resumed; an
# adaptive run resumed from a checkpoint continues with the split in effect there. Every bad
# option, plan field and history is one line naming it, exit code 2, and no run folder.
source "$(dirname "$0")/common.bash"

dlh-data import-fashion-mnist --out "$WORK/fm.h5" >/dev/null
cat >"$WORK/spec.json" <<'JSON'
{
  "name": "balance",
  "input": {"channels": 1, "height": 28, "width": 28},
  "classes": 10,
  "layers": [{"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1}, {"type": "batchnorm"},
             {"type": "relu"}, {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"},
             {"type": "dropout", "rate": 0.2}, {"type": "dense", "units": 10}],
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
  "batch_size": 32, "epochs": 1, "seed": 4, "dataset": "fm.h5"
}
JSON
# A plan that gives alpha three times beta's batch; both ranks run on this machine's equal
# cores, so the measured rates say the split is off and the balancer moves samples to beta.
export DLH_PLAN='{"format_version": 1, "global_batch": 32, "lr": 0.05, "warmup_epochs": 0,
  "allocation": {"parts": [
    {"node_type": "node-a", "gpu": "alpha", "nodes": 1, "gpus_per_node": 1, "per_gpu_batch": 24},
    {"node_type": "node-b", "gpu": "beta", "nodes": 1, "gpus_per_node": 1, "per_gpu_batch": 8}],
  "nodes": 2, "gpus": 2, "tasks_per_node": 1}, "why": "test mix"}'

mixed() {  # mixed RUN_DIR [options]: rank 0 alpha, rank 1 beta
  local dir=$1; shift
  mpirun -np 1 -x DLH_PLAN -x DLH_GPU_TYPE=alpha dlh-launch train "$WORK/spec.json" --run-dir "$dir" --progress plain --no-eval "$@" : \
    -np 1 -x DLH_PLAN -x DLH_GPU_TYPE=beta dlh-launch train "$WORK/spec.json" --run-dir "$dir" --progress plain --no-eval "$@"
}
crc() { json_field "$1/summary.json" param_crc32; }
last_ckpt() { ls "$1"/checkpoints/ckpt-*.h5 | tail -1; }
same_params() {  # same_params RUN_A RUN_B: the last checkpoints' parameters, bit for bit
  local a b
  a=$(last_ckpt "$1") b=$(last_ckpt "$2")
  if command -v h5diff >/dev/null; then
    h5diff -q "$a" "$b" /params /params || fail "h5diff: parameters of $a and $b differ"
  fi
  [[ $(crc "$1") == "$(crc "$2")" ]] || fail "param_crc32 $(crc "$1") ($1) != $(crc "$2") ($2)"
}

# Planned, then adaptive: the job starts with the plan's [24, 8] and moves samples to beta.
mixed "$WORK/adaptive" --balance adaptive --balance-every 5 --max-steps 60 >"$WORK/log.txt" 2>&1 ||
  { cat "$WORK/log.txt"; fail "adaptive run failed"; }
grep -q "balance: adaptive, every 5 steps from rank batches \[24, 8\], at most 31 per rank" "$WORK/log.txt" ||
  { cat "$WORK/log.txt"; fail "no line announcing the adaptive split"; }
check "$(grep -m1 'balance: adaptive' "$WORK/log.txt")"
python3 - "$WORK/adaptive" <<'PY' || fail "the adaptive run's records disagree"
import json, sys
run = sys.argv[1]
s = json.load(open(run + "/summary.json"))
b = s["balance"]
assert s["steps"] == 60 and b["mode"] == "adaptive" and b["every"] == 5, s
h = b["history"]
assert h[0] == {"step": 0, "rank_batches": [24, 8]}, h[0]
assert len(h) >= 2, f"a 3:1 split of equal ranks never moved: {h}"
# Beta gains samples. Not necessarily at the last record: among 6 tests at once on 2 cores the
# measured rates swing, and a clean-clone make check saw beta at 13 by step 30 and back at 7 by
# step 60 ([24, 8] ... [19, 13] ... [25, 7]).
assert max(r["rank_batches"][1] for r in h) > 8, f"beta never gained samples: {h}"
for e in h:
    assert sum(e["rank_batches"]) == 32 and min(e["rank_batches"]) >= 1, e
    assert e["step"] % 5 == 0, e
assert s["rank_batches"] == h[-1]["rank_batches"], s["rank_batches"]
recs = [json.loads(l) for l in open(run + "/metrics.jsonl")]
steps = [r for r in recs if "event" not in r]
assert steps[0]["rank_batches"] == [24, 8], steps[0]
events = [{"step": r["step"], "rank_batches": r["rank_batches"]} for r in recs
          if r.get("event") == "balance"]
assert events == h[1:], (events, h)
assert len(s["rank_step_seconds"]["compute"]) == 2 and len(s["rank_step_seconds"]["allreduce"]) == 2
print(" -> ".join(f"{e['rank_batches']} at step {e['step']}" for e in h))
PY
check "summary.json balance.history, metrics.jsonl balance records and the first record agree"

# Replayed from summary.json and from the last checkpoint: the same bits.
for source in "$WORK/adaptive/summary.json" "$(last_ckpt "$WORK/adaptive")"; do
  dir=$WORK/replay-$(basename "$source" | tr . -)
  mixed "$dir" --balance replay --balance-history "$source" --max-steps 60 >"$WORK/log.txt" 2>&1 ||
    { cat "$WORK/log.txt"; fail "replay of $source failed"; }
  same_params "$WORK/adaptive" "$dir"
  python3 -c "import json,sys; a,b=(json.load(open(p+'/summary.json'))['balance']['history'] for p in sys.argv[1:]); assert a==b,(a,b)" \
    "$WORK/adaptive" "$dir" || fail "the replay recorded another history"
  check "replay of $(basename "$source"): param_crc32 $(crc "$dir"), parameters bit-identical, same history"
done

# Resumed: the second half starts with the split in effect at the checkpoint, and the history
# goes on from the first half's.
mixed "$WORK/resumed" --balance adaptive --balance-every 5 --max-steps 30 >/dev/null 2>&1 || fail "first half failed"
mixed "$WORK/resumed" --balance adaptive --balance-every 5 --max-steps 60 >"$WORK/log.txt" 2>&1 ||
  { cat "$WORK/log.txt"; fail "resumed half failed"; }
grep -q "balance: continuing with rank batches \[[0-9]*, [0-9]*\], the split in effect at the checkpoint" "$WORK/log.txt" ||
  { cat "$WORK/log.txt"; fail "no line about the split continued from the checkpoint"; }
python3 - "$WORK/resumed" <<'PY' || fail "the resumed run did not continue the checkpoint's split"
import json, sys
run = sys.argv[1]
h = json.load(open(run + "/summary.json"))["balance"]["history"]
at30 = [e for e in h if e["step"] <= 30][-1]["rank_batches"]
recs = [json.loads(l) for l in open(run + "/metrics.jsonl") if '"event"' not in l]
first = [r for r in recs if r["step"] == 31][0]
assert first["rank_batches"] == at30, (first, h)
assert h[0] == {"step": 0, "rank_batches": [24, 8]}, h
PY
check "$(grep -o 'balance: continuing with.*' "$WORK/log.txt"); the first record after the resume has it"

# A history written by hand, replayed whole and in two runs (stopped right at a change): the
# same bits; the fixed plan split gives others, so the history is what made them.
cat >"$WORK/history.json" <<'JSON'
{"balance": {"history": [{"step": 0, "rank_batches": [24, 8]}, {"step": 7, "rank_batches": [18, 14]},
                         {"step": 13, "rank_batches": [12, 20]}, {"step": 30, "rank_batches": [16, 16]}]}}
JSON
mixed "$WORK/hand" --balance replay --balance-history "$WORK/history.json" --max-steps 40 >/dev/null 2>&1 || fail "replay failed"
mixed "$WORK/hand2" --balance replay --balance-history "$WORK/history.json" --max-steps 13 >/dev/null 2>&1 || fail "replay to 13 failed"
mixed "$WORK/hand2" --balance replay --balance-history "$WORK/history.json" --max-steps 40 >/dev/null 2>&1 || fail "replay 13-40 failed"
same_params "$WORK/hand" "$WORK/hand2"
mixed "$WORK/fixed" --max-steps 40 >/dev/null 2>&1 || fail "fixed run failed"
[[ $(crc "$WORK/fixed") != "$(crc "$WORK/hand")" ]] || fail "the replayed history changed nothing"
check "hand-written history: whole and resumed at a change bit-identical ($(crc "$WORK/hand")), the fixed split differs"

# Bad input: one line naming the option, plan field or file, exit code 2, no run folder.
bad() {  # bad PATTERN RUN [options]
  local pattern=$1 dir=$WORK/$2; shift 2
  expect_fail 2 "$pattern" mixed "$dir" "$@"
  [[ $(grep -c "^dlh-launch" "$WORK/err.txt") -eq 1 ]] || { cat "$WORK/err.txt"; fail "more than one line for one error"; }
  [[ ! -e $dir ]] || fail "a failed start left $dir"
}
bad "^dlh-launch: --balance: must be off, adaptive or replay, got 'fast'$" b1 --balance fast
bad "^dlh-launch: --balance-every: must be 3 to 1000000 steps (the median of fewer is noise), got 2$" b2 --balance adaptive --balance-every 2
bad "^dlh-launch: --balance replay: needs --balance-history FILE" b3 --balance replay
bad "^dlh-launch: --balance-history: only with --balance replay$" b4 --balance-history "$WORK/history.json"
sed 's/"rank_batches": \[18, 14\]/"rank_batches": [18, 13]/' "$WORK/history.json" >"$WORK/bad-sum.json"
bad "^dlh-launch: error: $WORK/bad-sum.json: balance.history\[1\].rank_batches: sum to 31, not the global batch 32$" b5 \
  --balance replay --balance-history "$WORK/bad-sum.json"
sed 's/"step": 13/"step": 7/' "$WORK/history.json" >"$WORK/bad-step.json"
bad "^dlh-launch: error: $WORK/bad-step.json: balance.history\[2\].step: 7 does not come after the step before it (7)$" b6 \
  --balance replay --balance-history "$WORK/bad-step.json"
bad "^dlh-launch: error: $WORK/fixed/summary.json: balance.history: missing (not the summary.json of a run that balanced)$" b7 \
  --balance replay --balance-history "$WORK/fixed/summary.json"
bad "^dlh-launch: error: $(last_ckpt "$WORK/fixed"): split_history: missing (the checkpoint is of a run that did not balance)$" b8 \
  --balance replay --balance-history "$(last_ckpt "$WORK/fixed")"
head -c 2000 "$(last_ckpt "$WORK/adaptive")" >"$WORK/cut.h5"
bad "^dlh-launch: error: $WORK/cut.h5: not a valid HDF5 file, truncated or corrupt" b9 --balance replay --balance-history "$WORK/cut.h5"
DLH_PLAN=${DLH_PLAN/\"why\"/\"balance\": \"fast\", \"why\"} \
  bad "^dlh-launch: error: DLH_PLAN: balance: must be \"off\" or \"adaptive\", got \"fast\"$" b10
# The plan may ask for adaptive balancing itself.
DLH_PLAN=${DLH_PLAN/\"why\"/\"balance\": \"adaptive\", \"why\"} mixed "$WORK/from-plan" --max-steps 6 >/dev/null 2>&1 ||
  fail "a plan asking for balancing failed"
[[ $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['balance']['mode'])" "$WORK/from-plan/summary.json") == adaptive ]] ||
  fail "the plan's \"balance\": \"adaptive\" was not used"
check "DLH_PLAN \"balance\": \"adaptive\" turns it on"
