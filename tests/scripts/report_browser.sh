#!/bin/bash
# DLH's pages as a person sees them (issue 16): headless Chromium (Debian's chromium, which
# make check installs) loads each page DLH writes (the run report of a resumed run, the
# report of a run still going, and dlh-estimate recommend --html) and tests/browser/check-page.sh
# requires no console error and every chart drawn with data, and writes a screenshot
# (SCREENSHOT_DIR, default the build's screenshots/ folder). Then the check itself must fail
# on a page with a chart without data and on one with a console error.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CHECK=$ROOT/tests/browser/check-page.sh
SHOTS=${SCREENSHOT_DIR:-$BINDIR/../screenshots}
mkdir -p "$SHOTS"
command -v chromium >/dev/null || fail "no chromium: make check installs it (share/setup/install-deps.sh)"

dlh-data synthetic --out "$WORK/data.h5" --shape 1x12x12 --classes 4 --train 1200 --test 120 --seed 5 >/dev/null
cat >"$WORK/spec.json" <<JSON
{
  "name": "browsertest",
  "input": {"channels": 1, "height": 12, "width": 12},
  "classes": 4,
  "layers": [{"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1}, {"type": "relu"},
             {"type": "flatten"}, {"type": "dense", "units": 4}],
  "optimizer": {"type": "sgd", "lr": 0.02, "momentum": 0.9},
  "batch_size": 24, "epochs": 3, "seed": 2, "dataset": "$WORK/data.h5"
}
JSON
train() {
  mpirun -np 2 dlh-launch train "$WORK/spec.json" --run-dir "$WORK/run" --threads 1 --progress none \
    --checkpoint-steps 20 "$@" >>"$WORK/train.log" 2>&1 || { cat "$WORK/train.log" >&2; fail "training failed"; }
}
train --max-steps 70
dlh-report "$WORK/run" --out "$WORK/partial.html" >/dev/null
train
dlh-report "$WORK/run" >/dev/null

page() {  # page HTML NAME: check it, keep its screenshot
  local out
  out=$(bash "$CHECK" "$1" "$SHOTS/$2.png" 2>&1) || { echo "$out" >&2; fail "$2: the page failed in the browser"; }
  check "$2: ${out#*: }"
}
page "$WORK/run/report.html" report
page "$WORK/partial.html" report-stopped

cluster=$ROOT/share/cluster/example.json
if dlh-estimate recommend --help 2>/dev/null | grep -q -- "--html"; then
  rc=0
  dlh-estimate recommend "$ROOT/share/examples/fashion-mnist.json" --samples 60000 --deadline 2h \
    --cluster "$cluster" --html "$WORK/recommend.html" >/dev/null 2>"$WORK/err.txt" || rc=$?
  ((rc == 0 || rc == 3)) || { cat "$WORK/err.txt"; fail "dlh-estimate recommend --html exited $rc"; }
  page "$WORK/recommend.html" recommend
fi

# The check must be able to fail: a chart that says it has no data, and a console error.
sed '0,/data-points="[0-9]*"/s//data-points="0"/' "$WORK/run/report.html" >"$WORK/nodata.html"
! bash "$CHECK" "$WORK/nodata.html" "$WORK/nodata.png" 2>"$WORK/err.txt" || fail "a chart without data passed"
grep -q "charts without data" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "no data: not named"; }
check "a chart without data fails: $(tail -1 "$WORK/err.txt")"
sed 's|</body>|<script>undefined_function();</script></body>|' "$WORK/run/report.html" >"$WORK/error.html"
! bash "$CHECK" "$WORK/error.html" "$WORK/error.png" 2>"$WORK/err.txt" || fail "a console error passed"
grep -q "console errors" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "console error: not named"; }
check "a console error fails: $(head -1 "$WORK/err.txt" | cut -c1-120)"
