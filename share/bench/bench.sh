#!/bin/bash
# make bench: measures DLH side by side with its peers on this host, stores each part's results
# under share/bench/results/RUN/PART/ (RUN: UTC date and host; its run.json records the host's
# CPU, cores, memory, kernel, sgemm GFLOP/s and the git commit) and renders OUT.md from every
# results folder committed there (share/bench/report.py render; share/bench/results.py says
# how). share/bench/report.py turns one part's raw measurements into its sections and goal
# records; share/bench/goals.py states every goal and how it fails. A section of OUT.md comes
# from the newest run that measured its part and names that run, date and host: OUT.md is one
# run's only when every part ran in that run, and its header says which runs it holds. A goal
# is met only where it holds on at least two hosts.
#   bench.sh BINDIR OUT.md                             (every part: about 1.5 hours on 2 cores)
#   BENCH_ONLY=allreduce,checkpoint bench.sh BINDIR OUT.md   those parts alone; the others'
#                                                      sections stay as committed
# Parts: estimator wave cpu quality exported suggested loader ddp allreduce checkpoint ckpt_overhead sbatch
# recommender replay lrfind lrvalidate jobs demo balance mixed_shares faults convergence local_sgd pipeline memory. BENCH_HOST names this host in
# the goals table (default: host name, machine id and a hash of the kernel and CPU); BENCH_ROUNDS the throughput rounds.
set -euo pipefail
bindir=$(cd "$1" && pwd) out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH" LC_ALL=C
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d "${TMPDIR:-/tmp}/dlh-bench-XXXXXX")
cluster=""  # the local Slurm cluster's folder while one runs
cleanup() {
  if [[ -n $cluster ]]; then
    bash "$root/share/slurm/stop-cluster.sh" "$cluster" >/dev/null 2>&1 || true
    rm -rf "$cluster"
  fi
  rm -rf "$work"
}
trap cleanup EXIT
py=/usr/bin/python3
bench=$root/share/bench
# The peers run OpenBLAS's kernels as DLH does. Where OpenBLAS takes its generic Prescott
# kernels for a CPU it does not know, DLH's programs take the family the CPU's instruction
# sets carry (docs/reference/dlh-launch.md, "OpenBLAS's kernels"); numpy's sgemm yardstick
# and PyTorch (Debian's links the system OpenBLAS for its GEMMs) then get the same through
# OPENBLAS_CORETYPE, or they would be measured at a fraction of their best. pinned: this
# machine's own OPENBLAS_CORETYPE, which the rows of OpenBLAS's own choice lift.
pinned=${OPENBLAS_CORETYPE:-}
if [[ -z ${OPENBLAS_CORETYPE+x} ]]; then
  probe_core() { dlh-launch probe --seconds 0.2 | $py -c 'import json, sys; print(json.load(sys.stdin)["blas_core"])'; }
  dlh_core=$(probe_core) openblas_core=$(DLH_BLAS_KERNELS=openblas probe_core)
  if [[ $dlh_core != "$openblas_core" ]]; then
    export OPENBLAS_CORETYPE=$dlh_core
    echo "bench.sh: OpenBLAS takes its $openblas_core kernels here, DLH its $dlh_core ones: the peers too (OPENBLAS_CORETYPE=$dlh_core)" >&2
  fi
fi
# PyTorch at its best keeps the memory it frees (its CPU performance guide: jemalloc or
# tcmalloc): the glibc tunables dlh-launch run gives a program (docs/reference/run.md, "Memory
# the program frees stays with it"), asked of dlh-launch itself so that they are typed once.
# Without them a PyTorch step here faults its activations in every step (up to 4x slower).
malloc_keep=$(cd "$work" && env -u GLIBC_TUNABLES dlh-launch run --run-dir "$work/malloc" \
  -- printenv GLIBC_TUNABLES 2>/dev/null) && [[ $malloc_keep == glibc.malloc.* ]] ||
  { echo "bench.sh: dlh-launch run gave no GLIBC_TUNABLES" >&2; exit 1; }
parts="estimator wave transfer cpu resnet_cpu quality exported suggested loader ddp allreduce checkpoint ckpt_overhead sbatch recommender replay lrfind lrvalidate jobs demo balance mixed_shares faults convergence local_sgd pipeline memory"
only=${BENCH_ONLY:-}
for p in ${only//,/ }; do
  [[ " $parts " == *" $p "* ]] || { echo "BENCH_ONLY: no part '$p' (parts: $parts)" >&2; exit 2; }
done
want() { [[ -z $only || ",$only," == *",$1,"* ]]; }
# This run and its host, for every part's results folder.
run_date=$(date -u '+%Y-%m-%d %H:%M UTC')
# One key per kind of machine (results.py's host_key: the VMs here share a host name and
# machine id across CPUs and kernels).
host_key=$($py -c 'import sys; sys.path.insert(0, sys.argv[1]); import results; print(results.host_key())' \
  "$root/share/bench")
run_id=$(date -u '+%Y-%m-%dT%H%MZ')-$host_key
run_json=$work/run.json
sgemm=$(dlh-estimate rates --threads 2 --blocks 3 --json 2>/dev/null |
  $py -c 'import json, sys; print(round(json.load(sys.stdin)["sgemm_gflops"], 1))' 2>/dev/null || true)
commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo "not a git checkout")
[[ -z $(git -C "$root" status --porcelain --untracked-files=no -- . ':!share/bench/results' ':!BENCHMARKS.md' 2>/dev/null) ]] ||
  commit="$commit (with uncommitted changes)"
$py - "$run_json" "$run_id" "$run_date" "$host_key" "${sgemm:-}" "$commit" "${BENCH_ONLY:-every part}" <<'PY'
import json, os, platform, sys
out, run, date, key, sgemm, commit, only = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
json.dump({"run": run, "date": date, "transcribed": False,
           "how": f"`make bench` (share/bench/bench.sh), parts: {only}",
           "host": {"key": key, "cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem / 2**20),
                    "kernel": f"{platform.system()} {platform.release()}",
                    "sgemm_gflops": float(sgemm) if sgemm else None, "commit": commit,
                    # what else ran here as the run began: a busy host measures low
                    "load_average": open("/proc/loadavg").read().split()[0]}},
          open(out, "w"), indent=1, sort_keys=True)
PY
# Rounds of the side-by-side throughput comparisons: DLH and the peer alternate, so a change
# of machine state hits both; enough rounds that min, median and max mean something and a
# bimodal peer shows.
rounds=${BENCH_ROUNDS:-10}
goals=$work/goals.jsonl
report() { $py "$bench/report.py" "$1" "$work" "$goals"; }
# part NAME: the goal records that follow are NAME's; store NAME SECTION.md...: NAME's sections
# and goal records into share/bench/results/RUN/NAME/, replacing an earlier store of this run.
part() { goals=$work/goals-$1.jsonl; : >"$goals"; }
store() {
  local name=$1
  shift
  $py "$bench/report.py" store "$run_json" "$name" "$work/goals-$name.jsonl" "$@"
}
# measure NAME: runs share/bench/NAME.sh, which writes WORK/NAME/; if it fails, its last
# line of stderr becomes WORK/NAME/unavailable, which report.py shows in place of the table.
measure() {
  bash "$bench/$1.sh" "$bindir" "$work" 2>"$work/$1.err" ||
    { mkdir -p "$work/$1"; echo "$1.sh failed: $(tail -1 "$work/$1.err")" >"$work/$1/unavailable"; }
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
t_begin=$SECONDS

section() { echo "== [$((SECONDS - t_begin)) s] $*" >&2; }

# ---- shared by the training parts -------------------------------------------------------
dlh-data synthetic --out "$work/bench.h5" --shape 1x28x28 --classes 10 --train 10000 --test 100 >/dev/null
# metrics SUMMARY: median samples/s of steps 11-70 (and the median blocked allreduce time).
metrics() {
  $py - "$work/run/metrics.jsonl" "$1" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"samples_per_s"' in l][10:]
print(f"{statistics.median(x['samples_per_s'] for x in r):.1f}", end="")
if sys.argv[2] == "allreduce":
    print(f" {statistics.median(x['time']['allreduce'] for x in r):.6f}", end="")
print()
PY
}
# dlh_train RANKS THREADS SPEC [OPTIONS...]: 70 steps of RANKS x the spec's batch, no checkpoints.
# blas_env: a command prefix for OpenBLAS's environment (empty: this machine's as it is).
blas_env=()
own_blas=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
dlh_train() {
  local n=$1 threads=$2 spec=$3 batch
  shift 3
  batch=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['batch_size'])" "$spec")
  rm -rf "$work/run"
  # One rank runs without mpirun, which would bind it (and all its threads) to one core.
  local launch=(mpirun -np "$n")
  ((n > 1)) || launch=()
  "${blas_env[@]}" "${launch[@]}" dlh-launch train "$spec" --data "$work/bench.h5" --run-dir "$work/run" \
    --batch-size $((n * batch)) --max-steps 70 --no-eval --progress none --no-resume \
    --checkpoint-seconds 0 --no-epoch-checkpoints --threads "$threads" "$@" 2>/dev/null
}

