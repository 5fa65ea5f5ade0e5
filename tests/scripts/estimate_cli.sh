#!/bin/bash
# dlh-estimate end to end: features, a quick real calibration with the engine, fit,
# predict, the communication model from a real MPI measurement, recommendations on the
# example cluster (feasible, impossible deadline, JSON plan), and bad input.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SPEC=$ROOT/share/examples/fashion-mnist.json
CLUSTER=$ROOT/share/cluster/example.json

echo "features"
dlh-estimate features "$SPEC" >"$WORK/features.txt"
grep -q "421834 parameters" "$WORK/features.txt" || { cat "$WORK/features.txt"; fail "parameter count"; }
check "$(grep -m1 "per sample" "$WORK/features.txt" | sed "s/^ *//")"
# Both engines' memory, the CPU engine's by its own count (features_test.cpp works it out:
# 168535560 bytes at batch 128), and each pipeline stage's.
grep -q "training memory at batch 128: 199 MB a GPU, 169 MB a rank of the CPU engine" "$WORK/features.txt" ||
  { cat "$WORK/features.txt"; fail "the memory line"; }
mem=$(dlh-estimate features "$SPEC" --engine cpu --pipeline-stages 2 --micro-batches 4 --json |
  python3 -c 'import json, sys; d = json.load(sys.stdin)
assert d["engine"] == "cpu" and len(d["stage_memory_bytes"]) == 2, d
print(int(d["memory_bytes"]), " ".join(f"{b / 1e6:.1f}" for b in d["stage_memory_bytes"]))')
[[ $mem == "168535560 "* ]] || fail "features --engine cpu --json: $mem"
check "features --engine cpu: $mem (bytes, then each of 2 stages' MB)"
for bad in "--engine tpu" "--pipeline-stages 15" "--micro-batches 129"; do
  # shellcheck disable=SC2086  # the option and its value, two words
  if dlh-estimate features "$SPEC" $bad >"$WORK/bad.txt" 2>&1; then fail "features $bad was accepted"; fi
  grep -q "^dlh-estimate: features: --${bad:2:6}" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "features $bad: $(cat "$WORK/bad.txt")"; }
done
check "features refuses --engine tpu, 15 stages of 14 layers and 129 micro-batches of 128"

echo "calibrate (quick sweep, real timed steps)"
# Two rounds: the sweep timed twice, interleaved, each configuration kept once (its median).
dlh-estimate calibrate --device cpu --quick --rounds 2 --repeats 2 --threads 1 --out "$WORK/cal.json" >"$WORK/cal.txt" 2>"$WORK/cal.err"
grep -q "cross-validated MAPE" "$WORK/cal.txt" || { cat "$WORK/cal.txt" "$WORK/cal.err"; fail "no fit report"; }
grep -q "configurations, 2 rounds" "$WORK/cal.err" || { cat "$WORK/cal.err"; fail "calibrate did not say its rounds"; }
check "$(grep 'fit (' "$WORK/cal.txt")"
python3 - "$WORK/cal.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["device"] == "cpu" and len(c["samples"]) >= 10, "calibration file incomplete"
assert all(s["seconds"] > 0 for s in c["samples"]), "non-positive timing"
assert len(c["model"]["coef"]) == 11
names = [(s["model"], s["batch"]) for s in c["samples"]]
assert len(names) == len(set(names)), "a configuration kept once per round"
assert len(c["layer_model"]["coef"]) == 13, c.get("layer_model")
PY
check "calibration file has $(python3 -c "import json;print(len(json.load(open('$WORK/cal.json'))['samples']))") timed samples and 11 coefficients"
dlh-estimate fit "$WORK/cal.json" --folds 3 | grep -q "R2" || fail "fit"
# How it divides the steps of models outside the sweep (each layer timed alone), and the
# share of their layers' time the forwards take, measured against the FLOPs' (a pipeline's
# re-run forward).
dlh-estimate validate --calibration "$WORK/cal.json" --layers --set term --threads 1 >"$WORK/layers.txt" 2>&1 ||
  { cat "$WORK/layers.txt"; fail "validate --layers"; }
grep -qE "^val-fashion-cnn-b128 +128 +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9]+\.[0-9] +[0-9]+\.[0-9]$" "$WORK/layers.txt" ||
  { cat "$WORK/layers.txt"; fail "validate --layers: no row for the example spec's network"; }
