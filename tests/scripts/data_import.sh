#!/bin/bash
# End-to-end checks of what every import of a user's own data shares (launcher/data/import.hpp),
# through `dlh-data import-hdf5` on files written by h5py as users write them: arrays in NHWC
# and NCHW, uint8 and float32; the held-out test split; label checks naming the sample; and
# the input normalisation that travels from the data set into every checkpoint. The other
# formats have their own scripts (data_import_numpy.sh, data_import_images.sh). Run by
# `make check-scripts` with BINDIR set to the build's bin folder.
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

# A learnable 3-class set: a bright square whose position is the class, plus noise; 300 RGB
# 16x16 images in NHWC uint8 (as PIL and Keras hold them), and the same as float32 NCHW.
"$PY" - "$tmp" <<'PY'
import sys, h5py, numpy as np
tmp = sys.argv[1]
rng = np.random.default_rng(5)
n = 300
y = np.arange(n) % 3
rng.shuffle(y)
x = rng.integers(0, 60, size=(n, 16, 16, 3), dtype=np.uint8)
for i, c in enumerate(y):
    x[i, 2:8, 1 + 5 * c:6 + 5 * c, :] += 180
with h5py.File(f"{tmp}/keras.h5", "w") as f:
    f["x_train"] = x[:250]
    f["y_train"] = y[:250].astype(np.int64)
    f["x_test"] = x[250:]
    f["y_test"] = y[250:].reshape(-1, 1).astype(np.int64)  # Keras keeps labels N x 1
    g = f.create_group("nchw")
    g["images"] = (x.transpose(0, 3, 1, 2).astype(np.float32) / 255.0)
    g["labels"] = y.astype(np.int32)
    f["bad_labels"] = np.where(np.arange(n) == 17, 7, y)
    f["float_labels"] = y.astype(np.float64)  # as MATLAB writes them: whole numbers, doubles
    f["half_labels"] = y.astype(np.float32) + 0.5
    f["short_labels"] = y[:10]
PY

check "import-hdf5: uint8 NHWC with a test split stays uint8, transposed to NCHW"
out=$("$DATA" import-hdf5 "$tmp/keras.h5" --images x_train --labels y_train \
  --test-images x_test --test-labels y_test --out "$tmp/a.h5")
echo "      $out"
[[ $out == "wrote $tmp/a.h5: 250 train, 50 test, 3x16x16, 3 classes" ]] || fail "summary: $out"
"$PY" - "$tmp" <<'PY' || fail "a.h5 does not hold the source's values"
import sys, h5py, numpy as np
tmp = sys.argv[1]
with h5py.File(f"{tmp}/keras.h5") as src, h5py.File(f"{tmp}/a.h5") as out:
    assert out["train/images"].dtype == np.uint8, out["train/images"].dtype
    assert (out["train/images"][()] == src["x_train"][()].transpose(0, 3, 1, 2)).all()
    assert (out["test/images"][()] == src["x_test"][()].transpose(0, 3, 1, 2)).all()
    assert (out["train/labels"][()] == src["y_train"][()]).all()
    assert (out["test/labels"][()] == src["y_test"][()].ravel()).all()
    # One mean and std per channel (the source is NHWC: channels last).
    px = src["x_train"][()].astype(np.float64) / 255
    mean, std = np.asarray(out.attrs["mean"]), np.asarray(out.attrs["std"])
    assert mean.shape == std.shape == (3,), (mean, std)
    assert np.allclose(mean, px.mean((0, 1, 2)), atol=1e-9), (mean, px.mean((0, 1, 2)))
    assert np.allclose(std, px.std((0, 1, 2)), atol=1e-9), (std, px.std((0, 1, 2)))
PY
"$DATA" inspect "$tmp/a.h5" >"$tmp/inspect"
grep -q '^classes   3$' "$tmp/inspect" || fail "inspect: classes"
grep -q '^train     250 samples of 3x16x16$' "$tmp/inspect" || fail "inspect: train line"

check "import-hdf5: float32 NCHW in a group, no test split: 10% held out by a fixed shuffle"
"$DATA" import-hdf5 "$tmp/keras.h5" --images /nchw/images --labels /nchw/labels \
  --out "$tmp/b.h5" >/dev/null
"$DATA" import-hdf5 "$tmp/keras.h5" --images /nchw/images --labels /nchw/labels \
  --out "$tmp/b-again.h5" >/dev/null
"$DATA" import-hdf5 "$tmp/keras.h5" --images /nchw/images --labels /nchw/labels \
  --out "$tmp/b-seed2.h5" --seed 2 --test-fraction 0.2 >/dev/null