# ---- estimator -----------------------------------------------------------------------------
# The estimator is judged as it is used: calibrated on the device it predicts (here this
# host; each shipped calibration in share/calibration was made on whichever host of its
# OpenBLAS kernel family the last calibrating session had, and hosts of one kind differ in
# speed). The shipped calibration check-calibration chooses for this host is validated too, to
# show how far it is from this host. The whole jobs are planned with this
# host's calibration as well, so either part makes it.
here_cal=$work/cpu-here.json
calibrate_here() {
  [[ -f $here_cal ]] && return
  section "a calibration of this host (dlh-estimate calibrate --device cpu)"
  if ! dlh-estimate calibrate --device cpu --out "$here_cal" >"$work/calibrate.txt" 2>&1; then
    echo "== dlh-estimate calibrate failed ($(tail -1 "$work/calibrate.txt")): the shipped calibration stands in" >&2
    cp "$(shipped_for_here)" "$here_cal"
  fi
}
# The shipped calibration for this host: the one check-calibration chooses from
# share/calibration (its line's first word), matched, transferable or not.
shipped_for_here() {
  local chosen
  chosen=$(dlh-estimate check-calibration "$root/share/calibration" 2>/dev/null | sed -n '1s/: .*//p')
  [[ -f $chosen ]] && echo "$chosen" || echo "$root/share/calibration/cpu.json"
}
bench_estimator() {
section "estimator: this host's calibration, validated on models outside the sweep"
calibrate_here
# validate DIR FILE: FILE relative to DIR, which the output names.
validate() {
  (cd "$1" && dlh-estimate validate --calibration "$2" --set judged --rounds 5 --repeats 3 --markdown 2>/dev/null)
}
validate "$work" "$(basename "$here_cal")" >"$work/validate.md"
shipped_here=$(shipped_for_here)
validate "$root" "${shipped_here#"$root"/}" >"$work/validate-shipped.md"
quality() {
  $py -c "import json, sys
c = json.load(open(sys.argv[1])); q = c['model']['quality']
print(f\"{q['samples']} sweep models, R² {q['r2']:.3f}, {q['folds']}-fold cross-validated MAPE {q['cv_mape']:.1f}%, made {c['created']}\")" "$1"
}
{
  echo "## Estimator: predicted vs measured step time"
  echo
  echo "\`dlh-estimate calibrate --device cpu\` on this host, then"
  echo "\`dlh-estimate validate --calibration FILE --set judged --rounds 5 --repeats 3 --markdown\`:"
  echo "that calibration ($(quality "$here_cal")) against fresh measurements with the engine of"
  echo "the judged validation models: architectures that are not in the sweep and took no part in"
  echo "choosing the time model's terms (runs before 2026-11-28 used the seven term models, which"
  echo "did). The estimator is judged as it is used, calibrated"
  echo "on the device it predicts. Target: under 10% MAPE (Habitat 11.8% across GPUs, ConvMeter"
  echo "under 18%)."
  echo
  cat "$work/validate.md"
  echo
  echo "The shipped ${shipped_here#"$root"/} ($(quality "$shipped_here"), the one"
  echo "\`dlh-estimate check-calibration share/calibration\` chooses for this host,"
  echo "host \"$($py -c "import json, sys; print(json.load(open(sys.argv[1]))['host'])" "$shipped_here")\"),"
  echo "validated the same way on this host: $(grep '^MAPE over' "$work/validate-shipped.md" | sed 's/ (calibration.*//')."
  echo "Hosts of one kind differ in speed: a site calibrates each of its devices (docs/admin-guide.md, \"Calibrating\")."
  echo
} >"$work/s1-estimator.md"
report estimator
store estimator "$work/s1-estimator.md"
}

# ---- wave scaling --------------------------------------------------------------------------
# A GPU type without a calibration gets another type's, scaled by the ratios of their peaks
# (estimator/model/wave_scaling.hpp). Two kinds of device on one CPU: 1 and 2 threads. Each
# calibrates (the whole sweep: --quick's models (18) missed their own device by 30-41%, which
# no scaling can make up), is validated at its own thread count, then predicts the other's
# measurements scaled by the measured sgemm and memory-copy ratios, next to plain reuse and
# the roofline with the target's measured peaks.
bench_wave() {
section "estimator: wave scaling between 1 and 2 threads"
for _ in 1 2 3; do
  for t in 1 2; do dlh-estimate rates --threads $t --blocks 3 --json >>"$work/rates.jsonl"; done
done
$py - "$work/rates.jsonl" >"$work/wave-ratio.json" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1])]
m = {(t, k): statistics.median(x[k] for x in r if x["threads"] == t)
     for t in (1, 2) for k in ("sgemm_gflops", "copy_gbs")}
print(json.dumps({"flops": m[2, "sgemm_gflops"] / m[1, "sgemm_gflops"],
                  "bandwidth": m[2, "copy_gbs"] / m[1, "copy_gbs"],
                  "tflops": {t: m[t, "sgemm_gflops"] / 1e3 for t in (1, 2)},
                  "gbs": {t: m[t, "copy_gbs"] for t in (1, 2)}}))
PY
wave() { $py -c "import json,sys; print(eval(sys.argv[2], json.load(open(sys.argv[1]))))" "$work/wave-ratio.json" "$1"; }
for t in 1 2; do
  dlh-estimate calibrate --threads $t --out "$work/cal-t$t.json" >/dev/null 2>&1
  dlh-estimate validate --calibration "$work/cal-t$t.json" --threads $t --repeats 3 \
    --save "$work/measured-t$t.json" 2>/dev/null >"$work/wave-native-t$t.txt"
done
for dir in "1 2 flops bandwidth" "2 1 1/flops 1/bandwidth"; do
  set -- $dir
  dlh-estimate validate --calibration "$work/cal-t$1.json" --measured "$work/measured-t$2.json" \
    --scale-flops "$(wave "$3")" --scale-bandwidth "$(wave "$4")" \
    --roofline "$(wave "tflops['$2']"),$(wave "gbs['$2']")" --markdown >"$work/wave-t$1-to-t$2.txt"
done
{
  echo "## Estimator: a calibration moved to another device (wave scaling)"
  echo
  echo "A GPU type without a calibration gets the closest calibrated type's model, compute terms"
  echo "scaled by the ratio of peak FLOP/s and memory terms by the ratio of memory bandwidth"
  echo "(Habitat's wave scaling, Yu et al. 2021). Here the two devices are this CPU at 1 and at 2"
  echo "threads: \`dlh-estimate rates --threads T\` measures each one's peaks (1024² sgemm; a"
  echo "64 MiB float array scaled into another, STREAM's scale; 3 rounds, alternating),"
  echo "\`dlh-estimate calibrate --threads T\` calibrates each (the whole sweep, 5 blocks per"
  echo "model), \`dlh-estimate validate --save\` measures the validation models on each, and"
  echo "\`dlh-estimate validate --measured --scale-flops R --scale-bandwidth R --roofline TFLOPS,GBS\`"
  echo "predicts one device's measurements from the other's calibration: scaled, unscaled (plain"
  echo "reuse) and by the roofline with the target's measured peaks. MAPE over the judged validation"
  echo "models (before 2026-11-28: the seven term models)."
  echo
  report wave
  echo
} >"$work/s1-wave.md"
store wave "$work/s1-wave.md"
}

