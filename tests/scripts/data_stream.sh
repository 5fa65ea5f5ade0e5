#!/bin/bash
# Data sets larger than memory (launcher/data/file_source.hpp): `dlh-launch train --data-mode
# stream` reads each step's samples from the file and trains exactly as the in-memory loader
# does (the same checkpoints, bit for bit, on 2 ranks, evaluation included); its memory does
# not grow with the data set (197 MB of data add under 64 MB to a run's peak);
# --data-mode auto picks memory for a small set; a file it cannot stream from is one line.
source "$(dirname "$0")/common.bash"
PY=/usr/bin/python3  # Debian's, with numpy and h5py
export PYTHONDONTWRITEBYTECODE=1

spec() {  # spec H W CLASSES FILE
  cat >"$4" <<JSON
{
  "name": "stream",
  "input": {"channels": 1, "height": $1, "width": $2},
  "classes": $3,
  "layers": [
    {"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1},
    {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2},
    {"type": "flatten"},
    {"type": "dropout", "rate": 0.2},
    {"type": "dense", "units": $3}
  ],
  "optimizer": {"type": "adam", "lr": 0.003},
  "batch_size": 32,
  "epochs": 2,
  "seed": 5,
  "dataset": "data.h5"
}
JSON
}

# 1. The same training from memory and from the file: uint8 (imported) and float32 (synthetic).
"$PY" - "$WORK" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(3)
y = rng.integers(0, 4, size=1000)
x = rng.integers(0, 90, size=(1000, 12, 12), dtype=np.uint8)
for i, c in enumerate(y):
    x[i, 3 * c:3 * c + 3, :] += 150
np.save(f"{sys.argv[1]}/x.npy", x)
np.save(f"{sys.argv[1]}/y.npy", y)
PY
dlh-data import-numpy --train-images "$WORK/x.npy" --train-labels "$WORK/y.npy" --out "$WORK/u8.h5" >/dev/null
dlh-data synthetic --out "$WORK/f32.h5" --shape 1x12x12 --classes 4 --train 900 --test 100 --seed 2 >/dev/null
spec 12 12 4 "$WORK/spec.json"
for set in u8 f32; do
  for mode in memory stream; do
    mpirun -np 2 dlh-launch train "$WORK/spec.json" --data "$WORK/$set.h5" --data-mode $mode \
      --run-dir "$WORK/$set-$mode" --threads 1 --progress none 2>"$WORK/$set-$mode.log" ||
      { cat "$WORK/$set-$mode.log" >&2; fail "$set, --data-mode $mode: training failed"; }
  done
  a=$(ls "$WORK/$set-memory/checkpoints"/ckpt-*.h5 | tail -1)
  b=$(ls "$WORK/$set-stream/checkpoints"/ckpt-*.h5 | tail -1)
  [[ $(basename "$a") == $(basename "$b") ]] || fail "$set: last checkpoints $a and $b differ in step"
  h5diff "$a" "$b" /params >/dev/null || fail "$set: parameters differ between memory and stream"
  h5diff "$a" "$b" /optimizer >/dev/null || fail "$set: optimizer state differs between memory and stream"
  grep -h '"test_accuracy"' "$WORK/$set-memory/metrics.jsonl" | sed 's/.*"test_accuracy": *\([0-9.]*\).*/\1/' >"$WORK/acc-m"
  grep -h '"test_accuracy"' "$WORK/$set-stream/metrics.jsonl" | sed 's/.*"test_accuracy": *\([0-9.]*\).*/\1/' >"$WORK/acc-s"
  cmp -s "$WORK/acc-m" "$WORK/acc-s" && [[ -s $WORK/acc-m ]] || fail "$set: test accuracies differ: $(paste -sd' ' "$WORK/acc-m") vs $(paste -sd' ' "$WORK/acc-s")"
  check "$set: 2 ranks, memory and stream end with the same parameters and optimizer state ($(basename "$a")), test accuracy by epoch $(paste -sd' ' "$WORK/acc-s") in both"
done

# 2. Memory stays bounded: a 1x64x64 uint8 set of 48000 samples (197 MB on disk, 786 MB as
# the floats memory mode holds) trains 30 steps in stream mode with at most 64 MB of resident
# memory more than the same run on a 200-sample set of that shape (the process's own
# baseline: MPI, OpenBLAS, HDF5 and their buffers, about 240 MB here).
"$PY" - "$WORK" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(4)
np.save(f"{sys.argv[1]}/bx.npy", rng.integers(0, 256, size=(48000, 64, 64), dtype=np.uint8))
np.save(f"{sys.argv[1]}/by.npy", rng.integers(0, 4, size=48000))
PY
dlh-data import-numpy --train-images "$WORK/bx.npy" --train-labels "$WORK/by.npy" --out "$WORK/big.h5" >/dev/null
rm -f "$WORK/bx.npy" "$WORK/by.npy"
dlh-data synthetic --out "$WORK/tiny.h5" --shape 1x64x64 --classes 4 --train 200 --test 10 >/dev/null
spec 64 64 4 "$WORK/big.json"
size_mb=$(($(stat -c %s "$WORK/big.h5") / 1000000))
peak_mb() {  # peak_mb DATA MODE: the run's peak resident memory in MB
  /usr/bin/time -f "%M" -o "$WORK/rss" dlh-launch train "$WORK/big.json" --data "$1" \
    --data-mode "$2" --run-dir "$WORK/big-$2-$(basename "$1")" --threads 1 --progress none \
    --max-steps 30 --no-eval 2>"$WORK/big.log" || { cat "$WORK/big.log" >&2; fail "$1, $2: training failed"; }
  echo $(($(tail -1 "$WORK/rss") / 1000))
}
base=$(peak_mb "$WORK/tiny.h5" memory)
stream=$(peak_mb "$WORK/big.h5" stream)
memory=$(peak_mb "$WORK/big.h5" memory)
((stream - base < 64)) ||
  fail "stream mode: peak $stream MB on a $size_mb MB data set, $((stream - base)) MB over the $base MB baseline (limit 64)"
((memory - base > size_mb)) || fail "memory mode: only $((memory - base)) MB over the baseline: the comparison is void"
check "a $size_mb MB data set: peak resident memory $stream MB streaming, $memory MB in memory, $base MB on a 200-sample set"

# 3. auto streams only what does not fit: a small set is loaded.
"$PY" - "$WORK" <<'PY'
import sys, h5py, numpy as np
# h5py's chunked layout (chunks=True), which the stream reader refuses rather than decode.
with h5py.File(f"{sys.argv[1]}/u8.h5") as src, h5py.File(f"{sys.argv[1]}/chunked.h5", "w") as out:
    for k, v in src.attrs.items():
        out.attrs[k] = v
    for split in ("train", "test"):
        out.create_dataset(f"{split}/images", data=src[f"{split}/images"][()], chunks=True)
        out[f"{split}/labels"] = src[f"{split}/labels"][()]
PY
dlh-launch train "$WORK/spec.json" --data "$WORK/chunked.h5" --run-dir "$WORK/auto" --threads 1 \
  --progress none --max-steps 3 --no-eval 2>"$WORK/auto.log" ||
  { cat "$WORK/auto.log" >&2; fail "--data-mode auto did not load a small chunked set into memory"; }
check "--data-mode auto loads a small (chunked) set into memory"
expect_fail 2 "chunked.h5: /train/images is not stored contiguously (chunked or compressed)" \
  dlh-launch train "$WORK/spec.json" --data "$WORK/chunked.h5" --data-mode stream \
  --run-dir "$WORK/refused" --threads 1 --progress none
expect_fail 2 "--data-mode: expected auto, memory or stream, got 'disk'" \
  dlh-launch train "$WORK/spec.json" --data-mode disk
echo "data_stream.sh: all checks passed"