line=$(grep "^mean of the largest cut errors over [0-9]* models" "$WORK/layers.txt") &&
  line2=$(grep "^the forward's share of a model's layers by the FLOPs, mean error [0-9.]* points of the measured share$" "$WORK/layers.txt") ||
  { cat "$WORK/layers.txt"; fail "validate --layers: no summary"; }
check "validate --layers --set term: ${line#mean of the }; ${line2#the }"
dlh-estimate predict "$SPEC" --calibration "$WORK/cal.json" >"$WORK/predict.txt" 2>"$WORK/predict.err"
check "$(cat "$WORK/predict.txt")"
[[ ! -s $WORK/predict.err ]] || { cat "$WORK/predict.err"; fail "a fresh calibration was called stale"; }
python3 - "$WORK/cal.json" "$WORK/tampered.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert len(c["engine"]["fingerprint"]) == 12, c.get("engine")
c["engine"]["fingerprint"] = "000000000000"
c["engine"].pop("sources", None)  # no file list: the fingerprint decides
json.dump(c, open(sys.argv[2], "w"))
PY
dlh-estimate predict "$SPEC" --calibration "$WORK/tampered.json" 2>"$WORK/predict.err" >/dev/null
grep -q "warning: .*tampered.json: measured with engine 000000000000, this build's engine is" \
  "$WORK/predict.err" || { cat "$WORK/predict.err"; fail "predict did not name the stale calibration"; }
check "$(cat "$WORK/predict.err")"

echo "a calibration moved to another device: validate --measured --scale-flops --roofline, rates"
# The moved calibration has fixed coefficients, every one positive: the quick sweep's own fit,
# timed beside make check's other tests, once gave this model no term at all (0.00 ms).
python3 - "$WORK/cal.json" "$WORK/measured.json" "$WORK/fixed.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
s = dict(c["samples"][0], model="val-mlp-784-1024-1024-b128", batch=128, seconds=0.03)
c["samples"] = [s]  # validate recomputes the features of a validation model from its name
json.dump(c, open(sys.argv[2], "w"))
c["model"]["coef"] = [1e-3, 2e-11, 3e-11, 4e-9, 5e-9, 1e-9, 2e-9, 1e-4, 5e-5, 1e-6, 1e-9]
json.dump(c, open(sys.argv[3], "w"))
PY
dlh-estimate validate --calibration "$WORK/fixed.json" --measured "$WORK/measured.json" \
  --scale-flops 2 --scale-bandwidth 4 --roofline 0.05,10 >"$WORK/transfer.txt"
python3 - "$WORK/transfer.txt" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
row = next(l.split() for l in lines if l.startswith("val-mlp"))
scaled, measured, unscaled, roofline = float(row[2]), float(row[3]), float(row[5]), float(row[7])
assert measured == 30.0, row
# Overhead kept, compute / 2, memory / 4: strictly between a quarter and all of the unscaled
# time (the table prints 2 decimals).
assert unscaled / 4 < scaled < unscaled, row
assert roofline > 0, row
for prefix in ("MAPE over 1 models", "unscaled MAPE over 1 models", "roofline MAPE over 1 models"):
    assert any(l.startswith(prefix) for l in lines), prefix
assert "scaled FLOP/s x2.00, bandwidth x4.00" in lines[-3], lines[-3]
PY
check "$(grep '^MAPE over' "$WORK/transfer.txt")"
expect_fail 2 "must be positive" dlh-estimate validate --calibration "$WORK/cal.json" \
  --measured "$WORK/measured.json" --scale-flops 0
expect_fail 2 "roofline: expected TFLOPS,GBS" dlh-estimate validate --calibration "$WORK/cal.json" \
  --measured "$WORK/measured.json" --roofline 5
expect_fail 2 "is not a validation model" dlh-estimate validate --calibration "$WORK/cal.json" \
  --measured "$WORK/cal.json"
dlh-estimate validate --calibration "$WORK/cal.json" --measured "$WORK/measured.json" \
  --set term >"$WORK/term.txt"
grep -q "^validation set: term (1 models: the time model's terms were chosen on these)" \
  "$WORK/term.txt" || { cat "$WORK/term.txt"; fail "validate --set term names no set"; }