# ---- CPU training throughput ---------------------------------------------------------------
bench_cpu() {
section "CPU training throughput: DLH against PyTorch, OpenBLAS sgemm"
# PyTorch in each of these configurations every round: torch.set_num_threads(2) with
# OMP_WAIT_POLICY=PASSIVE (as before), OpenMP as it comes (threads spin a while: ACTIVE-like),
# OpenBLAS held to 1 thread beside OpenMP's 2, channels_last for the CNNs, and (runs from
# 2026-12-04T14Z on) malloc keeping freed memory, alone and with channels_last. DLH is
# compared with the best PyTorch reaches, and the table names which that was.
torch_configs=(passive omp-default blas-1-thread channels-last malloc-keep malloc-keep-channels-last)
torch_run() {  # torch_run CONFIG MODEL BATCH: prints one round's samples/s
  local env=(OMP_WAIT_POLICY=PASSIVE) args=()
  case $1 in
    omp-default) env=(-u OMP_WAIT_POLICY OMP_NUM_THREADS=2) ;;
    blas-1-thread) env+=(OPENBLAS_NUM_THREADS=1) ;;
    malloc-keep*) env+=("GLIBC_TUNABLES=$malloc_keep") ;;
  esac
  [[ $1 == *channels-last ]] && args=(--channels-last)
  env "${env[@]}" $py "$bench/torch_train.py" --model "$2" --batch "$3" --threads 2 "${args[@]}"
}
OPENBLAS_NUM_THREADS=2 $py "$bench/sgemm.py" >"$work/sgemm-square.json"
OPENBLAS_NUM_THREADS=2 $py "$bench/sgemm.py" --shape 128x1024x1024 >"$work/sgemm-small.json"
for m in "cnn 64" "cnn-deep 64" "cnn-wide 64" "mlp 128"; do
  set -- $m
  dlh-estimate features "$bench/$1.json" --json >"$work/feat-$1.json"
  d_own=() t_own=()
  configs=("${torch_configs[@]}")
  if [[ $1 == mlp ]]; then configs=(passive omp-default blas-1-thread malloc-keep); fi  # no channels
  : >"$work/cpu-rounds.txt"
  for ((round = 0; round < rounds; round++)); do
    # Which side starts alternates round by round, so neither always meets the machine first.
    if ((round % 2 == 0)); then
      dlh_train 1 2 "$bench/$1.json"
      echo "dlh $(metrics rate)" >>"$work/cpu-rounds.txt"
    fi
    for c in "${configs[@]}"; do
      echo "$c $(torch_run "$c" "$1" "$2")" >>"$work/cpu-rounds.txt"
    done
    if ((round % 2 == 1)); then
      dlh_train 1 2 "$bench/$1.json"
      echo "dlh $(metrics rate)" >>"$work/cpu-rounds.txt"
    fi
    # Where this machine's environment pins OpenBLAS to a kernel set (OPENBLAS_CORETYPE), the
    # same round again with OpenBLAS's own choice, for these commands alone: both sides.
    if [[ -n $pinned ]]; then
      blas_env=("${own_blas[@]}")
      dlh_train 1 2 "$bench/$1.json"
      blas_env=()
      d_own+=("$(metrics rate)")
      # PyTorch as malloc-keep (runs before 2026-12-04T14Z: as passive, which faulted its
      # activations in every step).
      t_own+=("$("${own_blas[@]}" OMP_WAIT_POLICY=PASSIVE "GLIBC_TUNABLES=$malloc_keep" $py "$bench/torch_train.py" \
        --model "$1" --batch "$2" --threads 2)")
    fi
  done
  $py - "$work/cpu-rounds.txt" "$1" "$2" >>"$work/cpu.jsonl" <<'PY'
import json, sys
rates = {}
for line in open(sys.argv[1]):
    name, rate = line.split()
    rates.setdefault(name, []).append(float(rate))
dlh = rates.pop("dlh")
# "torch": the configuration whose best round is best; the goal is judged against it.
best = max(rates, key=lambda k: max(rates[k]))
print(json.dumps({"model": sys.argv[2], "batch": int(sys.argv[3]), "dlh": dlh,
                  "torch": rates[best], "torch_config": best, "torch_configs": rates}))
