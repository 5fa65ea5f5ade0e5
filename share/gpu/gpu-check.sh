#!/bin/bash
# DLH GPU check: the GPU tests, CPU/GPU parity, resume on the GPU, the hierarchical
# allreduce as 2 nodes x 1 GPU, and training throughput against PyTorch on the same GPU.
#
#   share/gpu/gpu-check.sh pack [BUILDDIR]   on the build machine: builds, then packs into
#                                            .gpu-bundle/ what a GPU machine without MPI or
#                                            HDF5 needs (binaries, the CUDA backend, their
#                                            shared libraries and the Open MPI runtime)
#   share/gpu/gpu-check.sh run [OUTDIR]      on the GPU machine, from the repository root
#                                            with .gpu-bundle/ beside it: runs everything,
#                                            prints a table and writes results.md to OUTDIR
#                                            (and OUTDIR/share/: the GPU's calibration and
#                                            the example cluster pointing at it, ready to
#                                            commit); exits non-zero if a row failed
#   share/gpu/gpu-check.sh selftest [OUTDIR] on any machine, GPU or not: the bundle's Open
#                                            MPI with no rsh/ssh agent (a singleton and
#                                            mpirun -np 2 of dlh-launch train), as run uses it
#
# Every step runs on its own, under its own time limit: one that fails or times out is a
# **FAILED** row and the others still run; each row is appended to OUTDIR/results.md as its
# step ends, so a visit that ends early keeps what it measured. Steps run in priority order:
# the multi-rank rows first. DLH_GPU_CHECK_SECONDS=N: the whole check's budget (a lent GPU's
# time is rationed): each step's limit is cut to what is left, and a step that no longer
# fits is a "not run" row. DLH_GPU_CHECK_ONLY=REGEX: only the steps whose names match it (grep
# -E) run, the others are "not run" rows (a visit of a few minutes spends them on the rows
# written since the last one). DLH_GPU_CALIBRATION_GOAL (default 15): the validation MAPE, in %,
# above which the calibration row fails. The work folder in /tmp (the unpacked bundle, each
# step's run folders) goes when the check ends; DLH_GPU_KEEP_WORK=1 keeps it to look into.
# run is meant for a machine with a GPU, so a missing GPU is a failure there: the probe
# (nvidia-smi) failing ends the check with a failed row, and gpu_tests runs with
# REQUIRE_GPU=1, which turns any skipped test into a failed run.
#
# The GPU machine brings the CUDA libraries (cudart, cuBLAS and cuBLASLt, cuDNN, NCCL)
# itself, from its CUDA toolkit or PyTorch's nvidia-* packages; only glibc and libstdc++
# are taken from it besides.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# DLH_GPU_BUNDLE: where the bundle is packed and read (tests/scripts/gpu_bundle.sh uses a
# temporary folder). DLH_PACK_SELFTEST=1: pack the build as it is, uncompressed, without the
# CUDA backend and gpu_tests if they were not built (for selftest on a machine without nvcc).
bundle=${DLH_GPU_BUNDLE:-$root/.gpu-bundle}
selftest_pack=${DLH_PACK_SELFTEST:-0}
helpers=$root/share/gpu/gpu_check_rows.py
mode=${1:-}