expect_fail 2 "no model of the judged set" dlh-estimate validate --calibration "$WORK/cal.json" \
  --measured "$WORK/measured.json" --set judged
expect_fail 2 "--set: must be judged, term or all, got 'sweep'" dlh-estimate validate \
  --calibration "$WORK/cal.json" --measured "$WORK/measured.json" --set sweep
check "validate --set: term, judged, a bad name"

echo "the GPU layer model, offline: fit on the H100 sweep, judged on its saved validation, H200"
H100=$ROOT/share/calibration/h100-80gb-hbm3.json
# predict gives the step recommend plans with: the stored layer model's, not the linear one's
# (they were 1.10 and 1.25 ms apart at batch 128).
dlh-estimate predict "$SPEC" --calibration "$H100" >"$WORK/predict-gpu.txt" 2>/dev/null ||
  fail "predict with the H100 calibration"
gpu_step=$(sed -n 's/.* on cuda: \([0-9.]*\) ms per step.*GPU layer model.*/\1/p' "$WORK/predict-gpu.txt")
[[ -n $gpu_step ]] || { cat "$WORK/predict-gpu.txt"; fail "predict does not say it used the GPU layer model"; }
planned=$(dlh-estimate recommend "$SPEC" --samples 60000 --epochs 8 --cluster "$CLUSTER" --types h100 \
  --max-gpus 1 --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['predicted']['step_s'] * 1e3)")
awk -v a="$gpu_step" -v b="$planned" 'BEGIN { exit !(a > 0.97 * b && a < 1.03 * b) }' ||
  fail "predict's $gpu_step ms is not recommend's $planned ms"
check "predict with a GPU calibration: $gpu_step ms, recommend's step $planned ms (its layer model's line)"
dlh-estimate gpu-layers --calibration "$H100" --peaks "$ROOT/share/gpu/specs/h100-sxm.json" \
  --measured "$ROOT/share/gpu/results/h100-80gb-hbm3-validation.json" --folds 0 \
  --predict "$ROOT/share/gpu/specs/h200-sxm.json" --out "$WORK/h200.json" --date 2026-11-28 \
  >"$WORK/layers.txt" 2>"$WORK/layers.err" || { cat "$WORK/layers.txt" "$WORK/layers.err"; fail "gpu-layers"; }
grep -q "^layer model MAPE over 10 models of .*: [0-9.]*% (linear model: 25.7%)" "$WORK/layers.txt" ||
  { cat "$WORK/layers.txt"; fail "no layer model MAPE"; }
python3 - "$WORK/h200.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["created"] == "2026-11-28" and p["target"]["name"] == "h200", p["target"]
assert set(p["target"]["sources"]) == {"fp32_tflops", "tf32_tflops", "bandwidth_gbs", "sms"}
rows = p["predictions"]
assert len(rows) == 24 and {r["set"] for r in rows} == {"term", "judged"}, len(rows)
assert all(r["seconds"] > 0 and r["wave_scaled_linear_seconds"] > 0 for r in rows)
assert p["reference"]["fit"]["samples"] == 96
PY
check "$(grep "^layer model MAPE" "$WORK/layers.txt" | sed 's/ of [^:]*json:/:/'); H200 predictions written"
# The check a GPU visit makes of predictions written before it (here against the H100's own
# measurements, only to run it).
dlh-estimate gpu-layers --check "$WORK/h200.json" \
  --measured "$ROOT/share/gpu/results/h100-80gb-hbm3-validation.json" >"$WORK/check.txt" ||
  fail "gpu-layers --check"
grep -q "^MAPE over 10 models: layer model [0-9.]*%, wave-scaled linear model [0-9.]*%" \
  "$WORK/check.txt" || { cat "$WORK/check.txt"; fail "gpu-layers --check: no MAPE"; }
# The layer model the committed H100 calibration holds is what this build fits (--store on a
# copy; without the cross-validation, which sets no parameter), and the recommender plans
# with it.
cp "$H100" "$WORK/h100.json"
dlh-estimate gpu-layers --calibration "$WORK/h100.json" --peaks "$ROOT/share/gpu/specs/h100-sxm.json" \
  --measured "$ROOT/share/gpu/results/h100-80gb-hbm3-validation.json" --folds 0 --store \
  >"$WORK/store.txt" ||
  { cat "$WORK/store.txt"; fail "gpu-layers --store"; }
