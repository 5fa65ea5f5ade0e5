#!/bin/bash
# dlh-estimate profile --device cuda: a GPU step timed pass by pass (issue 40, part 5). Without
# a GPU here: the refusals (one line each, exit 2), then the two offline readers of a kept
# profile, `profile --measured` and `gpu-layers --profile`, on a profile written below in
# the layout the CUDA engine's passes take (launcher/engine/cuda/step_timer.hpp). Its times
# are made up: they test the reading and the matching of passes to the layer model's
# kernels, not the model. A lent GPU measures a real one (share/gpu/gpu-check.sh).
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SPEC="$ROOT/share/examples/fashion-mnist.json"

echo "refusals"
expect_fail 2 "no usable GPU on" dlh-estimate profile --device cuda "$SPEC"
expect_fail 2 "the CPU engine is profiled in this process" dlh-estimate profile --device cpu "$SPEC"
expect_fail 2 "give SPEC or --set NAME" dlh-estimate profile --device cuda
expect_fail 2 "must be term, judged, all, sweep or quick-sweep" \
  dlh-estimate profile --device cuda --set bogus
expect_fail 2 "cannot write in $WORK/none" \
  dlh-estimate profile --device cuda "$SPEC" --out "$WORK/none/profile.json"
expect_fail 2 "times the GPU engine's layers (--device cuda)" \
  dlh-launch time-steps --device cpu --profile 3 --in "$WORK/req.json" --out "$WORK/res.json"
[[ ! -e "$WORK/res.json" ]] || fail "time-steps wrote a result for a refused --profile"

echo "profile --device cuda through a stand-in for the GPU's dlh-launch"
# It answers like `dlh-launch time-steps --device cuda --profile N` on an H100: every layer's
# forward, the loss, every layer's backward from the last (a convolution or dense layer in
# two passes, weights then input gradient, but the first layer, which has none), then the
# update; the last model did not fit.
cat >"$WORK/fake-gpu-launch" <<'PY'
#!/usr/bin/python3
import json, sys
a = dict(zip(sys.argv[2::2], sys.argv[3::2]))
assert a["--device"] == "cuda" and a["--profile"] == "4" and a["--repeats"] == "2", a
entries = json.load(open(a["--in"]))["entries"]
device = {"kind": "cuda", "index": 0, "name": "NVIDIA H100 80GB HBM3",
          "compute_capability": "9.0", "multiprocessors": 132, "memory_bytes": 85017493504,
          "max_sm_clock_mhz": 1980, "driver_cuda": "13.0", "cuda_runtime": "13.0"}
print("time-steps: %d entries on %s (GPU 0)" % (len(entries), device["name"]), flush=True)
library = {"conv2d": ("IMPLICIT_PRECOMP_GEMM", "tensor_op", 1 << 20),
           "dense": ("cuBLASLt matmul, bias epilogue", "fp32", 0)}
def row(layer, kind, p, device, host, algo=None, math=None, ws=0):
    return {"layer": layer, "kind": kind, "pass": p, "device_s": device, "host_s": host,
            "algorithm": algo, "math": math, "workspace_bytes": ws}
samples = []
for n, e in enumerate(entries):
    kinds = [l["type"] for l in e["spec"]["layers"]]
    if n == len(entries) - 1:
        samples.append({"model": e["spec"]["name"], "batch": e["batch"], "seconds": None,
                        "joules": None, "error": "CUDA error: out of memory"})
        continue
    rows = [row(i, k, "forward", 4e-6 * (i + 1), 6e-6, *library.get(k, (None, None, 0)))
            for i, k in enumerate(kinds)]
    rows.append(row(-1, "loss", "loss", 1e-5, 8e-6))
    for i in reversed(range(len(kinds))):
        k = kinds[i]
        if k in library:
            rows.append(row(i, k, "backward-weights", 3e-5, 9e-6, *library[k]))
            if i > 0:
                rows.append(row(i, k, "backward-data", 2.5e-5, 7e-6, *library[k]))
        else:
            rows.append(row(i, k, "backward", 1e-5, 5e-6))
    rows.append(row(-1, "update", "update", 4e-6, 5e-6))
    samples.append({"model": e["spec"]["name"], "batch": e["batch"],
                    "seconds": 1.1 * sum(r["device_s"] for r in rows), "joules": None,
                    "error": None, "layers": rows})
    if n == 1:  # as if a call inside its step had waited for the stream the timer held
        samples[-1]["layers_held"] = False
    print("[%d/%d] %s" % (n + 1, len(entries), e["spec"]["name"]), flush=True)
