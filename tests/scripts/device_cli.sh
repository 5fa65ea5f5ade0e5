#!/bin/bash
# --device on a machine without a usable GPU (CI): auto falls back to the CPU, saying so in
# one line where a GPU was asked for (--device given, a plan for GPUs, GPUs in the
# environment) or with --verbose, and quietly otherwise; cuda fails on every rank with one
# line and exit code 2, a bad value is a usage error, and a missing backend is named. With a
# GPU, share/gpu/gpu-check.sh covers the GPU path.
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

# No GPU in the environment and no plan, whatever the shell running the test holds.
plain() { env -u CUDA_VISIBLE_DEVICES -u SLURM_STEP_GPUS -u SLURM_JOB_GPUS -u SLURM_GPUS_ON_NODE \
  -u DLH_PLAN -u SLURM_SPANK_DLH_PLAN "$@"; }
fallbacks() { grep -c "no usable GPU on rank 0 .*training on the CPU" "$1" || true; }
# expect_line quiet|says NAME [VAR=VALUE...] -- OPTIONS...: a 2-rank run, without the fallback
# line or with it once.
expect_line() {
  local want=$1 name=$2; shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  plain env "${envs[@]}" mpirun -np 2 "$BINDIR/dlh-launch" train "$WORK/spec.json" --data "$WORK/s.h5" \
    --run-dir "$WORK/run-$name" --no-resume --progress none "$@" >"$WORK/$name.txt" 2>&1 ||
    { cat "$WORK/$name.txt"; fail "$name: the run failed"; }
  [[ $(json_field "$WORK/run-$name/summary.json" device) == cpu ]] || fail "$name: summary.json device is not cpu"
  local n
  n=$(fallbacks "$WORK/$name.txt")
  if [[ $want == quiet ]]; then
    ((n == 0)) || { cat "$WORK/$name.txt"; fail "$name: a fallback line where no GPU was asked for"; }
    check "$name: trained on the CPU without a word about GPUs"
  else
    ((n == 1)) || { cat "$WORK/$name.txt"; fail "$name: $n fallback lines, not 1"; }
    check "$name: $(grep "no usable GPU" "$WORK/$name.txt")"
  fi
}

echo "auto on the CPU is quiet where no GPU was asked for"
expect_line quiet plain --
printf '{"format_version": 1, "global_batch": 16, "lr": 0.1}' >"$WORK/plan-nogpu.json"
expect_line quiet plan-without-gpus -- --plan "$WORK/plan-nogpu.json"
expect_line quiet device-cpu-verbose -- --device cpu --verbose

echo "auto on the CPU says so where a GPU was asked for, or with --verbose"
expect_line says verbose -- --verbose
printf '{"format_version": 1, "global_batch": 16, "lr": 0.1, "allocation": {"gpus": 2}}' >"$WORK/plan.json"
expect_line says plan-with-gpus DLH_PLAN="$(cat "$WORK/plan.json")" --
expect_line says cuda-visible-devices CUDA_VISIBLE_DEVICES=0 --
expect_line says slurm-job-gpus SLURM_JOB_GPUS=0 --

echo "a plan for real GPUs (a part with a compute capability) never trains on the CPU (issue 42)"
cat >"$WORK/plan-a100.json" <<'JSON'
{"format_version": 1, "global_batch": 16, "lr": 0.1, "allocation": {"gpus": 2, "nodes": 1,
 "parts": [{"node_type": "gpu-a100", "gpu": "a100", "nodes": 1, "gpus_per_node": 2,
            "per_gpu_batch": 8, "compute_capability": "8.0"}]}}
JSON
plain env DLH_PLAN="$(cat "$WORK/plan-a100.json")" mpirun -np 2 "$BINDIR/dlh-launch" train "$WORK/spec.json" \
  --data "$WORK/s.h5" --run-dir "$WORK/run-a100" --no-resume --progress none >"$WORK/a100.txt" 2>&1 &&
  { cat "$WORK/a100.txt"; fail "a plan for a100 GPUs trained on a machine without one"; }
