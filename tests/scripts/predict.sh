#!/bin/bash
# A trained model used and its results analysed (issue 45): a short 2-rank training run, then
# `dlh-launch predict RUN --data FILE` on the test split:
#   1. its accuracy is the run's own (summary.json's test_accuracy) to the last sample, and
#      the CSV's probabilities and predictions agree with results.json;
#   2. results.json: a confusion matrix that sums to the split, per-class precision/recall/F1
#      recomputed here from the CSV, the most confused pairs, and the surest mistakes with
#      their images; Fashion-MNIST's import writes its class names, which results.json uses;
#   3. dlh-report shows them (a "Results" section) and the page passes check-page.sh in
#      headless Chromium, every sample image decoded;
#   4. bad input gets one line naming the file and exits non-zero, writing nothing: images of
#      another size, another number of classes, a damaged checkpoint, a folder without one,
#      bad options.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SHOTS=${SCREENSHOT_DIR:-$BINDIR/../screenshots}
mkdir -p "$SHOTS"
command -v chromium >/dev/null || fail "no chromium: make check installs it (share/setup/install-deps.sh)"
PY=/usr/bin/python3

dlh-data synthetic --out "$WORK/data.h5" --shape 1x12x12 --classes 4 --train 1200 --test 130 --seed 5 >/dev/null
cat >"$WORK/spec.json" <<JSON
{
  "name": "predicttest",
  "input": {"channels": 1, "height": 12, "width": 12},
  "classes": 4,
  "layers": [{"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1}, {"type": "batchnorm"},
             {"type": "relu"}, {"type": "flatten"}, {"type": "dense", "units": 4}],
  "optimizer": {"type": "sgd", "lr": 0.02, "momentum": 0.9},
  "batch_size": 24, "epochs": 1, "seed": 2, "dataset": "$WORK/data.h5"
}
JSON
mpirun -np 2 dlh-launch train "$WORK/spec.json" --run-dir "$WORK/run" --threads 1 --progress none \
  >"$WORK/train.log" 2>&1 || { cat "$WORK/train.log" >&2; fail "training failed"; }

echo "1. predict on the test split: the run's accuracy, exactly"
dlh-launch predict "$WORK/run" --data "$WORK/data.h5" --out "$WORK/p.csv" \
  --results "$WORK/run/results.json" --misclassified 6 --threads 1 >"$WORK/predict.txt" 2>&1 ||
  { cat "$WORK/predict.txt" >&2; fail "dlh-launch predict"; }
"$PY" - "$WORK/run/summary.json" "$WORK/run/results.json" "$WORK/p.csv" <<'PY' || fail "predictions"
import csv, json, sys
summary, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
rows = list(csv.DictReader(open(sys.argv[3])))
assert len(rows) == r["samples"] == 130, (len(rows), r["samples"])
# The trainer's accuracy is a float of correct / samples: the same count, not "close".
assert r["correct"] == round(summary["test_accuracy"] * 130), (r["correct"], summary["test_accuracy"])
assert r["accuracy"] == summary["test_accuracy"], (r["accuracy"], summary["test_accuracy"])
for row in rows:
    p = [float(row[f"p_{k}"]) for k in range(4)]
    assert abs(sum(p) - 1) < 1e-5 and int(row["predicted"]) == p.index(max(p)), row
    assert abs(float(row["confidence"]) - max(p)) < 1e-6, row
correct = sum(row["label"] == row["predicted"] for row in rows)
assert correct == r["correct"], (correct, r["correct"])
print(f"  ok: {correct} of 130 right, as the run's test accuracy {summary['test_accuracy']}")
PY

# The same probabilities as HDF5 (h5py reads them as a researcher would).
dlh-launch predict "$WORK/run" --data "$WORK/data.h5" --out "$WORK/p.h5" --threads 1 >/dev/null ||
  fail "dlh-launch predict --out p.h5"
"$PY" - "$WORK/p.h5" "$WORK/p.csv" <<'PY' || fail "predictions as HDF5"
import csv, sys
import h5py
rows = list(csv.DictReader(open(sys.argv[2])))
with h5py.File(sys.argv[1], "r") as f:
    probs, predicted, labels = f["/probabilities"][:], f["/predicted"][:], f["/labels"][:]
assert probs.shape == (130, 4) and list(predicted) == [int(r["predicted"]) for r in rows]
assert list(labels) == [int(r["label"]) for r in rows]
assert all(abs(probs[i][k] - float(rows[i][f"p_{k}"])) < 1e-6 for i in range(130) for k in range(4))
assert list(probs.argmax(1)) == list(predicted)
PY
check "the probabilities as HDF5 (/probabilities 130 x 4, /predicted, /labels): the CSV's"

echo "2. results.json: confusion, per-class scores, most confused, the surest mistakes"
"$PY" - "$WORK/run/results.json" "$WORK/p.csv" <<'PY' || fail "results.json"
import base64, csv, json, sys
r = json.load(open(sys.argv[1]))
rows = list(csv.DictReader(open(sys.argv[2])))
k = r["classes"]
m = [[0] * k for _ in range(k)]
for row in rows:
    m[int(row["label"])][int(row["predicted"])] += 1
assert r["confusion"] == m, (r["confusion"], m)
for c in range(k):
    tp, support, predicted = m[c][c], sum(m[c]), sum(m[t][c] for t in range(k))
    pc = r["per_class"][c]
    assert pc["support"] == support
    assert (pc["precision"] is None) if predicted == 0 else abs(pc["precision"] - tp / predicted) < 1e-12
    assert abs(pc["recall"] - tp / support) < 1e-12
wrong = [row for row in rows if row["label"] != row["predicted"]]
assert len(r["misclassified"]) == min(6, len(wrong)), len(r["misclassified"])
conf = [x["confidence"] for x in r["misclassified"]]
assert conf == sorted(conf, reverse=True), conf
assert max(float(w["confidence"]) for w in wrong) - conf[0] < 1e-6  # the surest first
for x in r["misclassified"]:
    assert x["true"] != x["predicted"]
    bmp = base64.b64decode(x["image_bmp_base64"])
    assert bmp[:2] == b"BM" and int.from_bytes(bmp[18:22], "little") == 12, bmp[:30]
pairs = [(p["true"], p["predicted"], p["count"]) for p in r["most_confused"]]
assert all(t != q and m[t][q] == n for t, q, n in pairs) and [n for *_, n in pairs] == sorted(
    [n for *_, n in pairs], reverse=True), pairs
assert r["class_names"] == ["0", "1", "2", "3"]  # the synthetic set has no names
print(f"  ok: confusion {m}; per-class F1 {[round(c['f1'], 3) for c in r['per_class']]}; "
      f"{len(pairs)} confused pairs; {len(r['misclassified'])} mistakes drawn (12x12 BMP)")
PY
check "results.json agrees with the CSV (confusion, precision, recall, order of the mistakes)"
# The names the results show for Fashion-MNIST: its import writes them (its README's).
dlh-data import-fashion-mnist --out "$WORK/fm.h5" >/dev/null || fail "import-fashion-mnist"
names=$(dlh-data inspect "$WORK/fm.h5" | grep '^names')
[[ $names == *"0 T-shirt/top, 1 Trouser, 2 Pullover"*"9 Ankle boot" ]] || fail "Fashion-MNIST's class names: $names"
check "Fashion-MNIST's import names its classes: $(sed -E 's/^names +//' <<<"$names")"

echo "3. the report's Results section in headless Chromium"
dlh-report "$WORK/run" >/dev/null || fail "dlh-report"
grep -q "Results on the test split" "$WORK/run/report.html" || fail "no Results section in the report"
grep -q 'class="dlh-confusion"' "$WORK/run/report.html" || fail "no confusion matrix in the report"
grep -q '<td>best</td><td>epoch 1, step 50: test accuracy ' "$WORK/run/report.html" ||
  fail "the report does not name the best evaluation and its checkpoint"
page=$(bash "$ROOT/tests/browser/check-page.sh" "$WORK/run/report.html" "$SHOTS/report-results.png" 2>&1) ||
  { echo "$page" >&2; fail "the report page failed in the browser"; }
check "report.html: ${page#*: }"

echo "4. bad input: one line naming the file, nothing written"
predict_fails() {  # predict_fails PATTERN ARGS...: exit non-zero, the line, no output file
  local pattern=$1 rc=0
  shift
  rm -f "$WORK/bad.csv"
  dlh-launch predict "$@" --out "$WORK/bad.csv" >"$WORK/bad.txt" 2>&1 || rc=$?
  ((rc != 0)) && grep -qE -- "$pattern" "$WORK/bad.txt" && [[ ! -e $WORK/bad.csv ]] ||
    { cat "$WORK/bad.txt" >&2; fail "predict $* (exit $rc): expected /$pattern/"; }
  check "exit $rc: $(head -1 "$WORK/bad.txt")"
}
dlh-data synthetic --out "$WORK/big.h5" --shape 1x14x14 --classes 4 --train 40 --test 20 --seed 1 >/dev/null
dlh-data synthetic --out "$WORK/five.h5" --shape 1x12x12 --classes 5 --train 40 --test 20 --seed 1 >/dev/null
ckpt=$(ls "$WORK"/run/checkpoints/ckpt-*.h5 | tail -1)
predict_fails "big.h5: /test/images are 1x14x14 but .*ckpt-[0-9]+.h5's network takes 1x12x12" "$WORK/run" --data "$WORK/big.h5"
predict_fails "five.h5: has 5 classes but .*'s network has 4" "$ckpt" --data "$WORK/five.h5"
head -c 3000 "$ckpt" >"$WORK/damaged.h5"
predict_fails "damaged.h5" "$WORK/damaged.h5" --data "$WORK/data.h5"
mkdir -p "$WORK/empty"
predict_fails "empty: no valid checkpoint" "$WORK/empty" --data "$WORK/data.h5"
predict_fails "--split: must be test or train" "$ckpt" --data "$WORK/data.h5" --split valid
predict_fails "give --data FILE or --images DIR" "$ckpt"
