#!/bin/bash
# End-to-end checks of `dlh-data import-numpy` and `import-csv` on files written the way
# users write them: np.save pairs (uint8 N x 28 x 28 with int64 labels; float32 NHWC),
# np.savez and np.savez_compressed archives, and a CSV table with a header and class names
# written by Python's csv module. The data set must hold exactly the values (uint8 stays
# uint8, NHWC becomes NCHW); each kind of bad input fails with one line naming the file;
# and a short training run learns from the CSV import. Run by `make check-scripts` with
# BINDIR set to the build's bin folder.
set -euo pipefail

BINDIR=${BINDIR:?BINDIR must name the folder holding dlh-data and dlh-launch}
DATA=$BINDIR/dlh-data
LAUNCH=$BINDIR/dlh-launch
PY=/usr/bin/python3  # Debian's, with numpy and h5py (python3-h5py)
export PYTHONDONTWRITEBYTECODE=1
for tool in "$DATA" "$LAUNCH"; do
  [[ -x $tool ]] || { echo "FAIL: $tool is not an executable" >&2; exit 1; }
done
"$PY" -c 'import h5py, numpy' || { echo "FAIL: $PY lacks h5py or numpy (python3-h5py)" >&2; exit 1; }

source "$(dirname "$0")/data_common.bash"

# The inputs, with a fixed seed. The iris-like table: 4 features around a mean per species,
# far enough apart that a small dense network separates them in a few epochs.
"$PY" - "$tmp" <<'PY'
import csv, sys, numpy as np
tmp = sys.argv[1]
rng = np.random.default_rng(11)
x = rng.integers(0, 256, size=(120, 28, 28), dtype=np.uint8)
y = rng.integers(0, 10, size=120).astype(np.int64)
np.save(f"{tmp}/x_train.npy", x[:100])
np.save(f"{tmp}/y_train.npy", y[:100])
np.save(f"{tmp}/x_test.npy", x[100:])
np.save(f"{tmp}/y_test.npy", y[100:])
f = rng.standard_normal(size=(40, 28, 28, 3)).astype(np.float32)
np.save(f"{tmp}/f_train.npy", f[:30])
np.save(f"{tmp}/f_train_y.npy", (np.arange(30) % 4).astype(np.int64))
np.save(f"{tmp}/f_test.npy", f[30:])
np.save(f"{tmp}/f_test_y.npy", (np.arange(10) % 4).astype(np.int64))
arrays = dict(x_train=x[:100], y_train=y[:100], x_test=x[100:], y_test=y[100:])
np.savez(f"{tmp}/stored.npz", **arrays)
np.savez_compressed(f"{tmp}/deflated.npz", **arrays)

# The failures: cut short, Fortran order, a label out of range.
with open(f"{tmp}/x_train.npy", "rb") as src, open(f"{tmp}/cut.npy", "wb") as dst:
    dst.write(src.read()[:-100])
np.save(f"{tmp}/fortran.npy", np.asfortranarray(x[:100]))
bad_y = y[:100].copy()
bad_y[17] = -1
np.save(f"{tmp}/bad_y.npy", bad_y)

species = ["setosa", "versicolor", "virginica"]
means = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]])
with open(f"{tmp}/iris.csv", "w", newline="") as out:
    w = csv.writer(out)
    w.writerow(["sepal_length", "sepal_width", "petal_length", "petal_width", "species"])
    for i in rng.permutation(150):
        c = i % 3
        w.writerow([f"{v:.1f}" for v in means[c] + rng.normal(0, 0.2, 4)] + [species[c]])
with open(f"{tmp}/iris.csv") as src, open(f"{tmp}/bad.csv", "w") as dst:
    lines = src.readlines()
    lines[3] = "abc," + lines[3].split(",", 1)[1]
    dst.writelines(lines)
# An inf in the float images (NCHW) at row 9, element 2; a NaN in the test images at row 4,
# element 5.
inf_x = f[:30].transpose(0, 3, 1, 2).copy()
inf_x.reshape(30, -1)[9, 2] = np.inf
np.save(f"{tmp}/inf_x.npy", inf_x)
np.savez(f"{tmp}/inf.npz", x_train=inf_x, y_train=np.arange(30) % 4)
inf_test = f[30:].transpose(0, 3, 1, 2).copy()
inf_test.reshape(10, -1)[4, 5] = np.nan
np.save(f"{tmp}/inf_test.npy", inf_test)
PY

