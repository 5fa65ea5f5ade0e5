#!/bin/bash
# make bench, "CPU training throughput: ResNet-18 at 32x32" (issue 43): DLH's CPU engine against
# PyTorch at its best CPU settings, one process and 2 threads each, on
# share/examples/resnet18-cifar.json at batch 64 on synthetic 3x32x32 data.
#   resnet_cpu.sh BINDIR WORK      measures; writes WORK/resnet_cpu/ (results.json, the section
#                                  s2-resnet-cpu.md, goals.jsonl, logs): bench.sh's `measure`
#   resnet_cpu.sh BINDIR --store   the same in a temporary folder, then stores it as a run of its
#                                  own (share/bench/results/RUN/resnet_cpu/) and renders
#                                  BENCHMARKS.md
# About 3.5 minutes on 2 idle cores. PyTorch first runs once in each configuration below (a probe:
# 1 warm-up step, 3 timed); the two best of the probe then alternate with DLH for
# BENCH_RESNET_ROUNDS rounds (4), the side that starts a round alternating too; each round's
# figure is the median samples/s of BENCH_RESNET_STEPS timed steps (8) after 2 warm-up steps,
# on both sides. The spec's augmentation is dropped on both sides: PyTorch trains a fixed batch,
# and DLH's loader would crop and flip on the same 2 cores. BENCH_RESNET_BATCH: the batch (64).
set -euo pipefail
bindir=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
bench=$root/share/bench
py=/usr/bin/python3
export PATH="$bindir:$PATH" LC_ALL=C
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
store=0
if [[ ${2:-} == --store ]]; then
  store=1
  work=$(mktemp -d "${TMPDIR:-/tmp}/dlh-resnet-cpu-XXXXXX")
  trap 'rm -rf "$work"' EXIT
else
  work=${2:?usage: resnet_cpu.sh BINDIR WORK|--store}
fi
out=$work/resnet_cpu
rm -rf "$out"
mkdir -p "$out"
$py -c 'import torch' 2>/dev/null || { echo "resnet_cpu.sh: $py has no torch (python3-torch)" >&2; exit 1; }
rounds=${BENCH_RESNET_ROUNDS:-4} batch=${BENCH_RESNET_BATCH:-64} steps=${BENCH_RESNET_STEPS:-8}
warmup=2 threads=2
t_begin=$SECONDS

spec=$out/resnet18-cifar.json
$py - "$root/share/examples/resnet18-cifar.json" "$spec" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s.pop("augment", None)
json.dump(s, open(sys.argv[2], "w"), indent=1)
PY
dlh-data synthetic --out "$out/data.h5" --shape 3x32x32 --classes 10 \
  --train $((batch * (warmup + steps + 1))) --test 64 >/dev/null
dlh-estimate features "$spec" --json >"$out/features.json"

# dlh_round: one DLH round, `dlh-launch train` (its loader, metrics and all) without mpirun (which
# would bind the rank and its threads to one core); prints the median samples/s of the steps
# after the warm-up, from the run's metrics.jsonl.
dlh_round() {
  rm -rf "$out/run"
  dlh-launch train "$spec" --data "$out/data.h5" --run-dir "$out/run" --batch-size "$batch" \
    --max-steps $((warmup + steps)) --no-eval --progress none --no-resume --checkpoint-seconds 0 \
    --no-epoch-checkpoints --threads "$threads" 2>>"$out/dlh.log" >/dev/null
  $py - "$out/run/metrics.jsonl" "$warmup" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"samples_per_s"' in l][int(sys.argv[2]):]
print(f"{statistics.median(x['samples_per_s'] for x in r):.2f}")
PY
}
# PyTorch's configurations (share/bench/report.py's RESNET_TORCH_CONFIGS describes each):
# OpenMP's wait policy, OpenBLAS beside OpenMP's threads, memory format, torch.jit.trace, and
# (runs from 2026-12-04T14Z on) malloc keeping freed memory, the tunables dlh-launch run gives
# a program (bench.sh says why; asked of dlh-launch, so that they are typed once).
malloc_keep=$(cd "$out" && env -u GLIBC_TUNABLES dlh-launch run --run-dir "$out/malloc" \
  -- printenv GLIBC_TUNABLES 2>/dev/null) && [[ $malloc_keep == glibc.malloc.* ]] ||
  { echo "resnet_cpu.sh: dlh-launch run gave no GLIBC_TUNABLES" >&2; exit 1; }
torch_configs=(passive passive-channels-last blas-1-thread blas-1-thread-channels-last
  blas-1-thread-channels-last-jit omp-default malloc-keep blas-1-thread-channels-last-malloc-keep)
torch_round() {  # torch_round CONFIG WARMUP STEPS: prints one round's median samples/s
  local env=(OMP_WAIT_POLICY=PASSIVE) args=()
  case $1 in
    blas-1-thread*) env+=(OPENBLAS_NUM_THREADS=1) ;;
    omp-default) env=(-u OMP_WAIT_POLICY "OMP_NUM_THREADS=$threads") ;;
  esac
  [[ $1 == *malloc-keep ]] && env+=("GLIBC_TUNABLES=$malloc_keep")
  [[ $1 == *channels-last* ]] && args+=(--channels-last)
  [[ $1 == *-jit ]] && args+=(--jit)
  env "${env[@]}" $py "$bench/torch_train.py" --spec "$spec" --batch "$batch" --threads "$threads" \
    --warmup "$2" --steps "$3" "${args[@]}" 2>>"$out/torch.log"
}

