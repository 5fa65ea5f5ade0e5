#!/bin/bash
# dlh-data stage (issue 19): a data set copied to a node-local folder, checksummed and read
# back; skipped when current; copied again when the source changed or (--verify) the copy is
# damaged; %n naming the node; a disk that fills, a missing or non-regular source and bad
# options each give one line and leave no file under the data set's name (a previous good
# copy untouched).
source "$(dirname "$0")/common.bash"
unset SLURMD_NODENAME

dlh-data synthetic --out "$WORK/d.h5" --shape 1x28x28 --classes 10 --train 4000 --test 100 >/dev/null
export SLURMD_NODENAME=node7
dlh-data stage "$WORK/d.h5" --to "$WORK/local/%n" >"$WORK/out.txt" || fail "stage failed"
grep -q "^staged $WORK/d.h5 on node7: $WORK/local/node7/d.h5, .* MB in .* s (.* MB/s, read back and checked), crc32 [0-9a-f]\{8\}$" "$WORK/out.txt" ||
  { cat "$WORK/out.txt"; fail "no 'staged' line"; }
cmp "$WORK/d.h5" "$WORK/local/node7/d.h5" || fail "the copy differs"
dlh-data inspect "$WORK/local/node7/d.h5" >/dev/null || fail "the copy is not a data set"
[[ -z $(find "$WORK/local/node7" -name '*.tmp*') ]] || fail "a temporary file is left"
check "$(cat "$WORK/out.txt")"

dlh-data stage "$WORK/d.h5" --to "$WORK/local/%n" >"$WORK/out.txt"
grep -q "^already staged .* unchanged (crc32 [0-9a-f]*)$" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "not skipped"; }
check "a second call: $(cat "$WORK/out.txt")"

# A damaged copy (same size) is found by --verify and staged again.
printf 'X' | dd of="$WORK/local/node7/d.h5" bs=1 seek=1000 conv=notrunc status=none
dlh-data stage "$WORK/d.h5" --to "$WORK/local/%n" --verify >"$WORK/out.txt"
grep -q "^staged " "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "a damaged copy was not staged again"; }
cmp -s "$WORK/d.h5" "$WORK/local/node7/d.h5" || fail "the copy still differs"
check "a damaged copy, --verify: staged again"

# The source changed: staged again.
touch -d '1 minute ago' "$WORK/d.h5"
dlh-data stage "$WORK/d.h5" --to "$WORK/local/%n" >"$WORK/out.txt"
grep -q "^staged " "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "a changed source was not staged again"; }
check "a changed source: staged again"

# Bad input: one line each, exit code 1 (the data) or 2 (the command line).
expect_fail 1 "^dlh-data: $WORK/none.h5: cannot read: No such file or directory$" dlh-data stage "$WORK/none.h5" --to "$WORK/x"
expect_fail 1 "^dlh-data: $WORK: cannot stage: not a regular file$" dlh-data stage "$WORK" --to "$WORK/x"
expect_fail 2 "^dlh-data: stage: missing FILE, the data set to stage (see 'dlh-data stage --help')$" dlh-data stage --to "$WORK/x"
expect_fail 2 "^dlh-data: stage: --to: $WORK/x-%j: %j is the Slurm job's id, and SLURM_JOB_ID is not set (not inside a job)" \
  env -u SLURM_JOB_ID dlh-data stage "$WORK/d.h5" --to "$WORK/x-%j"
# %u and %j name the user's and the job's folder.
SLURM_JOB_ID=4711 dlh-data stage "$WORK/d.h5" --to "$WORK/local/%u-%j" >"$WORK/out.txt"
[[ -f "$WORK/local/$(id -un)-4711/d.h5" ]] || { cat "$WORK/out.txt"; fail "%u-%j was not expanded"; }
check "--to DIR/%u-%j: $WORK/local/$(id -un)-4711"

# A disk that fills: a 1 MiB tmpfs (needs root to mount); the good copy from before stays.
if [[ $(id -u) -eq 0 ]] && mkdir -p "$WORK/small" && mount -t tmpfs -o size=1m,mode=0700 tmpfs "$WORK/small" 2>/dev/null; then
  trap 'umount "$WORK/small" 2>/dev/null; rm -rf "$WORK"' EXIT
  expect_fail 1 "^dlh-data: $WORK/small/d.h5: the disk is full after [0-9]* of [0-9]* bytes$" \
    dlh-data stage "$WORK/d.h5" --to "$WORK/small"
  [[ -z $(ls -A "$WORK/small") ]] || { ls -la "$WORK/small"; fail "a full disk left files"; }
  check "nothing left on the full disk"
else
  [[ ${REQUIRE_SLURM:-0} == 0 ]] || fail "cannot mount a tmpfs to fill (root needed)"
  echo "  skip: the full-disk case needs root (mount -t tmpfs)"
fi
