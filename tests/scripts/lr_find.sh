#!/bin/bash
# dlh-launch lr-find on a small synthetic data set: writes valid JSON and an SVG plot, suggests
# a rate inside the sweep, leaves the spec and any run folder alone, runs data-parallel under
# mpirun, and refuses bad options with one line, an exit code of 2 and no files.
source "$(dirname "$0")/common.bash"

dlh-data synthetic --out "$WORK/s.h5" --shape 1x8x8 --classes 4 --train 2000 --test 100 --seed 5 >/dev/null
cat >"$WORK/spec.json" <<'JSON'
{"name": "tiny", "input": {"channels": 1, "height": 8, "width": 8}, "classes": 4,
 "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1}, {"type": "batchnorm"},
            {"type": "relu"}, {"type": "flatten"}, {"type": "dense", "units": 4}],
 "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9}, "batch_size": 16, "epochs": 1,
 "seed": 3, "dataset": "s.h5"}
JSON
spec_sum=$(md5sum <"$WORK/spec.json")
find_lr() { dlh-launch lr-find "$WORK/spec.json" --threads 1 "$@"; }

# validate JSON MIN MAX: the fields a user or script reads, and the suggestion inside the sweep.
validate() {
  python3 - "$@" <<'PY'
import json, math, sys
r = json.load(open(sys.argv[1]))
lo, hi = float(sys.argv[2]), float(sys.argv[3])
for key in ("spec", "batch", "data", "seed", "points", "fit", "suggestion", "sweep", "plot"):
    assert key in r, "missing " + key
s = r["suggestion"]
assert s["status"] == "ok", s
assert lo <= s["interval"][0] <= s["lr"] <= s["interval"][1] <= hi, s
assert len(r["fit"]["polynomial"]["coefficients"]) == 6
pts = r["points"]
assert pts and all(lo * 0.999 <= p["lr"] <= hi * 1.001 for p in pts)
assert all(pts[i]["lr"] < pts[i + 1]["lr"] for i in range(len(pts) - 1))
print("suggested %.3g in [%.3g, %.3g], %d points" % (s["lr"], s["interval"][0], s["interval"][1], len(pts)))
PY
}

echo "one rank, default sweep range"
(cd "$WORK" && find_lr --steps 60 --batch 16) >"$WORK/out.txt"
grep -q "^suggested lr .* (interval .*-.*) for batch 16" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "no summary line"; }
check "$(grep '^suggested' "$WORK/out.txt")"
check "$(validate "$WORK/lr-find.json" 1e-5 10)"
grep -q "<polyline" "$WORK/lr-find.svg" && python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" \
  "$WORK/lr-find.svg" || fail "lr-find.svg is not a valid SVG with curves"
check "lr-find.svg parses as XML"
[[ $(md5sum <"$WORK/spec.json") == "$spec_sum" ]] || fail "the spec was modified"
[[ ! -e $WORK/runs ]] || fail "lr-find created a run folder"
check "spec unchanged, no run folder"

echo "same seed, same curve"
find_lr --steps 60 --batch 16 --out "$WORK/again.json" --plot "$WORK/again.svg" >/dev/null
python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); assert a['points']==b['points']" \
  "$WORK/lr-find.json" "$WORK/again.json" || fail "two runs with the same seed differ"
check "two runs give identical points"

echo "a narrower range and 2 ranks (data-parallel, the same global batch)"
mpirun -np 2 "$BINDIR/dlh-launch" lr-find "$WORK/spec.json" --threads 1 --steps 40 --batch 32 \
  --min-lr 1e-4 --max-lr 3 --out "$WORK/np2.json" >"$WORK/np2.txt"
[[ $(grep -c "^suggested lr" "$WORK/np2.txt") -eq 1 ]] || { cat "$WORK/np2.txt"; fail "not one summary line"; }
check "$(validate "$WORK/np2.json" 1e-4 3)"
[[ $(json_field "$WORK/np2.json" ranks) == 2 && $(json_field "$WORK/np2.json" batch) == 32 ]] || fail "ranks or batch"
check "2 ranks, batch 32 recorded"

echo "bad input: one line, exit 2, nothing written"
cd "$WORK"
rm -f lr-find.json lr-find.svg
expect_fail 2 "^dlh-launch: --max-lr: must be larger than --min-lr" find_lr --min-lr 1 --max-lr 1
expect_fail 2 "^dlh-launch: --max-lr: must be larger than --min-lr" find_lr --min-lr 1 --max-lr 0.1
expect_fail 2 "^dlh-launch: --min-lr: must be a positive number" find_lr --min-lr -1
expect_fail 2 "^dlh-launch: --steps: must be at least 10, got 5" find_lr --steps 5
expect_fail 2 "^dlh-launch: --batch: must be positive, got 0" find_lr --batch 0
expect_fail 2 "^dlh-launch: --batch: must be positive, got -8" find_lr --batch=-8
expect_fail 2 "^dlh-launch: error: --steps: 100 steps of batch 64 need 6464 training samples" find_lr --batch 64
expect_fail 2 "^dlh-launch: error: .*missing.h5" find_lr --data missing.h5
expect_fail 2 "^dlh-launch: error: .*nope.json: cannot read" dlh-launch lr-find nope.json
expect_fail 2 "^dlh-launch: --out: .*no-such-dir does not exist" find_lr --out no-such-dir/x.json
expect_fail 2 "^dlh-launch: lr-find: missing SPEC" dlh-launch lr-find
expect_fail 2 "unrecognised option '--bogus'" find_lr --bogus
[[ ! -e lr-find.json && ! -e lr-find.svg ]] || fail "a refused run wrote a file"
[[ -z $(ls "$WORK" | grep '\.tmp\.') ]] || fail "a temporary file was left"
check "no file written by refused runs"