PY
  if ((${#d_own[@]})); then
    echo "{\"model\": \"$1\", \"batch\": $2, \"dlh\": [$(IFS=,; echo "${d_own[*]}")], \"torch\": [$(IFS=,; echo "${t_own[*]}")]}" \
      >>"$work/cpu-own.jsonl"
  fi
  # Where DLH's step goes and the floor of its design; where this machine's environment pins
  # OpenBLAS to a kernel set, also with OpenBLAS's own choice, for that command alone.
  dlh-estimate profile "$bench/$1.json" --threads 2 --json >"$work/profile-$1.json"
  if [[ -n $pinned ]]; then
    "${own_blas[@]}" dlh-estimate profile "$bench/$1.json" --threads 2 --json \
      >"$work/profile-auto-$1.json"
  fi
done
{
  echo "## CPU training throughput: DLH against PyTorch"
  echo
  echo "One process, 2 threads, same model, batch and SGD on the same machine. DLH and PyTorch"
  echo "alternate for $rounds rounds, the side that starts a round alternating too, PyTorch in each of"
  echo "its configurations every round (below; the main table takes the best of them); each round's"
  echo "figure is the median samples/s of its 60 timed steps"
  echo "after 10 warm-up steps. The table gives min / median / max over the rounds of each and"
  echo "compares best round with best round and median with median; a peer that switches between"
  echo "two or more speeds from one process to the next is reported with each speed. DLH:"
  echo '`dlh-launch train share/bench/<model>.json` (its loader, metrics and all); PyTorch'
  echo "$($py -c 'import torch; print(torch.__version__)' 2>/dev/null) (Debian python3-torch,"
  echo "OMP_WAIT_POLICY=PASSIVE): share/bench/torch_train.py on a fixed random batch."
  echo
  report cpu
  echo
} >"$work/s2-cpu.md"
store cpu "$work/s2-cpu.md"
}

# ---- ResNet-18 on the CPU: DLH against PyTorch at its best CPU settings ----------------------
bench_resnet_cpu() {
section "CPU training throughput: ResNet-18 at 32x32 against PyTorch at its best"
measure resnet_cpu >"$work/resnet_cpu.txt"
[[ -f $work/resnet_cpu/unavailable ]] ||
  store resnet_cpu "$work/resnet_cpu/s2-resnet-cpu.md" "$work/resnet_cpu/results.json"
}

# ---- training quality: the same networks trained to the end in DLH and PyTorch --------------
bench_quality() {
section "training quality: DLH against PyTorch on Fashion-MNIST, six networks to the end"
# quality.sh writes its own section (every figure computed from its runs) and goal lines.
measure quality >"$work/quality.txt"
if [[ -f $work/quality/unavailable ]]; then
  { echo "## Training quality: DLH against PyTorch on Fashion-MNIST"; echo
    echo "Not measured: $(cat "$work/quality/unavailable")."; echo; } >"$work/s2-quality.md"
  $py -c 'import json, sys
for x in "abcdef":  # every network of quality.sh goes unmeasured
    print(json.dumps({"id": "quality-" + x, "goal": "Training quality", "measured": "not measured", "met": False, "limit": sys.argv[1]}))' \
    "$(cat "$work/quality/unavailable")" >>"$goals"
else
  { cat "$work/quality/quality.md"; echo; } >"$work/s2-quality.md"
  cat "$work/quality/goals.jsonl" >>"$goals"
fi
store quality "$work/s2-quality.md"
}

# ---- data larger than memory ------------------------------------------------------------------
bench_loader() {
section "data larger than memory: the loader from the file, cold and confined, against memory and dd"
# The step the loader feeds, measured here: the bench CNN's DLH step at batch 64 and 2
# threads, from this run's throughput rounds, or from 70 steps of its own.
if [[ -s $work/cpu.jsonl ]]; then
  BENCH_LOADER_STEP_MS=$($py -c 'import json, statistics, sys
r = next(json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["model"] == "cnn")
print("%.2f" % (1000 * r["batch"] / statistics.median(r["dlh"])))' "$work/cpu.jsonl")
  BENCH_LOADER_STEP_SOURCE="the median DLH round of this run's CPU throughput part"
else
  dlh_train 1 2 "$bench/cnn.json"
  BENCH_LOADER_STEP_MS=$($py -c 'import sys; print(f"{64000 / float(sys.argv[1]):.2f}")' "$(metrics rate)")
  BENCH_LOADER_STEP_SOURCE="70 steps of dlh-launch train share/bench/cnn.json, 2 threads, median of the last 60, just before"
fi
export BENCH_LOADER_STEP_MS BENCH_LOADER_STEP_SOURCE
measure loader >"$work/loader.txt"
if [[ -f $work/loader/unavailable ]]; then
  { echo "## Data larger than memory: the loader reading from the file"; echo
    echo "Not measured: $(cat "$work/loader/unavailable")."; echo; } >"$work/s2-loader.md"
else
  { cat "$work/loader/loader.md"; echo; } >"$work/s2-loader.md"
  cat "$work/loader/goals.jsonl" >>"$goals"
fi
store loader "$work/s2-loader.md"
}

# ---- data-parallel training, 2 ranks ---------------------------------------------------------
bench_ddp() {
section "data-parallel training: mpirun -np 2 dlh-launch against torchrun + DDP"
# torch 1.13's torchrun cannot parse its own default --redirects/--tee (0) under Python 3.11's
# enum.IntFlag; redirecting only stderr (2) leaves rank 0's stdout alone.
torch_ddp() {  # torch_ddp RANKS
  OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 GLIBC_TUNABLES=$malloc_keep $py -m torch.distributed.run --standalone \
    --nproc_per_node "$1" --redirects 2 --tee 2 "$bench/torch_ddp.py" --model cnn --batch 64 \
    --threads 1 2>/dev/null | tail -1
}
# The gradient bytes the DDP section names (the CPU part writes it too).
[[ -f $work/feat-cnn.json ]] || dlh-estimate features "$bench/cnn.json" --json >"$work/feat-cnn.json"
ddp_dlh() {  # ddp_dlh RANKS
  dlh_train "$1" 1 "$bench/cnn.json"
  if (($1 == 1)); then
    echo "dlh1 $(metrics rate)" >>"$work/ddp.txt"
  else
    read -r rate blocked < <(metrics allreduce)
    echo -e "dlh2 $rate\nar_overlap $blocked" >>"$work/ddp.txt"
  fi
}
for ((round = 0; round < rounds; round++)); do
  # Which side starts alternates round by round.
  for n in 1 2; do
    if ((round % 2 == 0)); then
      ddp_dlh $n
      echo "torch$n $(torch_ddp $n)" >>"$work/ddp.txt"
    else
      echo "torch$n $(torch_ddp $n)" >>"$work/ddp.txt"
      ddp_dlh $n
    fi
  done
  dlh_train 2 1 "$bench/cnn.json" --no-overlap
  read -r rate blocked < <(metrics allreduce)
  echo -e "dlh2_no_overlap $rate\nar_no_overlap $blocked" >>"$work/ddp.txt"
done
{
  echo "## Data-parallel training: DLH against PyTorch DDP (2 ranks)"
  echo
  echo "The bench CNN (share/bench/cnn.json), 64 samples per rank and step, 1 thread per rank"
  echo "(2 ranks on the 2 cores), alternating for $rounds rounds (the side that starts a round alternating"
  echo "too), each round's median samples/s of 60"
  echo "timed steps after 10 warm-up steps, min / median / max over the rounds. DLH: \`mpirun -np N dlh-launch train --threads 1 --batch-size 64N\`;"
  echo "PyTorch: \`python3 -m torch.distributed.run --standalone --nproc_per_node N"
  echo "share/bench/torch_ddp.py\` (DistributedDataParallel, gloo backend, OMP_WAIT_POLICY=PASSIVE,"
  echo "OPENBLAS_NUM_THREADS=1, GLIBC_TUNABLES=$malloc_keep: malloc keeps freed memory, as"
  echo "\`dlh-launch run\` runs a program; runs before 2026-12-04T14Z without it), each rank on a fixed"
  echo "random batch."
  echo
  report ddp
  echo
} >"$work/s3-ddp.md"
store ddp "$work/s3-ddp.md"
}

# ---- allreduce ---------------------------------------------------------------------------
bench_allreduce() {
section "allreduce: DLH against MPI_Allreduce, 2 ranks, 4 KiB - 256 MiB"
# Sizes x2 apart (17): the piecewise communication model, fitted to every other one (9),
# needs >= 3 sizes per regime.
mpirun -np 2 dlh-launch bench-allreduce --max-bytes 256M --factor 2 --repeats 7 \
  --json "$work/ar.json" >"$work/ar.txt"
# The communication model is fitted to every other size and scored on the sizes between,
# which it has not seen (report.py comm).
$py -c 'import json, sys; r = json.load(open(sys.argv[1])); r["sizes"] = r["sizes"][::2]; json.dump(r, open(sys.argv[2], "w"))' \
  "$work/ar.json" "$work/ar-fit.json"
dlh-estimate comm "$work/ar-fit.json" --json >"$work/comm.json"
{
  echo "## Allreduce: DLH's gradient path against Open MPI's MPI_Allreduce (2 ranks)"
  echo
  echo "\`mpirun -np 2 dlh-launch bench-allreduce --max-bytes 256M --factor 2\`: float sum; DLH's path is the"
  echo "fused gradient bucket training uses (four gradients, summed in place in the flat gradient"
  echo "array); both alternate block by block, min / median / max of 7 blocks, compared best with"
  echo "best and median with median."
  echo "algbw = bytes / time; busbw = algbw × 2(n−1)/n (nccl-tests)."
  echo
  report allreduce
  echo
  echo "### Communication model against the measurement"
  echo
  report comm
  echo
} >"$work/s4-allreduce.md"
store allreduce "$work/s4-allreduce.md"
}

# ---- checkpoints -----------------------------------------------------------------------------
bench_checkpoint() {
section "checkpoints: CheckpointDir::save against dd conv=fsync; overhead at a 2 s interval"
# Three writers of the same size: DLH's save, a plain write + fsync of the same arrays
# (bench-checkpoint --raw) and dd. Each round runs all three in a rotated order, each into a
# fresh file (the previous files deleted and synced beforehand, outside the timing).
ckpt_dlh() {  # ckpt_dlh MIB [--raw]: prints "FILE_BYTES SECONDS"
  rm -rf "$work/ck" "$work/dd.bin"
  sync
  dlh-launch bench-checkpoint --dir "$work/ck" --mb "$1" --repeats 1 --json "$work/ck.json" ${2:-} >/dev/null
  $py -c "import json,sys; s=json.load(open(sys.argv[1]))['sizes'][0]; print(s['file_bytes'], s['median_s'])" \
    "$work/ck.json"
}
ckpt_dd() {  # ckpt_dd MIB_OF_FILE: prints "FILE_BYTES SECONDS", as dd reports them
  rm -rf "$work/ck" "$work/dd.bin"
  sync
  dd if=/dev/zero of="$work/dd.bin" bs=1M count="$1" conv=fsync 2>&1 |
    sed -n 's/^\([0-9]*\) bytes .* copied, \([0-9.]*\) s.*/\1 \2/p'
}
for mb in 64 256; do
  dlh=() raw=() ddt=()
  file_mib=$((2 * mb + 1))  # parameters, momentum and the HDF5 metadata (well under 1 MiB)
  for round in 1 2 3 4 5; do
    for k in 0 1 2; do
      case $(((round + k) % 3)) in
        0) read -r bytes s < <(ckpt_dlh "$mb"); dlh+=("$s") ;;
        1) read -r raw_bytes s < <(ckpt_dlh "$mb" --raw); raw+=("$s") ;;
        2) read -r dd_bytes s < <(ckpt_dd "$file_mib"); ddt+=("$s") ;;
      esac
    done
  done
  echo "{\"mib\": $mb, \"file_bytes\": $bytes, \"raw_bytes\": $raw_bytes, \"dd_bytes\": $dd_bytes, \"dlh_s\": [$(IFS=,; echo "${dlh[*]}")], \"raw_s\": [$(IFS=,; echo "${raw[*]}")], \"dd_s\": [$(IFS=,; echo "${ddt[*]}")]}" \
    >>"$work/ckpt.jsonl"
done
rm -rf "$work/ck" "$work/dd.bin"
# Training time lost to checkpoints at an interval that fires several times in the run (the
# default 1800 s never fires in a run this short, so it would time the epoch ends alone):
# every 2 s over 3 epochs of a few seconds each, the other options as by default.
ovh_train=15000 ovh_epochs=3 ovh_every=2
dlh-data synthetic --out "$work/ovh.h5" --shape 1x28x28 --classes 10 --train $ovh_train --test 100 >/dev/null
mpirun -np 2 dlh-launch train "$root/share/examples/fashion-mnist.json" --data "$work/ovh.h5" \
  --run-dir "$work/ovh" --epochs $ovh_epochs --threads 1 --no-eval --progress none \
  --checkpoint-seconds $ovh_every 2>/dev/null
ovh_ckpt=$(ls "$work/ovh/checkpoints"/ckpt-*.h5 | tail -1)
echo "{\"metrics\": \"$work/ovh/metrics.jsonl\", \"train\": $ovh_train, \"epochs\": $ovh_epochs, \"every_s\": $ovh_every, \"file_bytes\": $(stat -c %s "$ovh_ckpt")}" \
  >"$work/ovh.json"
{
  echo "## Checkpoints: write bandwidth and training time lost"
  echo
  echo "\`dlh-launch bench-checkpoint --mb N\` times one whole \`CheckpointDir::save\` call (HDF5"
  echo "file, fsync, rename, folder fsync; whatever the training loop waits for) of N MiB of"
  echo "parameters plus N MiB of momentum, against \`dd if=/dev/zero bs=1M conv=fsync\` of the same"
  echo "size into the same folder, and against a plain write(2) + fsync of the same arrays, 1 MiB"
  echo "at a time through one buffer as dd and DLH's save write (\`bench-checkpoint --raw\`: the"
  echo "floor under any file format); 5 rounds, the order rotated,"
  echo "each into a fresh file. GB/s = file bytes / seconds."
  echo
  report checkpoint
  echo
} >"$work/s5-checkpoint.md"
store checkpoint "$work/s5-checkpoint.md"
}
bench_ckpt_overhead() {
section "checkpoints in the background: 100 MB every 100 steps and every 30 s, background and sync"
measure ckpt_overhead
{
  echo "## Checkpoints in the background: training time lost at frequent intervals"
  echo
  echo "share/bench/ckpt_overhead.sh: \`mpirun -np 2 dlh-launch train --threads 1\` of an MLP"
  echo "whose wide layer (784 → 10240) and Adam make a checkpoint of about 100 MB, global batch 32, with"
  echo "checkpoints written as by default (at a step boundary rank 0 copies the parameters and"
  echo "optimizer state to host memory and hands them to one writer thread; the loop waits only"
  echo "for the copy, and for the previous write if that still runs) or with"
  echo "\`--checkpoint-sync\` (the loop waits for the whole HDF5 write and fsync), against no"
  echo "checkpoints at all. Every run does the same steps on a synthetic 1x28x28 set, without"
  echo "evaluations or epoch checkpoints (\`--no-eval --no-epoch-checkpoints --keep 2\`)."
  echo "CheckFreq (Mohan et al., FAST 2021) also snapshots to memory and persists beside the"
  echo "training, and picks its interval so that checkpoints cost at most 3.5% of the run time."
  echo
  report ckpt_overhead
  echo
} >"$work/s5-ckpt-overhead.md"
store ckpt_overhead "$work/s5-ckpt-overhead.md"
}

