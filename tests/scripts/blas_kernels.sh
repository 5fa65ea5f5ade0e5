#!/bin/bash
# OpenBLAS's kernels for the CPU they run on (launcher/probe/blas_kernels.hpp): where OpenBLAS
# takes its generic Prescott kernels for a CPU it does not know, DLH's programs run themselves
# again with OPENBLAS_CORETYPE set to the family the CPU's instruction sets carry.
# DLH_BLAS_KERNELS=openblas keeps OpenBLAS's choice, =cpu takes the CPU's family whatever
# OpenBLAS or OPENBLAS_CORETYPE chose (so the re-run is tested on any host, Prescott named by
# hand), and what a program starts sees OPENBLAS_CORETYPE as the user had it. The probe's
# blas_core names the kernels that ran. About 15 seconds.
# shellcheck source=tests/scripts/common.bash
source "$(dirname "$0")/common.bash"
unset OPENBLAS_CORETYPE DLH_BLAS_KERNELS

core() { python3 -c 'import json, sys; print(json.load(sys.stdin)["blas_core"])'; }
probe() { dlh-estimate probe --seconds 0.5 | core; }  # the kernels a dlh-estimate command ran

# The family this CPU's instruction sets carry, read apart from the code under test.
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
family=
if has avx512f avx512bw avx512vl avx512dq avx512cd; then
  family=SkylakeX
  has avx512_bf16 && family=Cooperlake
elif has avx2 fma; then
  family=Haswell
fi

echo "OpenBLAS's own choice and the default"
own=$(DLH_BLAS_KERNELS=openblas probe)
auto=$(probe)
if [[ $own == Prescott && -n $family ]]; then
  [[ $auto == "$family" ]] || fail "OpenBLAS took Prescott on a CPU that carries $family; the default ran $auto"
  check "OpenBLAS took its Prescott kernels for this CPU; DLH ran its $family kernels (the CPU's instruction sets)"
else
  [[ $auto == "$own" ]] || fail "OpenBLAS took $own for this CPU, which it knows; the default ran $auto"
  check "OpenBLAS took its $own kernels for this CPU, which it knows; the default kept them"
fi
user=$(OPENBLAS_CORETYPE=Prescott probe)
[[ $user == Prescott ]] || fail "OPENBLAS_CORETYPE=Prescott (the user's choice) ran $user"
check "OPENBLAS_CORETYPE=Prescott, the user's choice, is kept"

[[ -n $family ]] || { check "this CPU carries no family past Prescott's: nothing more to run again"; exit 0; }

echo "DLH_BLAS_KERNELS=cpu over OPENBLAS_CORETYPE=Prescott: run again with $family"
forced=$(OPENBLAS_CORETYPE=Prescott DLH_BLAS_KERNELS=cpu probe)
[[ $forced == "$family" ]] || fail "DLH_BLAS_KERNELS=cpu ran $forced, not $family"
check "dlh-estimate probe ran OpenBLAS's $forced kernels"

dlh-data synthetic --out "$WORK/d.h5" --shape 1x8x8 --classes 2 --train 64 --test 8 --seed 1 >/dev/null
cat >"$WORK/spec.json" <<JSON
{"name": "blas", "input": {"channels": 1, "height": 8, "width": 8}, "classes": 2,
 "layers": [{"type": "flatten"}, {"type": "dense", "units": 2}],
 "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 16, "epochs": 1, "seed": 1,
 "dataset": "d.h5"}
JSON
train() { dlh-launch train "$WORK/spec.json" --data "$WORK/d.h5" --run-dir "$WORK/$1" --no-eval --progress none --threads 1; }
OPENBLAS_CORETYPE=Prescott DLH_BLAS_KERNELS=cpu train a >"$WORK/a.out" 2>&1 || { cat "$WORK/a.out"; fail "train under DLH_BLAS_KERNELS=cpu failed"; }
line=$(grep "^dlh-launch: OpenBLAS's $family kernels, not the Prescott ones OPENBLAS_CORETYPE named (DLH_BLAS_KERNELS=cpu" "$WORK/a.out" || true)
[[ -n $line ]] || { cat "$WORK/a.out"; fail "train did not say which kernels it ran"; }
check "train: ${line#dlh-launch: }"
DLH_BLAS_KERNELS=openblas train b >"$WORK/b.out" 2>&1 || { cat "$WORK/b.out"; fail "train under DLH_BLAS_KERNELS=openblas failed"; }
! grep -q "OpenBLAS's" "$WORK/b.out" || { cat "$WORK/b.out"; fail "train under DLH_BLAS_KERNELS=openblas ran other kernels"; }
check "train under DLH_BLAS_KERNELS=openblas: OpenBLAS's own kernels, no line"

echo "what a program starts sees the user's environment"
seen() {  # the child's OPENBLAS_CORETYPE ("unset" where it has none) and DLH's own variables
  dlh-launch run --run-dir "$WORK/run-$1" -- bash -c \
    'echo "coretype=${OPENBLAS_CORETYPE-unset} $(env | grep -c "^DLH_BLAS_KERNELS_")"' 2>"$WORK/run.err" |
    grep '^coretype=' || { cat "$WORK/run.err" >&2; fail "run: no line from the program"; }
}
got=$(OPENBLAS_CORETYPE=Prescott DLH_BLAS_KERNELS=cpu seen 1)
[[ $got == "coretype=Prescott 0" ]] || fail "under run, the program saw '$got', not the user's OPENBLAS_CORETYPE=Prescott"
got=$(DLH_BLAS_KERNELS=cpu seen 2)
[[ $got == "coretype=unset 0" ]] || fail "under run, the program saw '$got', not OPENBLAS_CORETYPE unset as the user had it"
check "a program under run sees OPENBLAS_CORETYPE as the user had it (set, or unset), none of DLH's own"

echo "bad input"
expect_fail 2 "^dlh-launch: DLH_BLAS_KERNELS: must be auto, openblas or cpu, got 'fast'$" \
  env DLH_BLAS_KERNELS=fast dlh-launch probe
