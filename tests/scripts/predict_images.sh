#!/bin/bash
# A trained model applied to image files (issue 45): `dlh-launch predict CHECKPOINT --images
# DIR`. PNG images of 4 classes (drawn here with PIL: a bar whose place is the class, plus
# noise) are imported with `dlh-data import-images` and a model trained on them; then:
#   1. --images on the test folder (one folder per class) gives the same probabilities as
#      --data on the imported set's test split, to the last digit (the same uint8 values put
#      on the same scale), and results.json the same accuracy;
#   2. a folder of loose images (no classes) gives a probability per file, named in the CSV;
#   3. bad input, one line and a non-zero exit, nothing written: an image of another size, a
#      file that is not an image, a model trained on float inputs, --results without labels,
#      the wrong count of class folders.
source "$(dirname "$0")/common.bash"
PY=/usr/bin/python3
"$PY" -c "import PIL, numpy" 2>/dev/null || fail "no python3-pil or numpy (make check installs them)"

"$PY" - "$WORK" <<'PY'
import os, sys
import numpy as np
from PIL import Image
root, rng = sys.argv[1], np.random.default_rng(7)
for split, n in (("train", 40), ("test", 6)):
    for c in range(4):
        d = os.path.join(root, split, f"class{c}")
        os.makedirs(d)
        for i in range(n):
            img = rng.integers(0, 90, (12, 12))
            img[:, 3 * c:3 * c + 3] += 150
            Image.fromarray(img.clip(0, 255).astype(np.uint8), "L").save(os.path.join(d, f"{i:03d}.png"))
os.makedirs(os.path.join(root, "loose"))
for name in ("b.png", "a, first.png"):
    Image.open(os.path.join(root, "test", "class2", "000.png")).save(os.path.join(root, "loose", name))
os.makedirs(os.path.join(root, "big"))
Image.new("L", (16, 12)).save(os.path.join(root, "big", "wide.png"))
os.makedirs(os.path.join(root, "black"))
Image.new("L", (12, 12)).save(os.path.join(root, "black", "square.png"))
os.makedirs(os.path.join(root, "text"))
open(os.path.join(root, "text", "note.png"), "w").write("not an image\n")
PY
dlh-data import-images "$WORK/train" --test "$WORK/test" --size 12x12 --channels 1 --out "$WORK/img.h5" >/dev/null
cat >"$WORK/spec.json" <<JSON
{"name": "bars", "input": {"channels": 1, "height": 12, "width": 12}, "classes": 4,
 "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1}, {"type": "relu"},
            {"type": "flatten"}, {"type": "dense", "units": 4}],
 "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9}, "batch_size": 16, "epochs": 2,
 "seed": 3, "dataset": "$WORK/img.h5"}
JSON
dlh-launch train "$WORK/spec.json" --run-dir "$WORK/run" --threads 1 --progress none >"$WORK/train.txt" 2>&1 ||
  { cat "$WORK/train.txt" >&2; fail "training"; }

echo "1. --images (class folders) against --data: the same probabilities"
dlh-launch predict "$WORK/run" --data "$WORK/img.h5" --out "$WORK/data.csv" --results "$WORK/rd.json" \
  --threads 1 >/dev/null || fail "predict --data"
dlh-launch predict "$WORK/run" --images "$WORK/test" --out "$WORK/images.csv" --results "$WORK/ri.json" \
  --threads 1 >"$WORK/pi.txt" || fail "predict --images"
"$PY" - "$WORK/data.csv" "$WORK/images.csv" "$WORK/rd.json" "$WORK/ri.json" <<'PY' || fail "images against the data set"
import csv, json, sys
d, i = list(csv.DictReader(open(sys.argv[1]))), list(csv.DictReader(open(sys.argv[2])))
assert len(d) == len(i) == 24, (len(d), len(i))
# import-images keeps the folder's order (classes, then files by name), as --images reads it.
for a, b in zip(d, i):
    assert b["file"].startswith(f"class{a['label']}/"), (a, b)
    assert [a[f"p_{c}"] for c in range(4)] == [b[f"p_{c}"] for c in range(4)], (a, b)
    assert a["label"] == b["label"] and a["predicted"] == b["predicted"]