python3 - "$H100" "$WORK/h100.json" <<'PY'
import json, sys
committed, refit = (json.load(open(p))["gpu_layer_model"] for p in sys.argv[1:])
assert committed["fitted_to"] == refit["fitted_to"] == "the calibration's sweep", committed
for k, v in committed["params"].items():
    assert abs(refit["params"][k] - v) <= 1e-9 * abs(v), (k, v, refit["params"][k])
assert committed["validation_models"] == 10 and abs(committed["validation_mape"] - refit["validation_mape"]) < 1e-9
PY
sed 's|"../calibration/h100-80gb-hbm3.json"|"'"$WORK"'/h100.json"|' "$ROOT/share/cluster/example.json" >"$WORK/example.json"
dlh-estimate recommend "$ROOT/share/gpu/cnn-large.json" --cluster "$WORK/example.json" \
  --samples 100000 --deadline 2h >"$WORK/planned.txt" 2>&1 || { cat "$WORK/planned.txt"; fail "recommend"; }
grep -q "^  h100: GPU layer model of h100.json, " "$WORK/planned.txt" ||
  { cat "$WORK/planned.txt"; fail "h100's plan does not come from its layer model"; }
grep -q "^  a100: GPU layer model of h100's calibration (h100.json), carried by a100's peaks (FP32 19.5, TF32 156 TFLOP/s, 1555 GB/s, 108 SMs)" "$WORK/planned.txt" ||
  { cat "$WORK/planned.txt"; fail "a100's plan is not the layer model carried by its peaks"; }
check "the committed H100 layer model is this build's fit; recommend: $(grep -o 'h100: GPU layer model[^,]*' "$WORK/planned.txt")"
expect_fail 2 "check: needs --measured" dlh-estimate gpu-layers --check "$WORK/h200.json"
expect_fail 2 "calibration: required" dlh-estimate gpu-layers --peaks x.json
echo '{"name": "x", "fp32_tflops": 1, "tf32_tflops": 2, "bandwidth_gbs": 0, "sms": 4}' >"$WORK/bad-peaks.json"
expect_fail 2 "bandwidth_gbs: must be a positive number" dlh-estimate gpu-layers \
  --calibration "$H100" --peaks "$WORK/bad-peaks.json"
# A probe file given as peaks, a field of the wrong type: the file and the field, no library text.
dlh-estimate rates --threads 1 --blocks 1 --json >"$WORK/not-peaks.json"
expect_fail 2 "not-peaks.json: name: required (a GPU peaks file: name, fp32_tflops" dlh-estimate gpu-layers \
  --calibration "$H100" --peaks "$WORK/not-peaks.json"
echo '{"name": "x", "fp32_tflops": 1, "tf32_tflops": 2, "bandwidth_gbs": 3, "sms": "many"}' >"$WORK/bad-peaks.json"
expect_fail 2 "bad-peaks.json: sms: must be a number, got \"many\"" dlh-estimate gpu-layers \
  --calibration "$H100" --peaks "$WORK/bad-peaks.json"
grep -q "json.exception" "$WORK/err.txt" && fail "gpu-layers --peaks showed the JSON library's text"
expect_fail 2 "is a cpu calibration; the layer model is for a GPU" dlh-estimate gpu-layers \
  --calibration "$WORK/cal.json" --peaks "$ROOT/share/gpu/specs/h100-sxm.json"
check "gpu-layers: bad peaks, a CPU calibration"
dlh-estimate rates --threads 1 --blocks 1 --json >"$WORK/rates.json"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['threads']==1 and r['sgemm_gflops']>0 and r['copy_gbs']>0, r" \
  "$WORK/rates.json" || { cat "$WORK/rates.json"; fail "rates"; }
check "rates: $(cat "$WORK/rates.json")"

