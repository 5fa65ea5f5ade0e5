# Shared by the dlh-data scripts (data_cli.sh, data_import*.sh; sourced, not run): a scratch
# folder $tmp, failures counted rather than fatal, and the one-line failure check.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

failures=0
check() { echo "  check: $*"; }
fail() {  # as common.bash's, the reason kept for make check's FAILED line, but not fatal
  echo "  FAIL: $*" >&2
  [[ -z ${DLH_TEST_FAIL_FILE:-} ]] || echo "$*" >>"$DLH_TEST_FAIL_FILE"
  failures=$((failures + 1))
}

# expect_failure STATUS TEXT COMMAND...: COMMAND must exit with STATUS and print exactly one
# line on stderr, starting with "dlh-data: " and containing TEXT.
expect_failure() {
  local want_rc=$1 want_text=$2 rc=0
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  local lines
  lines=$(wc -l <"$tmp/err")
  if [[ $rc -ne $want_rc ]]; then
    fail "exit status $rc, expected $want_rc: $*"
  elif [[ $lines -ne 1 ]]; then
    fail "$lines lines on stderr, expected 1: $*"
  elif [[ $(head -c 10 "$tmp/err") != "dlh-data: " ]]; then
    fail "message does not start with 'dlh-data: ': $(cat "$tmp/err")"
  elif ! grep -qF -- "$want_text" "$tmp/err"; then
    fail "message does not mention '$want_text': $(cat "$tmp/err")"
  fi
  sed 's/^/      /' "$tmp/err"
}