# ---- sbatch --dlh-auto -------------------------------------------------------------------------
bench_sbatch() {
section "sbatch --dlh-auto: submission time on a local Slurm cluster"
sbatch_bench() {
  local b so=$bindir/../lib/spank_dlh.so
  for b in munged slurmctld slurmd sbatch scancel; do
    PATH="$PATH:/usr/sbin" command -v "$b" >/dev/null ||
      { echo "unavailable: '$b' is not installed (share/setup/install-deps.sh bench installs slurm-wlm and munge)"; return; }
  done
  [[ $(id -u) -eq 0 ]] || { echo "unavailable: the local Slurm cluster needs root"; return; }
  [[ -f $so ]] || { echo "unavailable: no $so in this build"; return; }
  # start-cluster.sh needs a short folder name (Unix socket paths).
  cluster=$(mktemp -d /tmp/dlhb-XXXX)
  if ! SLURM_TEST_PLUGSTACK="required $so cluster=$root/share/cluster/local.json" \
      bash "$root/share/slurm/start-cluster.sh" "$cluster" >"$work/cluster.txt" 2>&1; then
    echo "unavailable: share/slurm/start-cluster.sh failed: $(tail -1 "$work/cluster.txt")"
    return
  fi
  (
    while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN)_' || true)
    unset DLH_PLAN
    # shellcheck source=/dev/null
    source "$cluster/env.sh"
    cd "$work"
    auto="spec=$root/share/examples/fashion-mnist.json,samples=60000,deadline=30m"
    for _ in $(seq "$sbatch_rounds"); do
      t0=$EPOCHREALTIME
      sbatch --hold -o /dev/null --wrap true >/dev/null 2>"$work/plain.err" ||
        { echo "unavailable: sbatch failed: $(tail -1 "$work/plain.err")"; break; }
      t1=$EPOCHREALTIME
      sbatch --hold -o /dev/null --dlh-auto="$auto" --wrap true >/dev/null 2>"$work/auto.err" ||
        { echo "unavailable: sbatch --dlh-auto failed: $(tail -1 "$work/auto.err")"; break; }
      t2=$EPOCHREALTIME
      # The plugin must have planned (its one summary line), or this would time nothing.
      grep -q '^sbatch: dlh: ' "$work/auto.err" ||
        { echo "unavailable: spank_dlh.so printed no plan: $(tail -1 "$work/auto.err")"; break; }
      awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {printf "plain %.4f\nauto %.4f\n", b - a, c - b}'
    done
    scancel --user=root >/dev/null 2>&1 || true
  )
  bash "$root/share/slurm/stop-cluster.sh" "$cluster" >/dev/null 2>&1 || true
  rm -rf "$cluster"
  cluster=""
}
sbatch_rounds=20
sbatch_bench >"$work/sbatch.txt"
# A failure midway leaves its "unavailable" line last: report that alone.
if grep -q '^unavailable' "$work/sbatch.txt"; then
  grep -m1 '^unavailable' "$work/sbatch.txt" >"$work/sbatch.err" && mv "$work/sbatch.err" "$work/sbatch.txt"
fi
{
  echo "## sbatch --dlh-auto: time added to a submission"
  echo
  echo "A local Slurm 22.05 cluster (share/slurm/start-cluster.sh, \`spank_dlh.so\` in its"
  echo "plugstack.conf with share/cluster/local.json); $sbatch_rounds rounds of \`sbatch --hold --wrap true\`"
  echo "without and with \`--dlh-auto=spec=share/examples/fashion-mnist.json,samples=60000,deadline=30m\`,"
  echo "alternating, each timed from start to exit; the held jobs are cancelled afterwards."
  echo
  report sbatch
  echo
} >"$work/s6-sbatch.md"
store sbatch "$work/s6-sbatch.md"
}