echo "communication model from a real MPI measurement"
# x2 sizes, 4 KiB - 4 MiB: 11 sizes, room for up to 3 regimes of >= 3.
# On a loaded machine (make check runs tests side by side) a measurement can come out too
# noisy for the fit, which then says so ("do not follow the alpha-beta model"): measure
# again, up to 5 times; any other failure, or 5 such, fails the test.
for attempt in 1 2 3 4 5; do
  mpirun -np 2 dlh-launch bench-allreduce --max-bytes 4M --factor 2 --repeats 3 --json "$WORK/ar.json" >/dev/null
  rc=0
  dlh-estimate comm "$WORK/ar.json" >"$WORK/comm.txt" 2>"$WORK/comm.err" || rc=$?
  ((rc != 0)) || break
  cat "$WORK/comm.err" >&2
  grep -q 'do not follow the alpha-beta model' "$WORK/comm.err" && ((attempt < 5)) ||
    fail "dlh-estimate comm exited $rc (attempt $attempt)"
  echo "  measuring again (attempt $attempt was too noisy to fit)"
done
grep -q "^MAPE single .*, piecewise " "$WORK/comm.txt" || { cat "$WORK/comm.txt"; fail "comm fit"; }
check "$(head -1 "$WORK/comm.txt"): $(grep '^MAPE' "$WORK/comm.txt")"
# The link it prints is a valid intra_node: paste it into the example cluster and plan.
python3 - "$CLUSTER" "$(tail -1 "$WORK/comm.txt")" "$WORK/pasted.json" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1]))
c["node_types"][0]["intra_node"] = json.loads(sys.argv[2])
for g in c["gpu_types"] + c.get("cpu_node_types", []):  # a calibration path is relative to the cluster file's folder
    if "calibration" in g:
        g["calibration"] = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), g["calibration"])
json.dump(c, open(sys.argv[3], "w"))
PY
dlh-estimate recommend "$SPEC" --samples 60000 --epochs 8 --deadline 3h --cluster "$WORK/pasted.json" \
  >"$WORK/rec-pasted.txt" || { cat "$WORK/rec-pasted.txt"; fail "the pasted link"; }
check "the printed link pasted as intra_node: $(tail -1 "$WORK/comm.txt" | cut -c1-60)..."
# A measurement with a time of 0 or a missing field: the file and the field.
python3 - "$WORK/ar.json" "$WORK/ar-zero.json" "$WORK/ar-nobytes.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["sizes"][2]["mpi_s"] = 0
json.dump(r, open(sys.argv[2], "w"))
del r["sizes"][1]["bytes"]
json.dump(r, open(sys.argv[3], "w"))
PY
expect_fail 2 "ar-zero.json: sizes\[2\].mpi_s: must be a positive time, got 0" dlh-estimate comm "$WORK/ar-zero.json"
expect_fail 2 "ar-nobytes.json: sizes\[1\].bytes: required" dlh-estimate comm "$WORK/ar-nobytes.json"

echo "recommend"
dlh-estimate recommend "$SPEC" --samples 60000 --epochs 8 --deadline 3h --cluster "$CLUSTER" >"$WORK/rec.txt"
grep -q "^chosen:" "$WORK/rec.txt" || { cat "$WORK/rec.txt"; fail "no choice"; }
check "$(grep '^chosen:' "$WORK/rec.txt")"
dlh-estimate recommend "$SPEC" --samples 60000 --epochs 8 --deadline 3h --cluster "$CLUSTER" --json >"$WORK/plan.json"
python3 - "$WORK/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
a = p["allocation"]
assert p["feasible"] is True
assert a["gpus"] == sum(x["nodes"] * x["gpus_per_node"] for x in a["parts"])
assert p["predicted"]["total_s"] * 1.1 <= 3 * 3600 + 1e-6
assert p["time_limit"]
PY
check "JSON plan: feasible, GPUs add up, predicted time within the deadline"
dlh-estimate recommend "$SPEC" --samples 60000 --epochs 8 --deadline 3h --cluster "$CLUSTER" --json \
  --stage >"$WORK/plan-staged.json"
python3 - "$WORK/plan.json" "$WORK/plan-staged.json" <<'PY'
import json, sys
shared, staged = (json.load(open(f))["predicted"] for f in sys.argv[1:])
assert shared["phases"]["stage_s"] == 0 and staged["phases"]["stage_s"] > 0, (shared, staged)
assert staged["total_s"] > shared["total_s"] - shared["phases"]["data_s"]
PY
check "--stage: the plan counts copying the data set to the nodes (stage_s > 0, 0 without)"
dlh-estimate recommend "$SPEC" --samples 60000 --epochs 8 --deadline 3h --cluster "$CLUSTER" --json \
  --html "$WORK/rec.html" >"$WORK/plan-html.json"
