#!/bin/bash
# A disk that fills with checkpoints: a 3 MiB tmpfs holds three checkpoints of a small CNN
# (about 0.8 MiB each) and not a fourth. The run must end as a checkpoint failure (exit 3,
# one line naming the file and the space), not a crash: before, HDF5's write failed for want
# of space, its file could not be closed, and the rank died with SIGSEGV in MPI_Finalize
# (exit 139, which the example job script requeues; 2026-12-07). The three checkpoints stay
# valid, no temporary file is left, and with room made the run resumes from the newest and
# ends with the parameters of a run that never stopped. Needs root (mount -t tmpfs).
source "$(dirname "$0")/common.bash"

if [[ $(id -u) -ne 0 ]]; then
  [[ ${REQUIRE_SLURM:-0} == 0 ]] || fail "cannot mount a tmpfs to fill (root needed)"
  echo "  skip: the full disk needs root (mount -t tmpfs)"
  exit 0
fi
mkdir -p "$WORK/disk"
mount -t tmpfs -o size=3m tmpfs "$WORK/disk" || fail "cannot mount a tmpfs"
trap 'umount "$WORK/disk" 2>/dev/null; rm -rf "$WORK"' EXIT

cat >"$WORK/small.json" <<'JSON'
{"name": "small", "input": {"channels": 1, "height": 28, "width": 28}, "classes": 10,
 "layers": [{"type": "conv2d", "filters": 8, "kernel": 3, "stride": 1, "padding": 1},
            {"type": "relu"}, {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"},
            {"type": "dense", "units": 64}, {"type": "relu"}, {"type": "dense", "units": 10}],
 "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
 "batch_size": 64, "epochs": 2, "seed": 1, "dataset": "d.h5"}
JSON
dlh-data synthetic --out "$WORK/d.h5" --shape 1x28x28 --classes 10 --train 2048 --test 128 \
  --seed 3 >/dev/null
train=(mpirun -np 2 dlh-launch train "$WORK/small.json" --data "$WORK/d.h5" --progress none
  --checkpoint-steps 10 --no-epoch-checkpoints)

rc=0
"${train[@]}" --run-dir "$WORK/disk/run" >"$WORK/full.txt" 2>&1 || rc=$?
((rc == 3)) || { cat "$WORK/full.txt"; fail "a full disk ended the run with exit $rc, not 3"; }
line=$(grep -E "^dlh-launch: error: $WORK/disk/run/checkpoints/ckpt-[0-9]+\.h5: no space for it in $WORK/disk/run/checkpoints" \
  "$WORK/full.txt" || true)
[[ -n $line ]] || { cat "$WORK/full.txt"; fail "no line naming the checkpoint and the space"; }
! grep -qiE "segmentation|crashed|signal" "$WORK/full.txt" || { cat "$WORK/full.txt"; fail "a crash"; }
kept=("$WORK"/disk/run/checkpoints/ckpt-*.h5)
((${#kept[@]} == 3)) || fail "expected the 3 checkpoints that fit, found ${#kept[@]}"
[[ -z $(find "$WORK/disk" -name '*.tmp.*') ]] || fail "a temporary file is left: $(find "$WORK/disk" -name '*.tmp.*')"
check "${line#dlh-launch: error: } (exit 3; ${#kept[@]} checkpoints kept, no temporary file)"

# Room made: the run resumes from the newest checkpoint and ends as one that never stopped.
mount -o remount,size=64m "$WORK/disk" || fail "cannot grow the tmpfs"
"${train[@]}" --run-dir "$WORK/disk/run" >"$WORK/resumed.txt" 2>&1 || { cat "$WORK/resumed.txt"; fail "the resumed run failed"; }
grep -q "resumed from ${kept[2]}" "$WORK/resumed.txt" || { cat "$WORK/resumed.txt"; fail "did not resume from ${kept[2]}"; }
"${train[@]}" --run-dir "$WORK/straight" >"$WORK/straight.txt" 2>&1 || { cat "$WORK/straight.txt"; fail "the straight run failed"; }
a=$(json_field "$WORK/straight/summary.json" param_crc32)
b=$(json_field "$WORK/disk/run/summary.json" param_crc32)
[[ $a == "$b" ]] || fail "resumed param_crc32 $b, straight $a"
check "with room made it resumes from $(basename "${kept[2]}") and ends as a straight run (param_crc32 $a)"
echo "checkpoint_full_disk.sh: all checks passed"