json.dump({"format": "dlh-time-steps-result", "version": 1, "complete": True, "device": device,
           "options": {"profile_steps": int(a["--profile"])}, "samples": samples},
          open(a["--out"], "w"))
PY
chmod +x "$WORK/fake-gpu-launch"
DLH_LAUNCH=$WORK/fake-gpu-launch dlh-estimate profile --device cuda --set term --steps 4 \
  --repeats 2 --out "$WORK/profile.json" >"$WORK/profiled.txt" 2>"$WORK/profiled.err" ||
  { cat "$WORK/profiled.txt" "$WORK/profiled.err"; fail "profile --device cuda"; }
grep -q "profiling 10 models on NVIDIA H100 80GB HBM3 (GPU 0)" "$WORK/profiled.err" ||
  { cat "$WORK/profiled.err"; fail "no announcement of the GPU"; }
grep -q "warning: not profiled: val-gpu-mlp-3072-4096x3-b1024 b1024: CUDA error: out of memory" \
  "$WORK/profiled.err" || { cat "$WORK/profiled.err"; fail "no warning for the model that did not fit"; }
python3 - "$WORK/profile.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["format"] == "dlh-time-steps-result" and r["complete"], r.keys()
assert r["options"]["profile_steps"] == 4 and r["device"]["name"] == "NVIDIA H100 80GB HBM3"
assert len(r["samples"]) == 10 and sum(1 for s in r["samples"] if s.get("layers")) == 9
PY
check "profile --device cuda: 10 models asked of the child, 9 profiled and kept with --out"

echo "a kept profile, read back"
dlh-estimate profile --measured "$WORK/profile.json" >"$WORK/measured.txt" ||
  { cat "$WORK/measured.txt"; fail "profile --measured"; }
grep -q "^on NVIDIA H100 80GB HBM3 (GPU 0, sm_90, 132 SMs.*the median of 4 profiled steps" \
  "$WORK/measured.txt" || { cat "$WORK/measured.txt"; fail "no header"; }
grep -Eq "^ +0 conv2d +forward +0\.0040 +0\.0060  IMPLICIT_PRECOMP_GEMM +tensor_op +1\.0 MiB" \
  "$WORK/measured.txt" || { cat "$WORK/measured.txt"; fail "no row of the first convolution"; }
grep -Eq "the passes: device [0-9.]+ ms, host [0-9.]+ ms to issue them; the step timed whole: [0-9.]+ ms" "$WORK/measured.txt" ||
  { cat "$WORK/measured.txt"; fail "no sum of the passes"; }
grep -q "^val-gpu-mlp-3072-4096x3-b1024 b1024: not profiled: CUDA error: out of memory" "$WORK/measured.txt" ||
  { cat "$WORK/measured.txt"; fail "the failed model is not said"; }
grep -q "^val-vgg-small-in32c3-b32, batch 32: step [0-9.]* ms timed whole; its steps could not be held until issued" \
  "$WORK/measured.txt" || { cat "$WORK/measured.txt"; fail "the unheld model is not said"; }
check "profile --measured: $(grep -c conv2d "$WORK/measured.txt") convolution rows, the failed and the unheld model named"
dlh-estimate profile --measured "$WORK/profile.json" --json >"$WORK/again.json"
cmp -s <(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["samples"], sort_keys=True))' "$WORK/profile.json") \
  <(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["samples"], sort_keys=True))' "$WORK/again.json") ||
  fail "--json does not give the kept samples back"
check "profile --measured --json gives the samples back unchanged"

row=$(python3 "$ROOT/share/gpu/gpu_check_rows.py" profile "$WORK/profile.json")
want=$(python3 - "$WORK/profile.json" <<'PY'
import json, sys
done = [s for s in json.load(open(sys.argv[1]))["samples"] if s.get("layers")]
conv = sum(1 for s in done for p in s["layers"] if p["kind"] == "conv2d")
print(f"passed: 9 of 10 models, {sum(len(s['layers']) for s in done)} passes; *; {conv} of {conv} "
      "convolution passes name cuDNN's algorithm; not profiled: val-gpu-mlp-3072-4096x3-b1024; "
      "1 model(s) could not be held until issued (their device times hold the host's gaps)")
PY
)
# shellcheck disable=SC2053  # $want is a pattern
[[ $row == $want ]] || fail "gpu-check's row of the profile: $row (expected $want)"
check "gpu-check's row: $row"

