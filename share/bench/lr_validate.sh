#!/bin/bash
# make bench, "lr-find: validation on Fashion-MNIST": does the range test's suggested rate train
# as well as the hand-picked one? (issue 14: at the example batch and at 4x it, against linear
# scaling too.)
#   lr_validate.sh BINDIR WORK   (10 trainings, 12 to 25 minutes on 2 cores; BENCH_LR_EPOCHS, BENCH_LR_SEEDS)
# Writes WORK/lr_validate/setup.json and WORK/lr_validate/runs.jsonl (one line per range test
# and per training) for report.py's "lrvalidate" section, or WORK/lr_validate/unavailable.
#
# The example spec (share/examples/fashion-mnist.json: its model, optimizer and warm-up +
# cosine schedule) on the real Fashion-MNIST (Debian's dataset-fashion-mnist, 60,000 training
# and 10,000 test samples), with "epochs" shortened to BENCH_LR_EPOCHS (2) so that every
# training of the comparison fits here. For each seed (the spec's `seed`: initial weights and
# data order, for the range test and the training alike) and each batch (the spec's 128 and
# 4x that): the range test, then one training per rate: the spec's (hand-picked, also at 4x,
# the issue's bar), the suggestion, and at 4x linear scaling (the spec's rate x 4). 2 ranks x
# 1 thread, as a 2-GPU job would run; CPU training here is deterministic, so a rerun of the
# same commit gives the same accuracies.
set -euo pipefail
bindir=$(cd "$1" && pwd) work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH" LC_ALL=C
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
py=/usr/bin/python3
out=$work/lr_validate
rm -rf "$out"
mkdir -p "$out"
epochs=${BENCH_LR_EPOCHS:-2}
seeds=${BENCH_LR_SEEDS:-1 2}
spec=$root/share/examples/fashion-mnist.json
launch=(mpirun -np 2)

unavailable() { echo "$*" >"$out/unavailable"; exit 0; }
dlh-data import-fashion-mnist --out "$out/fm.h5" >"$out/import.log" 2>&1 ||
  unavailable "dlh-data import-fashion-mnist failed: $(tail -1 "$out/import.log")"

# A copy of the spec with the seed, rate and epochs of one run.
variant() {  # variant OUT SEED LR
  $py - "$spec" "$1" "$2" "$3" "$epochs" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["seed"], s["optimizer"]["lr"], s["epochs"] = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
s["dataset"] = "fm.h5"
json.dump(s, open(sys.argv[2], "w"), indent=2)
PY
}
record() { $py -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])))' "$1" >>"$out/runs.jsonl"; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }

hand=$($py -c 'import json, sys; print(json.load(open(sys.argv[1]))["optimizer"]["lr"])' "$spec")
base=$($py -c 'import json, sys; print(json.load(open(sys.argv[1]))["batch_size"])' "$spec")
$py -c 'import json, sys; print(json.dumps({"epochs": int(sys.argv[1]), "hand_lr": float(sys.argv[2]),
  "base_batch": int(sys.argv[3]), "seeds": sys.argv[4].split(), "load_before": open("/proc/loadavg").read().split()[:3]}))' \
  "$epochs" "$hand" "$base" "$seeds" >"$out/setup.json"

for seed in $seeds; do
  for batch in "$base" $((4 * base)); do
    tag=s$seed-b$batch
    variant "$out/spec-$tag.json" "$seed" "$hand"
    t0=$(date +%s.%N)
    "${launch[@]}" dlh-launch lr-find "$out/spec-$tag.json" --data "$out/fm.h5" --threads 1 \
      --batch "$batch" --out "$out/lr-$tag.json" >"$out/lr-$tag.log" 2>&1 ||
      unavailable "lr-find (seed $seed, batch $batch) failed: $(tail -1 "$out/lr-$tag.log")"
    record "{\"kind\": \"lr-find\", \"seed\": $seed, \"batch\": $batch, \"seconds\": $(elapsed "$t0"), \"result\": $(cat "$out/lr-$tag.json")}"
    suggested=$($py -c 'import json, sys; s = json.load(open(sys.argv[1]))["suggestion"]
print(s["lr"] if s["status"] == "ok" else "")' "$out/lr-$tag.json")
    [[ -n $suggested ]] || unavailable "lr-find (seed $seed, batch $batch) suggested no rate"
    rates=("hand:$hand" "suggested:$suggested")
    ((batch == base)) || rates+=("linear:$($py -c "print($hand * $batch / $base)")")
    for entry in "${rates[@]}"; do
      source=${entry%%:*} lr=${entry#*:}
      run=$out/runs/$tag-$source
      variant "$out/spec-$tag-$source.json" "$seed" "$lr"
      t0=$(date +%s.%N)
      "${launch[@]}" dlh-launch train "$out/spec-$tag-$source.json" --data "$out/fm.h5" \
        --batch-size "$batch" --threads 1 --run-dir "$run" --no-resume --no-epoch-checkpoints \
        --checkpoint-seconds 0 >"$out/train-$tag-$source.log" 2>&1 ||
        unavailable "training (seed $seed, batch $batch, $source lr $lr) failed: $(tail -1 "$out/train-$tag-$source.log")"
      acc=$($py -c 'import json, sys; print(json.load(open(sys.argv[1]))["test_accuracy"])' "$run/summary.json")
      record "{\"kind\": \"train\", \"seed\": $seed, \"batch\": $batch, \"source\": \"$source\", \"lr\": $lr, \"test_accuracy\": $acc, \"seconds\": $(elapsed "$t0")}"
      echo "seed $seed batch $batch $source lr $lr: test accuracy $acc" >&2
    done
  done
done
$py -c 'import json, sys; s = json.load(open(sys.argv[1])); s["load_after"] = open("/proc/loadavg").read().split()[:3]
json.dump(s, open(sys.argv[1], "w"))' "$out/setup.json"
