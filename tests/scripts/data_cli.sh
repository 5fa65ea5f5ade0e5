#!/bin/bash
# End-to-end checks of the dlh-data command line: generate, inspect, and the exit status
# and one-line message of each kind of failure. Run by `make check-scripts` with BINDIR
# set to the build's bin folder.
set -euo pipefail

BINDIR=${BINDIR:?BINDIR must name the folder holding dlh-data}
DATA=$BINDIR/dlh-data
[[ -x $DATA ]] || { echo "FAIL: $DATA is not an executable" >&2; exit 1; }

source "$(dirname "$0")/data_common.bash"

check "synthetic writes a data set and a summary line"
out=$("$DATA" synthetic --out "$tmp/syn.h5" --shape 3x8x6 --classes 5 --train 100 --test 20 \
  --seed 3)
echo "      $out"
[[ $out == "wrote $tmp/syn.h5: 100 train, 20 test, 3x8x6, 5 classes" ]] ||
  fail "unexpected summary: $out"
! compgen -G "$tmp/syn.h5.tmp*" >/dev/null ||
  fail "temporary file left behind: $(compgen -G "$tmp/syn.h5.tmp*")"

check "inspect validates it and prints classes, shapes and the label histogram"
"$DATA" inspect "$tmp/syn.h5" >"$tmp/inspect"
sed 's/^/      /' "$tmp/inspect"
grep -q '^classes   5$' "$tmp/inspect" || fail "inspect: no 'classes 5' line"
grep -q '^train     100 samples of 3x8x6$' "$tmp/inspect" || fail "inspect: no train line"
grep -q '^test      20 samples of 3x8x6$' "$tmp/inspect" || fail "inspect: no test line"
grep -q ' 0:20 1:20 2:20 3:20 4:20$' "$tmp/inspect" || fail "inspect: wrong train histogram"

check "the same seed gives the same data (h5dump of the datasets)"
"$DATA" synthetic --out "$tmp/again.h5" --shape 3x8x6 --classes 5 --train 100 --test 20 \
  --seed 3 >/dev/null
cmp -s <(h5dump -d /train/images -d /train/labels "$tmp/syn.h5" | tail -n +2) \
  <(h5dump -d /train/images -d /train/labels "$tmp/again.h5" | tail -n +2) ||
  fail "same seed, different /train data"

check "h5dump -H shows /train/images as N x C x H x W"
h5dump -H "$tmp/syn.h5" >"$tmp/header"
grep -q 'DATASET "images"' "$tmp/header" || fail "h5dump -H: no images dataset"
h5dump -H -d /train/images "$tmp/syn.h5" | grep -q 'DATASPACE  SIMPLE { ( 100, 3, 8, 6 )' ||
  fail "h5dump: /train/images is not 100 x 3 x 8 x 6"

check "--help documents every command's options"
"$DATA" --help | grep -q 'import-fashion-mnist' || fail "dlh-data --help"
"$DATA" synthetic --help >"$tmp/help"
for opt in --out --shape --classes --train --test --seed --help; do
  grep -q -- "$opt" "$tmp/help" || fail "synthetic --help does not mention $opt"
done
"$DATA" import-fashion-mnist --help | grep -q -- '--source' || fail "import --help"
"$DATA" inspect --help | grep -q -- 'FILE' || fail "inspect --help"

check "bad command lines exit 2 with one line"
expect_failure 2 "unrecognised option '--bogus'" "$DATA" synthetic --bogus 1
expect_failure 2 "--shape" "$DATA" synthetic --out "$tmp/x.h5" --shape 3x32 --classes 2 \
  --train 4 --test 1
expect_failure 2 "--classes" "$DATA" synthetic --out "$tmp/x.h5" --shape 1x2x2 --classes 1 \
  --train 4 --test 1
expect_failure 2 "'--out' is required" "$DATA" synthetic --shape 1x2x2 --classes 2 --train 4 \
  --test 1
expect_failure 2 "unknown command 'frobnicate'" "$DATA" frobnicate
expect_failure 2 "missing command" "$DATA"
expect_failure 2 "missing FILE" "$DATA" inspect
[[ ! -e $tmp/x.h5 ]] || fail "a rejected command line wrote $tmp/x.h5"

check "bad files exit 1 with one line naming the file"
echo "not hdf5" >"$tmp/text.h5"
expect_failure 1 "$tmp/text.h5: not an HDF5 file" "$DATA" inspect "$tmp/text.h5"
head -c 3000 "$tmp/syn.h5" >"$tmp/cut.h5"
expect_failure 1 "$tmp/cut.h5" "$DATA" inspect "$tmp/cut.h5"
expect_failure 1 "$tmp/missing.h5: cannot open" "$DATA" inspect "$tmp/missing.h5"
expect_failure 1 "$tmp/nowhere: cannot open folder" "$DATA" import-fashion-mnist --out "$tmp/fm.h5" \
  --source "$tmp/nowhere"
expect_failure 1 "$tmp/no-dir/x.h5" "$DATA" synthetic --out "$tmp/no-dir/x.h5" --shape 1x2x2 \
  --classes 2 --train 4 --test 1

check "--out a folder, or an input, is refused before the work, nothing written"
mkdir "$tmp/outdir" "$tmp/fm"
expect_failure 1 "synthetic: --out: $tmp/outdir: is a folder, expected a file name" \
  "$DATA" synthetic --out "$tmp/outdir" --shape 1x2x2 --classes 2 --train 4 --test 1
echo "idx" >"$tmp/fm/train-labels-idx1-ubyte.gz"
expect_failure 1 "import-fashion-mnist: --out $tmp/fm/train-labels-idx1-ubyte.gz is the input file (write to another file)" \
  "$DATA" import-fashion-mnist --out "$tmp/fm/train-labels-idx1-ubyte.gz" --source "$tmp/fm"
[[ -z $(ls "$tmp/outdir") && $(cat "$tmp/fm/train-labels-idx1-ubyte.gz") == idx ]] ||
  fail "a refused command wrote or replaced a file"

if ((failures > 0)); then
  echo "data_cli.sh: $failures check(s) failed" >&2
  exit 1
fi
echo "data_cli.sh: all checks passed"
