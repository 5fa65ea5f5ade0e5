#!/bin/bash
# --device on a machine without a usable GPU (CI): auto falls back to the CPU with one line,
# cuda fails on every rank with one line and exit code 2, a bad value is a usage error, and
# a missing backend is named. With a GPU, share/gpu/gpu-check.sh covers the GPU path.
source "$(dirname "$0")/common.bash"
probe=$("$BINDIR/gpu_tests" --gtest_brief=1 2>/dev/null | head -1 || true)
if [[ -x $BINDIR/gpu_tests && $probe != *SKIPPING* ]]; then
  echo "  skipped: this machine has a usable GPU (share/gpu/gpu-check.sh tests that path)"
  exit 0
fi
dlh-data synthetic --out "$WORK/s.h5" --shape 1x8x8 --classes 3 --train 64 --test 16 >/dev/null
cat >"$WORK/spec.json" <<'JSON'
{"name": "tiny", "input": {"channels": 1, "height": 8, "width": 8}, "classes": 3,
 "layers": [{"type": "flatten"}, {"type": "dense", "units": 3}],
 "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 16, "epochs": 1, "seed": 1, "dataset": "s.h5"}
JSON
train() { dlh-launch train "$WORK/spec.json" --data "$WORK/s.h5" --run-dir "$WORK/run" --no-resume --progress none "$@"; }

echo "auto falls back to the CPU, saying why once"
DLH_POWERCAP_DIR=$WORK/no-powercap mpirun -np 2 "$BINDIR/dlh-launch" train "$WORK/spec.json" \
  --data "$WORK/s.h5" --run-dir "$WORK/run" --no-resume --progress none --device auto >"$WORK/auto.txt" 2>&1
[[ $(grep -c "no usable GPU on rank 0 .*training on the CPU" "$WORK/auto.txt") -eq 1 ]] ||
  { cat "$WORK/auto.txt"; fail "no single fallback line"; }
[[ $(json_field "$WORK/run/summary.json" device) == cpu ]] || fail "summary.json device is not cpu"
check "$(grep "no usable GPU" "$WORK/auto.txt")"
# No RAPL there (and no GPU): the energy is "not measured" and why, never a made-up figure.
[[ $(json_field "$WORK/run/summary.json" energy) == \
  "{'measured': False, 'why': 'rank 0: RAPL not readable: $WORK/no-powercap: No such file or directory'}" ]] ||
  fail "summary.json energy: $(json_field "$WORK/run/summary.json" energy)"
! grep -q energy_j "$WORK/run/metrics.jsonl" || fail "metrics.jsonl has energy_j without a meter"
check "energy not measured, and why"

echo "cuda without a GPU fails on every rank with one line"
expect_fail 2 "^dlh-launch: error: --device cuda: no usable GPU on rank 0" \
  mpirun -np 2 "$BINDIR/dlh-launch" train "$WORK/spec.json" --data "$WORK/s.h5" --run-dir "$WORK/run2" \
  --no-resume --progress none --device cuda
[[ $(grep -c "error" "$WORK/err.txt") -eq 1 ]] || fail "more than one error line"
[[ ! -e $WORK/run2/checkpoints ]] || [[ -z $(ls "$WORK/run2/checkpoints") ]] || fail "a checkpoint was written"

echo "bad values and a missing backend"
expect_fail 2 "--device: must be auto, cpu or cuda, got 'gpu'" train --device gpu
expect_fail 2 "--comm-timeout: must be positive" train --comm-timeout 0
DLH_CUDA_BACKEND=$WORK/none.so expect_fail 2 "no CUDA backend ($WORK/none.so not found)" train --device cuda
echo "cpu never loads the backend"
DLH_CUDA_BACKEND=$WORK/none.so train --device cpu >/dev/null 2>&1 || fail "--device cpu failed"
check "--device cpu trained"