# ---- recommender -------------------------------------------------------------------------
bench_recommender() {
section "recommender speed: 1,000 and 10,000 nodes of 4 GPU types; planning at 10,000 live nodes"
# big-N.json: share/cluster/example.json with N nodes of each of its 4 types. Without compute
# capabilities: the planner would leave the v100 out, and the goals count 4 types' candidates.
for n in 250 2500; do
  $py - "$work/big-$n.json" "$root/share/cluster/example.json" "$n" <<'PY'
import json, sys
c = json.load(open(sys.argv[2]))
for t in c["gpu_types"]:
    t.pop("calibration", None)
    t.pop("compute_capability", None)
for nt in c["node_types"]:
    nt["nodes"] = int(sys.argv[3])
json.dump(c, open(sys.argv[1], "w"))
PY
done
recommend() {  # recommend NODES_PER_TYPE
  dlh-estimate recommend "$root/share/examples/fashion-mnist.json" --samples 600000 \
    --deadline 3h --cluster "$work/big-$1.json" --mixed --per-gpu-batch 64
}
# The live state sbatch --dlh-auto plans from at 10,000 nodes (sinfo's lines, as
# cli_filter.lua passes them to slurm-plan; the plugin reads the same from slurmctld): a
# quarter of each type's nodes free.
$py - "$work/big-2500.json" "$work/sinfo-10000.txt" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as out:
    for nt in c["node_types"]:
        gpu, k = nt["gpu"], nt["gpus_per_node"]
        for i in range(1, nt["nodes"] + 1):
            busy = i % 4 != 0
            used = f"gpu:{gpu}:{k}(IDX:0-{k - 1})" if busy else f"gpu:{gpu}:0(IDX:N/A)"
            out.write(f"{gpu}{i:04d}|{'allocated' if busy else 'idle'}|gpu:{gpu}:{k}|{used}|\n")
PY
plan_10000() {
  DLH_SITE="cluster=$work/big-2500.json" dlh-estimate slurm-plan --live-nodes "$work/sinfo-10000.txt" \
    --dlh-auto "spec=$root/share/examples/fashion-mnist.json,samples=600000,deadline=3h,mixed"
}
local -a candidates=() times=() plans=()
: >"$work/recommend.txt"
for n in 250 2500; do
  times=()
  for _ in 1 2 3 4 5; do
    t=$(recommend "$n" | grep -o 'considered in [0-9.]* ms')
    t=${t#considered in }
    times+=("${t% ms}")
  done
  echo "$n ${times[*]}" >>"$work/recommend.txt"
  candidates[$n]=$(recommend "$n" | grep -o '^[0-9]* allocations')
done
plan_10000 >"$work/plan-10000.out" 2>&1 || true
if grep -q '^done$' "$work/plan-10000.out"; then
  for _ in 1 2 3 4 5; do
    t0=$EPOCHREALTIME
    plan_10000 >/dev/null 2>&1
    t1=$EPOCHREALTIME
    plans+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", b - a}')")
  done
fi
echo "${plans[*]}" >"$work/plan-10000.txt"
{
  echo "## Recommender speed"
  echo
  echo "\`dlh-estimate recommend --mixed --per-gpu-batch 64\` (weak scaling, so every allocation is a"
  echo "candidate) on share/cluster/example.json scaled to 250 and to 2,500 nodes of each of its 4 GPU"
  echo "types (1,000 and 10,000 nodes), 5 runs each: ${candidates[250]} and ${candidates[2500]}"
  echo "considered (single types and all pairs of types; above 32 nodes of a type, pairs on a grid"
  echo "refined around the best). Then the planning \`sbatch --dlh-auto\` adds, at 10,000 live nodes:"
  echo "\`dlh-estimate slurm-plan\` (the plugin's planning core, as cli_filter.lua runs it) with"
  echo "sinfo's view of the 10,000 nodes (a quarter of each type free) and \`--dlh-auto=...,mixed\`,"
  echo "timed from start to exit, 5 runs."
  echo
  report recommender
  echo
} >"$work/s7-recommender.md"
store recommender "$work/s7-recommender.md"
}

# ---- a cluster replay (issue 46) -----------------------------------------------------------
bench_replay() {
section "a cluster replay: 100,000 generated jobs on 4,000 GPUs and 1,000 CPU nodes, five policies; sensitivity"
measure replay
{
  echo "## A cluster replay: least energy to a deadline, for a whole cluster"
  echo
  echo "share/bench/replay.sh: \`dlh-estimate replay\` (docs/reference/replay.md) runs a generated"
  echo "trace of 100,000 jobs through the recommender on share/cluster/replay.json (125 nodes of 8"
  echo "GPUs of each of a100, h100, l40s and a40, and 1,000 CPU-only nodes of 64 cores that only"
  echo "DLH's plans use), once per policy: the users' own requests (their"
  echo "GPU count and type, their time limit), DLH's least energy meeting the deadline and its"
  echo "shortest time (both planned at submission on the free nodes, as \`sbatch --dlh-auto\`"
  echo "plans), the most GPUs the model can use, and one GPU. The replay's own FIFO + EASY-backfill"
  echo "scheduler runs the jobs; each job's real time is its prediction times a log-normal noise"
  echo "factor shared by every policy. The generator's sizes, durations and arrivals follow the"
  echo "Philly, Helios and PAI studies (docs/reference/replay.md, \"The generator\"). Goal: the whole"
  echo "replay in under 10 minutes on this host."
  echo
  $py "$bench/replay_report.py" "$work" "$goals"
  echo
} >"$work/s7-replay.md"
# The page of charts (replay --html) is kept beside the section, which links it.
page=()
[[ -f $work/replay/replay.html ]] && page=("$work/replay/replay.html")
store replay "$work/s7-replay.md" "${page[@]}"
}

# ---- lr-find -------------------------------------------------------------------------------
# The range test's cost, on 1 and 2 ranks; then whether its suggestion trains well
# (lr_validate.sh: 10 trainings on Fashion-MNIST, 12 to 25 minutes).
bench_lrfind() {
section "lr-find: the range test on 1 rank x 2 threads and 2 ranks x 1 thread"
for n in 1 2; do
  launch=(mpirun -np "$n")
  ((n > 1)) || launch=()
  t0=$(date +%s.%N)
  "${launch[@]}" dlh-launch lr-find "$root/share/examples/fashion-mnist.json" --data "$work/bench.h5" \
    --batch 64 --threads $((2 / n)) --out "$work/lr-$n.json" >/dev/null 2>&1
  echo "$t0 $(date +%s.%N)" | awk '{printf "%.2f\n", $2 - $1}' >"$work/lr-$n.time"
done
{
  echo "## lr-find: the learning-rate range test"
  echo
  echo "\`dlh-launch lr-find share/examples/fashion-mnist.json --batch 64\` (100 rates from 1e-5 to 10,"
  echo "stopping at divergence) on the synthetic 28x28 set above, on 1 rank x 2 threads and on 2 ranks"
  echo "x 1 thread. Time: the whole command (start-up, data, sweep, fit, files); a job with"
  echo "\`lr=find\` pays it once per spec and batch. The suggestions are shown but not judged: the"
  echo "model starts near ln 10 (chance for 10 classes, with the default initialisation), and on the"
  echo "synthetic set the few steps between a rate that learns and divergence do not bring its loss"
  echo "down by more than the loss's own noise, so the test says it found no clear minimum instead"
  echo "of guessing; dropout masks differ per rank, so the two curves are not the same either."
  echo "Whether the suggestion trains well, on the real data, is the validation below."
  echo
  report lrfind
  echo
} >"$work/s9-lrfind.md"
store lrfind "$work/s9-lrfind.md"
}
bench_lrvalidate() {
section "lr-find: validation on Fashion-MNIST, suggested against hand-picked and linear scaling"
measure lr_validate
{
  echo "## lr-find: validation on Fashion-MNIST"
  echo
  echo "share/bench/lr_validate.sh: the example spec (share/examples/fashion-mnist.json: its"
  echo "model, optimizer and warm-up + cosine schedule) on the real Fashion-MNIST (60,000 training,"
  echo "10,000 test samples), 2 ranks x 1 thread, with \"epochs\" shortened so every training fits"
  echo "here. For each seed (initial weights and data order, for the range test and the training"
  echo "alike) and at the spec's batch and 4x it: \`dlh-launch lr-find\`, then one training per"
  echo "rate: the spec's hand-picked rate (at 4x unscaled, the issue's bar), the suggestion, and at"
  echo "4x linear scaling. Training on the CPU is deterministic: a rerun of the same commit gives"
  echo "the same accuracies. docs/reference/lr-find.md has the other rules tried."
  echo
  report lrvalidate
  echo
} >"$work/s9-lrvalidate.md"
store lrvalidate "$work/s9-lrvalidate.md"
}

