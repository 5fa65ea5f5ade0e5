#!/bin/bash
# make demo: import Fashion-MNIST, train the example CNN data-parallel on 2 MPI ranks,
# show progress, and print the final test accuracy and checkpoint.
#   demo.sh BINDIR WORKDIR [EPOCHS]
set -euo pipefail
bindir=$1 work=$2 epochs=${3:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
if [[ ! -s "$work/fashion-mnist.h5" ]]; then
  "$bindir/dlh-data" import-fashion-mnist --out "$work/fashion-mnist.h5"
fi
args=()
[[ -n "$epochs" ]] && args+=(--epochs "$epochs")
echo "== mpirun -np 2 dlh-launch train share/examples/fashion-mnist.json (run folder $work/run)"
mpirun -np 2 "$bindir/dlh-launch" train "$here/fashion-mnist.json" --data "$work/fashion-mnist.h5" \
  --run-dir "$work/run" "${args[@]}"
echo "== summary ($work/run/summary.json)"
cat "$work/run/summary.json"