"$PY" - "$tmp" <<'PY' || fail "held-out split"
import sys, h5py, numpy as np
tmp = sys.argv[1]
src = h5py.File(f"{tmp}/keras.h5")["nchw/images"][()]
def load(name):
    with h5py.File(f"{tmp}/{name}") as f:
        return {k: f[k][()] for k in ("train/images", "test/images", "train/labels", "test/labels")}
b, again, seed2 = load("b.h5"), load("b-again.h5"), load("b-seed2.h5")
assert b["train/images"].dtype == np.float32
assert len(b["test/labels"]) == 30 and len(b["train/labels"]) == 270
assert len(seed2["test/labels"]) == 60
for k in b:
    assert (b[k] == again[k]).all(), k          # the same seed, the same split
assert not (b["test/images"][:30] == seed2["test/images"][:30]).all()
# Every source sample is in exactly one split, in the file's order within each.
rows = {r.tobytes(): i for i, r in enumerate(src)}
ti = [rows[r.tobytes()] for r in b["train/images"]]
te = [rows[r.tobytes()] for r in b["test/images"]]
assert sorted(ti + te) == list(range(300)) and ti == sorted(ti) and te == sorted(te)
PY

check "held out by class: a class of 3 samples in 208 gets its test sample, the total stays 10%"
"$PY" - "$tmp/skewed.h5" <<'PY'
import sys, h5py, numpy as np
labels = np.array([0] * 200 + [1] * 5 + [2] * 3, dtype=np.int32)
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = np.random.default_rng(3).random((len(labels), 4)).astype(np.float32)
    f["y"] = labels
PY
"$DATA" import-hdf5 "$tmp/skewed.h5" --images x --labels y --out "$tmp/skewed-out.h5" >/dev/null ||
  fail "import of the skewed set"
"$PY" - "$tmp/skewed-out.h5" <<'PY' || fail "the held-out split leaves a class out"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1]) as f:
    test, train = f["test/labels"][()], f["train/labels"][()]
assert len(test) == 21 and len(train) == 187, (len(test), len(train))
assert set(np.unique(test)) == {0, 1, 2} and set(np.unique(train)) == {0, 1, 2}, (np.bincount(test), np.bincount(train))
print(f"      test per class {np.bincount(test).tolist()}, train per class {np.bincount(train).tolist()}")
PY

check "labels counted from 1: imported, with one note that class 0 is empty"
"$PY" - "$tmp/from1.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["X"] = np.random.default_rng(4).random((60, 5))
    f["Y"] = (np.arange(60) % 3 + 1).astype(np.float64).reshape(60, 1)
PY
"$DATA" import-hdf5 "$tmp/from1.h5" --images /X --labels /Y --out "$tmp/from1-out.h5" >/dev/null 2>"$tmp/from1.err" ||
  fail "labels from 1: $(cat "$tmp/from1.err")"
grep -qx "dlh-data: note: $tmp/from1.h5: no sample has label 0: class 0 is empty, an output the network never learns (labels counted from 1, as MATLAB counts? subtract 1 from them)" "$tmp/from1.err" ||
  fail "labels from 1: no note: $(cat "$tmp/from1.err")"
sed 's/^/      /' "$tmp/from1.err"
"$DATA" import-hdf5 "$tmp/keras.h5" --images x_train --labels y_train --out "$tmp/noted.h5" >/dev/null 2>"$tmp/noted.err"
[[ ! -s $tmp/noted.err ]] || fail "a note for labels from 0: $(cat "$tmp/noted.err")"

check "import-hdf5: whole-number labels stored as doubles (MATLAB's default) import as integers"
"$DATA" import-hdf5 "$tmp/keras.h5" --images /nchw/images --labels float_labels \
  --out "$tmp/b-float.h5" >/dev/null || fail "float labels of whole numbers refused"
"$PY" - "$tmp" <<'PY' || fail "float labels"
import sys, h5py, numpy as np
tmp = sys.argv[1]
with h5py.File(f"{tmp}/b.h5") as a, h5py.File(f"{tmp}/b-float.h5") as b:
    for k in ("train/labels", "test/labels"):
        assert (a[k][()] == b[k][()]).all(), k
PY

check "bad data: one line naming the file and the sample, nothing written"
expect_failure 1 "keras.h5: train sample 17: label 7 is outside [0, 3)" \
  "$DATA" import-hdf5 "$tmp/keras.h5" --images /nchw/images --labels bad_labels \
  --classes 3 --out "$tmp/bad.h5"