cmp -s "$WORK/plan.json" "$WORK/plan-html.json" || fail "--html changed the JSON plan"
[[ $(head -1 "$WORK/rec.html") == "<!DOCTYPE html>" ]] || fail "rec.html does not start with <!DOCTYPE html>"
grep -q 'class="dlh-chart"' "$WORK/rec.html" || fail "rec.html has no chart"
check "--html with --json: the same plan on stdout, and a page of $(grep -o 'class="dlh-chart"' "$WORK/rec.html" | wc -l) charts"
expect_fail 2 "^dlh-estimate: --html: $WORK/nope/rec.html: folder $WORK/nope does not exist" dlh-estimate recommend "$SPEC" \
  --samples 60000 --cluster "$CLUSTER" --html "$WORK/nope/rec.html"
[[ ! -e $WORK/nope ]] || fail "--html into a missing folder created it"
# A CPU node type whose calibration is missing is named as one, with what to do (its
# calibration is required: no roofline times a CPU); it was called a "GPU type" whose
# calibration could be removed.
cp "$ROOT/share/cluster/local.json" "$WORK/local-elsewhere.json"
expect_fail 2 "CPU node type \"cpu-local\": calibration file .*/calibration/cpu.json not found (dlh-estimate calibrate on one of its nodes" \
  dlh-estimate recommend "$SPEC" --samples 60000 --cluster "$WORK/local-elsewhere.json" --types cpu-local
# A calibration's or a validation's file is checked before the minutes of timing: found
# after them, a typo in its path threw the sweep away (validate did not even print its table).
expect_fail 2 "^dlh-estimate: --out: $WORK/nope/cal.json: folder $WORK/nope does not exist" \
  timeout 60 dlh-estimate calibrate --quick --out "$WORK/nope/cal.json"
grep -q "calibrating" "$WORK/err.txt" && fail "calibrate timed its sweep before refusing --out"
expect_fail 2 "^dlh-estimate: --save: $WORK/nope/v.json: folder $WORK/nope does not exist" \
  timeout 60 dlh-estimate validate --calibration "$ROOT/share/calibration/cpu.json" --repeats 1 \
  --save "$WORK/nope/v.json"
expect_fail 2 "^dlh-estimate: --chosen-out: $WORK: is a folder, expected a file name" \
  dlh-estimate check-calibration "$ROOT/share/calibration/cpu.json" --chosen-out "$WORK"
rc=0; dlh-estimate recommend "$SPEC" --samples 60000000 --epochs 50 --deadline 10m --cluster "$CLUSTER" >"$WORK/imp.txt" || rc=$?
[[ $rc -eq 3 ]] || { cat "$WORK/imp.txt"; fail "impossible deadline exited $rc, expected 3"; }
grep -q "no allocation meets the deadline" "$WORK/imp.txt" || fail "impossible deadline not explained"
check "$(grep 'no allocation' "$WORK/imp.txt")"

echo "bad input"
printf '{"name": "x", "gpu_types": [], "node_types": [], "inter_node": {"bandwidth_gbs": 1, "latency_us": 1}, "bogus": 1}' >"$WORK/bad-cluster.json"
expect_fail 2 "bad-cluster.json: " dlh-estimate recommend "$SPEC" --samples 100 --cluster "$WORK/bad-cluster.json"
for cmd in predict validate recommend; do
  dlh-estimate "$cmd" --help >"$WORK/help.txt" || fail "dlh-estimate $cmd --help exited $?"
done
check "predict, validate and recommend --help exit 0 without their required options"
python3 -c 'print("[" * 100000 + "]" * 100000)' >"$WORK/deep.json"
expect_fail 2 "deep.json: not valid JSON: arrays and objects nested deeper than 64 levels" \
  timeout 60 dlh-estimate recommend "$WORK/deep.json" --samples 100 --cluster "$CLUSTER"
expect_fail 2 "deep.json: not valid JSON: arrays and objects nested deeper" \
  timeout 60 dlh-estimate recommend "$SPEC" --samples 100 --cluster "$WORK/deep.json"
