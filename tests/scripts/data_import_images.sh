#!/bin/bash
# End-to-end check of `dlh-data import-images`: a real ImageFolder tree (Fashion-MNIST images
# of three classes, saved by PIL as grey and RGB PNG and JPEG files of two sizes) is imported
# with --channels 1 and 3 and read back with h5py; bad files fail with one line; the result
# trains. Run by `make check-scripts` with BINDIR set to the build's bin folder.
set -euo pipefail

BINDIR=${BINDIR:?BINDIR must name the folder holding dlh-data}
DATA=$BINDIR/dlh-data
LAUNCH=$BINDIR/dlh-launch
PY=/usr/bin/python3  # Debian's, with PIL (python3-pil), numpy and h5py (python3-h5py)
FASHION=/usr/share/datasets/fashion-mnist  # dataset-fashion-mnist (install-deps.sh build)
export PYTHONDONTWRITEBYTECODE=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for tool in "$DATA" "$LAUNCH"; do
  [[ -x $tool ]] || { echo "FAIL: $tool is not an executable" >&2; exit 1; }
done
"$PY" -c 'import PIL, h5py, numpy' ||
  { echo "FAIL: $PY lacks PIL, h5py or numpy (python3-pil, python3-h5py)" >&2; exit 1; }
[[ -f $FASHION/train-images-idx3-ubyte.gz ]] ||
  { echo "FAIL: no $FASHION/train-images-idx3-ubyte.gz (dataset-fashion-mnist)" >&2; exit 1; }

source "$(dirname "$0")/data_common.bash"

# The tree: ROOT/{train,test}/{sneaker,trouser,tshirt}/NNN.{png,jpg} (Fashion-MNIST classes
# 7, 1, 0), 20 training and 5 test images per class. Image i is, by i % 5: a 28x28 grey PNG,
# a 28x28 RGB PNG (tinted, so grey is a real conversion), a 40x30 grey PNG (enlarged), a
# 28x28 RGB JPEG and a 40x30 grey JPEG (both lossy, so only shapes are checked for them).
check "write an ImageFolder tree with PIL"
"$PY" - "$FASHION" "$tmp/images" <<'EOF'
import gzip, os, sys
import numpy as np
from PIL import Image

src, root = sys.argv[1], sys.argv[2]
with gzip.open(os.path.join(src, "train-images-idx3-ubyte.gz")) as f:
    images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
with gzip.open(os.path.join(src, "train-labels-idx1-ubyte.gz")) as f:
    labels = np.frombuffer(f.read(), np.uint8, offset=8)