# compare OUT.h5 TRAIN_X TRAIN_Y TEST_X TEST_Y [nhwc]: the data set holds exactly these.
compare() {
  "$PY" - "$@" <<'PY'
import sys, h5py, numpy as np
out, xtr, ytr, xte, yte = sys.argv[1:6]
nhwc = len(sys.argv) > 6
with h5py.File(out) as f:
    for split, xs, ys in (("train", xtr, ytr), ("test", xte, yte)):
        x, y = np.load(xs), np.load(ys)
        want = x.transpose(0, 3, 1, 2) if nhwc else x[:, None]
        got = f[f"{split}/images"]
        assert got.dtype == x.dtype, (split, got.dtype, x.dtype)
        assert got.shape == want.shape, (split, got.shape, want.shape)
        assert np.array_equal(got[()], want), f"{split} images differ"
        assert np.array_equal(f[f"{split}/labels"][()], y), f"{split} labels differ"
        print(f"      {split}: {got.shape} {got.dtype}, labels equal")
PY
}

check "np.save pairs of uint8 images and int64 labels"
"$DATA" import-numpy --out "$tmp/pairs.h5" --train-images "$tmp/x_train.npy" \
  --train-labels "$tmp/y_train.npy" --test-images "$tmp/x_test.npy" \
  --test-labels "$tmp/y_test.npy" | sed 's/^/      /'
"$DATA" inspect "$tmp/pairs.h5" >"$tmp/inspect" || fail "inspect rejects pairs.h5"
grep -q '^train     100 samples of 1x28x28$' "$tmp/inspect" || fail "inspect: no train line"
grep -q '^test      20 samples of 1x28x28$' "$tmp/inspect" || fail "inspect: no test line"
compare "$tmp/pairs.h5" "$tmp"/{x_train,y_train,x_test,y_test}.npy || fail "pairs.h5 differs"

check "float32 NHWC images become NCHW"
"$DATA" import-numpy --out "$tmp/nhwc.h5" --train-images "$tmp/f_train.npy" \
  --train-labels "$tmp/f_train_y.npy" --test-images "$tmp/f_test.npy" \
  --test-labels "$tmp/f_test_y.npy" >/dev/null
"$DATA" inspect "$tmp/nhwc.h5" | grep -q '^train     30 samples of 3x28x28$' ||
  fail "inspect: nhwc.h5 is not 30 samples of 3x28x28"
compare "$tmp/nhwc.h5" "$tmp"/{f_train,f_train_y,f_test,f_test_y}.npy nhwc || fail "nhwc.h5 differs"

for archive in stored deflated; do
  check "np.savez archive ($archive) with the default keys"
  "$DATA" import-numpy --out "$tmp/$archive.h5" --npz "$tmp/$archive.npz" >/dev/null
  "$DATA" inspect "$tmp/$archive.h5" >/dev/null || fail "inspect rejects $archive.h5"
  compare "$tmp/$archive.h5" "$tmp"/{x_train,y_train,x_test,y_test}.npy || fail "$archive.h5 differs"
done

check "the CSV table with a header and species names"
"$DATA" import-csv "$tmp/iris.csv" --out "$tmp/iris.h5" --test-fraction 0.2 | sed 's/^/      /'
"$DATA" inspect "$tmp/iris.h5" >"$tmp/inspect" || fail "inspect rejects iris.h5"
grep -q '^train     120 samples of 1x1x4$' "$tmp/inspect" || fail "inspect: no iris train line"
grep -q '^test      30 samples of 1x1x4$' "$tmp/inspect" || fail "inspect: no iris test line"
"$PY" - "$tmp/iris.csv" "$tmp/iris.h5" <<'PY' || fail "iris.h5 differs from iris.csv"
import csv, json, sys, h5py, numpy as np
rows = list(csv.reader(open(sys.argv[1])))[1:]
with h5py.File(sys.argv[2]) as f:
    names = json.loads(f["class_names"][()])
    assert names == ["setosa", "versicolor", "virginica"], names
    want = sorted((tuple(np.float32(v) for v in r[:4]), names.index(r[4])) for r in rows)
    got = sorted((tuple(x.reshape(4)), int(y)) for s in ("train", "test")
                 for x, y in zip(f[f"{s}/images"][()], f[f"{s}/labels"][()]))
    assert got == want, "rows differ"
    print(f"      {len(got)} rows and labels equal; classes {names}")
PY

