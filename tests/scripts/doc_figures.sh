#!/bin/bash
# Figures that cannot drift: every measured figure README.md and docs/ quote links to its
# BENCHMARKS.md section and says what that section says (tests/util/doc_figures.py). The
# checker must also fail: a changed figure, an anchor no heading has, a link to no file and
# an unlinked MAPE planted in a copy each give a finding that names the file and line.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
checker=$ROOT/tests/util/doc_figures.py

echo "README.md and docs/ against BENCHMARKS.md"
python3 "$checker" "$ROOT" >"$WORK/out.txt" 2>"$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "a figure in README.md or docs/ differs from BENCHMARKS.md"; }
check "$(cat "$WORK/out.txt")"

# A copy with one README: a figure taken from a real section of BENCHMARKS.md, linked to it.
mkdir -p "$WORK/copy"
cp "$ROOT/BENCHMARKS.md" "$WORK/copy/"
read -r anchor figure wrong < <(python3 - "$checker" "$WORK/copy/BENCHMARKS.md" <<'PY'
import importlib.util, re, sys
spec = importlib.util.spec_from_file_location("doc_figures", sys.argv[1])
doc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(doc)
for anchor, text in doc.sections(sys.argv[2]).items():
    m = re.search(r"(?<![\d.,])(\d+)\.(\d+)%", text)
    if not m or text.startswith("# "):  # a section of its own, not the whole file
        continue
    digits = len(m.group(2))
    for step in range(7, 1000, 7):  # a value of the same form that the section does not state
        wrong = f"{float(m.group(1) + '.' + m.group(2)) + step / 10:.{digits}f}"
        if not doc.has_number(wrong, text):
            print(anchor, m.group(0), wrong + "%")
            sys.exit(0)
PY
)
[[ -n ${wrong:-} ]] || fail "no section of BENCHMARKS.md quotes a percentage to plant"

plant() {  # plant LINE: README.md of the copy holds LINE alone
  printf '# DLH\n\n%s\n' "$1" >"$WORK/copy/README.md"
}
plant "Measured: [$figure](BENCHMARKS.md#$anchor)."
python3 "$checker" "$WORK/copy" >/dev/null 2>"$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "the copy's correct figure $figure (#$anchor) was refused"; }
check "a linked figure that its section states passes ($figure, #$anchor)"

expect_finding() {  # expect_finding PATTERN WHAT: the checker fails on the copy, naming PATTERN
  local rc=0
  python3 "$checker" "$WORK/copy" >/dev/null 2>"$WORK/err.txt" || rc=$?
  [[ $rc -eq 1 ]] || fail "$2: the checker exited $rc, expected 1"
  grep -q -- "README.md:3: .*$1" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "$2: no finding for '$1'"; }
  check "$2: $(head -1 "$WORK/err.txt")"
}
plant "Measured: [$wrong](BENCHMARKS.md#$anchor)."
expect_finding "'${wrong%\%}'" "a figure that differs from its section"
plant "Measured: [$figure](BENCHMARKS.md#no-such-section)."
expect_finding "no-such-section" "an anchor no heading has"
plant "See [the guide](docs/no-such-guide.md)."
expect_finding "names no file" "a link to a file that does not exist"
plant "Predicted within $figure MAPE of the measured."
expect_finding "MAPE" "a measured figure without a link"
plant "Goal: a MAPE < 10% on models outside the sweep."
python3 "$checker" "$WORK/copy" >/dev/null 2>"$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "a goal's threshold was taken for a measured figure"; }
check "a goal's threshold (< 10%) is not a measurement"