expect_failure 1 "keras.h5: half_labels: label 0 is 1.500000: labels must be whole numbers" \
  "$DATA" import-hdf5 "$tmp/keras.h5" --images /nchw/images --labels half_labels --out "$tmp/bad.h5"
expect_failure 1 "keras.h5: /nchw/images: 300 samples (300 x 3 x 16 x 16) for 10 labels in short_labels" \
  "$DATA" import-hdf5 "$tmp/keras.h5" --images /nchw/images --labels short_labels --out "$tmp/bad.h5"
expect_failure 1 "keras.h5: no dataset missing" \
  "$DATA" import-hdf5 "$tmp/keras.h5" --images missing --labels y_train --out "$tmp/bad.h5"
expect_failure 2 "--test-fraction: expected a number between 0 and 1" \
  "$DATA" import-hdf5 "$tmp/keras.h5" --images x_train --labels y_train --test-fraction 1 \
  --out "$tmp/bad.h5"
[[ ! -e $tmp/bad.h5 ]] && ! compgen -G "$tmp/bad.h5*" >/dev/null || fail "a file was left behind"

check "--out the input file (by its name, another path or a link) or a folder: refused, input kept"
cp "$tmp/keras.h5" "$tmp/keras-copy.h5"
ln -s keras.h5 "$tmp/keras-link.h5"
mkdir "$tmp/outdir"
expect_failure 1 "import-hdf5: --out $tmp/keras.h5 is the input file (write to another file)" \
  "$DATA" import-hdf5 "$tmp/keras.h5" --out "$tmp/keras.h5" --images x_train --labels y_train
for out in "$tmp/keras-link.h5" "$tmp/../$(basename "$tmp")/keras.h5"; do
  expect_failure 1 "import-hdf5: --out $out is the input file $tmp/keras.h5 (write to another file)" \
    "$DATA" import-hdf5 "$tmp/keras.h5" --out "$out" --images x_train --labels y_train
done
expect_failure 1 "import-hdf5: --out: $tmp/outdir: is a folder, expected a file name" \
  "$DATA" import-hdf5 "$tmp/keras.h5" --out "$tmp/outdir" --images x_train --labels y_train
cmp -s "$tmp/keras.h5" "$tmp/keras-copy.h5" && [[ -L $tmp/keras-link.h5 && -z $(ls "$tmp/outdir") ]] ||
  fail "a refused import replaced its input or wrote into the folder"
! compgen -G "$tmp/*.tmp.*" >/dev/null || fail "a refused import left a temporary file"

check "train on the import; the checkpoint records the input normalisation"
cat >"$tmp/spec.json" <<'JSON'
{
  "name": "import-check",
  "input": {"channels": 3, "height": 16, "width": 16},
  "classes": 3,
  "layers": [
    {"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1},
    {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2},
    {"type": "flatten"},
    {"type": "dense", "units": 3}
  ],
  "optimizer": {"type": "adam", "lr": 0.003},
  "batch_size": 25,
  "epochs": 4,
  "seed": 3,
  "dataset": "a.h5"
}
JSON
"$LAUNCH" train "$tmp/spec.json" --data "$tmp/a.h5" --run-dir "$tmp/run" --threads 1 \
  --progress none >"$tmp/train.out" 2>&1 || { cat "$tmp/train.out"; fail "training failed"; }
ckpt=$(ls "$tmp/run/checkpoints"/ckpt-*.h5 | tail -1)
"$PY" - "$tmp/a.h5" "$ckpt" "$tmp/run/metrics.jsonl" <<'PY' || fail "checkpoint normalisation or accuracy"
import sys, json, h5py
data, ckpt, metrics = sys.argv[1:]
with h5py.File(data) as d, h5py.File(ckpt) as c:
    print(f"      {ckpt.rsplit('/', 1)[1]}: input_scale {c.attrs['input_scale']:.6g}, "
          f"input_mean {c.attrs['input_mean']}, input_std {c.attrs['input_std']}")
    assert abs(c.attrs["input_scale"] - 1 / 255) < 1e-15
    assert (c.attrs["input_mean"] == d.attrs["mean"]).all() and (c.attrs["input_std"] == d.attrs["std"]).all()
acc = [json.loads(l)["test_accuracy"] for l in open(metrics) if '"test_accuracy"' in l]
print(f"      test accuracy by epoch: {acc}")
assert acc and acc[-1] > 0.9, acc
PY

if ((failures > 0)); then
  echo "data_import.sh: $failures failure(s)" >&2
  exit 1
fi
echo "data_import.sh: all checks passed"