check "a table whose columns have scales of their own: a mean and std per column, and a model learns it"
# An income column in the tens of thousands that carries nothing, beside six features near 1
# of which four decide the class. One mean and std for the whole table left the features
# at 1e-4 of the income's spread: 50% test accuracy (the largest class); per column, 90%.
"$PY" - "$tmp/table.csv" <<'PY'
import csv, sys, numpy as np
rng = np.random.default_rng(7)
with open(sys.argv[1], "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["income"] + [f"x{i}" for i in range(6)] + ["band"])
    for _ in range(1200):
        x = rng.normal(0, 1, 6)
        c = int(x[1] + x[2] - x[3] > 0) + int(x[4] > 0.8)
        w.writerow([f"{rng.uniform(20000, 120000):.2f}"] + [f"{v:.4f}" for v in x] + [["lo", "mid", "hi"][c]])
PY
"$DATA" import-csv "$tmp/table.csv" --out "$tmp/table.h5" >/dev/null
"$DATA" inspect "$tmp/table.h5" | grep -q '^normalize mean 7 per element: ' || fail "inspect: no per-element statistics"
"$PY" - "$tmp/table.h5" <<'PY' || fail "table.h5: the statistics are not the training columns' own"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1]) as f:
    x = f["train/images"][()].reshape(-1, 7).astype(np.float64)
    mean, std = np.asarray(f.attrs["mean"]), np.asarray(f.attrs["std"])
assert mean.shape == std.shape == (7,), (mean.shape, std.shape)
assert np.allclose(mean, x.mean(0), rtol=1e-9) and np.allclose(std, x.std(0), rtol=1e-9), (mean, std)
print(f"      mean per column {np.round(mean, 3).tolist()}")
PY
cat >"$tmp/table.json" <<'JSON'
{"name": "table", "input": {"channels": 1, "height": 1, "width": 7}, "classes": 3,
 "layers": [{"type": "flatten"}, {"type": "dense", "units": 32}, {"type": "relu"},
            {"type": "dense", "units": 3}],
 "optimizer": {"type": "adam", "lr": 0.01}, "batch_size": 32, "epochs": 15, "seed": 1,
 "dataset": "table.h5"}
JSON
"$LAUNCH" train "$tmp/table.json" --data "$tmp/table.h5" --run-dir "$tmp/table-run" --threads 1 \
  --progress none >"$tmp/table.out" 2>&1 || { cat "$tmp/table.out"; fail "training on table.h5"; }
"$PY" - "$tmp/table-run/summary.json" <<'PY' || fail "test accuracy on the table: the columns' scales were not standardised apart"
import json, sys
acc = json.load(open(sys.argv[1]))["test_accuracy"]
print(f"      test accuracy {acc:.3f} after 15 epochs")
assert acc > 0.8, acc
PY

check "bad inputs fail with one line naming the file"
expect_failure 1 "$tmp/cut.npy: truncated: holds" "$DATA" import-numpy --out "$tmp/x.h5" \
  --train-images "$tmp/cut.npy" --train-labels "$tmp/y_train.npy"
expect_failure 1 "$tmp/fortran.npy: Fortran-order arrays are not supported" "$DATA" import-numpy \
  --out "$tmp/x.h5" --train-images "$tmp/fortran.npy" --train-labels "$tmp/y_train.npy"
expect_failure 1 "label -1 is outside" "$DATA" import-numpy --out "$tmp/x.h5" \
  --train-images "$tmp/x_train.npy" --train-labels "$tmp/bad_y.npy"
# A bad test label is the test labels' file's, not the training one's.
expect_failure 1 "dlh-data: $tmp/bad_y.npy: test sample 17: label -1 is outside" "$DATA" import-numpy \
  --out "$tmp/x.h5" --train-images "$tmp/x_train.npy" --train-labels "$tmp/y_train.npy" \
  --test-images "$tmp/x_train.npy" --test-labels "$tmp/bad_y.npy"
expect_failure 1 "$tmp/bad.csv: row 4, column 'sepal_length': 'abc' is not a number" \
  "$DATA" import-csv "$tmp/bad.csv" --out "$tmp/x.h5"
# A non-finite image value is the images' file's, not the labels' (which label messages name).
expect_failure 1 "dlh-data: $tmp/inf_x.npy: train sample 9: holds a non-finite value at element 2" \
  "$DATA" import-numpy --out "$tmp/x.h5" --train-images "$tmp/inf_x.npy" \
  --train-labels "$tmp/f_train_y.npy"
