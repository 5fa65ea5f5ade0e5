#!/bin/bash
# make bench, "The example spec as an exported PyTorch program" (issue 45): the example spec
# (share/examples/fashion-mnist.json) trained on the real Fashion-MNIST by `dlh-launch train`
# and by the program `dlh-launch export SPEC --pytorch` writes from it, run as a user runs it
# under DLH (`mpirun -np 1 dlh-launch run -- python3 PROGRAM`, the dlh module on PYTHONPATH),
# one after the other, alternating which goes first, EXPORTED_ROUNDS rounds (default 2: seeds
# 1 and 2 on both sides), BENCH_QUALITY_EPOCHS epochs (default 5), 2 threads each.
#   exported.sh BINDIR WORK    (about 2 x 4 runs of 5 epochs: 20-30 minutes on 2 cores)
# Writes WORK/exported/runs.jsonl (one line per run: side, round, per-epoch test accuracy,
# seconds) or WORK/exported/unavailable with the reason.
set -euo pipefail
bindir=$(cd "$1" && pwd) work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH" LC_ALL=C OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH=$root/share/python
unset DLH_PLAN DLH_RUN_DIR DLH_CHECKPOINT
py=/usr/bin/python3
out=$work/exported
rm -rf "$out"
mkdir -p "$out"
epochs=${BENCH_QUALITY_EPOCHS:-5} rounds=${EXPORTED_ROUNDS:-2} threads=2
source_dir=/usr/share/datasets/fashion-mnist
unavailable() { echo "$*" >"$out/unavailable"; echo "unavailable: $*" >&2; exit 0; }
[[ -d $source_dir ]] || unavailable "the Fashion-MNIST data set ($source_dir) is not installed"
$py -c 'import h5py, torch' 2>/dev/null || unavailable "$py has no torch or h5py (python3-torch, python3-h5py)"
dlh-data import-fashion-mnist --out "$out/fm.h5" --source "$source_dir" >"$out/import.log" 2>&1 ||
  unavailable "dlh-data import-fashion-mnist failed: $(tail -1 "$out/import.log")"

for ((round = 1; round <= rounds; round++)); do
  spec=$out/example-r$round.json
  $py - "$root/share/examples/fashion-mnist.json" "$spec" "$round" "$epochs" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["seed"], s["epochs"], s["dataset"] = int(sys.argv[3]), int(sys.argv[4]), "fm.h5"
json.dump(s, open(sys.argv[2], "w"), indent=2)
PY
  dlh-launch export "$spec" --pytorch "$out/example-r$round.py" 2>"$out/export.log" ||
    unavailable "dlh-launch export failed: $(tail -1 "$out/export.log")"
  sides=(dlh exported)
  ((round % 2)) || sides=(exported dlh)
  for side in "${sides[@]}"; do
    run=$out/$side-r$round
    echo "exported: $side, round $round/$rounds, $epochs epochs" >&2
    t0=$(date +%s.%N)
    if [[ $side == dlh ]]; then
      dlh-launch train "$spec" --run-dir "$run" --threads "$threads" --device cpu --no-resume \
        --checkpoint-seconds 0 --no-epoch-checkpoints --progress none >"$run.log" 2>&1 ||
        unavailable "dlh-launch train (round $round) failed: $(tail -1 "$run.log")"
    else
      mpirun -np 1 dlh-launch run --run-dir "$run" -- "$py" "$out/example-r$round.py" \
        --threads "$threads" --log-every 100000 --result "$run.result.json" >"$run.log" 2>&1 ||
        unavailable "the exported program (round $round) failed: $(tail -1 "$run.log")"
    fi
    $py - "$side" "$round" "$run" "$t0" "$(date +%s.%N)" >>"$out/runs.jsonl" <<'PY'
import json, sys
side, rnd, run, t0, t1 = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
if side == "dlh":
    evals = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"eval"' in l]
    acc = [e["test_accuracy"] for e in evals if "test_accuracy" in e]
else:
    acc = [e["test_accuracy"] for e in json.load(open(f"{run}.result.json"))["epochs"]]
print(json.dumps({"side": side, "round": rnd, "test_accuracy": acc, "seconds": round(t1 - t0, 1)}))
PY
  done
done