mkfifo "$WORK/fifo.json"
expect_fail 2 "fifo.json: cannot read: not a regular file" \
  timeout 60 dlh-estimate recommend "$WORK/fifo.json" --samples 100 --cluster "$CLUSTER"
expect_fail 2 "deadline: expected a duration" dlh-estimate recommend "$SPEC" --samples 100 --deadline soon --cluster "$CLUSTER"
expect_fail 2 "objective: must be one of" dlh-estimate recommend "$SPEC" --samples 100 --objective cheap --cluster "$CLUSTER"
expect_fail 2 "samples" dlh-estimate recommend "$SPEC" --cluster "$CLUSTER"
expect_fail 2 "no cluster description" env -u DLH_CLUSTER "$BINDIR/dlh-estimate" recommend "$SPEC" --samples 100
expect_fail 2 "types: .* has no GPU type or CPU node type 'tpu'" dlh-estimate recommend "$SPEC" --samples 100 --types tpu --cluster "$CLUSTER"
expect_fail 2 "nope.json: cannot read" dlh-estimate fit "$WORK/nope.json"
expect_fail 2 "device: must be cpu, cuda or cuda:N, got 'tpu:7'" dlh-estimate calibrate --device tpu:7
expect_fail 2 "dlh-estimate: --rounds: must be in" dlh-estimate validate --calibration "$ROOT/share/calibration/cpu.json" --rounds 0
expect_fail 2 "dlh-estimate: --rounds: must be in" dlh-estimate calibrate --quick --rounds 0 --out "$WORK/never.json"
# Options that were taken and ignored, or printed a figure that was none.
expect_fail 2 "dlh-estimate: --top: must be at least 1 row, got 0" dlh-estimate recommend "$SPEC" \
  --samples 60000 --cluster "$CLUSTER" --top 0
expect_fail 2 "dlh-estimate: --batch: must not be negative" dlh-estimate predict "$SPEC" \
  --calibration "$ROOT/share/calibration/cpu.json" --batch -1
expect_fail 2 "dlh-estimate: --deadline: at most a year" dlh-estimate recommend "$SPEC" \
  --samples 60000 --cluster "$CLUSTER" --deadline 99999999999999h
dlh-estimate recommend "$SPEC" --samples 60000 --cluster "$CLUSTER" --deadline none >"$WORK/none.txt" ||
  fail "--deadline none (as --help offers) refused"
grep -q "deadline none" "$WORK/none.txt" || { cat "$WORK/none.txt"; fail "--deadline none not taken as none"; }
dlh-estimate gpu-layers --calibration "$H100" --peaks "$ROOT/share/gpu/specs/h100-sxm.json" --folds 0 \
  >"$WORK/folds0.txt" 2>/dev/null || fail "gpu-layers --folds 0"
grep -q "(no cross-validation: --folds 0)" "$WORK/folds0.txt" && ! grep -q "0-fold" "$WORK/folds0.txt" ||
  { head -2 "$WORK/folds0.txt"; fail "gpu-layers --folds 0 printed a cross-validated MAPE"; }
check "--top 0, --batch -1, a deadline of millennia refused; --deadline none taken; --folds 0 says no cross-validation"
[[ ! -e $WORK/never.json ]] || fail "calibrate --rounds 0 wrote a file"
expect_fail 2 "unknown command 'guess'" dlh-estimate guess

echo "a run planned by the estimator reports predicted against measured (issue 13)"
dlh-data synthetic --out "$WORK/data.h5" --shape 1x8x8 --classes 4 --train 400 --test 40 >/dev/null
cat >"$WORK/small.json" <<'JSON'
{
  "input": {"channels": 1, "height": 8, "width": 8},
  "classes": 4,
  "layers": [{"type": "conv2d", "filters": 4, "kernel": 3}, {"type": "relu"},
             {"type": "flatten"}, {"type": "dense", "units": 4}],
  "optimizer": {"type": "sgd", "lr": 0.1},
  "batch_size": 20, "epochs": 2, "dataset": "data.h5"
}
JSON
dlh-estimate recommend "$WORK/small.json" --samples 400 --cluster "$ROOT/share/cluster/local.json" \
  --types alpha --max-gpus 2 --json >"$WORK/small-plan.json" 2>/dev/null