expect_failure 1 "dlh-data: $tmp/inf_test.npy: test sample 4: holds a non-finite value at element 5" \
  "$DATA" import-numpy --out "$tmp/x.h5" --train-images "$tmp/f_train.npy" \
  --train-labels "$tmp/f_train_y.npy" --test-images "$tmp/inf_test.npy" \
  --test-labels "$tmp/f_test_y.npy"
expect_failure 1 "dlh-data: $tmp/inf.npz: x_train: train sample 9: holds a non-finite value at element 2" \
  "$DATA" import-numpy --out "$tmp/x.h5" --npz "$tmp/inf.npz" --keys x_train,y_train
printf 'a,b,label\n1,2,0\n3,inf,1\n' >"$tmp/inf.csv"  # CSV: a non-finite cell is no number
expect_failure 1 "$tmp/inf.csv: row 3, column 'b': 'inf' is not a number" \
  "$DATA" import-csv "$tmp/inf.csv" --out "$tmp/x.h5"
[[ ! -e $tmp/x.h5 ]] || fail "a failed import wrote $tmp/x.h5"

check "--out naming an input (by any path) or a folder is refused before reading; inputs kept"
cp "$tmp/y_train.npy" "$tmp/y_keep.npy"
ln -s y_train.npy "$tmp/y_link.npy"
mkdir "$tmp/outdir"
for out in "$tmp/y_train.npy" "$tmp/y_link.npy" "$tmp/./y_train.npy"; do
  expect_failure 1 "--out $out is the input --train-labels $tmp/y_train.npy (write to another file)" \
    "$DATA" import-numpy --out "$out" --train-images "$tmp/x_train.npy" \
    --train-labels "$tmp/y_train.npy"
done
expect_failure 1 "--out $tmp/stored.npz is the input --npz $tmp/stored.npz" \
  "$DATA" import-numpy --out "$tmp/stored.npz" --npz "$tmp/stored.npz"
expect_failure 1 "import-numpy: --out: $tmp/outdir: is a folder" \
  "$DATA" import-numpy --out "$tmp/outdir" --npz "$tmp/stored.npz"
expect_failure 1 "import-csv: --out $tmp/iris.csv is the input file (write to another file)" \
  "$DATA" import-csv "$tmp/iris.csv" --out "$tmp/iris.csv"
expect_failure 1 "--out $tmp/bad.csv is the input --test $tmp/bad.csv" \
  "$DATA" import-csv "$tmp/iris.csv" --test "$tmp/bad.csv" --out "$tmp/bad.csv"
cmp -s "$tmp/y_train.npy" "$tmp/y_keep.npy" && [[ -L $tmp/y_link.npy ]] ||
  fail "a refused import replaced its input"
head -1 "$tmp/iris.csv" | grep -q '^sepal_length,' || fail "a refused import replaced iris.csv"
[[ -z $(ls "$tmp/outdir") ]] && ! compgen -G "$tmp/*.tmp.*" >/dev/null || fail "a refused import wrote"

check "a short training run learns from the CSV import"
cat >"$tmp/spec.json" <<'JSON'
{
  "name": "iris-check",
  "input": {"channels": 1, "height": 1, "width": 4},
  "classes": 3,
  "layers": [
    {"type": "flatten"},
    {"type": "dense", "units": 16},
    {"type": "relu"},
    {"type": "dense", "units": 3}
  ],
  "optimizer": {"type": "adam", "lr": 0.02},
  "batch_size": 10,
  "epochs": 3,
  "seed": 3,
  "dataset": "iris.h5"
}
JSON
"$LAUNCH" train "$tmp/spec.json" --data "$tmp/iris.h5" --epochs 3 --run-dir "$tmp/run" \
  --threads 1 --progress none >"$tmp/train.out" 2>&1 || { cat "$tmp/train.out"; fail "training failed"; }
"$PY" - "$tmp/run/metrics.jsonl" <<'PY' || fail "test accuracy not above chance"
import json, sys
acc = [json.loads(l)["test_accuracy"] for l in open(sys.argv[1]) if '"test_accuracy"' in l]
print(f"      test accuracy by epoch: {acc}")
assert acc and acc[-1] > 0.6, acc  # chance is 1/3
PY

if ((failures > 0)); then
  echo "data_import_numpy.sh: $failures failure(s)" >&2
  exit 1
fi
echo "data_import_numpy.sh: all checks passed"
