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
  skip_or_fail "${why%; }"
}

# need_python_module MODULE PACKAGE: as need_slurm, for a module Debian's python3 imports.
need_python_module() {
  /usr/bin/python3 -c "import $1" 2>/dev/null ||
    skip_or_fail "/usr/bin/python3 cannot import $1 (Debian package $2; make deps installs it)"
}

skip_or_fail() {
  [[ ${REQUIRE_SLURM:-0} == 0 ]] || fail "REQUIRE_SLURM=$REQUIRE_SLURM but $(basename "$0") cannot run: $1"
  echo "  skip: $1"
  exit 0
}

# state JOB: the job's state as scontrol shows it ("" once it has left).
state() { scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }

# wait_completed JOB [GUARD_S]: until the job has ended for good (COMPLETED; or another end
# that still holds 3 s later, so not a requeue's passing one; or it left the queue), or
# GUARD_S seconds of wall time have passed (default 1200). A guard against a hang, not a
# verdict on speed: make check runs six tests at a time, and on a 2-core host a job that
# takes 2 minutes alone took over 3 (CI). The caller checks the state after.
wait_completed() {
  local guard=$((SECONDS + ${2:-1200})) s
  going() { [[ $1 =~ ^(PENDING|RUNNING|REQUEUED|REQUEUE_HOLD|REQUEUE_FED|CONFIGURING|COMPLETING|RESIZING|SUSPENDED)$ ]]; }
  while ((SECONDS < guard)); do
    s=$(state "$1")
    [[ $s == COMPLETED || -z $s ]] && return 0
    if ! going "$s"; then
      sleep 3
      going "$(state "$1")" || return 0
    fi
    sleep 0.2
  done
}

# release_requeued JOB OUT: a requeued job may start again at once (Slurm makes it wait 2
# minutes). Released only once its old run has left the nodes: a launch that races with the
# old batch step's cleanup on the same slurmd fails the job for good.
release_requeued() {
  for _ in $(seq 1200); do
    if scontrol show job "$1" 2>/dev/null | grep -q 'JobState=PENDING Reason=BeginTime' &&
      ! sinfo -h -N -o '%T' | grep -qi 'comp'; then
      sleep 2
      scontrol update JobId="$1" StartTime=now
      return 0
    fi
    sleep 0.05
  done
  cat "$2" >&2
  fail "job $1 was not requeued (state $(state "$1"))"
}