mpirun -np 2 dlh-launch train "$WORK/small.json" --plan "$WORK/small-plan.json" --run-dir "$WORK/planned" \
  --progress none >"$WORK/planned.out" 2>&1 || { cat "$WORK/planned.out"; fail "planned run"; }
grep -q "done: .* steps, final test accuracy .*; predicted .*, took .* (.*%, .* the 90% band: <= .*); step .* ms predicted, .* ms measured" \
  "$WORK/planned.out" || { cat "$WORK/planned.out"; fail "no predicted against measured in the last line"; }
python3 - "$WORK/planned/summary.json" "$WORK/small-plan.json" <<'PY'
import json, sys
s, plan = (json.load(open(f)) for f in sys.argv[1:])
assert s["prediction"]["total_s"] == plan["predicted"]["total_s"], s["prediction"]
assert s["measured"]["whole_job"] and s["measured"]["total_s"] > 0 and s["measured"]["step_s"] > 0
assert "total_error_pct" in s["measured"] and "step_error_pct" in s["measured"]
PY
check "$(grep -o 'predicted [^;]*; step.*' "$WORK/planned.out")"

echo "scaling: the GPU allreduce algorithms on paper (issue 42)"
HGX=$ROOT/share/cluster/h100-hgx-ndr.json
dlh-estimate scaling "$ROOT/share/gpu/cnn-large.json" --cluster "$HGX" --node-type hgx-h100 \
  --gradient-mb 100 >"$WORK/scaling.txt" 2>&1 || { cat "$WORK/scaling.txt"; fail "scaling"; }
# 1, 2 and 4 GPUs in a node, then 1 to 8 whole nodes; large gradients: flat NCCL ahead.
[[ $(grep -c '^| [0-9]' "$WORK/scaling.txt") -eq 7 ]] || { cat "$WORK/scaling.txt"; fail "scaling rows"; }
grep -q '^| 64 | 8 | .* | flat |$' "$WORK/scaling.txt" || { cat "$WORK/scaling.txt"; fail "scaling at 64 GPUs"; }
check "$(grep '^| 64 ' "$WORK/scaling.txt")"
grep -q "on paper only" "$WORK/scaling.txt" && fail "scaling warned about a spec the GPU engine runs"
# A spec the GPU engine cannot run yet is timed on paper, and says recommend will not plan it.
dlh-estimate scaling "$ROOT/share/examples/resnet50-imagenet.json" --cluster "$HGX" --node-type hgx-h100 \
  >"$WORK/scaling-res.txt" 2>&1 || { cat "$WORK/scaling-res.txt"; fail "scaling of ResNet-50"; }
grep -q "^warning: .*residual is not supported by the CUDA engine yet: on paper only: recommend and the plugin do not plan it on hgx-h100" \
  "$WORK/scaling-res.txt" || { cat "$WORK/scaling-res.txt"; fail "no on-paper warning for ResNet-50"; }
check "$(grep 'on paper only' "$WORK/scaling-res.txt" | cut -c1-100)..."
expect_fail 2 "has no node type 'dgx'" dlh-estimate scaling "$ROOT/share/gpu/cnn-large.json" \
  --cluster "$HGX" --node-type dgx
expect_fail 2 "node-type: required" dlh-estimate scaling "$ROOT/share/gpu/cnn-large.json" --cluster "$HGX"
expect_fail 2 "gradient-mb: must not be negative" dlh-estimate scaling "$ROOT/share/gpu/cnn-large.json" \
  --cluster "$HGX" --node-type hgx-h100 --gradient-mb -1
# BENCHMARKS.md's on-paper tables are this build's model on the committed files: rendered
# again here, they must equal the committed section (share/gpu/paper.sh says how to remake it).
bash "$ROOT/share/gpu/paper.sh" "$BINDIR" >"$WORK/paper.md"
diff -u "$ROOT/share/gpu/paper/scaling-8gpu.md" "$WORK/paper.md" >"$WORK/paper.diff" ||
  { cat "$WORK/paper.diff"; fail "share/gpu/paper/scaling-8gpu.md differs from what this build computes: run share/gpu/paper.sh > share/gpu/paper/scaling-8gpu.md, then python3 share/bench/report.py render"; }
check "BENCHMARKS.md's on-paper tables are what this build computes"