pack() {
  local builddir=${1:-build}
  ((selftest_pack)) || make -C "$root" -j"$(nproc)" BUILDDIR="$builddir" all tests >/dev/null
  [[ $builddir == /* ]] || builddir=$root/$builddir
  local bin=$builddir/bin stage
  if [[ ! -f $builddir/lib/dlh/libdlh_cuda.so ]] && ! ((selftest_pack)); then
    echo "gpu-check: no CUDA backend built (nvcc missing?)" >&2
    exit 1
  fi
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir -p "$stage/bin" "$stage/lib/dlh"
  cp "$bin/dlh-launch" "$bin/dlh-data" "$bin/dlh-estimate" "$stage/bin/"
  [[ -f $bin/gpu_tests ]] && cp "$bin/gpu_tests" "$stage/bin/"
  [[ -f $builddir/lib/dlh/libdlh_cuda.so ]] && cp "$builddir/lib/dlh/libdlh_cuda.so" "$stage/lib/dlh/"
  # The NCCL stand-in (tests/nccl_standin/): several ranks on one GPU, and injected faults.
  [[ -f $builddir/lib/libdlh_nccl_standin.so ]] && cp "$builddir/lib/libdlh_nccl_standin.so" "$stage/lib/dlh/"
  # The Open MPI runtime at its own paths under ompi/ (relocated there by OPAL_PREFIX).
  local ompi_files
  ompi_files=$(dpkg -L openmpi-bin libopenmpi3 openmpi-common libpmix2 2>/dev/null |
    while read -r f; do [[ -f $f || -L $f ]] && echo "$f"; done | grep -v '/share/\(man\|doc\)/')
  mkdir -p "$stage/ompi"
  tar -C / -cf - $(sed 's|^/||' <<<"$ompi_files") etc/openmpi | tar -C "$stage/ompi" -xf -
  # Commands are links through /etc/alternatives, which the GPU machine lacks: copy them.
  for f in "$stage"/ompi/usr/bin/*; do
    [[ -L $f ]] && cp --remove-destination -L "/usr/bin/$(basename "$f")" "$f"
  done
  ln -sf orterun "$stage/ompi/usr/bin/mpirun"
  # Shared libraries of everything above, except the C runtime and CUDA's own.
  local objs
  objs=$(ls "$stage"/bin/* "$stage"/lib/dlh/*.so 2>/dev/null; find "$stage/ompi" -name '*.so*' -type f; ls "$stage"/ompi/usr/bin/* 2>/dev/null)
  for o in $objs; do ldd "$o" 2>/dev/null || true; done | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  # Debug information is most of the binaries' size, and the carry to the GPU is limited.
  strip --strip-unneeded "$stage"/bin/* "$stage"/lib/*.so* $(ls "$stage"/lib/dlh/*.so 2>/dev/null)
  rm -rf "$bundle" && mkdir -p "$bundle"
  # xz, since the carry to a GPU machine is limited; plain tar for a local selftest.
  if ((selftest_pack)); then
    tar -C "$stage" -cf "$bundle/bundle.tar" .
  else
    tar -C "$stage" -cJf "$bundle/bundle.tar.xz" .
  fi
  echo "gpu-check: packed $(du -h "$bundle"/bundle.tar* | cut -f1) into $bundle (carry it to the GPU machine)"
}

# --- run: everything below happens on the GPU machine -----------------------------------
cuda_lib_dirs() {  # the GPU machine's CUDA libraries: the toolkit's, then PyTorch's
  local dirs=()
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [[ -d $d ]] && dirs+=("$d"); done
  local py
  py=$(python3 -c 'import glob, os, nvidia
for p in nvidia.__path__:
    for d in sorted(glob.glob(os.path.join(p, "*", "lib"))): print(d)' 2>/dev/null || true)
  dirs+=($py)
  local IFS=:
  echo "${dirs[*]}"
}

# Unpacks the bundle into $1 and points the environment at it. Everything runs on this one
# machine, so Open MPI's isolated launcher starts the ranks: the default (rsh) aborts even a
# singleton when no ssh or rsh is installed ("Unable to start a daemon on the local node"),
# as on most GPU images. The bundle's libraries (Debian's libssl, libz, libcurl among them)
# are for DLH's binaries only: python and PyTorch run with the machine's own (py below).
bundle_env() {
  local w=$1
  if [[ -f $bundle/bundle.tar ]]; then tar -C "$w" -xf "$bundle/bundle.tar"; else tar -C "$w" -xJf "$bundle/bundle.tar.xz"; fi
  export PATH="$w/bin:$w/ompi/usr/bin:$PATH"
  machine_ld_path=${LD_LIBRARY_PATH:-}
  export LD_LIBRARY_PATH="$w/lib:$w/ompi/usr/lib/x86_64-linux-gnu/openmpi/lib:$(cuda_lib_dirs)"
  export OPAL_PREFIX=$w/ompi/usr
  export PMIX_MCA_mca_base_component_path=$w/ompi/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
  # mpirun's PMIx server still scans its built-in component folder first (strace shows it),
  # and the H100 image has another PMIx there: its zlib compressor fails to load, with a
  # warning on every start. Only large PMIx messages would be compressed, none here.
  export PMIX_MCA_pcompress_base_silence_warning=1
  export OMPI_MCA_mca_base_param_files=$w/ompi/etc/openmpi/openmpi-mca-params.conf
  export OMPI_MCA_plm=isolated
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
}
py() { LD_LIBRARY_PATH=$machine_ld_path python3 "$@"; }

# The table: row NAME RESULT appends a line; a result containing FAILED fails the check.
table_start() {
  table=$1/results.md log=$1/log.txt  # global: finish (the EXIT trap) reads them
  : >"$log"
  {
    echo "### $2 ($(date -u '+%Y-%m-%d'))"
    echo
    echo "| check | result |"
    echo "|---|---|"
  } >"$table"
}
row() {
  echo "| $1 | $2 |" >>"$table"
  echo "== $1: $2"
}
# step NAME LIMIT FUNCTION [ARGS]: FUNCTION under set -e in a process of its own (this
# script again, mode _step), killed with everything it started (timeout signals its process
# group: mpirun, the ranks, python) after LIMIT seconds, or fewer when the check's budget
# (DLH_GPU_CHECK_SECONDS) has less left. A command failing in it, or the limit, ends that
# step only, as a **FAILED** row, and the next step runs.
step() {
  local name=$1 limit=$2 rc=0 started=$SECONDS
  shift 2
  if [[ -n ${DLH_GPU_CHECK_ONLY:-} ]] && ! grep -qE -- "$DLH_GPU_CHECK_ONLY" <<<"$name"; then
    row "$name" "not run: not selected (DLH_GPU_CHECK_ONLY)"
    return
  fi
  if ((${DLH_GPU_CHECK_SECONDS:-0} > 0)); then
    local left=$((DLH_GPU_CHECK_SECONDS - SECONDS))
    if ((left < 20)); then
      row "$name" "not run: the check's ${DLH_GPU_CHECK_SECONDS} s (DLH_GPU_CHECK_SECONDS) were spent"
      return
    fi
    ((limit <= left)) || limit=$left
  fi
  set +e
  timeout -k 15 "$limit" bash "$root/share/gpu/gpu-check.sh" _step "$@"
  rc=$?
  set -e
  # How long each step took: the device time that runs this check is rationed.
  echo "== $name: $((SECONDS - started)) s (limit $limit s)" | tee -a "$log"
  if ((rc == 124 || rc == 137)); then
    row "$name" "**FAILED**: timed out after $limit s (see log.txt)"
  elif ((rc != 0)); then
    row "$name" "**FAILED**: stopped with exit $rc (see log.txt)"
  fi
}
# On every exit: the table, and exit 1 if a row failed.
finish() {
  local rc=$?
  echo
  cat "$table"
  if ((rc == 0)) && grep -q 'FAILED' "$table"; then rc=1; fi
  ((rc == 0)) || echo "gpu-check: FAILED (a row marked **FAILED**, or the check stopped with exit $rc); details in $log" >&2
  # Every row is in the table by now; make check runs selftest on every build and left
  # 1.8 MB in /tmp each time.
  [[ -z ${w:-} || ${DLH_GPU_KEEP_WORK:-} == 1 ]] || rm -rf "$w"
  exit "$rc"
}

run() {
  local out=${1:-$root/gpu-results}
  mkdir -p "$out"
  w=$(mktemp -d /tmp/dlh-gpu-XXXXXX)
  bundle_env "$w"
  local gpu probe_rc=0
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>>"$out/probe.txt" | head -1) ||
    probe_rc=$?
  table_start "$out" "GPU check on ${gpu:-no GPU found}"
  cat "$out/probe.txt" >>"$log" 2>/dev/null || true
  trap finish EXIT
  # 0. The probe: without a GPU nothing below means anything, and the run must not pass.
  if [[ $probe_rc -ne 0 || -z $gpu ]]; then
    row "GPU probe (nvidia-smi)" "**FAILED**: no GPU found (exit $probe_rc; see log.txt)"
    exit 1
  fi
  row "GPU probe (nvidia-smi)" "passed: $gpu"
  export REQUIRE_GPU=1  # gpu_tests: a skipped test fails the run (tests/gpu/gpu_main.cpp)
  gpu_slug=$(tr 'A-Z' 'a-z' <<<"${gpu%%,*}" | sed 's/^nvidia //; s/[^a-z0-9]\+/-/g; s/^-//; s/-$//')
  fm=$root/share/examples/fashion-mnist.json
  # The steps run in processes of their own (step): what they read from here is exported.
  export w table log fm gpu_slug machine_ld_path
  # Fashion-MNIST's shape and classes; synthetic, so the bundle stays small (the GPU machine
  # cannot fetch the data set and the real files would double the carry).
  dlh-data synthetic --out "$w/fm.h5" --shape 1x28x28 --classes 10 --train 30000 --test 1000 >>"$log" 2>&1 ||
    row "synthetic data" "**FAILED** (see log.txt)"
  # Priority order: what only a GPU can show, the multi-rank paths first (issue 42); the
  # committed calibration is validated, not measured again.
  step "2 ranks on one GPU" 120 check_shared_gpu
  step "NCCL stand-in: flat, 2 and 4 ranks on one GPU" 240 check_standin_flat
  step "NCCL stand-in: hierarchical, 2 nodes x 2, 1 node x 3 (tail), 2 + 1 (unequal)" 300 check_standin_hierarchical
  step "NCCL stand-in: a rank stopped at a collective ends the job, named" 120 check_standin_stall
  step "real NCCL: non-blocking join and abort, one rank" 120 check_nccl_nonblocking
  step "stale-synchronous training on the GPU, 2 ranks (stand-in) against 2 CPU ranks (unverified until this row)" 180 check_stale_gpu
  step "pipeline on the GPU: 2 stages, 2 stages x 2 replicas (stand-in) against 1 rank (unverified until this row)" 300 check_pipeline_gpu
  step "hierarchical allreduce, 2 nodes x 1 GPU" 180 check_hierarchical
  step "hierarchical allreduce with its tail, 2 nodes x 3 GPUs" 180 check_hierarchical_tail
  step "gpu_tests (layers, loss, optimizers vs CPU)" 300 check_gpu_tests
  step "CPU/GPU parity, CNN without batch norm or dropout" 180 check_parity
  step "CPU/GPU parity, residual network (new layers, unverified until this row)" 180 check_parity_resnet
  step "GPU resume equals uninterrupted run (param crc32)" 180 check_resume
  step "energy (NVML)" 120 check_energy
  step "users' programs: DDP and FSDP examples (issue 44)" 300 check_programs
  step "per-layer GPU profile (new, unverified until this row)" 180 check_profile "$out"
  step "GPU calibration and validation" 480 check_calibration "$out"
  step "throughput against PyTorch" 420 check_throughput
  step "PyTorch at its best (cudnn.benchmark, channels_last, TF32, bf16, CUDA graphs, torch.compile)" 600 check_torch_best "$out"
  step "bf16 against fp32: Fashion-MNIST CNN loss curves (unverified until this row)" 240 check_bf16_curve
  step "DLH bf16 ResNet-50 at 224 against PyTorch's best bf16 (goal 1.0x)" 300 check_bf16_resnet50 "$out"
}

train() {  # train RUN_DIR SPEC [options]: dlh-launch train, output to the log
  local dir=$1 spec=$2
  shift 2
  dlh-launch train "$spec" --run-dir "$dir" --progress none --no-resume "$@" >>"$log" 2>&1
}
summary() { py -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1/summary.json" "$2"; }
# The parity rows' model: no batch norm or dropout, so runs can be held to 1e-5.
parity_spec=$root/share/gpu/parity-cnn.json

# 1. GPU tests: every layer and kernel against the CPU engine.
check_gpu_tests() {
  if gpu_tests --gtest_brief=1 >>"$log" 2>&1; then
    row "gpu_tests (layers, loss, optimizers vs CPU)" "passed ($(grep -o '[0-9]* tests* from' "$log" | tail -1 | cut -d' ' -f1) tests)"
  else
    local why
    why=$(grep -m1 '^gpu_tests: FAIL: ' "$log" | cut -c18- || true)
    row "gpu_tests (layers, loss, optimizers vs CPU)" "**FAILED** (${why:-see log.txt})"
  fi
}

# 2. Parity: the same spec, data, seed and steps on CPU and GPU, TF32 off, on a model with no
# batch norm or dropout: the losses of the first 10 steps within 1e-5 of each other.
check_parity() {
  NVIDIA_TF32_OVERRIDE=0 train "$w/p-cpu" "$parity_spec" --data "$w/fm.h5" --device cpu --max-steps 10 --no-eval --threads 8
  NVIDIA_TF32_OVERRIDE=0 train "$w/p-gpu" "$parity_spec" --data "$w/fm.h5" --device cuda --max-steps 10 --no-eval
  row "CPU/GPU parity, CNN without batch norm or dropout" "$(py "$helpers" parity "$w/p-cpu/metrics.jsonl" "$w/p-gpu/metrics.jsonl" 10)"
}

# 2b. The same for the layers written without a GPU (issue 43): residual blocks (nested, with
# the identity and a projection), GELU, SiLU, average and global average pooling and label
# smoothing. dlh-launch refuses them on a GPU until this row has passed
# (common/cuda_support.cpp); DLH_TEST_CUDA_UNVERIFIED=1 lets it train them here.
check_parity_resnet() {
  local spec=$root/share/gpu/parity-resnet.json
  NVIDIA_TF32_OVERRIDE=0 train "$w/pr-cpu" "$spec" --data "$w/fm.h5" --device cpu --max-steps 10 --no-eval --threads 8
  DLH_TEST_CUDA_UNVERIFIED=1 NVIDIA_TF32_OVERRIDE=0 train "$w/pr-gpu" "$spec" --data "$w/fm.h5" --device cuda --max-steps 10 --no-eval
  row "CPU/GPU parity, residual network (new layers, unverified until this row)" \
    "$(py "$helpers" parity "$w/pr-cpu/metrics.jsonl" "$w/pr-gpu/metrics.jsonl" 10)"
}

# 2c. bf16 mixed precision (issue 43; launcher/engine/cuda/bf16.hpp): the Fashion-MNIST CNN
# 400 steps in fp32 and in bf16, same seed and batches; the curves must agree within the band
# of gpu_check_rows.py (precision). Then a bf16 run resumes from its checkpoint in fp32 (and
# the reverse): checkpoints are fp32 either way. dlh-launch refuses bf16 on a GPU until this
# row has passed (common/cuda_support.cpp).
with_field() {  # with_field SPEC KEY VALUE OUT: SPEC with "KEY": VALUE set
  py -c 'import json,sys; s=json.load(open(sys.argv[1])); s[sys.argv[2]]=json.loads(sys.argv[3]); json.dump(s,open(sys.argv[4],"w"))' "$@"
}
check_bf16_curve() {
  with_field "$fm" precision '"bf16"' "$w/fm-bf16.json"
  with_field "$fm" dataset "\"$w/fm.h5\"" "$w/fm-fp32.json"
  with_field "$w/fm-bf16.json" dataset "\"$w/fm.h5\"" "$w/fm-bf16.json"
  train "$w/b-fp32" "$w/fm-fp32.json" --device cuda --max-steps 400 --no-eval
  DLH_TEST_CUDA_UNVERIFIED=1 train "$w/b-bf16" "$w/fm-bf16.json" --device cuda --max-steps 400 --no-eval
  local curve
  curve=$(py "$helpers" precision "$w/b-fp32/metrics.jsonl" "$w/b-bf16/metrics.jsonl")
  # Resume across precisions: 400 steps of bf16 on to 420 in fp32, and fp32's on in bf16.
  dlh-launch train "$w/fm-fp32.json" --run-dir "$w/b-bf16" --device cuda --max-steps 420 --no-eval \
    --progress none >>"$log" 2>&1
  DLH_TEST_CUDA_UNVERIFIED=1 dlh-launch train "$w/fm-bf16.json" --run-dir "$w/b-fp32" --device cuda \
    --max-steps 420 --no-eval --progress none >>"$log" 2>&1
  local resumed
  resumed=$(py -c 'import json,sys; print(" and ".join(str(json.load(open(p+"/summary.json"))["steps"]) for p in sys.argv[1:]))' \
    "$w/b-bf16" "$w/b-fp32")
  row "bf16 against fp32: Fashion-MNIST CNN loss curves (unverified until this row)" \
    "$curve; resumed across precisions to steps $resumed"
}

# 2d. DLH's bf16 ResNet-50 at 224x224 against PyTorch's best bf16 variant (check_torch_best's
# torch-best.json; run after it), on synthetic data (1,280 images, epochs of 10 steps at
# batch 128, evaluation off): 40 steps a run, the rates of the last 20, 2 rounds.
check_bf16_resnet50() {
  local out=$1 r=()
  dlh-data synthetic --out "$w/in224.h5" --shape 3x224x224 --classes 1000 --train 1280 --test 10 >>"$log" 2>&1
  with_field "$root/share/examples/resnet50-imagenet.json" precision '"bf16"' "$w/r50-bf16.json"
  for _ in 1 2; do
    rm -rf "${w:?}/r50"
    DLH_TEST_CUDA_UNVERIFIED=1 train "$w/r50" "$w/r50-bf16.json" --data "$w/in224.h5" --device cuda \
      --max-steps 40 --no-eval --checkpoint-seconds 0 --no-epoch-checkpoints --batch-size 128
    r+=("$(py "$helpers" rates "$w/r50/metrics.jsonl" 128)")
  done
  row "DLH bf16 ResNet-50 at 224 against PyTorch's best bf16 (goal 1.0x)" \
    "$(py "$helpers" against-best resnet50 bf16 "${r[*]}" "$out/torch-best.json")"
}

# 3. Resume on the GPU: 60 steps in one go against 50 + 10 from a checkpoint, on a data set
# of 50 steps an epoch. The uninterrupted run copies each step's batch to the GPU during the
# previous step's backward, and keeps step 51's there through the evaluation at the end of
# epoch 1; the resumed run copies step 51's when it starts. Equal parameters show that the
# batches copied ahead are the ones the steps use, and that the evaluation left it alone.
check_resume() {
  dlh-data synthetic --out "$w/fm-small.h5" --shape 1x28x28 --classes 10 --train 6400 --test 500 >>"$log" 2>&1
  train "$w/r-full" "$fm" --data "$w/fm-small.h5" --device cuda --max-steps 60
  train "$w/r-split" "$fm" --data "$w/fm-small.h5" --device cuda --max-steps 50
  dlh-launch train "$fm" --run-dir "$w/r-split" --data "$w/fm-small.h5" --device cuda --max-steps 60 --progress none >>"$log" 2>&1
  local a b
  a=$(summary "$w/r-full" param_crc32) b=$(summary "$w/r-split" param_crc32)
  row "GPU resume equals uninterrupted run (param crc32)" "$([[ $a == "$b" ]] && echo passed || echo '**FAILED**'): $a vs $b"
}

# 4. Two ranks on one GPU (mpirun -np 2 on a one-GPU machine): NCCL refuses ranks that share
# a GPU, so every rank holds a GPU it cannot train on: --device auto, --device cuda and a run
# that asked for nothing must each stop with one line naming the shared GPU and exit 2,
# before NCCL is reached, and none may train on the CPU (issue 42: a GPU allocation never
# trains on the CPU).
check_shared_gpu() {
  local first auto_rc=0 cuda_rc=0 msg
  first=$(nvidia-smi --query-gpu=index --format=csv,noheader | head -1)
  CUDA_VISIBLE_DEVICES=$first mpirun -np 2 -x PATH -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES \
    dlh-launch train "$fm" --run-dir "$w/s-auto" --data "$w/fm.h5" --device auto --max-steps 5 \
    --no-eval --progress none --no-resume >"$w/s-auto.txt" 2>&1 || auto_rc=$?
  CUDA_VISIBLE_DEVICES=$first mpirun -np 2 -x PATH -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES \
    dlh-launch train "$fm" --run-dir "$w/s-cuda" --data "$w/fm.h5" --device cuda --max-steps 5 \
    --no-eval --progress none --no-resume >"$w/s-cuda.txt" 2>&1 || cuda_rc=$?
  # Nobody asked for a GPU here (no --device, no CUDA_VISIBLE_DEVICES, no plan), but the ranks
  # found one they cannot share: the same error.
  local quiet_rc=0
  env -u CUDA_VISIBLE_DEVICES mpirun -np 2 -x PATH -x LD_LIBRARY_PATH \
    dlh-launch train "$fm" --run-dir "$w/s-quiet" --data "$w/fm.h5" --max-steps 5 \
    --no-eval --progress none --no-resume >"$w/s-quiet.txt" 2>&1 || quiet_rc=$?
  cat "$w/s-auto.txt" "$w/s-cuda.txt" "$w/s-quiet.txt" >>"$log"
  msg=$(grep -m1 -o 'ranks [0-9]* and [0-9]* on .* both use GPU [^,]*' "$w/s-cuda.txt" || true)
  local named=0 f
  for f in "$w/s-auto.txt" "$w/s-cuda.txt" "$w/s-quiet.txt"; do
    grep -q 'error: .*ranks [0-9]* and [0-9]* on .* both use GPU' "$f" && ! grep -q 'training on the CPU' "$f" &&
      named=$((named + 1))
  done
  if ((auto_rc == 2 && cuda_rc == 2 && quiet_rc == 2 && named == 3)) && [[ -n $msg ]] &&
    [[ ! -f $w/s-auto/summary.json && ! -f $w/s-quiet/summary.json ]]; then
    row "2 ranks on one GPU" "passed: auto, cuda and a run that asked for nothing each exit 2 naming the shared GPU, none trains on the CPU ($msg)"
  else
    row "2 ranks on one GPU" "**FAILED**: auto exit $auto_rc, unasked exit $quiet_rc, cuda exit $cuda_rc, $named of 3 naming the shared GPU (expected 2, 2, 2 and 3, nothing trained; see log.txt)"
  fi
}

# 4b. Multi-rank GPU runs on one GPU through the NCCL stand-in (LD_PRELOAD in the ranks only,
# DLH_TEST_SHARE_GPU=1 to let them share it): the GPU engine's gradient sync as on a node of
# several GPUs, its collectives through shared memory. Each run, on the parity model with TF32
# off, must train like one rank with the whole batch on real NCCL: losses of 20 steps within
# 1e-5 (dlh-launch itself checks that the ranks' parameters stay bit-identical).
# node_script FILE EXPR: a wrapper that names each rank's node $(( EXPR )) from its rank r.
node_script() {
  printf '#!/bin/bash\nr=$OMPI_COMM_WORLD_RANK\nexport SLURMD_NODENAME=gpunode$((%s))\nexec "$@"\n' "$2" >"$1"
  chmod +x "$1"
}
standin_train() {  # standin_train NP NODE_SCRIPT RUN_DIR [dlh-launch train options]
  local np=$1 nodes=$2 dir=$3
  shift 3
  NVIDIA_TF32_OVERRIDE=0 mpirun -np "$np" -x PATH -x LD_LIBRARY_PATH -x NVIDIA_TF32_OVERRIDE \
    -x LD_PRELOAD="$w/lib/dlh/libdlh_nccl_standin.so" -x DLH_TEST_SHARE_GPU=1 \
    -x DLH_NCCL_STANDIN_FAULT="${DLH_NCCL_STANDIN_FAULT:-}" "$nodes" \
    dlh-launch train "$parity_spec" --run-dir "$dir" --data "$w/fm.h5" --device cuda \
    --max-steps 20 --no-eval --progress none --no-resume "$@"
}
check_standin_flat() {
  node_script "$w/one-node.sh" 0
  one_rank_reference
  standin_train 2 "$w/one-node.sh" "$w/sf2" >>"$log" 2>&1
  standin_train 4 "$w/one-node.sh" "$w/sf4" >>"$log" 2>&1
  row "NCCL stand-in: flat, 2 and 4 ranks on one GPU" "$(py "$helpers" stand-in "$w/h1/metrics.jsonl" \
    "2 ranks=$w/sf2/metrics.jsonl" "4 ranks=$w/sf4/metrics.jsonl")"
}
check_standin_hierarchical() {
  node_script "$w/two-by-two.sh" 'r / 2'
  node_script "$w/one-node.sh" 0
  node_script "$w/two-plus-one.sh" 'r < 2 ? 0 : 1'
  one_rank_reference
  standin_train 4 "$w/two-by-two.sh" "$w/sh4" --allreduce hierarchical >>"$log" 2>&1 || true
  standin_train 3 "$w/one-node.sh" "$w/sh3" --allreduce hierarchical >>"$log" 2>&1 || true
  standin_train 3 "$w/two-plus-one.sh" "$w/su3" --allreduce hierarchical >>"$log" 2>&1 || true
  row "NCCL stand-in: hierarchical, 2 nodes x 2, 1 node x 3 (tail), 2 + 1 (unequal)" \
    "$(py "$helpers" stand-in "$w/h1/metrics.jsonl" "2x2=$w/sh4/metrics.jsonl" \
      "1x3=$w/sh3/metrics.jsonl" "2+1=$w/su3/metrics.jsonl")"
}
# Rank 1 stops itself (SIGSTOP, as a frozen node) at its 40th collective: with --comm-timeout
# 10 the peer watch must end the job, naming rank 1, in under 30 s from the stop.
check_standin_stall() {
  local name="NCCL stand-in: a rank stopped at a collective ends the job, named" rc=0
  node_script "$w/one-node.sh" 0
  DLH_NCCL_STANDIN_FAULT=stop:1:40 standin_train 2 "$w/one-node.sh" "$w/ss" --comm-timeout 10 \
    --max-steps 200 2>&1 | while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done \
    >"$w/ss.txt" || rc=$?
  local ended stopped took named
  ended=$(date +%s.%N)
  cat "$w/ss.txt" >>"$log"
  stopped=$(grep -m1 'nccl-standin: rank 1: injecting stop' "$w/ss.txt" | cut -d' ' -f1)
  named=$(grep -m1 -o 'rank 1 ([^)]*) [a-z ]*' "$w/ss.txt" | head -1 || true)
  if [[ -z $stopped ]]; then
    row "$name" "**FAILED**: the stop was never injected (see log.txt)"
    return
  fi
  took=$(py -c "print(f'{$ended - $stopped:.1f}')")
  if [[ -n $named ]] && py -c "import sys; sys.exit(0 if $took < 30 else 1)"; then
    row "$name" "passed: ended ${took} s after the stop, naming \"$named\""
  else
    row "$name" "**FAILED**: ended ${took} s after the stop; rank 1 named: ${named:-no} (see log.txt)"
  fi
}
check_nccl_nonblocking() {
  if gpu_tests --gtest_filter='NcclNonBlocking.*' >>"$log" 2>&1; then
    row "real NCCL: non-blocking join and abort, one rank" "passed: $(grep -m1 'ncclCommAbort ended' "$log" || echo 'see log.txt')"
  else
    row "real NCCL: non-blocking join and abort, one rank" "**FAILED** (see log.txt)"
  fi
}

# 5. Hierarchical allreduce as 2 nodes x 1 GPU (each node's NCCL communicator has one rank,
# the cross-node step is MPI on host memory): ranks must stay bit-identical (dlh-launch
# checks) and train like one rank with the whole batch: on the parity model, TF32 off, the
# losses of the first 20 steps within 1e-5 of one rank's.
one_rank_reference() {
  [[ -f $w/h1/metrics.jsonl ]] ||
    NVIDIA_TF32_OVERRIDE=0 train "$w/h1" "$parity_spec" --data "$w/fm.h5" --device cuda --max-steps 20 --no-eval
}
check_hierarchical() {
  printf '#!/bin/bash\nexport SLURMD_NODENAME=gpunode$OMPI_COMM_WORLD_RANK\nexec "$@"\n' >"$w/node.sh"
  chmod +x "$w/node.sh"
  one_rank_reference
  NVIDIA_TF32_OVERRIDE=0 mpirun -np 2 -x PATH -x LD_LIBRARY_PATH -x NVIDIA_TF32_OVERRIDE "$w/node.sh" \
    dlh-launch train "$parity_spec" --run-dir "$w/h2" --data "$w/fm.h5" --device cuda \
    --allreduce hierarchical --max-steps 20 --no-eval --progress none --no-resume >>"$log" 2>&1
  row "hierarchical allreduce, 2 nodes x 1 GPU" "$(py "$helpers" hierarchical "$w/h1/metrics.jsonl" "$w/h2/metrics.jsonl" 20)"
}

# 5b. The hierarchical tail step: the elements past a multiple of the node's GPU count are
# summed by an NCCL allreduce inside the node. The flat gradient array's length is a multiple
# of a power of two, so only an odd GPU count per node has a tail: 2 nodes x 3 GPUs, the
# nodes posed on this machine, each node's ranks on GPUs 0-2.
check_hierarchical_tail() {
  local name="hierarchical allreduce with its tail, 2 nodes x 3 GPUs" count
  count=$(nvidia-smi -L | wc -l)
  if ((count < 3)); then
    row "$name" "not run: $count GPU(s) here, the tail needs 3 per node (its plan is the CPU path's, which make check tests with tails)"
    return
  fi
  printf '#!/bin/bash\nexport SLURMD_NODENAME=gpunode$((OMPI_COMM_WORLD_RANK / 3))\nexec "$@"\n' >"$w/node3.sh"
  chmod +x "$w/node3.sh"
  one_rank_reference
  NVIDIA_TF32_OVERRIDE=0 mpirun -np 6 -x PATH -x LD_LIBRARY_PATH -x NVIDIA_TF32_OVERRIDE "$w/node3.sh" \
    dlh-launch train "$parity_spec" --run-dir "$w/h6" --data "$w/fm.h5" --device cuda \
    --allreduce hierarchical --max-steps 20 --no-eval --progress none --no-resume >>"$log" 2>&1
  row "$name" "$(py "$helpers" hierarchical "$w/h1/metrics.jsonl" "$w/h6/metrics.jsonl" 20)"
}

# 6. Energy: the GPU's own counter (NVML) over a training run, in summary.json.
# The same run's observation record (issue 40): a GPU job's, so its device names the GPU
# ("cuda:0 (NAME, ...)"), it counts one GPU a node and its probe is the GPU's. Before
# 2026-12-02 the CUDA engine's name read as a CPU there; records were never checked on a GPU.
check_energy() {
  mkdir -m 1777 "$w/obs"
  train "$w/e" "$fm" --data "$w/fm.h5" --device cuda --max-steps 200 --no-eval \
    --observations "$w/obs"
  row "energy (NVML)" "$(py "$helpers" energy "$w/e/summary.json")"
  row "a GPU job's observation record (new, unverified until this row)" \
    "$(py "$helpers" record "$w/obs")"
}

# 5b. Stale-synchronous training on the GPU (issue 47): its gradients staged through the host
# (CudaEngine::gradient_values; refused on a GPU until this row has passed:
# common/cuda_support.cpp). The parity spec with staleness 2, on 2 ranks sharing this GPU
# through the NCCL stand-in, against the same on 2 CPU ranks: the same batches, the same sums
# in flight and the same own steps, so the losses agree as the parity rows' do.
check_stale_gpu() {
  py - "$parity_spec" "$w/stale.json" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec["sync"] = {"mode": "stale_sync", "staleness": 2}
json.dump(spec, open(sys.argv[2], "w"), indent=1)
PY
  local run=(dlh-launch train "$w/stale.json" --data "$w/fm.h5" --max-steps 20 --no-eval
    --progress none --no-resume)
  mpirun -np 2 -x PATH -x LD_LIBRARY_PATH "${run[@]}" --run-dir "$w/st-cpu" --device cpu \
    --threads 4 >>"$log" 2>&1
  node_script "$w/one-node.sh" 0
  NVIDIA_TF32_OVERRIDE=0 DLH_TEST_CUDA_UNVERIFIED=1 mpirun -np 2 -x PATH -x LD_LIBRARY_PATH \
    -x NVIDIA_TF32_OVERRIDE -x DLH_TEST_CUDA_UNVERIFIED \
    -x LD_PRELOAD="$w/lib/dlh/libdlh_nccl_standin.so" -x DLH_TEST_SHARE_GPU=1 "$w/one-node.sh" \
    "${run[@]}" --run-dir "$w/st-gpu" --device cuda >>"$log" 2>&1
  row "stale-synchronous training on the GPU, 2 ranks (stand-in) against 2 CPU ranks (unverified until this row)" \
    "$(py "$helpers" parity "$w/st-cpu/metrics.jsonl" "$w/st-gpu/metrics.jsonl" 10)"
}

# 5c. Pipeline stages on the GPU (issue 47, launcher/engine/cuda/cuda_pipeline.cpp), written
# without one: the parity model cut into 2 stages of 4 micro-batches, its activations and
# gradients passed by ncclSend/ncclRecv (the stand-in's, so that the stages share this GPU),
# on 2 ranks and on 4 (2 replicas), against one rank unpipelined on real NCCL, 20 steps; then
# one epoch of a small data set with its evaluation through the stages against the same epoch
# unpipelined; the bubble is measured on the device.
check_pipeline_gpu() {
  py - "$parity_spec" "$w/pipe.json" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec["parallel"] = {"pipeline_stages": 2, "micro_batches": 4}
json.dump(spec, open(sys.argv[2], "w"), indent=1)
PY
  node_script "$w/one-node.sh" 0
  one_rank_reference
  dlh-data synthetic --out "$w/small.h5" --shape 1x28x28 --classes 10 --train 1280 --test 500 >>"$log" 2>&1
  NVIDIA_TF32_OVERRIDE=0 train "$w/pe1" "$parity_spec" --data "$w/small.h5" --device cuda
  pipelined() {  # pipelined NP RUN_DIR DATA [options]
    local np=$1 dir=$2 data=$3
    shift 3
    NVIDIA_TF32_OVERRIDE=0 DLH_TEST_CUDA_UNVERIFIED=1 mpirun -np "$np" -x PATH -x LD_LIBRARY_PATH \
      -x NVIDIA_TF32_OVERRIDE -x DLH_TEST_CUDA_UNVERIFIED \
      -x LD_PRELOAD="$w/lib/dlh/libdlh_nccl_standin.so" -x DLH_TEST_SHARE_GPU=1 "$w/one-node.sh" \
      dlh-launch train "$w/pipe.json" --run-dir "$dir" --data "$data" --device cuda \
      --progress none --no-resume "$@" >>"$log" 2>&1
  }
  pipelined 2 "$w/pp2" "$w/fm.h5" --max-steps 20 --no-eval || true
  pipelined 4 "$w/pp4" "$w/fm.h5" --max-steps 20 --no-eval || true
  pipelined 2 "$w/pe2" "$w/small.h5" || true
  row "pipeline on the GPU: 2 stages, 2 stages x 2 replicas (stand-in) against 1 rank (unverified until this row)" \
    "$(py "$helpers" pipeline "$w/h1/metrics.jsonl" "$w/pp2" "$w/pp4" "$w/pe1" "$w/pe2")"
}

# 6b. Users' programs on the GPU (issue 44): the DDP and FSDP examples under `dlh-launch run`,
# over NCCL on this GPU (one rank: NCCL refuses two on one GPU), each with its run folder's
# summary and the GPU's energy (NVML) measured around it; and the FSDP example on 2 ranks on
# the CPU with gloo, which Debian's PyTorch 1.13 cannot run (make check skips it) and this
# machine's PyTorch can. On Fashion-MNIST-shaped random data: the rows judge the runs.
check_programs() {
  local ex=$root/share/examples torch
  torch=$(py -c 'import torch; print(torch.__version__)')
  py "$helpers" idx "$w/idx"
  # The program runs with the machine's libraries (py above), and finds DLH's module.
  local prog=(env LD_LIBRARY_PATH="$machine_ld_path" PYTHONPATH="$root/share/python" python3)
  local data=(--data-dir "$w/idx" --epochs 1 --max-test-samples 500)
  dlh-launch run --run-dir "$w/ddp" -- "${prog[@]}" "$ex/ddp_fashion.py" "${data[@]}" \
    --device cuda >>"$log" 2>&1 || true
  row "DDP example over NCCL, 1 rank, PyTorch $torch (issue 44)" "$(py "$helpers" program "$w/ddp" nvml)"
  dlh-launch run --run-dir "$w/fsdp" -- "${prog[@]}" "$ex/fsdp_fashion.py" "${data[@]}" \
    >>"$log" 2>&1 || true
  row "FSDP example over NCCL, 1 rank, PyTorch $torch (issue 44)" "$(py "$helpers" program "$w/fsdp" nvml)"
  CUDA_VISIBLE_DEVICES='' mpirun -np 2 -x PATH -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES \
    dlh-launch run --run-dir "$w/fsdp-cpu" -- \
    "${prog[@]}" "$ex/fsdp_fashion.py" "${data[@]}" --max-samples 1280 >>"$log" 2>&1 || true
  row "FSDP example on the CPU with gloo, 2 ranks, PyTorch $torch (issue 44)" \
    "$(py "$helpers" program "$w/fsdp-cpu")"
}

# 7. The GPU calibration: the sweep on the CUDA engine, then its error on architectures
# outside the sweep. The calibration and the example cluster pointing at it are written to
# OUTDIR/share/, ready to commit, and the validation models' step times to
# OUTDIR/GPU-validation.json (for share/gpu/results/: `validate --measured` redoes the table
# without a GPU, for any later model). The whole sweep by default: on an H100 it and the
# validation took 249 s. DLH_GPU_QUICK_SWEEP=1: the quick sweep (a check, not for committing).
# A type with a committed calibration (share/calibration/SLUG.json, made by this engine) is
# not swept again: the visit validates the committed one (DLH_GPU_RECALIBRATE=1 sweeps all
# the same). The row fails above DLH_GPU_CALIBRATION_GOAL (15%, issue 40's goal for the GPU).
check_calibration() {
  local out=$1 cal quick=() what
  [[ ${DLH_GPU_QUICK_SWEEP:-0} == 1 ]] && quick=(--quick)
  mkdir -p "$out/share/calibration" "$out/share/cluster"
  cal=$out/share/calibration/$gpu_slug.json
  local committed=$root/share/calibration/$gpu_slug.json
  if [[ -f $committed && ${DLH_GPU_RECALIBRATE:-0} != 1 ]] &&
    dlh-estimate check-calibration "$committed" >>"$log" 2>&1; then
    cal=$committed what="the committed share/calibration/$gpu_slug.json, not swept again"
  else
    dlh-estimate calibrate --device cuda "${quick[@]}" --out "$cal" >>"$log" 2>&1
    what="share/calibration/$gpu_slug.json swept on this visit"
  fi
  dlh-estimate validate --device cuda --calibration "$cal" --set all \
    --save "$out/$gpu_slug-validation.json" >"$w/validate.txt" 2>&1
  cat "$w/validate.txt" >>"$log"
  # Predictions committed before this type was measured (share/gpu/predictions/, named by
  # the type's short name, which starts the GPU's slug): how far off they were.
  local f name
  for f in "$root"/share/gpu/predictions/*.json; do
    [[ -e $f ]] || continue
    name=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['target']['name'])" "$f")
    [[ $gpu_slug == "$name"* ]] || continue
    dlh-estimate gpu-layers --check "$f" --measured "$out/$gpu_slug-validation.json" \
      >"$w/predictions.txt" 2>&1 || true
    cat "$w/predictions.txt" >>"$log"
    row "predictions made before the visit (${f#"$root"/})" \
      "$(grep -m1 '^MAPE over' "$w/predictions.txt" || echo 'could not be checked')"
  done
  # A calibration swept on this visit gets its GPU layer model, fitted to its sweep and judged
  # on the validation models just measured (gpu-layers --store), for the recommender.
  local peaks
  peaks=$(peaks_file)
  if [[ $cal != "$committed" && -n $peaks ]]; then
    dlh-estimate gpu-layers --calibration "$cal" --peaks "$peaks" \
      --measured "$out/$gpu_slug-validation.json" --store >>"$log" 2>&1 || true
  fi
  [[ $cal == "$committed" ]] ||
    py "$helpers" cluster "$root/share/cluster/example.json" "$out/share/cluster/example.json" "$gpu_slug"
  row "GPU calibration and validation" "$(py "$helpers" calibration "$w/validate.txt" "${DLH_GPU_CALIBRATION_GOAL:-15}"); $what"
}

# This GPU's published peaks (share/gpu/specs/, by the slug's first word: h100-80gb-hbm3 has
# h100-sxm.json), for the GPU layer model; empty where there are none.
peaks_file() {
  local f
  for f in "$root/share/gpu/specs/${gpu_slug%%-*}"*.json; do
    [[ -e $f ]] && echo "$f" && return
  done
  return 0  # none: an empty answer, not a failed step (steps run under set -e)
}

# 7b. Where a GPU step goes (issue 40, part 5): every GPU validation model's step timed pass
# by pass (dlh-estimate profile --device cuda), kept as OUTDIR/SLUG-profile.json (for
# share/gpu/results/), and the quick sweep's 15 models likewise (SLUG-profile-sweep.json: the
# layer model's device and host terms are fitted to these passes offline, `gpu-layers
# --fit-profile`, and judged on the validation models' whole steps, which took no part);
# where this type has a committed calibration, the layer model's passes set against the
# validation models' (gpu-layers --profile). DLH_GPU_PROFILE_SWEEP=1: the whole sweep (96).
check_profile() {
  local out=$1 peaks cal=$root/share/calibration/$gpu_slug.json sweep=quick-sweep
  [[ ${DLH_GPU_PROFILE_SWEEP:-0} == 1 ]] && sweep=sweep
  dlh-estimate profile --device cuda --set all --steps 10 --repeats 3 \
    --out "$out/$gpu_slug-profile.json" >"$w/profile.txt" 2>&1
  cat "$w/profile.txt" >>"$log"
  dlh-estimate profile --device cuda --set "$sweep" --steps 10 --repeats 3 \
    --out "$out/$gpu_slug-profile-sweep.json" >>"$log" 2>&1
  peaks=$(peaks_file)
  if [[ -f $cal && -n $peaks ]]; then
    dlh-estimate gpu-layers --calibration "$cal" --peaks "$peaks" --folds 0 \
      --profile "$out/$gpu_slug-profile.json" --passes >>"$log" 2>&1 || true
  fi
  row "per-layer GPU profile (new, unverified until this row)" \
    "$(py "$helpers" profile "$out/$gpu_slug-profile.json"); kept as $gpu_slug-profile.json, the $sweep's as $gpu_slug-profile-sweep.json"
}

# 8. Throughput against PyTorch on the same GPU, model and batch, like for like: PyTorch
# copies a pinned host batch to the GPU each step and reads the loss back, as DLH does
# (TF32 as each library's default). DLH's compute-only rate leaves its data loading out.
check_throughput() {
  dlh-data synthetic --out "$w/large.h5" --shape 3x32x32 --classes 10 --train 20000 --test 100 >>"$log" 2>&1
  {
    echo
    echo "| model | batch | DLH samples/s | DLH compute-only | PyTorch $(py -c 'import torch; print(torch.__version__)') samples/s | DLH / PyTorch |"
    echo "|---|---|---|---|---|---|"
  } >>"$table"
  local m
  for m in "fashion-mnist $fm $w/fm.h5 128" "cnn-large $root/share/gpu/cnn-large.json $w/large.h5 256"; do
    set -- $m
    local d=() t=()
    for _ in 1 2 3; do
      rm -rf "${w:?}/tp"
      train "$w/tp" "$2" --data "$3" --device cuda --max-steps 220 --no-eval --checkpoint-seconds 0 --no-epoch-checkpoints --batch-size "$4"
      d+=("$(py "$helpers" rates "$w/tp/metrics.jsonl" "$4")")
      t+=("$(py "$root/share/gpu/torch_spec_train.py" "$2" --batch "$4" | tail -1)")
    done
    py "$helpers" throughput-row "$1" "$4" "${d[*]}" "${t[*]}" >>"$table"
  done
}

# 9. PyTorch at its best on this GPU (issue 43): share/gpu/torch_best.py times the Fashion-MNIST
# CNN, cnn-large, ResNet-18 at 32x32 and ResNet-50 at 224x224 at batches that fill the GPU, in
# FP32 (TF32 off), TF32 and bf16 autocast, eager, as a captured CUDA graph and through
# torch.compile, with no syncs inside the timed steps; 3 interleaved rounds in its own budget
# of 420 s (a compilation under way may overrun it by its own limit, 150 s). Every variant's
# figures go to OUTDIR/torch-best.json; the table gets the best of each model and precision.
# A variant that fails there is its own row in the JSON, not a failure of the check.
check_torch_best() {
  local out=$1 feats=() m
  for m in "resnet50 share/examples/resnet50-imagenet.json" "resnet18 share/examples/resnet18-cifar.json" \
    "cnn-large share/gpu/cnn-large.json" "fashion-mnist share/examples/fashion-mnist.json"; do
    set -- $m
    dlh-estimate features "$root/$2" --json >"$w/features-$1.json" 2>>"$log" && feats+=(--features "$1=$w/features-$1.json")
  done
  py "$root/share/gpu/torch_best.py" --out "$out/torch-best.json" --budget 420 "${feats[@]}" \
    >"$w/torch-best.txt" 2>>"$log" || true
  cat "$w/torch-best.txt" >>"$log"
  row "PyTorch at its best (cudnn.benchmark, channels_last, TF32, bf16, CUDA graphs, torch.compile)" \
    "$(py "$helpers" torch-best "$out/torch-best.json")"
  if [[ -f $out/torch-best.json ]]; then py "$helpers" torch-best-table "$out/torch-best.json" >>"$table"; fi
}

# --- selftest: the bundle's launcher on this machine, GPU or not -------------------------
# What run relies on before any GPU step: the packed Open MPI starts a singleton and
# mpirun -np 2 with no rsh/ssh agent at all (plm_rsh_agent pointing nowhere, as on a GPU
# image without ssh), and dlh-launch trains there (on the GPU, or on the CPU with the
# fallback line). It also shows that the rsh launcher fails there, which is why run uses
# the isolated one.
selftest() {
  local out=${1:-$root/gpu-results}
  mkdir -p "$out"
  w=$(mktemp -d /tmp/dlh-gpu-selftest-XXXXXX)
  bundle_env "$w"
  export OMPI_MCA_plm_rsh_agent=does-not-exist
  table_start "$out" "GPU bundle selftest on $(hostname)"
  trap 'finish' EXIT
  dlh-data synthetic --out "$w/s.h5" --shape 1x28x28 --classes 10 --train 512 --test 64 >>"$log" 2>&1
  local spec=$root/share/examples/fashion-mnist.json rc=0
  if OMPI_MCA_plm=rsh dlh-launch train "$spec" --run-dir "$w/rsh" --data "$w/s.h5" --device cpu \
    --max-steps 2 --no-eval --progress none >"$w/rsh.txt" 2>&1; then
    row "singleton, rsh launcher, no agent" "**FAILED**: expected Open MPI to refuse to start"
  elif grep -q 'plm_rsh_agent\|Unable to start a daemon' "$w/rsh.txt"; then
    row "singleton, rsh launcher, no agent" "passed: refused, as on a GPU image without ssh"
  else
    row "singleton, rsh launcher, no agent" "**FAILED**: failed for another reason (see log.txt)"
  fi
  cat "$w/rsh.txt" >>"$log"
  dlh-launch train "$spec" --run-dir "$w/one" --data "$w/s.h5" --device auto --max-steps 4 \
    --no-eval --progress none >"$w/one.txt" 2>&1 || rc=$?
  cat "$w/one.txt" >>"$log"
  if ((rc == 0)) && [[ -f $w/one/summary.json ]]; then
    row "singleton dlh-launch train, isolated launcher" "passed: $(grep -m1 -o 'training on the CPU\|device: .*' "$w/one.txt" || echo trained)"
  else
    row "singleton dlh-launch train, isolated launcher" "**FAILED**: exit $rc"
  fi
  rc=0
  # --device cpu: on a one-GPU machine two ranks would share its GPU, which is refused.
  mpirun -np 2 -x PATH -x LD_LIBRARY_PATH dlh-launch train "$spec" --run-dir "$w/two" --data "$w/s.h5" \
    --device cpu --max-steps 4 --no-eval --progress none >>"$log" 2>&1 || rc=$?
  if ((rc == 0)) && [[ -f $w/two/summary.json ]]; then
    row "mpirun -np 2 dlh-launch train, isolated launcher" "passed"
  else
    row "mpirun -np 2 dlh-launch train, isolated launcher" "**FAILED**: exit $rc"
  fi
}

case $mode in
  _step) shift; set -e; "$@" ;;  # one step of run, in a process of its own (step)
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  selftest) shift; selftest "$@" ;;
  *) echo "usage: $0 pack [BUILDDIR] | run [OUTDIR] | selftest [OUTDIR]" >&2; exit 2 ;;
esac
