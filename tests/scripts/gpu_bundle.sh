#!/bin/bash
# share/gpu/gpu-check.sh's bundle on this machine (issue 12, finding 1): packed from this
# build, its relocated Open MPI must start dlh-launch where no ssh or rsh agent exists, as on
# most GPU images. Open MPI's rsh launcher refuses even a singleton there; run and selftest use
# the isolated launcher, with which a singleton and mpirun -np 2 train (on the CPU here).
source "$(dirname "$0")/common.bash"
root=$(cd "$(dirname "$0")/../.." && pwd)
export DLH_GPU_BUNDLE=$WORK/bundle DLH_PACK_SELFTEST=1
echo "pack the bundle from this build"
bash "$root/share/gpu/gpu-check.sh" pack "$(dirname "$BINDIR")" >"$WORK/pack.txt" 2>&1 ||
  { cat "$WORK/pack.txt"; fail "pack failed"; }
tar -tf "$WORK/bundle/bundle.tar" >"$WORK/files.txt"
for f in ./bin/dlh-launch ./bin/dlh-data ./bin/dlh-estimate ./ompi/usr/bin/mpirun ./ompi/usr/bin/orterun; do
  grep -qx -- "$f" "$WORK/files.txt" || fail "bundle lacks $f"
done
check "$(cat "$WORK/pack.txt")"

echo "selftest: no rsh agent at all"
rc=0
(unset OMPI_MCA_plm OMPI_MCA_rmaps_base_oversubscribe
  bash "$root/share/gpu/gpu-check.sh" selftest "$WORK/out") >"$WORK/selftest.txt" 2>&1 || rc=$?
cat "$WORK/out/results.md" 2>/dev/null | sed 's/^/    /'
((rc == 0)) || { cat "$WORK/out/log.txt" 2>/dev/null | tail -30; fail "selftest exited $rc"; }
[[ $(grep -c '| passed' "$WORK/out/results.md") -eq 3 ]] || fail "expected 3 passed rows"
grep -q 'singleton, rsh launcher, no agent | passed' "$WORK/out/results.md" ||
  fail "the rsh launcher did not refuse: the test proves nothing"
check "the bundle's Open MPI starts a singleton and 2 ranks with no rsh agent"