# ---- the shipped calibration on another host ----------------------------------------------
bench_transfer() {
section "estimator: the shipped calibration on this host and on a slower one (probes, transfer)"
bash "$bench/transfer.sh" "$bindir" "$work/transfer" >"$work/transfer.txt" 2>"$work/transfer.err" ||
  echo "unavailable: transfer.sh failed: $(tail -1 "$work/transfer.err")" >"$work/transfer.txt"
{
  echo "## Estimator: the shipped calibration on a host it was not made on"
  echo
  echo "share/bench/transfer.sh, as a new user would: the shipped calibrations (share/calibration, one per OpenBLAS kernel family) on"
  echo "this host as it is and on this host made slower by a CFS CPU quota (1 ms period, so steps"
  echo "are slowed evenly). On each, \`dlh-estimate check-calibration share/calibration --transfer-out\`"
  echo "probes the host (sgemm at the engine's shapes, memory bandwidth), chooses the shipped"
  echo "calibration that fits it best and says whether it matches, transfers by the probes'"
  echo "ratios or is refused; \`validate --set judged --rounds 5"
  echo "--repeats 9 --save\` times the judged validation models there (none shaped the time"
  echo "model's terms); \`calibrate\` calibrates that host. The three calibrations are then scored"
  echo "offline against the same measurements (\`validate --measured\`). Where this host"
  echo "refuses every shipped calibration (another OpenBLAS core type), the slower host is given"
  echo "the calibration made on this host as it is: one made on a host of the same kind at"
  echo "another speed."
  echo
  report transfer
  echo
} >"$work/s1-transfer.md"
store transfer "$work/s1-transfer.md"
}

# ---- whole jobs ----------------------------------------------------------------------------
bench_jobs() {
calibrate_here
section "whole jobs: ten sbatch --dlh-auto jobs, predicted against measured"
BENCH_CALIBRATION=$here_cal bash "$bench/whole_jobs.sh" "$bindir" "$work" >"$work/jobs.txt" 2>"$work/jobs.err" ||
  echo "unavailable: whole_jobs.sh failed: $(tail -1 "$work/jobs.err")" >"$work/jobs.txt"
{
  echo "## Whole jobs: predicted against measured on the local Slurm cluster"
  echo
  echo "share/bench/whole_jobs.sh: ten jobs submitted with \`sbatch --dlh-auto\` to a local Slurm"
  echo "cluster of two fake-GPU nodes (share/cluster/local.json, alpha timed by the calibration"
  echo "this run made of this host, as in the estimator's section; both nodes are this machine, which \`runtime.shared_host_cores\`"
  echo "says). The user's \`--nodes\`, \`--gres\` and \`--ntasks-per-node\` fix each shape; the plugin"
  echo "plans the rest and predicts the whole job (start-up, data, warm-up, steps, one evaluation"
  echo "of 10,000 test samples per epoch, checkpoints). Measured: the batch script's clock around"
  echo "\`srun dlh-launch train\`; the launcher's phases from its summary.json. The run's results"
  echo "keep what planning needs (jobs/saved-jobs.json: cluster file, calibration, specs, each"
  echo "job's options, time and observation record): \`share/bench/replay_jobs.py\` plans the same"
  echo "jobs again with another build, from the same measurements."
  echo
  report jobs
  echo
} >"$work/s8-jobs.md"
saved=()
[[ -f $work/jobs/saved-jobs.json ]] && saved=("$work/jobs/saved-jobs.json")
store jobs "$work/s8-jobs.md" "${saved[@]}"
}

# ---- make demo as a new user meets it (issue 40) -------------------------------------------
bench_demo() {
section "make demo as on a fresh machine, then again: predicted against the Slurm job"
measure demo
{
  echo "## make demo as on a fresh machine"
  echo
  echo "share/bench/demo.sh: README's first command, share/examples/demo.sh (Fashion-MNIST, the"
  echo "example spec, \`sbatch --dlh-auto=deadline=30m,...\` on the local cluster), run in an empty"
  echo "folder, so that it plans as on a fresh machine: no observation store, no calibration of"
  echo "this host, the shipped calibration check-calibration chooses (a match, or carried here by"
  echo "the probes). Then once more in the same folder, planned from the first job's observation."
  echo "Measured: the job's RunTime in Slurm (the batch script's whole run, the test-set"
  echo "predictions and report after the training included) and dlh-launch's own wall time."
  echo
  $py "$bench/demo_report.py" "$work" "$goals"
  echo
} >"$work/s8-jobs2-demo.md"
store demo "$work/s8-jobs2-demo.md"
}

# ---- adaptive batch balancing -------------------------------------------------------------
bench_balance() {
section "adaptive batch balancing: 2 ranks of different speed, even / planned / adaptive"
measure balance
{
  echo "## Adaptive batch balancing"
  echo
  echo "share/bench/balance.sh: two ranks of truly different speed on this machine, rank 0 an"
  echo "alpha and rank 1 a beta of share/cluster/local.json, beta slowed by a cgroup CPU quota to"
  echo "the speed the estimator gives it; the bench CNN (share/bench/cnn.json) at a global batch"
  echo "of 128, 1 thread per rank, each rank bound to its own core. Even: \`--batch-size 128\`"
  echo "(the plan's split overridden); planned: the 2-part \`DLH_PLAN\`; adaptive:"
  echo "\`--balance adaptive\` (docs/reference/dlh-launch.md, \"Adaptive balancing\")."
  echo "Ideal: the sum of each rank's own"
  echo "rate at the whole batch under the same binding and throttle, measured two ways: side by"
  echo "side (two 1-rank runs at once, each on its core, as the ranks of the job run) and alone (the"
  echo "other core idle, so also free of what two busy cores cost each other in memory bandwidth"
  echo "and caches, which no split can win back). Target: adaptive within 10% of the ideal side by"
  echo "side (issue 14 cites LB-BSP and Cannikin, 52-54% faster training)."
  echo
  report balance
  echo
} >"$work/s9-balance.md"
store balance "$work/s9-balance.md"
}

# ---- the example spec as an exported PyTorch program (issue 45) ----------------------------
bench_exported() {
section "the example spec as an exported PyTorch program against dlh-launch train"
measure exported
{
  echo "## The example spec as an exported PyTorch program"
  echo
  echo "share/bench/exported.sh: the example spec (share/examples/fashion-mnist.json) on the real"
  echo "Fashion-MNIST, trained by \`dlh-launch train\` and by the program \`dlh-launch export SPEC"
  echo "--pytorch\` writes from it (docs/man/dlh-launch.md, \"export\"), run as a user runs it under"
  echo "DLH: \`mpirun -np 1 dlh-launch run -- python3 PROGRAM\`, with the dlh module. One process, 2"
  echo "threads each, one after the other, alternating which goes first; round r uses seed r on"
  echo "both sides. The random streams differ (initial weights, order, dropout), so the two agree"
  echo "statistically. Seconds: the whole process, data loading and evaluations included."
  echo
  $py "$bench/exported_report.py" "$work" "$goals"
  echo
} >"$work/s2-quality2-exported.md"
store exported "$work/s2-quality2-exported.md"
}

# ---- a network suggested for a data set and a deadline (issue 45) --------------------------
bench_suggested() {
section "a suggested network to a deadline: Fashion-MNIST, 10 minutes, through sbatch --dlh-auto"
calibrate_here  # the plan from this host's calibration, as the whole jobs are planned
BENCH_CALIBRATION=$here_cal measure suggested
{
  echo "## A suggested network to a deadline"
  echo
  echo "share/bench/suggested.sh: \`dlh-estimate suggest\` (docs/man/dlh-estimate.md, \"suggest\")"
  echo "on the real Fashion-MNIST with a 10-minute deadline and the local cluster description"
  echo "(two alpha nodes, this machine), then the spec it wrote submitted as a user would,"
  echo "\`sbatch --dlh-auto=spec=suggested.json,deadline=10m,...\`, to a local Slurm cluster:"
  echo "the job's wall time around \`srun dlh-launch train\`, its time limit and its final test"
  echo "accuracy. Goal: at least 90%, the job inside its time limit and the deadline."
  echo
  $py "$bench/suggested_report.py" "$work" "$goals"
  echo
} >"$work/s2-quality3-suggested.md"
store suggested "$work/s2-quality3-suggested.md"
}