echo "gpu-layers --profile: the layer model's passes against the profile"
dlh-estimate gpu-layers --calibration "$ROOT/share/calibration/h100-80gb-hbm3.json" \
  --peaks "$ROOT/share/gpu/specs/h100-sxm.json" --folds 0 --profile "$WORK/profile.json" \
  --passes >"$WORK/layers.txt" 2>&1 || { cat "$WORK/layers.txt"; fail "gpu-layers --profile"; }
python3 - "$WORK/profile.json" "$WORK/layers.txt" <<'PY'
import collections, json, re, sys
done = [s for s in json.load(open(sys.argv[1]))["samples"] if s.get("layers")]
want = collections.Counter(f"{p['kind']} {p['pass']}" for s in done for p in s["layers"]
                           if p["kind"] != "flatten")  # the model runs no kernel for flatten
left_out = sum(1 for s in done for p in s["layers"] if p["kind"] == "flatten")
text = open(sys.argv[2]).read()
assert (f"({len(done)} models, 1 of them not held: their device times hold the host's gaps; "
        f"{left_out} passes the model runs no kernel for left out)") in text, text
got = {}
for line in text.splitlines():
    m = re.match(r"^([a-z0-9]+ [a-z-]+) +([0-9]+) +([0-9.]+) +([0-9.]+) +([0-9.]+)% +([0-9.]+) +([0-9.]+)", line)
    if m:
        got[m[1]] = int(m[2])
        assert float(m[4]) > 0 and float(m[7]) > 0, line  # the model gives every pass time
assert got == dict(want), (got, want)
PY
check "gpu-layers --profile: $(python3 -c "import re,sys; print(sum(1 for l in open(sys.argv[1]) if re.match(r'^[a-z0-9]+ [a-z-]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+%', l)))" "$WORK/layers.txt") groups of passes by kind, each predicted"
dlh-estimate gpu-layers --calibration "$ROOT/share/calibration/h100-80gb-hbm3.json" \
  --peaks "$ROOT/share/gpu/specs/h100-sxm.json" --folds 0 --profile "$WORK/profile.json" \
  --fit-profile >"$WORK/fitted.txt" 2>&1 || { cat "$WORK/fitted.txt"; fail "gpu-layers --fit-profile"; }
grep -Eq "^layer model fitted to the passes of $WORK/profile.json: device terms to [0-9]+ passes, MAPE [0-9.]+%; host terms to [0-9]+ passes, MAPE [0-9.]+% \(the profile's own marking, [0-9.]+ us a pass, left out\); the step to 9 whole steps, MAPE [0-9.]+%" \
  "$WORK/fitted.txt" || { cat "$WORK/fitted.txt"; fail "no fit to the passes"; }
grep -Eq "^the sweep's whole steps under the fit to the passes: MAPE [0-9.]+%" "$WORK/fitted.txt" ||
  { cat "$WORK/fitted.txt"; fail "the fit to the passes is not judged on the sweep"; }
check "gpu-layers --fit-profile: $(grep -o 'device terms to [0-9]* passes' "$WORK/fitted.txt"), $(grep -o 'the step to 9 whole steps' "$WORK/fitted.txt")"
expect_fail 2 "fit-profile: needs --profile" dlh-estimate gpu-layers \
  --calibration "$ROOT/share/calibration/h100-80gb-hbm3.json" \
  --peaks "$ROOT/share/gpu/specs/h100-sxm.json" --fit-profile
expect_fail 2 "passes: needs --profile" dlh-estimate gpu-layers \
  --calibration "$ROOT/share/calibration/h100-80gb-hbm3.json" \
  --peaks "$ROOT/share/gpu/specs/h100-sxm.json" --passes

echo "a damaged profile"
sed 's/"pass": "loss"/"pass": "sideways"/' "$WORK/profile.json" >"$WORK/bad.json"
expect_fail 2 "bad.json: samples\[0\].layers\[12\].pass: must be forward, backward" \
  dlh-estimate profile --measured "$WORK/bad.json"
echo "gpu_profile: all passed"
