#!/bin/bash
# make bench: measures DLH side by side with its peers on this machine and rewrites
# BENCHMARKS.md. Every figure in that file comes from this script's run.
#   bench.sh BINDIR OUT.md
set -euo pipefail
bindir=$(cd "$1" && pwd) out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d "${TMPDIR:-/tmp}/dlh-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT
py=/usr/bin/python3

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
{
  echo "# DLH benchmarks"
  echo
  echo "Produced by \`make bench\` (share/bench/bench.sh) on $(date -u '+%Y-%m-%d %H:%M UTC'):"
  echo "$cpu, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr)."
  echo "Machines here are noisy (about ±30% between runs); every comparison runs both sides in"
  echo "one invocation, alternating, and reports medians."
  echo
} >"$out.tmp"

echo "== estimator: validation on models outside the calibration sweep" >&2
{
  echo "## Estimator: predicted vs measured step time"
  echo
  echo "\`dlh-estimate validate --calibration share/calibration/cpu.json --markdown\`: the shipped"
  echo "calibration ($(python3 -c "import json;c=json.load(open('$root/share/calibration/cpu.json'));q=c['model']['quality'];print(f\"{q['samples']} sweep models, R² {q['r2']:.3f}, {q['folds']}-fold cross-validated MAPE {q['cv_mape']:.1f}%\")")),"
  echo "against fresh measurements with the engine of architectures that are not in the sweep."
  echo "Target: under 10% MAPE (Habitat 11.8% across GPUs, ConvMeter under 18%)."
  echo
  (cd "$root" && dlh-estimate validate --calibration share/calibration/cpu.json --markdown 2>/dev/null)
  echo
} >>"$out.tmp"

echo "== CPU training throughput: DLH against PyTorch" >&2
dlh-data synthetic --out "$work/bench.h5" --shape 1x28x28 --classes 10 --train 10000 --test 100 >/dev/null
dlh_rate() {  # dlh_rate SPEC: median samples/s of steps 11-70 of one process, 2 threads
  rm -rf "$work/run"
  dlh-launch train "$1" --data "$work/bench.h5" --run-dir "$work/run" --max-steps 70 --no-eval \
    --progress none --no-resume --checkpoint-seconds 0 --no-epoch-checkpoints --threads 2 2>/dev/null
  $py - "$work/run/metrics.jsonl" <<'PY'
import json, statistics, sys
r = [json.loads(l)["samples_per_s"] for l in open(sys.argv[1]) if '"samples_per_s"' in l][10:]
print(f"{statistics.median(r):.1f}")
PY
}
torch_rate() {  # torch_rate MODEL BATCH
  OMP_WAIT_POLICY=PASSIVE $py "$root/share/bench/torch_train.py" --model "$1" --batch "$2" --threads 2
}
{
  echo "## CPU training throughput: DLH against PyTorch"
  echo
  echo "One process, 2 threads, same model, batch and SGD on the same machine, alternating, 3"
  echo "rounds; each figure is the median samples/s of 60 timed steps after 10 warm-up steps. DLH:"
  echo '`dlh-launch train share/bench/<model>.json` (its loader, metrics and all); PyTorch'
  echo "$($py -c 'import torch; print(torch.__version__)' 2>/dev/null) (Debian python3-torch,"
  echo "OMP_WAIT_POLICY=PASSIVE): share/bench/torch_train.py on a fixed random batch."
  echo
  echo "| model | batch | DLH samples/s | PyTorch samples/s | DLH / PyTorch |"
  echo "|---|---|---|---|---|"
} >>"$out.tmp"
for m in "cnn 64" "mlp 128"; do
  set -- $m
  d=() t=()
  for _ in 1 2 3; do
    d+=("$(dlh_rate "$root/share/bench/$1.json")")
    t+=("$(torch_rate "$1" "$2")")
  done
  $py - "$1" "$2" "${d[*]}" "${t[*]}" >>"$out.tmp" <<'PY'
import statistics, sys
name, batch, d, t = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
dm, tm = statistics.median(map(float, d)), statistics.median(map(float, t))
label = {"cnn": "CNN conv32-pool-conv64-pool-fc128-fc10", "mlp": "MLP 784-1024-1024-10"}[name]
print(f"| {label} | {batch} | {dm:.0f} ({', '.join(d)}) | {tm:.0f} ({', '.join(t)}) | **{dm/tm:.2f}** |")
PY
done
{
  echo
  echo "Goal: at least 1.5x PyTorch on CNNs and 1.2x on the MLP. Not met yet: DLH's im2col and"
  echo "element-wise passes (relu, pooling, loss, optimizer) run on one thread while OpenBLAS's"
  echo "GEMMs use two, so the non-GEMM half of a CNN step gets half the machine."
} >>"$out.tmp"
echo >>"$out.tmp"

