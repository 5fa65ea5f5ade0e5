# Shared start of the Slurm tests (sourced, not run): tests/scripts/common.bash plus
# need_slurm, the one place that decides whether a Slurm test can run here.
# shellcheck source=tests/scripts/common.bash
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.bash"

# need_slurm CMD...: returns when the test can run (root, every CMD installed). Otherwise it
# ends the test as skipped (exit 0, one "skip:" line saying what is missing) or, with
# REQUIRE_SLURM=1 (.ci/run), as failed: where the Slurm tier must run, a skip would let a
# green run hide that it never did.
need_slurm() {
  local missing=() b
  for b in "$@"; do
    PATH="$PATH:/usr/sbin" command -v "$b" >/dev/null || missing+=("'$b' is not installed")
  done
  [[ $(id -u) -eq 0 ]] || missing+=("the test cluster needs root (running as uid $(id -u))")
  ((${#missing[@]} == 0)) && return 0
  local why
  why=$(printf '%s; ' "${missing[@]}")
  why=${why%; }
  [[ ${REQUIRE_SLURM:-0} == 0 ]] || fail "REQUIRE_SLURM=$REQUIRE_SLURM but $(basename "$0") cannot run: $why"
  echo "  skip: $why"
  exit 0
}