classes = {"sneaker": 7, "trouser": 1, "tshirt": 0}
for name, label in classes.items():
    picks = np.flatnonzero(labels == label)[:25]
    for split, chosen in (("train", picks[:20]), ("test", picks[20:])):
        folder = os.path.join(root, split, name)
        os.makedirs(folder)
        for i, k in enumerate(chosen):
            grey = Image.fromarray(images[k])
            rgb = Image.merge("RGB", (grey, grey.point(lambda v: v * 3 // 4),
                                      grey.point(lambda v: 255 - v)))
            kind = i % 5
            path = os.path.join(folder, "%03d" % i)
            if kind == 0:
                grey.save(path + ".png")
            elif kind == 1:
                rgb.save(path + ".png")
            elif kind == 2:
                grey.resize((30, 40), Image.BILINEAR).save(path + ".png")
            elif kind == 3:
                rgb.save(path + ".jpg", quality=95)
            else:
                grey.resize((30, 40), Image.BILINEAR).save(path + ".jpg", quality=95)
EOF

# Checks FILE (import with --channels $2) against the tree with h5py: shapes, dtype, labels in
# folder order, and the same-size PNGs exactly as PIL reads them (RGB -> grey: PIL's "L").
verify() {
  "$PY" - "$1" "$2" "$tmp/images" <<'EOF'
import os, sys
import h5py
import numpy as np
from PIL import Image

path, channels, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
errors = []
with h5py.File(path, "r") as f:
    for split, count in (("train", 60), ("test", 15)):
        images, labels = f[split + "/images"], f[split + "/labels"][()]
        if images.shape != (count, channels, 28, 28) or images.dtype != np.uint8:
            errors.append("%s/images is %s %s" % (split, images.shape, images.dtype))
            continue
        files = [(c, name) for c, cls in enumerate(sorted(os.listdir(os.path.join(root, split))))
                 for name in sorted(os.listdir(os.path.join(root, split, cls)))]
        want = [c for c, _ in files]
        if list(labels) != want:
            errors.append("%s/labels %s, expected %s" % (split, list(labels), want))
        data = images[()]
        exact = 0
        for i, (c, name) in enumerate(files):
            cls = sorted(os.listdir(os.path.join(root, split)))[c]
            image = Image.open(os.path.join(root, split, cls, name))
            if not name.endswith(".png") or image.size != (28, 28):
                continue
            mode = "L" if channels == 1 else "RGB"
            expected = np.asarray(image.convert(mode)).reshape(28, 28, channels).transpose(2, 0, 1)
            if not np.array_equal(data[i], expected):
                diff = np.abs(data[i].astype(int) - expected).max()
                errors.append("%s %s/%s: pixels differ from PIL's by up to %d" % (split, cls, name, diff))
            exact += 1
        if exact == 0:
            errors.append("%s: no same-size PNG compared" % split)
        print("      %s: %d images, %d same-size PNGs equal to PIL's" % (split, count, exact))
for e in errors:
    print("  FAIL: " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
EOF
}

for channels in 1 3; do
  out=$tmp/images$channels.h5
  check "import-images --channels $channels writes 60 train and 15 test images of ${channels}x28x28"
  "$DATA" import-images "$tmp/images/train" --test "$tmp/images/test" --out "$out" \
    --size 28x28 --channels "$channels" >"$tmp/out" || fail "import-images exited $?"
  sed 's/^/      /' "$tmp/out"
  "$DATA" inspect "$out" >"$tmp/inspect" || fail "inspect $out exited $?"
  sed 's/^/      /' "$tmp/inspect"
  grep -q '^classes   3$' "$tmp/inspect" || fail "inspect: no 'classes 3' line"
  grep -q "^train     60 samples of ${channels}x28x28\$" "$tmp/inspect" || fail "inspect: train"
  grep -q "^test      15 samples of ${channels}x28x28\$" "$tmp/inspect" || fail "inspect: test"
  check "the stored images and labels match the tree (h5py, PIL)"
  verify "$out" "$channels" || fail "$out does not match the tree"
done

check "a text file named .png fails with one line naming it"
cp -r "$tmp/images/train" "$tmp/text"
echo "not an image" >"$tmp/text/trouser/005.png"
expect_failure 1 "trouser/005.png: not a PNG or JPEG image" \
  "$DATA" import-images "$tmp/text" --out "$tmp/text.h5" --size 28x28
[[ ! -e $tmp/text.h5 ]] || fail "a data set was written despite the error"

check "files whose names are no image's are left out with one note; an image's name must hold an image"
cp -r "$tmp/images/train" "$tmp/stray"
echo "where these came from" >"$tmp/stray/trouser/notes.txt"
echo "label,file" >"$tmp/stray/tshirt/labels.CSV"
"$DATA" import-images "$tmp/stray" --out "$tmp/stray.h5" --size 28x28 >/dev/null 2>"$tmp/stray.err" ||
  fail "stray files: $(cat "$tmp/stray.err")"
grep -qx "dlh-data: note: $tmp/stray: left out 2 file(s) whose names are no image's (not .png, .jpg or .jpeg): trouser/notes.txt, tshirt/labels.CSV" "$tmp/stray.err" ||
  fail "stray files: no note naming them: $(cat "$tmp/stray.err")"
"$DATA" inspect "$tmp/stray.h5" | grep -q '^train     ' || fail "stray.h5 is not a data set"
sed 's/^/      /' "$tmp/stray.err"

check "a truncated JPEG fails with one line naming it"
cp -r "$tmp/images/train" "$tmp/cut"
jpeg=$tmp/cut/tshirt/003.jpg
head -c $(($(stat -c %s "$jpeg") / 2)) "$jpeg" >"$tmp/half" && mv "$tmp/half" "$jpeg"
expect_failure 1 "tshirt/003.jpg: corrupt JPEG data: Premature end of JPEG file" \
  "$DATA" import-images "$tmp/cut" --out "$tmp/cut.h5" --size 28x28 --channels 1

check "--out the image folder, or one of its images: refused before any image is decoded"
cp "$tmp/images/train/trouser/005.png" "$tmp/keep.png"
expect_failure 1 "import-images: --out: $tmp/images/train: is a folder, expected a file name" \
  "$DATA" import-images "$tmp/images/train" --out "$tmp/images/train" --size 28x28
expect_failure 1 "import-images: --out $tmp/images/train/trouser/005.png is an image of the input folder $tmp/images/train" \
  "$DATA" import-images "$tmp/images/train" --out "$tmp/images/train/trouser/005.png" --size 28x28
expect_failure 1 "is an image of the --test folder $tmp/images/test" \
  "$DATA" import-images "$tmp/images/train" --test "$tmp/images/test" --size 28x28 \
  --out "$tmp/images/test/$(ls "$tmp/images/test" | head -1)/$(ls "$tmp/images/test/$(ls "$tmp/images/test" | head -1)" | head -1)"
cmp -s "$tmp/images/train/trouser/005.png" "$tmp/keep.png" || fail "a refused import replaced an image"
! compgen -G "$tmp/images/train.tmp.*" >/dev/null || fail "a refused import left a temporary file"

check "the imported grey set trains for an epoch"
cat >"$tmp/spec.json" <<'JSON'
{
  "name": "images",
  "input": {"channels": 1, "height": 28, "width": 28},
  "classes": 3,
  "layers": [{"type": "flatten"}, {"type": "dense", "units": 16}, {"type": "relu"},
             {"type": "dense", "units": 3}],
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
  "batch_size": 10, "epochs": 1, "seed": 1, "dataset": "images1.h5"
}
JSON
rc=0
"$LAUNCH" train "$tmp/spec.json" --data "$tmp/images1.h5" --epochs 1 --run-dir "$tmp/run" \
  --threads 1 --progress none >"$tmp/train.out" 2>&1 || rc=$?
sed 's/^/      /' "$tmp/train.out" | tail -5
[[ $rc -eq 0 ]] || fail "dlh-launch train exited $rc"

check "--spec takes the size and channels from the spec's input: the same file as --size 28x28 --channels 1"
"$DATA" import-images "$tmp/images/train" --test "$tmp/images/test" --spec "$tmp/spec.json" \
  --out "$tmp/by-spec.h5" >/dev/null || fail "import-images --spec exited $?"
cmp -s <(h5dump -d /train/images -d /test/images -d /train/labels "$tmp/images1.h5" | tail -n +2) \
  <(h5dump -d /train/images -d /test/images -d /train/labels "$tmp/by-spec.h5" | tail -n +2) ||
  fail "--spec gave other images than --size 28x28 --channels 1"

if [[ $failures -ne 0 ]]; then
  echo "data_import_images: $failures failure(s)" >&2
  exit 1
fi
echo "data_import_images: all checks passed"
