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
#                                            prints a table and writes results.md to OUTDIR;
#                                            exits non-zero if a row failed or a step
#                                            stopped the check
#
# run is meant for a machine with a GPU, so a missing GPU is a failure there: the probe
# (nvidia-smi) failing ends the check with a failed row, and gpu_tests runs with
# REQUIRE_GPU=1, which turns any skipped test into a failed run.
#
# The GPU machine brings the CUDA libraries (cudart, cuBLAS, cuDNN, NCCL) itself, from its
# CUDA toolkit or PyTorch's nvidia-* packages; only glibc and libstdc++ are taken from it
# besides.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bundle=$root/.gpu-bundle
mode=${1:-}

pack() {
  local builddir=${1:-build}
  make -C "$root" -j"$(nproc)" BUILDDIR="$builddir" all tests >/dev/null
  local bin=$root/$builddir/bin stage
  [[ -f $root/$builddir/lib/dlh/libdlh_cuda.so ]] || { echo "gpu-check: no CUDA backend built (nvcc missing?)" >&2; exit 1; }
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir -p "$stage/bin" "$stage/lib/dlh"
  cp "$bin/dlh-launch" "$bin/dlh-data" "$bin/gpu_tests" "$stage/bin/"
  cp "$root/$builddir/lib/dlh/libdlh_cuda.so" "$stage/lib/dlh/"
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
  objs=$(ls "$stage"/bin/* "$stage"/lib/dlh/*.so; find "$stage/ompi" -name '*.so*' -type f; ls "$stage"/ompi/usr/bin/* 2>/dev/null)
  for o in $objs; do ldd "$o" 2>/dev/null || true; done | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  # Debug information is most of the binaries' size, and the carry to the GPU is limited.
  strip --strip-unneeded "$stage"/bin/* "$stage"/lib/dlh/*.so "$stage"/lib/*.so*
  rm -rf "$bundle" && mkdir -p "$bundle"
  tar -C "$stage" -cJf "$bundle/bundle.tar.xz" .
  echo "gpu-check: packed $(du -h "$bundle/bundle.tar.xz" | cut -f1) into .gpu-bundle/ (carry it to the GPU machine)"
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

run() {
  local out=${1:-$root/gpu-results}
  mkdir -p "$out"
  local w
  w=$(mktemp -d /tmp/dlh-gpu-XXXXXX)
  tar -C "$w" -xJf "$bundle/bundle.tar.xz"
  export PATH="$w/bin:$w/ompi/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$w/lib:$w/ompi/usr/lib/x86_64-linux-gnu/openmpi/lib:$(cuda_lib_dirs)"
  export OPAL_PREFIX=$w/ompi/usr
  export PMIX_MCA_mca_base_component_path=$w/ompi/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
  export OMPI_MCA_mca_base_param_files=$w/ompi/etc/openmpi/openmpi-mca-params.conf
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  export REQUIRE_GPU=1  # gpu_tests: a skipped test fails the run (tests/gpu/gpu_main.cpp)
  table=$out/results.md log=$out/log.txt  # global: finish (the EXIT trap) reads them
  : >"$log"
  local gpu probe_rc=0
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>>"$log" | head -1) ||
    probe_rc=$?
  {
    echo "### GPU check on ${gpu:-no GPU found} ($(date -u '+%Y-%m-%d'))"
    echo
    echo "| check | result |"
    echo "|---|---|"
  } >"$table"
  failed=0
  row() {
    echo "| $1 | $2 |" >>"$table"
    echo "== $1: $2"
    [[ $2 != *FAILED* ]] || failed=1
  }
  # On every exit, also a step failing under set -e: the table, and a failure if any.
  finish() {
    local rc=$?
    echo
    cat "$table"
    ((rc == 0)) || echo "gpu-check: FAILED (a row marked **FAILED**, or a step stopped the check with exit $rc); details in $log" >&2
  }
  trap finish EXIT
  # 0. The probe: without a GPU nothing below means anything, and the run must not pass.
  if [[ $probe_rc -ne 0 || -z $gpu ]]; then
    row "GPU probe (nvidia-smi)" "**FAILED**: no GPU found (exit $probe_rc; see log.txt)"
    exit 1
  fi
  row "GPU probe (nvidia-smi)" "passed: $gpu"
  train() {  # train RUN_DIR SPEC [options]: dlh-launch train, output to the log
    local dir=$1 spec=$2
    shift 2
    dlh-launch train "$spec" --run-dir "$dir" --progress none --no-resume "$@" >>"$log" 2>&1
  }
  summary() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1/summary.json" "$2"; }

  # 1. GPU tests: every layer and kernel against the CPU engine.
  if gpu_tests --gtest_brief=1 >>"$log" 2>&1; then
    row "gpu_tests (layers, loss, optimizers vs CPU)" "passed ($(grep -o '[0-9]* tests* from' "$log" | tail -1 | cut -d' ' -f1) tests)"
  else
    local why
    why=$(grep -m1 '^gpu_tests: FAIL: ' "$log" | cut -c18- || true)
    row "gpu_tests (layers, loss, optimizers vs CPU)" "**FAILED** (${why:-see log.txt})"
  fi

  # Fashion-MNIST's shape and classes; synthetic, so the bundle stays small (the GPU
  # machine cannot fetch the data set and the real files would double the carry).
  dlh-data synthetic --out "$w/fm.h5" --shape 1x28x28 --classes 10 --train 30000 --test 1000 >>"$log" 2>&1
  local fm=$root/share/examples/fashion-mnist.json

  # 2. Parity: the same spec, data, seed and steps on CPU and GPU, TF32 off. Losses agree
  # to fp32 rounding at first; rounding differences then grow through training, so the
  # check is the mean relative difference over the first 100 steps and the final accuracy.
  NVIDIA_TF32_OVERRIDE=0 train "$w/p-cpu" "$fm" --data "$w/fm.h5" --device cpu --max-steps 100 --no-eval --threads 8
  NVIDIA_TF32_OVERRIDE=0 train "$w/p-gpu" "$fm" --data "$w/fm.h5" --device cuda --max-steps 100 --no-eval
  local parity
  parity=$(python3 - "$w/p-cpu/metrics.jsonl" "$w/p-gpu/metrics.jsonl" <<'PY'
import json, sys
def losses(p): return [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
c, g = losses(sys.argv[1]), losses(sys.argv[2])
first = abs(c[0] - g[0]) / abs(c[0])
mean = sum(abs(a - b) / abs(a) for a, b in zip(c, g)) / len(c)
ok = first < 1e-4 and mean < 0.02
print(f"{'passed' if ok else '**FAILED**'}: step 1 loss {c[0]:.6f} vs {g[0]:.6f} ({first:.1e}), mean relative loss difference over {len(c)} steps {mean:.2%} (limit 2%)")
PY
)
  row "CPU/GPU parity, Fashion-MNIST CNN" "$parity"

  # 3. Resume on the GPU: 30 steps in one go against 15 + 15 from a checkpoint.
  train "$w/r-full" "$fm" --data "$w/fm.h5" --device cuda --max-steps 30 --no-eval
  train "$w/r-split" "$fm" --data "$w/fm.h5" --device cuda --max-steps 15 --no-eval
  dlh-launch train "$fm" --run-dir "$w/r-split" --data "$w/fm.h5" --device cuda --max-steps 30 --no-eval --progress none >>"$log" 2>&1
  local a b
  a=$(summary "$w/r-full" param_crc32) b=$(summary "$w/r-split" param_crc32)
  row "GPU resume equals uninterrupted run (param crc32)" "$([[ $a == "$b" ]] && echo passed || echo '**FAILED**'): $a vs $b"

  # 4. Hierarchical allreduce as 2 nodes x 1 GPU (NCCL refuses two ranks on one GPU, so
  # the cross-node step is MPI on host memory): ranks must stay bit-identical (dlh-launch
  # checks) and train like one rank with the whole batch.
  cat >"$w/node.sh" <<'EOF'
#!/bin/bash
export SLURMD_NODENAME=gpunode$OMPI_COMM_WORLD_RANK
exec "$@"
EOF
  chmod +x "$w/node.sh"
  train "$w/h1" "$fm" --data "$w/fm.h5" --device cuda --max-steps 60 --no-eval
  if mpirun -np 2 -x PATH -x LD_LIBRARY_PATH "$w/node.sh" dlh-launch train "$fm" --run-dir "$w/h2" \
      --data "$w/fm.h5" --device cuda --allreduce hierarchical --max-steps 60 --no-eval \
      --progress none --no-resume >>"$log" 2>&1; then
    row "hierarchical allreduce, 2 nodes x 1 GPU" "$(python3 - "$w/h1/metrics.jsonl" "$w/h2/metrics.jsonl" <<'PY'
import json, sys
def losses(p): return [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
one, two = losses(sys.argv[1]), losses(sys.argv[2])
mean = sum(abs(a - b) / abs(a) for a, b in zip(one, two)) / len(one)
print(f"{'passed' if mean < 0.05 else '**FAILED**'}: ranks identical; mean relative loss difference to 1 rank {mean:.2%} over {len(one)} steps (limit 5%: batchnorm statistics are per rank)")
PY
)"
  else
    row "hierarchical allreduce, 2 nodes x 1 GPU" "**FAILED** (see log.txt)"
  fi

  # 5. Throughput against PyTorch on the same GPU, model and batch (TF32 as each library's
  # default: cuDNN convolutions may use it, matrix products do not).
  dlh-data synthetic --out "$w/large.h5" --shape 3x32x32 --classes 10 --train 20000 --test 100 >>"$log" 2>&1
  echo >>"$table"
  echo "| model | batch | DLH samples/s | PyTorch $(python3 -c 'import torch; print(torch.__version__)') samples/s | DLH / PyTorch |" >>"$table"
  echo "|---|---|---|---|---|" >>"$table"
  for m in "fashion-mnist $fm $w/fm.h5 128" "cnn-large $root/share/gpu/cnn-large.json $w/large.h5 256"; do
    set -- $m
    local d=() t=()
    for _ in 1 2 3; do
      rm -rf "$w/tp"
      train "$w/tp" "$2" --data "$3" --device cuda --max-steps 220 --no-eval --checkpoint-seconds 0 --no-epoch-checkpoints --batch-size "$4"
      d+=("$(python3 -c "import json,statistics,sys; r=[json.loads(l)['samples_per_s'] for l in open(sys.argv[1]) if 'samples_per_s' in l][20:]; print(f'{statistics.median(r):.0f}')" "$w/tp/metrics.jsonl")")
      t+=("$(python3 "$root/share/gpu/torch_spec_train.py" "$2" --batch "$4")")
    done
    python3 - "$1" "$4" "${d[*]}" "${t[*]}" >>"$table" <<'PY'
import statistics, sys
name, batch, d, t = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
dm, tm = statistics.median(map(float, d)), statistics.median(map(float, t))
print(f"| {name} | {batch} | {dm:.0f} ({', '.join(d)}) | {tm:.0f} ({', '.join(f'{float(x):.0f}' for x in t)}) | **{dm/tm:.2f}** |")
PY
  done
  exit "$failed"
}

case $mode in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 pack [BUILDDIR] | run [OUTDIR]" >&2; exit 2 ;;
esac
