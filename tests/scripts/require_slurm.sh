#!/bin/bash
# REQUIRE_SLURM=1 turns a skipped Slurm test into a failure. Every tests/slurm/*.sh is run
# where it must skip, as a user other than root (as nobody when this runs as root): plain,
# each exits 0 with a "skip:" line saying what is missing; with REQUIRE_SLURM=1, each exits
# non-zero with a line that says so. Takes about a second.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

# A copy nobody can read (the checkout may be under /root), with an empty bin folder: the
# tests stop before they would need anything else.
T=$WORK/t
mkdir -p "$T/tests/slurm" "$T/tests/scripts" "$T/build/bin" "$T/build/lib" "$T/tmp"
cp "$ROOT"/tests/slurm/*.sh "$ROOT"/tests/slurm/*.bash "$T/tests/slurm/"
cp "$ROOT/tests/scripts/common.bash" "$T/tests/scripts/"
chmod -R a+rX "$WORK"
chmod 1777 "$T/tmp"
if [[ $(id -u) -eq 0 ]]; then
  command -v setpriv >/dev/null || fail "no setpriv (util-linux) to run the Slurm tests as nobody"
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
  who=nobody
else
  as_user=()
  who="uid $(id -u)"
fi
# as_other SCRIPT [VAR=VALUE...]: runs a copied Slurm test as a user other than root.
as_other() {
  local script=$1; shift
  "${as_user[@]}" env -u REQUIRE_SLURM "$@" BINDIR="$T/build/bin" TMPDIR="$T/tmp" HOME="$T/tmp" \
    bash "$T/tests/slurm/$script"
}

for t in "$ROOT"/tests/slurm/*.sh; do
  name=$(basename "$t")
  rc=0
  as_other "$name" >"$WORK/plain.txt" 2>&1 || rc=$?
  [[ $rc -eq 0 ]] || { cat "$WORK/plain.txt" >&2; fail "$name as $who exited $rc, expected a skip (0)"; }
  grep -q "^  skip: .*the test cluster needs root" "$WORK/plain.txt" ||
    { cat "$WORK/plain.txt" >&2; fail "$name as $who: no skip line naming root"; }
  rc=0
  as_other "$name" REQUIRE_SLURM=1 >"$WORK/required.txt" 2>&1 || rc=$?
  [[ $rc -ne 0 ]] || { cat "$WORK/required.txt" >&2; fail "$name as $who with REQUIRE_SLURM=1 exited 0"; }
  line=$(grep "FAIL: REQUIRE_SLURM=1 but $name cannot run: .*the test cluster needs root" "$WORK/required.txt") ||
    { cat "$WORK/required.txt" >&2; fail "$name with REQUIRE_SLURM=1: no line saying what was missing"; }
  check "$name as $who: skips with exit 0; REQUIRE_SLURM=1 exits $rc:${line#*FAIL:}"
done
