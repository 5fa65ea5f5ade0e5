#!/bin/bash
# The shipped ResNet specs train on the CPU engine: ResNet-18 (CIFAR-sized, on 1 and 2 ranks)
# and ResNet-50 (224x224) take a few steps on synthetic data of their input shape, and a run
# stopped half-way and resumed ends with the same parameters, bit for bit, as one that never
# stopped: with their data augmentation (random crops and flips), the same images again. The
# 2-rank runs average the residual blocks' batch statistics across ranks.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

common=(--progress none --checkpoint-seconds 0 --no-epoch-checkpoints --no-eval --threads 1)

# resume_exact NAME SPEC DATA BATCH HALF FULL [mpirun -np N]: FULL steps straight against HALF
# steps, then a resumed run to FULL; both must end with the same param_crc32 and /params.
resume_exact() {
  local name=$1 spec=$2 data=$3 batch=$4 half=$5 full=$6
  shift 6
  local launch=("$@" dlh-launch train "$spec" --data "$data" --batch-size "$batch" "${common[@]}")
  "${launch[@]}" --run-dir "$WORK/$name-a" --max-steps "$full" --no-resume >"$WORK/$name-a.log" 2>&1 ||
    { cat "$WORK/$name-a.log"; fail "$name: the straight run failed"; }
  "${launch[@]}" --run-dir "$WORK/$name-b" --max-steps "$half" --no-resume >"$WORK/$name-b1.log" 2>&1 ||
    { cat "$WORK/$name-b1.log"; fail "$name: the first half failed"; }
  "${launch[@]}" --run-dir "$WORK/$name-b" --max-steps "$full" >"$WORK/$name-b2.log" 2>&1 ||
    { cat "$WORK/$name-b2.log"; fail "$name: the resumed run failed"; }
  grep -q "resumed from .*ckpt-0*$half\.h5" "$WORK/$name-b2.log" ||
    { cat "$WORK/$name-b2.log"; fail "$name: did not resume from step $half"; }
  local crc_a crc_b loss
  crc_a=$(json_field "$WORK/$name-a/summary.json" param_crc32)
  crc_b=$(json_field "$WORK/$name-b/summary.json" param_crc32)
  [[ $crc_a == "$crc_b" ]] || fail "$name: resumed param_crc32 $crc_b, straight $crc_a"
  local final
  final=$(basename "$(json_field "$WORK/$name-a/summary.json" last_checkpoint)")
  h5diff "$WORK/$name-a/checkpoints/$final" "$WORK/$name-b/checkpoints/$final" /params >/dev/null ||
    fail "$name: h5diff: /params differ in $final"
  loss=$(grep '"loss"' "$WORK/$name-a/metrics.jsonl" | tail -1 | sed -E 's/.*"loss":([^,]*).*/\1/')
  /usr/bin/python3 -c 'import math, sys; x = float(sys.argv[1]); sys.exit(0 if math.isfinite(x) and x > 0 else 1)' \
    "$loss" || fail "$name: last loss $loss"
  check "$name: $full steps straight = $half + $((full - half)) resumed (param_crc32 $crc_a, last loss $loss)"
}

echo "== ResNet-18, 3x32x32"
dlh-data synthetic --out "$WORK/c10.h5" --shape 3x32x32 --classes 10 --train 96 --test 16 --seed 5 >/dev/null
resume_exact resnet18 "$ROOT/share/examples/resnet18-cifar.json" "$WORK/c10.h5" 8 2 4
resume_exact resnet18-2ranks "$ROOT/share/examples/resnet18-cifar.json" "$WORK/c10.h5" 8 2 4 \
  mpirun -np 2

echo "== ResNet-50, 3x224x224"
dlh-data synthetic --out "$WORK/in.h5" --shape 3x224x224 --classes 1000 --train 8 --test 2 --seed 6 >/dev/null
resume_exact resnet50 "$ROOT/share/examples/resnet50-imagenet.json" "$WORK/in.h5" 2 1 2

echo "resnet.sh: all checks passed"