# ---- a user's program with shares on a mixed allocation (issue 44) -------------------------
bench_mixed_shares() {
section "a program with shares on a mixed allocation: even / the plan's shares / shares + Balancer"
measure mixed_shares
{
  echo "## A program with shares on a mixed allocation"
  echo
  echo "share/bench/mixed_shares.sh: a user's PyTorch program, share/examples/mixed_shares.py (DDP"
  echo "over gloo, a small CNN on synthetic 1x28x28 images, \`dlh.ShareSampler\`), on 2 ranks set up"
  echo "as in the balancing section: rank 0 an alpha, rank 1 a beta slowed by a cgroup CPU quota"
  echo "to the speed the estimator gives it, 1 thread per rank, each rank bound to its own core."
  echo "Even: a plan with an even split; the plan's shares: the split the estimator plans from"
  echo "the program's profiles on both types (\`DLH_RANK_BATCHES\`; runs before 2026-12-01T16Z:"
  echo "from alpha's profile alone, beta's scaled by the peaks; runs from 2026-12-04T18Z on: each"
  echo "profile's step time the mean of its timed steps, not their median, which for the throttled"
  echo "beta was either of its two kinds of step); shares + Balancer: that split and"
  echo "\`dlh.Balancer\` (docs/reference/run.md). Ideal: the sum of each rank's own rate at the"
  echo "whole global batch, both 1-rank runs at once, each on its core, under the same throttle."
  echo "Every run is under \`dlh-launch run\`, which keeps the program's freed memory (\`--malloc"
  echo "keep\`; runs before 2026-12-04T14Z faulted a step's activations in every step, which made"
  echo "the program 4x slower at batch 128 than at 100 and the ideal a measure of page faults)."
  echo
  $py "$bench/mixed_shares_report.py" "$work" "$goals"
  echo
} >"$work/s9-mixed-shares.md"
store mixed_shares "$work/s9-mixed-shares.md"
}

# ---- faults: time to detect -----------------------------------------------------------------
bench_faults() {
section "faults: a rank frozen, killed or cut off, time to the job's end"
measure faults
{
  echo "## Faults: time to detect"
  echo
  echo "share/bench/faults.sh: 3 ranks under \`mpirun\` on this machine, rank 2 SIGSTOPped or"
  echo "SIGKILLed after the first checkpoint, rounds interleaved; then tests/slurm/faults_test.sh"
  echo "once: one job of the example job script on a Slurm cluster whose two nodes are network"
  echo "namespaces of their own (2 ranks each, MPI over TCP between them) meets a frozen rank, a"
  echo "killed rank, a link down and a lost slurmd in turn, is requeued and resumed each time, and"
  echo "ends bit-identical to an uninterrupted job (docs/reference/dlh-launch.md, \"A lost rank or"
  echo "host under Slurm\")."
  echo
  report faults
  echo
} >"$work/s9-faults.md"
store faults "$work/s9-faults.md"
}

# ---- distributed training: convergence and scaling ----------------------------------------
bench_convergence() {
section "distributed training: 1, 2 and 4 ranks on 2 namespace hosts, time to accuracy"
# convergence.sh prints its own table too; BENCHMARKS.md gets report.py's.
measure convergence >"$work/convergence.txt"
{
  echo "## Distributed training: same state on any rank count, time to accuracy"
  echo
  echo "share/bench/convergence.sh: the example spec (share/examples/fashion-mnist.json) on the"
  echo "real Fashion-MNIST, trained at one global batch (the spec's) by 1 rank on one host, 2"
  echo "ranks (one per host) and 4 ranks (two per host, so the hierarchical allreduce crosses the"
  echo "hosts), one after the other, each a whole \`srun dlh-launch train\` on a local Slurm"
  echo "cluster whose two nodes are network namespaces of their own (\`SLURM_TEST_NETNS=1\`, MPI"
  echo "over TCP between them), with no checkpoint but the last. Every output line is stamped with the"
  echo "seconds since \`srun\`, which dates each epoch's evaluation. The same seed and global batch"
  echo "give every rank count the same samples in every step; the spec's dropout and batch norm"
  echo "differ per rank, so the curves can agree only statistically (the rounding-level"
  echo "agreement is tests/scripts/convergence.sh's, on a spec without either;"
  echo "docs/reference/dlh-launch.md, \"Same state on any rank count\")."
  echo
  report convergence
  echo
} >"$work/s9-convergence.md"
store convergence "$work/s9-convergence.md"
}

# ---- local SGD against synchronous training, fast and slow link ----------------------------
bench_local_sgd() {
section "local SGD (period 4, 16) against synchronous training on two hosts, fast and 100 Mbit/s link"
measure local_sgd
{
  echo "## Local SGD: the allreduce it saves on a slow link, the accuracy it costs"
  echo
  echo "share/bench/local_sgd.sh: the example spec (share/examples/fashion-mnist.json) on the real"
  echo "Fashion-MNIST at the spec's global batch, by 1 rank on one host and by 2 ranks (one per"
  echo "host) synchronously, with local SGD (\"sync\": {\"mode\": \"local_sgd\", \"period\": 4 or"
  echo "16}: docs/reference/training-spec.md, \"Local SGD\") and stale-synchronously (\"stale_sync\","
  echo "staleness 1 or 2: \"Stale-synchronous training\"), each a whole \`srun dlh-launch train\`"
  echo "on a local Slurm cluster whose two nodes are network namespaces (\`SLURM_TEST_NETNS=1\`, MPI"
  echo "over TCP between them): first on the hosts' own link, then with host2's link shaped by"
  echo "\`tc\` (a token bucket on both ends of its veth pair), as a job on a slow inter-node link."
  echo
  $py "$bench/local_sgd_report.py" "$work" "$goals"
  echo
} >"$work/s9-local-sgd.md"
store local_sgd "$work/s9-local-sgd.md"
}

# ---- pipeline parallelism: the bubble, and the largest network under a memory cap ----------
bench_pipeline() {
section "pipeline: the bubble against GPipe's, the widest network under a memory cap"
calibrate_here
BENCH_CALIBRATION=$here_cal measure pipeline
{
  echo "## Pipeline parallelism: the bubble, and the largest network under a memory cap"
  echo
  echo "share/bench/pipeline.sh: the example spec (share/examples/fashion-mnist.json) on the real"
  echo "Fashion-MNIST as 2 pipeline stages (\"parallel\": docs/reference/training-spec.md,"
  echo "\"Pipeline parallelism\") with 2, 4 and 8 micro-batches next to 1 and 2 data-parallel ranks,"
  echo "each \`mpirun dlh-launch train\` on this machine; then MLPs of growing width planned by"
  echo "\`dlh-estimate recommend --memory-cap\` (docs/reference/dlh-estimate.md, \"A network too large"
  echo "for one device\") and the widest pipelined one trained as planned."
  echo
  $py "$bench/pipeline_report.py" "$work" "$goals"
  echo
} >"$work/s9-pipeline.md"
store pipeline "$work/s9-pipeline.md"
}

# ---- a rank's memory: predicted against measured --------------------------------------------
bench_memory() {
section "a rank's memory: dlh-estimate features against the peak resident memory"
measure memory
{
  echo "## A rank's memory: predicted against measured"
  echo
  echo "share/bench/memory.sh: MLPs, the example and bench CNNs, ResNet-18 (32x32) and ResNet-50"
  echo "(224x224), each at two batches, and three networks held out of writing the count, on"
  echo "synthetic data of its input shape: \`dlh-estimate features SPEC --batch B --engine cpu"
  echo "--json\`'s memory_bytes (the figure \`recommend\` fits into a CPU rank's memory, and a"
  echo "pipeline's stages into \`--memory-cap\`: docs/reference/dlh-estimate.md) against the peak"
  echo "resident memory of \`dlh-launch train\` on the CPU engine (summary.json's"
  echo "rank_process.peak_rss_mib); two networks also as 2-stage pipelines, stage by stage."
  echo
  $py "$bench/report.py" memory "$work" "$goals"
  echo
} >"$work/s9-memory.md"
# The raw rows too: the memory model's next form is fitted and judged on them.
if [[ -f $work/memory/results.json ]]; then
  store memory "$work/s9-memory.md" "$work/memory/results.json"
else
  store memory "$work/s9-memory.md"
fi
}

# ---- run the parts, render BENCHMARKS.md ---------------------------------------------------
for p in $parts; do
  want "$p" || continue
  part "$p"
  "bench_$p"
done
$py "$bench/report.py" render "$out"
took=$((SECONDS - t_begin))
echo "stored share/bench/results/$run_id/ (${only:-every part}), rendered $out; took ${took} s" >&2
