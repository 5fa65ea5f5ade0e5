#!/bin/bash
# Every job teaches the estimator (issue 40). A tiny spec planned by `dlh-estimate recommend
# --json` and trained by the real `dlh-launch train --observations DIR` leaves one record in
# the store (mode 0644, no temporary file); `dlh-estimate observations list/summary/check`
# read it; `recommend` then predicts the spec from that run ("from 1 earlier run of this spec
# on alpha"), its step within 5% of the run's median step and its whole job within 5% of the
# run's. A damaged record is one warning line naming the file and field, and `check` exits 1.
# A store others can write without the sticky bit is refused with one line (the job still
# succeeds), and so is a missing one. `dlh-launch run --` leaves a record too. `prune` removes
# the caller's records; `refit` adds the observed rows to a calibration, and on a GPU
# calibration fits its layer model again with them.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

dlh-data synthetic --out "$WORK/data.h5" --shape 1x16x16 --classes 4 --train 960 --test 96 \
  --seed 2 >/dev/null
cat >"$WORK/spec.json" <<'JSON'
{
  "name": "observed",
  "input": {"channels": 1, "height": 16, "width": 16},
  "classes": 4,
  "layers": [{"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1}, {"type": "relu"},
             {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"},
             {"type": "dense", "units": 4}],
  "optimizer": {"type": "sgd", "lr": 0.05},
  "batch_size": 32, "epochs": 2, "seed": 3, "dataset": "data.h5"
}
JSON
# One type, one node of one "GPU" (a CPU rank), timed by the shipped CPU calibration; the
# store is named relative to the cluster file's folder.
cat >"$WORK/cluster.json" <<JSON
{"name": "observed", "observations": "obs",
 "gpu_types": [{"name": "alpha", "memory_gb": 2, "peak_tflops": 0.05,
   "memory_bandwidth_gbs": 10, "active_watts": 30, "idle_watts": 5,
   "calibration": "$ROOT/share/calibration/cpu.json"}],
 "node_types": [{"name": "n", "gpu": "alpha", "gpus_per_node": 1, "nodes": 1,
   "node_base_watts": 20, "intra_node": {"latency_us": 5, "bandwidth_gbs": 5}}],
 "inter_node": {"latency_us": 5, "bandwidth_gbs": 5}}
JSON
mkdir -m 1777 "$WORK/obs"
# With the threads its job will have (common.bash exports OPENBLAS_NUM_THREADS=1, which the
# training below and the plugin go by): the record says how many it ran with.
recommend() {
  dlh-estimate recommend "$WORK/spec.json" --samples 960 --cluster "$WORK/cluster.json" \
    --threads-per-rank "${OPENBLAS_NUM_THREADS:-0}" "$@" 2>/dev/null
}

recommend --json >"$WORK/plan.json"
python3 - "$WORK/plan.json" "$WORK/obs" <<'PY' || fail "the plan names no store, type or model"
import json, sys
o = json.load(open(sys.argv[1]))["observations"]
assert o["store"] == sys.argv[2] and o["gpu"] == "alpha" and len(o["model_key"]) == 16, o
assert o["features"]["params"] > 0, o
PY
check "the plan names the store, the chosen type and the model's key"

dlh-launch train "$WORK/spec.json" --plan "$WORK/plan.json" --run-dir "$WORK/run1" \
  --progress none --observations "$WORK/obs" >"$WORK/train.txt" 2>&1 ||
  { cat "$WORK/train.txt" >&2; fail "training failed"; }
grep -q "dlh-launch: observation: $WORK/obs/" "$WORK/train.txt" || fail "no observation line"
records=("$WORK"/obs/*.json)
((${#records[@]} == 1)) || fail "expected one record, found ${#records[@]}"
[[ -z $(find "$WORK/obs" -name '.*') ]] || fail "a temporary file was left in the store"
[[ $(stat -c %a "${records[0]}") == 644 ]] || fail "record mode $(stat -c %a "${records[0]}")"
python3 - "${records[0]}" "$WORK" <<'PY' || fail "the record holds the data set's folder"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["model"]["spec"]["dataset"] == "data.h5", r["model"]["spec"]["dataset"]
assert sys.argv[2] not in json.dumps(r["model"]), "the work folder is in the record's model"
PY
check "the run left one whole record, mode 644, its spec naming the data set's file, not its folder: $(basename "${records[0]}")"

dlh-estimate observations list --store "$WORK/obs" >"$WORK/list.txt"
grep -q "alpha .*observed" "$WORK/list.txt" || { cat "$WORK/list.txt"; fail "list"; }
dlh-estimate observations summary --cluster "$WORK/cluster.json" >"$WORK/summary.txt"
grep -qE "^alpha +1 +1 +1 +1 +[0-9.]+ \(1 job\)$" "$WORK/summary.txt" ||
  { cat "$WORK/summary.txt"; fail "summary (one job: no spread)"; }
dlh-estimate observations check --store "$WORK/obs" | grep -q ": 1 record, all readable" ||
  fail "check"
check "observations list, summary and check read it"

recommend >"$WORK/rec.txt"
grep -q "step time: alpha: from 1 earlier run of this spec on alpha" "$WORK/rec.txt" ||
  { cat "$WORK/rec.txt"; fail "recommend does not say where the step time came from"; }
recommend --json >"$WORK/plan2.json"
python3 - "$WORK/plan2.json" "${records[0]}" <<'PY' || fail "the second prediction is off"
import json, sys
plan, rec = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
# The steady step, which a job takes (the mean of the steps after the first epoch), not the
# median; the first epoch's steps and the first evaluation are timed apart.
m = rec["measured"]
assert m["steps"] == 60 and m["later_steps"] == 30 and 0 < m["later_steps_s"] < m["steps_s"], m
assert m["evaluations"] == 2 and 0 < m["first_eval_s"] < m["eval_s"], m
step, measured = plan["predicted"]["step_s"], m["later_steps_s"] / m["later_steps"]
total, took = plan["predicted"]["total_s"], rec["measured"]["total_s"]
print("  step %.3f ms predicted, %.3f ms measured; job %.3f s predicted, %.3f s measured"
      % (step * 1e3, measured * 1e3, total, took))
assert abs(step / measured - 1) <= 0.05, (step, measured)
assert abs(total / took - 1) <= 0.05, (total, took)
assert plan["provenance"]["alpha"] == "from 1 earlier run of this spec on alpha"
PY
check "recommend predicts the spec from its run: step and whole job within 5%"

# Damaged and foreign records: one warning each, naming the file and the field.
echo '{"dlh_observation": 1,' >"$WORK/obs/broken.json"
python3 - "${records[0]}" "$WORK/obs/foreign.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); r["dlh_observation"] = 9; json.dump(r, open(sys.argv[2], "w"))
PY
expect_fail 1 "foreign.json: dlh_observation: must be 1" \
  dlh-estimate observations check --store "$WORK/obs"
[[ $(grep -c warning "$WORK/err.txt") == 2 ]] || fail "expected two warning lines"
grep -q "broken.json: not valid JSON" "$WORK/err.txt" || fail "no line for broken.json"
dlh-estimate observations list --store "$WORK/obs" 2>/dev/null | grep -qx "1 record" ||
  fail "list does not skip the bad records"
recommend | grep -q "from 1 earlier run" || fail "recommend did not skip the bad records"
check "bad records are skipped with one line each; check exits 1"
rm "$WORK/obs/broken.json" "$WORK/obs/foreign.json"

# A store others can write without the sticky bit: refused, in one line; the job succeeds.
mkdir "$WORK/open" && chmod 0777 "$WORK/open"
dlh-launch train "$WORK/spec.json" --run-dir "$WORK/run2" --progress none --no-plan \
  --max-steps 4 --observations "$WORK/open" >"$WORK/train2.txt" 2>&1 ||
  { cat "$WORK/train2.txt" >&2; fail "a run failed for its store"; }
grep -q "observation store $WORK/open: group or others can write it without the sticky bit: others could replace a user's records; chmod +t" \
  "$WORK/train2.txt" || { cat "$WORK/train2.txt"; fail "no refusal line"; }
[[ -z $(ls -A "$WORK/open") ]] || fail "a record was written into the unsafe store"
expect_fail 2 "others could replace a user's records; chmod +t $WORK/open" \
  dlh-estimate observations list --store "$WORK/open"
[[ $(wc -l <"$WORK/err.txt") == 1 ]] || fail "more than one line"
check "a store others can write without the sticky bit is refused; the job still succeeds"

dlh-launch train "$WORK/spec.json" --run-dir "$WORK/run3" --progress none --no-plan \
  --max-steps 4 --observations "$WORK/missing" >"$WORK/train3.txt" 2>&1 ||
  fail "a run failed for a missing store"
grep -q "warning: observation store $WORK/missing does not exist" "$WORK/train3.txt" ||
  { cat "$WORK/train3.txt"; fail "no warning for the missing store"; }
check "a missing store is one warning at the end of a job that succeeds"

# A run without a plan still records its model: the reader computes the key from the spec.
dlh-launch train "$WORK/spec.json" --run-dir "$WORK/run4" --progress none --no-plan \
  --gpu-type alpha --observations "$WORK/obs" >/dev/null 2>&1 || fail "run without a plan"
recommend | grep -q "from 2 earlier runs of this spec on alpha" ||
  fail "a record without a plan was not matched to its model"
check "a record written without a plan counts for its model"

# Your own program: dlh-launch run writes its record too (steps timed by its progress lines).
cat >"$WORK/prog.sh" <<'SH'
#!/bin/bash
echo "device cpu" >&"$DLH_PROGRESS_FD"
for _ in 1 2 3 4 5 6; do sleep 0.02; echo "step 16" >&"$DLH_PROGRESS_FD"; done
SH
chmod +x "$WORK/prog.sh"
dlh-launch run --no-plan --run-dir "$WORK/run5" --gpu-type alpha --observations "$WORK/obs" \
  -- "$WORK/prog.sh" >"$WORK/run5.txt" 2>&1 || { cat "$WORK/run5.txt"; fail "dlh-launch run"; }
grep -q "dlh-launch: run: observation: $WORK/obs/" "$WORK/run5.txt" || { cat "$WORK/run5.txt"; fail "no run record"; }
dlh-estimate observations list --store "$WORK/obs" | grep -qE "alpha +prog .* 1 +16 " ||
  fail "the run's record is not listed"
check "dlh-launch run -- PROGRAM leaves a record too"

dlh-estimate refit "$ROOT/share/calibration/cpu.json" --store "$WORK/obs" --all \
  --out "$WORK/refit.json" >"$WORK/refit.txt" 2>/dev/null || { cat "$WORK/refit.txt"; fail "refit"; }
grep -q "2 observed rows added" "$WORK/refit.txt" && grep -q "^old fit" "$WORK/refit.txt" &&
  grep -q "^new fit" "$WORK/refit.txt" || { cat "$WORK/refit.txt"; fail "refit report"; }
python3 - "$ROOT/share/calibration/cpu.json" "$WORK/refit.json" <<'PY' || fail "refit rows"
import json, sys
old, new = (json.load(open(p)) for p in sys.argv[1:])
assert len(new["samples"]) == len(old["samples"]) + 2
assert new["samples"][-1]["model"] == "observed observed"
PY
check "refit adds the observed rows and reports the old and the new fit"
# A record that `observations check` reads but whose features miss a field (another build's
# writer, a hand-made file) is skipped and named; refit once refused the whole calibration,
# naming a sample it does not have ("cpu.json with store: samples[76].features...").
cp -r "$WORK/obs" "$WORK/obs-partial"
python3 - "$WORK/obs-partial" "${records[0]}" <<'PY' || fail "partial record"
import json, sys
r = json.load(open(sys.argv[2]))
r["model"]["features"] = {"params": 620, "conv_layers": 1}
json.dump(r, open(f"{sys.argv[1]}/20261201T000000-h-1-partial.json", "w"))
PY
dlh-estimate refit "$ROOT/share/calibration/cpu.json" --store "$WORK/obs-partial" --all \
  --out "$WORK/refit-partial.json" >"$WORK/refit-partial.txt" 2>&1 ||
  { cat "$WORK/refit-partial.txt"; fail "refit with a partial record"; }
grep -q "warning: the observation of .* model.features.conv_flops_fwd: required: skipped" \
  "$WORK/refit-partial.txt" && grep -q "2 observed rows added (2 records skipped" "$WORK/refit-partial.txt" ||
  { cat "$WORK/refit-partial.txt"; fail "the partial record was not skipped and named"; }
check "$(grep -o 'warning: the observation.*' "$WORK/refit-partial.txt")"

# A GPU calibration takes the jobs of its GPU, and its layer model (what plans the type) is
# fitted again with them. The job: the first training run's own record, as the CUDA engine
# writes one (its device "cuda:N (NAME, ...)", one GPU a node) with a step of 0.4 ms; a copy
# on another GPU is not the calibration's.
mkdir -m 1777 "$WORK/gpu-obs"
python3 - "$WORK/gpu-obs" "${records[0]}" <<'PY' || fail "GPU records"
import json, sys
r = json.load(open(sys.argv[2]))
for name, gpu in (("h100.json", "NVIDIA H100 80GB HBM3"), ("a100.json", "NVIDIA A100-SXM4-80GB")):
    r["where"].update(device=f"cuda:0 ({gpu}, sm_90, 79 GiB)", gpus_per_node=1, gpu_type="h100")
    r["measured"]["step_s"] = 0.0004
    json.dump(r, open(f"{sys.argv[1]}/{name}", "w"))
PY
H100=$ROOT/share/calibration/h100-80gb-hbm3.json
dlh-estimate refit "$H100" --store "$WORK/gpu-obs" --folds 2 --out "$WORK/refit-gpu.json" \
  >"$WORK/refit-gpu.txt" 2>&1 || { cat "$WORK/refit-gpu.txt"; fail "refit of a GPU calibration"; }
grep -q "1 observed rows added (1 records skipped" "$WORK/refit-gpu.txt" &&
  grep -q "^GPU layer model new fit: $(($(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['samples']))" "$H100") + 1)) samples" \
    "$WORK/refit-gpu.txt" || { cat "$WORK/refit-gpu.txt"; fail "GPU refit report"; }
python3 - "$H100" "$WORK/refit-gpu.json" <<'PY' || fail "the refit's layer model"
import json, sys
old, new = (json.load(open(p))["gpu_layer_model"] for p in sys.argv[1:])
assert "1 observed jobs" in new["fitted_to"], new["fitted_to"]
assert new["params"] != old["params"] and new["samples"] == old["samples"] + 1
assert new["validation_mape"] == old["validation_mape"]
PY
dlh-estimate gpu-layers --calibration "$WORK/refit-gpu.json" --peaks "$ROOT/share/gpu/specs/h100-sxm.json" \
  --folds 2 2>&1 | grep -q "1 rows of observed jobs left out" || fail "gpu-layers on a refit file"
check "refit of a GPU calibration: its GPU's jobs, and the layer model that plans it fitted again"

dlh-estimate observations prune --store "$WORK/obs" --keep 0 | grep -q "removed 3 records" ||
  fail "prune"
[[ -z $(ls -A "$WORK/obs") ]] || fail "prune left records"
check "prune --keep 0 removes the caller's records"