rd, ri = json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
assert rd["accuracy"] == ri["accuracy"] and rd["confusion"] == ri["confusion"], (rd["accuracy"], ri["accuracy"])
print(f"  ok: 24 images: every probability as from the imported set's test split; accuracy {ri['accuracy']}")
PY

echo "2. loose images: a probability per file"
dlh-launch predict "$WORK/run" --images "$WORK/loose" --out "$WORK/loose.csv" --threads 1 >"$WORK/pl.txt" ||
  fail "predict --images loose"
"$PY" - "$WORK/loose.csv" "$WORK/images.csv" <<'PY' || fail "loose images"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["file"] for r in rows] == ["a, first.png", "b.png"] and "label" not in rows[0], rows
same = [r for r in csv.DictReader(open(sys.argv[2])) if r["file"] == "class2/000.png"][0]
assert all(r["p_2"] == same["p_2"] for r in rows), (rows, same)
# No class folders here: the names come from the checkpoint, which recorded the data set's.
assert all(r["predicted_class"] == f"class{r['predicted']}" for r in rows), rows
print(f"  ok: {len(rows)} files, named (one with a comma, quoted), no label column; "
      f"classes named as trained: {[r['predicted_class'] for r in rows]}")
PY
check "$(cat "$WORK/pl.txt")"
dlh-launch predict "$WORK/run" --images "$WORK/big" --resize --out "$WORK/resized.csv" --threads 1 >/dev/null ||
  fail "predict --images --resize"
dlh-launch predict "$WORK/run" --images "$WORK/black" --out "$WORK/black.csv" --threads 1 >/dev/null ||
  fail "predict --images of the network's size"
"$PY" - "$WORK/resized.csv" "$WORK/black.csv" <<'PY' || fail "--resize"
import csv, sys
a, b = (list(csv.DictReader(open(p))) for p in sys.argv[1:3])
assert len(a) == len(b) == 1 and all(a[0][f"p_{c}"] == b[0][f"p_{c}"] for c in range(4)), (a, b)
print(f"  ok: --resize: a black 16x12 image gets the probabilities of a black 12x12 one ({a[0]['predicted']})")
PY

echo "3. bad input"
expect_fail 1 "wide.png: 16x12 pixels (width x height), the network takes 12x12 (--resize resizes each to 12x12 (height x width), as dlh-data import-images --size 12x12 does)" \
  dlh-launch predict "$WORK/run" --images "$WORK/big" --out "$WORK/bad.csv"
expect_fail 1 "note.png: not a PNG or JPEG image" dlh-launch predict "$WORK/run" --images "$WORK/text" --out "$WORK/bad.csv"
expect_fail 2 "predict: --results needs labels" \
  dlh-launch predict "$WORK/run" --images "$WORK/loose" --results "$WORK/bad.json"
expect_fail 2 "predict: give --data FILE or --images DIR, not both" \
  dlh-launch predict "$WORK/run" --images "$WORK/loose" --data "$WORK/img.h5" --out "$WORK/bad.csv"
mkdir -p "$WORK/three"
cp -r "$WORK/test/class0" "$WORK/test/class1" "$WORK/test/class2" "$WORK/three/"
expect_fail 1 "three: 3 class folders, the network has 4 classes" \
  dlh-launch predict "$WORK/run" --images "$WORK/three" --out "$WORK/bad.csv"
dlh-data synthetic --out "$WORK/float.h5" --shape 1x12x12 --classes 4 --train 64 --test 8 >/dev/null
sed "s|$WORK/img.h5|$WORK/float.h5|" "$WORK/spec.json" >"$WORK/float.json"
dlh-launch train "$WORK/float.json" --run-dir "$WORK/frun" --threads 1 --progress none --max-steps 2 >/dev/null 2>&1 ||
  fail "training on float inputs"
expect_fail 1 "trained on float inputs (input_scale 1.000000), not 8-bit images" \
  dlh-launch predict "$WORK/frun" --images "$WORK/loose" --out "$WORK/bad.csv"
[[ ! -e $WORK/bad.csv && ! -e $WORK/bad.json ]] || fail "a refused predict wrote a file"
