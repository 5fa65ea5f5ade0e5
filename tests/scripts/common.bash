# Shared helpers for the end-to-end test scripts (sourced, not run).
set -euo pipefail
: "${BINDIR:?BINDIR must point at the bin folder of the build}"
BINDIR=$(cd "$BINDIR" && pwd)
export PATH="$BINDIR:$PATH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# A rank that waits in MPI (for a slower, stopped or hung peer) spins on its core; make check
# runs six tests at a time on 2 cores, CPU-bound, so yield that core to whoever needs it.
# Measured: a rank waiting for a stopped peer took 520 of 1000 ticks of its core from a busy
# loop beside it, yielding 22. The Slurm tests' jobs inherit it through sbatch's environment.
export OMPI_MCA_mpi_yield_when_idle=1
export OPENBLAS_NUM_THREADS=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dlh-test-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

check() { echo "  ok: $*"; }
# fail MESSAGE: the test fails with MESSAGE. Under make check (tests/run_test.sh) the message
# is kept for the FAILED line too: a test that prints logs on its way out (a cluster's slurmd
# log, a job's output) would otherwise bury it where CI's excerpt of the output leaves it out.
fail() {
  echo "  FAIL: $*" >&2
  [[ -z ${DLH_TEST_FAIL_FILE:-} ]] || echo "$*" >>"$DLH_TEST_FAIL_FILE"
  exit 1
}

# expect_fail CODE PATTERN CMD...: CMD must exit with CODE and print PATTERN on stderr.
expect_fail() {
  local code=$1 pattern=$2; shift 2
  local rc=0
  "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
  [[ $rc -eq $code ]] || { cat "$WORK/err.txt" >&2; fail "'$*' exited $rc, expected $code"; }
  grep -q -- "$pattern" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "'$*': no '$pattern' in stderr"; }
  check "$(head -1 "$WORK/err.txt")"
}

# running PID: PID is a live process (a zombie is not). /proc/PID/stat is read once: a test that
# checked it could be read and then read it saw the zombie reaped in between, got "", and took
# it for running (a red CI). The state is the field after the ")" that closes the command name.
running() {
  local stat
  { read -r stat </proc/"$1"/stat; } 2>/dev/null || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}
# process_ends PID: within 10 s PID is no longer running (gone, or a zombie about to be
# reaped); decided inside the loop, never by another look after it.
process_ends() {
  local i
  for ((i = 0; i < 100; ++i)); do
    running "$1" || return 0
    sleep 0.1
  done
  return 1
}

