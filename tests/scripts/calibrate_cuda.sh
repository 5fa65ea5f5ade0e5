#!/bin/bash
# dlh-estimate calibrate|validate through `dlh-launch time-steps`, the child process that times
# GPU calibrations: the whole path with the CPU engine (--device cpu --via-launch), and
# --device cuda on a machine without a GPU (one line, exit code 2, nothing written).
source "$(dirname "$0")/common.bash"
mkdir -p "$WORK/tmp"
export TMPDIR=$WORK/tmp  # the request and result must not be left behind

echo "calibrate --device cpu --via-launch (quick sweep through dlh-launch time-steps)"
dlh-estimate calibrate --device cpu --via-launch --quick --repeats 2 --threads 1 \
  --out "$WORK/cal.json" >"$WORK/cal.txt" 2>"$WORK/cal.err" ||
  { cat "$WORK/cal.txt" "$WORK/cal.err"; fail "calibrate --via-launch failed"; }
grep -q "timing 22 configurations on cpu (1 thread)" "$WORK/cal.err" ||
  { cat "$WORK/cal.err"; fail "no announcement of the device"; }
grep -q "^\[22/22\] " "$WORK/cal.err" || { cat "$WORK/cal.err"; fail "no progress from the child"; }
check "$(grep 'fit (' "$WORK/cal.txt")"
python3 - "$WORK/cal.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["device"] == "cpu" and c["threads"] == 1, (c["device"], c["threads"])
assert len(c["samples"]) == 22 and all(s["seconds"] > 0 for s in c["samples"])
assert len(c["engine"]["fingerprint"]) == 12
PY
dlh-estimate fit "$WORK/cal.json" --folds 3 | grep -q "R2" || fail "the calibration does not load"
live_check_calibration "$WORK/cal.json"
check "calibration of 22 samples loads and fits"
[[ -z $(ls -A "$WORK/tmp") ]] || fail "left behind: $(ls "$WORK/tmp")"
check "no temporary files left"

echo "validate --device cpu --via-launch"
dlh-estimate validate --device cpu --via-launch --calibration "$WORK/cal.json" --repeats 2 \
  --rounds 2 >"$WORK/val.txt" 2>"$WORK/val.err" || { cat "$WORK/val.err"; fail "validate failed"; }
grep -q "^validation set: judged (14 models" "$WORK/val.txt" || { cat "$WORK/val.txt"; fail "not the judged set"; }
grep -q "MAPE over 14 models" "$WORK/val.txt" || { cat "$WORK/val.txt"; fail "no MAPE"; }
check "$(grep "MAPE over" "$WORK/val.txt")"
dlh-estimate validate --device cpu --via-launch --calibration "$WORK/cal.json" --repeats 1 \
  --save "$WORK/saved.json" >/dev/null 2>&1 || fail "validate --save"
dlh-estimate validate --calibration "$WORK/cal.json" --measured "$WORK/saved.json" |
  grep -q "MAPE over 14 models" || fail "validate --measured of a --via-launch measurement"
expect_fail 2 "no model of the term set" \
  dlh-estimate validate --calibration "$WORK/cal.json" --measured "$WORK/saved.json" --set term
check "validate --save, then --measured of that file"

