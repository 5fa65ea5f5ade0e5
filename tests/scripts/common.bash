# Shared helpers for the end-to-end test scripts (sourced, not run).
set -euo pipefail
: "${BINDIR:?BINDIR must point at the bin folder of the build}"
BINDIR=$(cd "$BINDIR" && pwd)
export PATH="$BINDIR:$PATH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dlh-test-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

check() { echo "  ok: $*"; }
fail() { echo "  FAIL: $*" >&2; exit 1; }

# expect_fail CODE PATTERN CMD...: CMD must exit with CODE and print PATTERN on stderr.
expect_fail() {
  local code=$1 pattern=$2; shift 2
  local rc=0
  "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
  [[ $rc -eq $code ]] || { cat "$WORK/err.txt" >&2; fail "'$*' exited $rc, expected $code"; }
  grep -q -- "$pattern" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "'$*': no '$pattern' in stderr"; }
  check "$(head -1 "$WORK/err.txt")"
}

json_field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