# heartbeat_field FILE KEY: a string or number field of a rank's heartbeat (one line of
# compact JSON, launcher/watch/peer_watch.cpp), read with the shell's builtins. A test that
# stops a training rank reads these while the ranks train on, and a python3 per field takes
# seconds under make check's load (stall_requeue_test.sh saw a job end before such a read).
heartbeat_field() {
  local line=
  read -r line <"$1" || [[ -n $line ]] || return 1
  [[ $line =~ \"$2\":(\"([^\"]*)\"|(-?[0-9.]+)) ]] || return 1
  echo "${BASH_REMATCH[2]}${BASH_REMATCH[3]}"
}
# newest_checkpoint_step RUN_DIR: the step of RUN_DIR's newest checkpoint (ckpt-STEP.h5,
# zero-padded, so the last in glob order), with the shell's builtins; fails without one.
newest_checkpoint_step() {
  local ckpts=("$1"/checkpoints/ckpt-*.h5)
  local name=${ckpts[-1]##*/ckpt-}
  echo $((10#${name%.h5}))
}
# A TCP port for a test's own rendezvous (MASTER_PORT): in 10000-19999, below this host's
# ephemeral range, where no outgoing connection of a test running beside this one can hold
# it, and below the bands dlh-launch run (the 8192 under the ephemeral range) and the test
# clusters (share/slurm/start-cluster.sh, from 20000) pick from; bindable now. A random port
# in 20000-40000 met another test's connection in CI ("Address already in use", errno 98).
free_port() {
  python3 - <<'PY'
import random, socket
for _ in range(500):
    port = random.randrange(10000, 20000)
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            continue
    print(port)
    break
else:
    raise SystemExit("free_port: no free port below the ephemeral range")
PY
}
json_field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

# final_ckpt RUN_DIR: the checkpoint a finished run names in its summary.json.
final_ckpt() { echo "$1/checkpoints/$(basename "$(json_field "$1/summary.json" last_checkpoint)")"; }
# max_diff A B: the largest |a - b| over /params of two checkpoints (h5diff lists every
# element that differs: position, a, b, difference).
max_diff() {
  { h5diff -v "$1" "$2" /params || true; } | awk '$1 == "[" { n = NF; d = $n; if (d < 0) d = -d; if (d > m) m = d }
    END { printf "%.3g\n", m + 0 }'
}
# within D TOLERANCE: D <= TOLERANCE (floating point).
within() { awk -v d="$1" -v t="$2" 'BEGIN { exit !(d <= t) }'; }

# live_check_calibration CAL: `dlh-estimate check-calibration CAL` against this host's live
# probe, for a calibration this test made a moment ago. It must exit 0 (matches) or 2 (the
# host's load moved its rates since, and the calibration transfers), or 1 only where the load
# moved them past a transfer's reach: in a clean-clone make check, 6 tests at once, a
# calibration's probe recorded 5.0 GFLOP/s and the live probe 16.0 (x3.21), and another
# 7.3 against 26.9 (x3.66), beyond the factor of 3 trusted, which is the refusal such a
# calibration should get. Prints what it saw; any other exit fails the test.
live_check_calibration() {
  local cal=$1 rc=0
  dlh-estimate check-calibration "$cal" --seconds 1 >"$WORK/live-check.txt" 2>&1 || rc=$?
  if [[ $rc == 1 ]] && grep -q "$(basename "$cal"): does not match: this machine is FLOP/s x[0-9.]*, bandwidth x[0-9.]* the one measured (.*), beyond the factor of 3 a transfer is trusted for; recalibrate" "$WORK/live-check.txt"; then
    check "live probe of this host: exit 1, the load moved the rates past a transfer: $(cut -c1-120 "$WORK/live-check.txt")"
  else
    [[ $rc == 0 || $rc == 2 ]] || { cat "$WORK/live-check.txt" >&2; fail "check-calibration of $cal on this host: exit $rc"; }
    check "live probe of this host: exit $rc (0, or 2 where its load moved the rates)"
  fi
}

# signal_one_rank SIGNAL DIR PID: once the 2-rank run at DIR (started as `setsid mpirun ... &`,
# PID its session) trains (metrics.jsonl's start record comes after the ranks' signal
# handlers), holds every dlh-launch of it still at once, sends SIGNAL to one rank (a dlh-launch
# whose parent is its guard, also one) and lets them all go on. HELD_STEP: the step it was held
# at (the newest whole record; the last line may be half written). Returns 1, signalling
# nothing, when the run was never seen training: a whole test run takes well under a second on
# a fast host, and a loaded one may look only after it ended, or near its end (2026-12-02:
# make check's local_sgd.sh once signalled too late for any checkpoint), so each test makes
# such a try again.
signal_one_rank() {
  local sig=$1 dir=$2 pid=$3 all=() ranks=() p
  HELD_STEP=0
  for _ in $(seq 3000); do
    [[ -s $dir/metrics.jsonl ]] && mapfile -t all < <(pgrep -s "$pid" -x dlh-launch) && ((${#all[@]} == 4)) && break
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.01
  done
  ((${#all[@]} == 4)) || return 1
  kill -STOP "${all[@]}" 2>/dev/null || true
  # Ending as it was found (2026-12-05: two of the four had exited before the hold, and the
  # ranks could not be told apart): a try again, as one found too late.
  for p in "${all[@]}"; do
    kill -0 "$p" 2>/dev/null || { kill -CONT "${all[@]}" 2>/dev/null; return 1; }
  done
  HELD_STEP=$(sed '$d' "$dir/metrics.jsonl" | grep -o '"step":[0-9]*' | tail -1 | cut -d: -f2)
  HELD_STEP=${HELD_STEP:-0}
  mapfile -t ranks < <(for p in "${all[@]}"; do
    [[ $(ps -o comm= -p "$(ps -o ppid= -p "$p" | tr -d ' ')" 2>/dev/null) == dlh-launch ]] && echo "$p"
  done)
  ((${#ranks[@]} == 2)) || { kill -CONT "${all[@]}"; fail "expected 2 ranks among ${all[*]}, found ${ranks[*]:-none}"; }
  kill "-$sig" "${ranks[1]}"
  kill -CONT "${all[@]}"
}