echo "dlh-launch time-steps directly"
python3 - "$WORK/req.json" <<'PY'
import json, sys
spec = {"name": "tiny", "input": {"channels": 1, "height": 8, "width": 8}, "classes": 2,
        "layers": [{"type": "flatten"}, {"type": "dense", "units": 2}],
        "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 4, "epochs": 1, "dataset": "-"}
json.dump({"format": "dlh-time-steps-request", "version": 1,
           "entries": [{"batch": 8, "spec": spec}]}, open(sys.argv[1], "w"))
PY
dlh-launch time-steps --in "$WORK/req.json" --out "$WORK/res.json" --repeats 2 >/dev/null
python3 - "$WORK/res.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["complete"] and r["device"]["kind"] == "cpu", r
s = r["samples"][0]
assert s["model"] == "tiny" and s["batch"] == 8 and s["seconds"] > 0 and s["error"] is None, s
assert r["options"]["warmup_seconds"] == 0, r["options"]  # the CPU's default: no timed warm-up
PY
check "one entry timed, result complete"
dlh-launch time-steps --in "$WORK/req.json" --out "$WORK/res.json" --repeats 1 --warmup 0 \
  --warmup-seconds 0.2 >/dev/null
python3 - "$WORK/res.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["complete"] and r["options"]["warmup_seconds"] == 0.2, r["options"]
PY
check "--warmup-seconds recorded in the result"
expect_fail 2 "--warmup-seconds: must be 0 to 60" \
  dlh-launch time-steps --in "$WORK/req.json" --out "$WORK/res.json" --warmup-seconds -1
sed 's/"units": 2/"units": 0/' "$WORK/req.json" >"$WORK/bad.json"
expect_fail 2 "^dlh-launch: .*bad.json: entries\[0\].spec: layers\[1\].units" \
  dlh-launch time-steps --in "$WORK/bad.json" --out "$WORK/bad-res.json"
expect_fail 2 "time-steps: --out is required" dlh-launch time-steps --in "$WORK/req.json"

echo "bad options and a missing launcher"
expect_fail 2 "--device: must be cpu, cuda or cuda:N, got 'gpu'" \
  dlh-estimate calibrate --device gpu --quick --out "$WORK/x.json"
DLH_LAUNCH=$WORK/no-such-launcher expect_fail 1 "cannot run $WORK/no-such-launcher" \
  dlh-estimate calibrate --device cpu --via-launch --quick --out "$WORK/x.json"
[[ ! -e $WORK/x.json ]] || fail "a failed calibration wrote its file"

echo "calibrate --device cuda"
if nvidia-smi -L >/dev/null 2>&1; then
  check "skipped: this machine has a GPU (share/gpu/gpu-check.sh calibrates it)"
else
  expect_fail 2 "dlh-launch time-steps --device cuda failed (exit 2): no usable GPU on " \
    dlh-estimate calibrate --device cuda --quick --out "$WORK/gpu.json"
  [[ $(wc -l <"$WORK/err.txt") -eq 1 ]] || { cat "$WORK/err.txt"; fail "more than one line"; }
  [[ ! -e $WORK/gpu.json ]] || fail "calibrate --device cuda wrote a file without a GPU"
  [[ -z $(ls -A "$WORK/tmp") ]] || fail "left behind: $(ls "$WORK/tmp")"
  check "one line, exit code 2, nothing written"
  expect_fail 2 "no usable GPU on " \
    dlh-estimate validate --device cuda:1 --calibration "$WORK/cal.json"
fi

echo "a child that dies keeps the entries it finished"
# A stand-in for dlh-launch: its first run times two entries, then dies as by SIGSEGV; later
# runs time all they get. validate must go on after the entry it died on.
cat >"$WORK/fake-launch" <<'PY'
#!/usr/bin/python3
import json, os, sys
a = dict(zip(sys.argv[2::2], sys.argv[3::2]))
entries = json.load(open(a["--in"]))["entries"]
first = not os.path.exists(a["--out"] + ".ran")
open(a["--out"] + ".ran", "w").close()
print("time-steps: %d entries on fake" % len(entries), flush=True)
samples = []
for i, e in enumerate(entries):
    if first and i == 2:
        print("fake: segmentation fault", flush=True)
        os.kill(os.getpid(), 11)
    samples.append({"model": e["spec"]["name"], "batch": e["batch"], "seconds": 0.001 * (i + 1),
                    "joules": None, "error": None})
    json.dump({"format": "dlh-time-steps-result", "version": 1,
               "complete": len(samples) == len(entries), "device": {"kind": "fake"},
               "options": {}, "samples": samples}, open(a["--out"], "w"))
    print("[%d/%d] %s" % (i + 1, len(entries), e["spec"]["name"]), flush=True)
PY
chmod +x "$WORK/fake-launch"
DLH_LAUNCH=$WORK/fake-launch dlh-estimate validate --device cpu --via-launch --set term \
  --calibration "$WORK/cal.json" >"$WORK/crash.txt" 2>"$WORK/crash.err" ||
  { cat "$WORK/crash.err"; fail "validate did not survive a crashed child"; }
grep -q "warning: dlh-launch time-steps --device cpu failed (exit 139): fake: segmentation fault; going on after val-wide-shallow-in28c1-b64" \
  "$WORK/crash.err" || { cat "$WORK/crash.err"; fail "no warning naming the entry"; }
grep -q "MAPE over 6 models" "$WORK/crash.txt" || { cat "$WORK/crash.txt"; fail "not 6 models"; }
check "crash on the 3rd model: warned, restarted, $(grep -o 'MAPE over 6 models' "$WORK/crash.txt")"

echo "calibrate --device cuda with a stand-in for the GPU's dlh-launch"
# The GPU path of dlh-estimate (GPU sweep, device record, a model that does not fit) without
# a GPU: the stand-in answers like `dlh-launch time-steps --device cuda` on an H100.
cat >"$WORK/fake-gpu-launch" <<'PY'
#!/usr/bin/python3
import json, sys
a = dict(zip(sys.argv[2::2], sys.argv[3::2]))
assert a["--device"] == "cuda:0", a
entries = json.load(open(a["--in"]))["entries"]
device = {"kind": "cuda", "index": 0, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "0000:3B:00.0",
          "compute_capability": "9.0", "multiprocessors": 132, "memory_bytes": 85899345920,
          "max_sm_clock_mhz": 1980, "driver_cuda": "13.0", "cuda_runtime": "13.0",
          "cudnn": "9.10.2", "cublas": "13.0.0", "nccl": "2.28.9"}
print("time-steps: %d entries on %s (GPU 0)" % (len(entries), device["name"]), flush=True)
samples = []
for i, e in enumerate(entries):
    s = e["spec"]
    side = s["input"]["height"]
    big = side == 224
    samples.append({"model": s["name"], "batch": e["batch"],
                    "seconds": None if big else 1e-3 + 2e-8 * e["batch"] * side * side * (1 + i % 3),
                    "joules": None if big else 0.5, "error": "CUDA error: out of memory" if big else None})
    print("[%d/%d] %s" % (i + 1, len(entries), s["name"]), flush=True)
json.dump({"format": "dlh-time-steps-result", "version": 1, "complete": True, "device": device,
           "options": {}, "samples": samples}, open(a["--out"], "w"))
PY
chmod +x "$WORK/fake-gpu-launch"
DLH_LAUNCH=$WORK/fake-gpu-launch dlh-estimate calibrate --device cuda:0 --quick \
  --out "$WORK/gpu.json" >"$WORK/gpu.txt" 2>"$WORK/gpu.err" ||
  { cat "$WORK/gpu.txt" "$WORK/gpu.err"; fail "calibrate --device cuda:0 failed"; }
grep -q "timing 19 configurations on NVIDIA H100 80GB HBM3 (GPU 0)" "$WORK/gpu.err" ||
  { cat "$WORK/gpu.err"; fail "no announcement of the GPU"; }
grep -q "warning: not timed: conv2-f32-fc0-in224c3-b64 b64: CUDA error: out of memory" \
  "$WORK/gpu.err" || { cat "$WORK/gpu.err"; fail "no warning for the model that did not fit"; }
python3 - "$WORK/gpu.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["device"] == "cuda" and c["threads"] == 0, c["device"]
assert c["host"] == ("NVIDIA H100 80GB HBM3 (GPU 0, sm_90, 132 SMs, 80.0 GiB, 1980 MHz), "
                     "driver CUDA 13.0, runtime 13.0"), c["host"]
assert c["engine"]["blas"] == "cuDNN 9.10.2, cuBLAS 13.0.0, NCCL 2.28.9", c["engine"]
assert c["device_info"]["pci_bus_id"] == "0000:3B:00.0"
assert len(c["samples"]) == 18 and all(s["joules"] == 0.5 for s in c["samples"])
assert min(s["batch"] for s in c["samples"]) >= 64
PY
dlh-estimate fit "$WORK/gpu.json" --folds 3 | grep -q "fit (cuda)" || fail "the GPU calibration does not load"
check "GPU calibration of 18 samples (1 out of memory), device recorded, loads"