echo "== resnet_cpu: PyTorch probe, ${#torch_configs[@]} configurations" >&2
: >"$out/probe.txt"
for c in "${torch_configs[@]}"; do
  # A configuration that fails (torch.jit.trace, say) says so in torch.log and is left out.
  v=$(torch_round "$c" 1 3) || v=""
  if [[ -n $v ]]; then echo "$c $v" >>"$out/probe.txt"; else echo "$c failed" >>"$out/torch.log"; fi
done
[[ -s $out/probe.txt ]] || { echo "resnet_cpu.sh: every PyTorch configuration failed ($out/torch.log)" >&2; exit 1; }
mapfile -t best < <(sort -k2 -g -r "$out/probe.txt" | head -2 | cut -d' ' -f1)
echo "== resnet_cpu: $rounds rounds, DLH against PyTorch ${best[*]}" >&2
: >"$out/rounds.txt"
for ((round = 0; round < rounds; round++)); do
  # Which side starts alternates round by round, so neither always meets the machine first.
  if ((round % 2 == 0)); then echo "dlh $(dlh_round)" >>"$out/rounds.txt"; fi
  for c in "${best[@]}"; do
    echo "$c $(torch_round "$c" "$warmup" "$steps")" >>"$out/rounds.txt"
  done
  if ((round % 2 == 1)); then echo "dlh $(dlh_round)" >>"$out/rounds.txt"; fi
  echo "== resnet_cpu: round $((round + 1)) done, $((SECONDS - t_begin)) s" >&2
done
rm -rf "$out/run" "$out/data.h5"

$py - "$out" "$batch" "$threads" "$warmup" "$steps" "$((SECONDS - t_begin))" <<'PY'
import json, os, sys, torch
out, batch, threads, warmup, steps, seconds = sys.argv[1], *map(int, sys.argv[2:])
def rates(name):
    d = {}
    for line in open(os.path.join(out, name)):
        k, v = line.split()
        d.setdefault(k, []).append(float(v))
    return d
r, probe = rates("rounds.txt"), rates("probe.txt")
dlh = r.pop("dlh")
best = max(r, key=lambda k: max(r[k]))  # the configuration whose best round is best
feat = json.load(open(os.path.join(out, "features.json")))
json.dump({"model": "resnet18-cifar", "spec": "share/examples/resnet18-cifar.json (augment dropped)",
           "input": "3x32x32", "batch": batch, "threads": threads, "warmup_steps": warmup,
           "timed_steps": steps, "seconds": seconds, "dlh": dlh, "torch": r[best],
           "torch_config": best, "torch_configs": r,
           "probe": {k: v[0] for k, v in probe.items()}, "torch_version": torch.__version__,
           "flops_train_per_sample": feat["flops_train"], "params": feat["params"],
           "load_average": open("/proc/loadavg").read().split()[0]},
          open(os.path.join(out, "results.json"), "w"), indent=1)
PY
: >"$out/goals.jsonl"
{
  echo "## CPU training throughput: ResNet-18 at 32x32, DLH against PyTorch at its best"
  echo
  echo "share/bench/resnet_cpu.sh: share/examples/resnet18-cifar.json (11.2 M parameters, SGD with"
  echo "momentum and weight decay, batch norm, residual blocks; its augmentation dropped on both"
  echo "sides) at batch $batch on synthetic 3x32x32 data, one process and $threads threads per side."
  echo "DLH: \`dlh-launch train --threads $threads\` (its loader, metrics and all). PyTorch"
  echo "$($py -c 'import torch; print(torch.__version__)') (Debian python3-torch, oneDNN on):"
  echo "share/bench/torch_train.py --spec on a fixed random batch, the model built by"
  echo "share/bench/torch_spec.py. PyTorch runs once in every configuration first (a probe, 1"
  echo "warm-up step and 3 timed); the two best of the probe then alternate with DLH for $rounds"
  echo "rounds, the side that starts a round alternating too; each round's figure is the median"
  echo "samples/s of $steps timed steps after $warmup warm-up steps; min / median / max over the rounds."
  echo
  $py "$bench/report.py" resnet_cpu "$work" "$out/goals.jsonl"
  echo
} >"$out/s2-resnet-cpu.md"
cat "$out/s2-resnet-cpu.md"
if ((store)); then
  run_json=$out/run.json
  $py "$bench/report.py" run "$run_json" "share/bench/resnet_cpu.sh --store"
  $py "$bench/report.py" store "$run_json" resnet_cpu "$out/goals.jsonl" \
    "$out/s2-resnet-cpu.md" "$out/results.json"
  $py "$bench/report.py" render
  echo "stored share/bench/results/$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"])' "$run_json")/resnet_cpu/, rendered BENCHMARKS.md" >&2
fi
echo "== resnet_cpu: took $((SECONDS - t_begin)) s" >&2