line=$(grep -E "^dlh-launch: error: the plan \(DLH_PLAN\) put this job on a100 \(compute capability 8\.0\) GPUs: no usable GPU on rank 0 \([^)]*\): .*; not training on the CPU \(--device cpu to train there anyway\)$" "$WORK/a100.txt" || true)
[[ -n $line ]] || { cat "$WORK/a100.txt"; fail "no line saying the plan's GPUs are missing"; }
[[ $(grep -c "error" "$WORK/a100.txt") -eq 1 ]] || { cat "$WORK/a100.txt"; fail "more than one error line"; }
[[ ! -e $WORK/run-a100 ]] || fail "the refused run left its run folder: $(find "$WORK/run-a100" | head -5)"
check "${line#dlh-launch: error: }"
plain env DLH_PLAN="$(cat "$WORK/plan-a100.json")" mpirun -np 2 "$BINDIR/dlh-launch" train "$WORK/spec.json" \
  --data "$WORK/s.h5" --run-dir "$WORK/run-a100-cpu" --no-resume --progress none --device cpu \
  >"$WORK/a100-cpu.txt" 2>&1 || { cat "$WORK/a100-cpu.txt"; fail "--device cpu under the a100 plan failed"; }
[[ $(json_field "$WORK/run-a100-cpu/summary.json" device) == cpu ]] || fail "--device cpu: summary.json device is not cpu"
check "--device cpu under that plan trains on the CPU, as asked"
# The local cluster's CPU-rank types have no compute capability: their plans train on the CPU.
sed 's/, "compute_capability": "8.0"//' "$WORK/plan-a100.json" >"$WORK/plan-fake.json"
expect_line says plan-fake-gpus DLH_PLAN="$(cat "$WORK/plan-fake.json")" --

echo "lr-find likewise"
lr_find() { plain mpirun -np 2 "$BINDIR/dlh-launch" lr-find "$WORK/spec.json" --data "$WORK/s.h5" --batch 4 \
  --steps 10 --out "$WORK/lr.json" "$@" >"$WORK/lr.txt" 2>&1 || { cat "$WORK/lr.txt"; fail "lr-find $* failed"; }; }
lr_find
[[ $(fallbacks "$WORK/lr.txt") == 0 ]] || { cat "$WORK/lr.txt"; fail "lr-find: a fallback line where no GPU was asked for"; }
lr_find --verbose
[[ $(fallbacks "$WORK/lr.txt") == 1 ]] || { cat "$WORK/lr.txt"; fail "lr-find --verbose: no fallback line"; }
check "lr-find: quiet, and one line with --verbose"

echo "auto falls back to the CPU, saying why once"
DLH_POWERCAP_DIR=$WORK/no-powercap plain mpirun -np 2 "$BINDIR/dlh-launch" train "$WORK/spec.json" \
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
[[ ! -e $WORK/run2 ]] || fail "the refused run left its run folder: $(find "$WORK/run2" | head -5)"

echo "a bf16 spec: the CPU engine refuses it on every --device, naming the field (issue 43)"
sed 's/"seed": 1,/"seed": 1, "precision": "bf16",/' "$WORK/spec.json" >"$WORK/bf16.json"
bf16_line='bf16.json: precision: "bf16" needs the CUDA engine; the CPU engine trains in fp32 only (set "precision": "fp32" to train this spec on the CPU)$'
for device in cpu auto; do
  expect_fail 2 "^dlh-launch: error: .*$bf16_line" plain mpirun -np 2 "$BINDIR/dlh-launch" train "$WORK/bf16.json" \
    --data "$WORK/s.h5" --run-dir "$WORK/run-bf16-$device" --no-resume --progress none --device $device
  [[ $(grep -c "error" "$WORK/err.txt") -eq 1 ]] || { cat "$WORK/err.txt"; fail "--device $device: more than one error line"; }
  [[ ! -e $WORK/run-bf16-$device ]] || fail "--device $device: the refused run left its run folder"
  check "--device $device: $(grep -o "error: .*" "$WORK/err.txt" | cut -c1-150)..."
done
# The CUDA engine's bf16 has not run on a GPU yet: refused too, without sending the user to
# the CPU, which cannot train it either.
expect_fail 2 'precision: "bf16" is not supported by the CUDA engine yet (its bf16 path has not run on a GPU)$' \
  dlh-launch train "$WORK/bf16.json" --data "$WORK/s.h5" --run-dir "$WORK/run-bf16-cuda" --no-resume \
  --progress none --device cuda

echo "bad values and a missing backend"
expect_fail 2 "--device: must be auto, cpu or cuda, got 'gpu'" train --device gpu
expect_fail 2 "--comm-timeout: must be positive" train --comm-timeout 0
DLH_CUDA_BACKEND=$WORK/none.so expect_fail 2 "no CUDA backend ($WORK/none.so not found)" train --device cuda
echo "cpu never loads the backend"
DLH_CUDA_BACKEND=$WORK/none.so train --device cpu >/dev/null 2>&1 || fail "--device cpu failed"
check "--device cpu trained"