echo "== allreduce: DLH against MPI_Allreduce, 2 ranks" >&2
mpirun -np 2 dlh-launch bench-allreduce --max-bytes 64M --json "$work/ar.json" >"$work/ar.txt"
dlh-estimate comm "$work/ar.json" >"$work/comm.txt"
{
  echo "## Allreduce: DLH's gradient path against Open MPI's MPI_Allreduce (2 ranks)"
  echo
  echo "\`mpirun -np 2 dlh-launch bench-allreduce\`: float sum; DLH's path is the fused gradient"
  echo "bucket training uses. algbw = bytes / time; busbw = algbw × 2(n−1)/n (nccl-tests)."
  echo
  $py - "$work/ar.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); n = r["ranks"]; bus = 2 * (n - 1) / n
print("| bytes | MPI_Allreduce µs | DLH µs | MPI busbw GB/s | DLH busbw GB/s | DLH speed / MPI |")
print("|---|---|---|---|---|---|")
for s in r["sizes"]:
    b, m, d = s["bytes"], s["mpi_s"], s["dlh_s"]
    print(f"| {b} | {m*1e6:.1f} | {d*1e6:.1f} | {b/m*bus/1e9:.2f} | {b/d*bus/1e9:.2f} | {m/d:.2f} |")
sm = r["small"]
print()
print(f"{sm['tensors']} tensors of {sm['bytes_each']} bytes: one MPI_Allreduce per tensor "
      f"{sm['per_tensor_s']*1e6:.0f} µs, DLH fused {sm['fused_s']*1e6:.0f} µs: "
      f"**{sm['per_tensor_s']/sm['fused_s']:.1f}x** faster.")
PY
  echo
  echo "### Communication model against the measurement"
  echo
  echo "\`dlh-estimate comm\` fits the ring alpha-beta model to the MPI_Allreduce column above:"
  echo
  echo '```'
  sed "s|$work/||" "$work/comm.txt"
  echo '```'
  echo
  echo "A single alpha-beta pair cannot follow Open MPI's protocol switches (eager, then"
  echo "single-copy CMA) and the drop in shared-memory bandwidth once messages outgrow the"
  echo "caches (64 MiB), so its error is largest at the extremes; gradient buckets (1-16 MiB)"
  echo "sit where it is closest."
  echo
} >>"$out.tmp"

echo "== recommender speed: 1,000 nodes of 4 GPU types" >&2
$py - "$work/big.json" "$root/share/cluster/example.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[2]))
for t in c["gpu_types"]:
    t.pop("calibration", None)
for nt in c["node_types"]:
    nt["nodes"] = 250
json.dump(c, open(sys.argv[1], "w"))
PY
times=()
for i in 1 2 3 4 5; do
  t=$(dlh-estimate recommend "$root/share/examples/fashion-mnist.json" --samples 600000 \
        --deadline 3h --cluster "$work/big.json" --mixed --per-gpu-batch 64 |
        grep -o 'considered in [0-9.]* ms')
  times+=("${t#considered in }")
done
candidates=$(dlh-estimate recommend "$root/share/examples/fashion-mnist.json" --samples 600000 \
  --deadline 3h --cluster "$work/big.json" --mixed --per-gpu-batch 64 | grep -o '^[0-9]* allocations')
median=$(printf '%s\n' "${times[@]}" | sed 's/ ms//' | sort -g | sed -n 3p)
{
  echo "## Recommender speed"
  echo
  echo "\`dlh-estimate recommend --mixed --per-gpu-batch 64\` (weak scaling, so every allocation is a"
  echo "candidate) on share/cluster/example.json scaled to 250 nodes of each of its 4 GPU types"
  echo "(1,000 nodes): $candidates considered (single types and all pairs of types),"
  echo "**median $median ms** over 5 runs (runs: ${times[*]}). Target: well under 100 ms."
  echo
} >>"$out.tmp"

mv "$out.tmp" "$out"
echo "wrote $out" >&2
