#!/bin/bash
# A network suggested for a data set and sized to a deadline (issue 45): `dlh-estimate
# suggest --data FILE --deadline T` on the real Fashion-MNIST (dlh-data import-fashion-mnist)
# and the local cluster description (share/cluster/local.json):
#   1. 10 minutes: a VGG-style CNN, the largest member the table shows meeting the deadline,
#      a spec dlh-launch trains (a few steps) and `dlh-estimate recommend` plans within it;
#   2. 4 hours picks a larger member; objective energy the family's base member;
#   3. flat features get an MLP;
#   4. bad input: a deadline nothing meets (exit 3, nothing written), a training split of
#      one class, a file that is not a data set, bad options: one line each, nothing written.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLUSTER=$ROOT/share/cluster/local.json
[[ -d /usr/share/datasets/fashion-mnist ]] || fail "no Fashion-MNIST (make check installs dataset-fashion-mnist)"
dlh-data import-fashion-mnist --out "$WORK/fm.h5" --source /usr/share/datasets/fashion-mnist >/dev/null

echo "1. Fashion-MNIST, 10 minutes"
dlh-estimate suggest --data "$WORK/fm.h5" --deadline 10m --cluster "$CLUSTER" --out "$WORK/s10.json" \
  2>"$WORK/s10.txt" || { cat "$WORK/s10.txt" >&2; fail "suggest --deadline 10m"; }
grep -q "^suggest: family: images, so a VGG-style CNN" "$WORK/s10.txt" || { cat "$WORK/s10.txt" >&2; fail "no CNN family"; }
python3 - "$WORK/s10.txt" "$WORK/s10.json" "$WORK/fm.h5" <<'PY' || { cat "$WORK/s10.txt" >&2; fail "the choice"; }
import json, sys
rows = [l.split("|")[1:-1] for l in open(sys.argv[1]) if l.startswith("| ") and "member" not in l]
chosen = [i for i, r in enumerate(rows) if r[0].strip().startswith("**")]
assert len(chosen) == 1, rows
feasible = [r[5].strip() == "yes" for r in rows]
assert feasible == [i <= chosen[0] for i in range(len(rows))], (feasible, chosen)
spec = json.load(open(sys.argv[2]))
assert spec["dataset"] == sys.argv[3] and spec["classes"] == 10 and spec["epochs"] == 10, spec
print(f"  ok: 10m: {rows[chosen[0]][0].strip()} of {len(rows)}, predicted {rows[chosen[0]][2].strip()}; "
      f"the larger ones miss it")
PY
check "$(grep '^suggest: chosen' "$WORK/s10.txt" | cut -c1-160)"
dlh-estimate recommend "$WORK/s10.json" --samples 60000 --deadline 10m --cluster "$CLUSTER" --json \
  >"$WORK/plan.json" 2>"$WORK/plan.err" || { cat "$WORK/plan.err" >&2; fail "recommend the suggested spec"; }
dlh-launch train "$WORK/s10.json" --run-dir "$WORK/run" --max-steps 3 --threads 1 --progress none \
  >"$WORK/train.txt" 2>&1 || { cat "$WORK/train.txt" >&2; fail "dlh-launch train the suggested spec"; }
check "the suggested spec is planned within 10m by recommend and trains (3 steps)"

echo "2. a longer deadline, objective energy"
dlh-estimate suggest --data "$WORK/fm.h5" --deadline 4h --cluster "$CLUSTER" >"$WORK/s4h.json" 2>"$WORK/s4h.txt" ||
  { cat "$WORK/s4h.txt" >&2; fail "suggest --deadline 4h"; }
dlh-estimate suggest --data "$WORK/fm.h5" --deadline 4h --objective energy --cluster "$CLUSTER" \
  >"$WORK/se.json" 2>"$WORK/se.txt" || { cat "$WORK/se.txt" >&2; fail "suggest --objective energy"; }
python3 - "$WORK/s10.json" "$WORK/s4h.json" "$WORK/se.json" <<'PY' || fail "longer deadline / energy"
import json, sys
def params(path):
    return sum(l.get("filters", 0) for l in json.load(open(path))["layers"])
s10, s4h, se = map(params, sys.argv[1:4])
assert s4h > s10, (s10, s4h)
first = json.load(open(sys.argv[3]))["layers"]
assert first[0]["filters"] == 32 and sum(l["type"] == "conv2d" for l in first) == 2, first
print(f"  ok: 4h: conv filters {s4h} (10m: {s10}); energy: the 32-filter base member")
PY

echo "3. flat features"
dlh-data synthetic --out "$WORK/flat.h5" --shape 24x1x1 --classes 3 --train 600 --test 60 >/dev/null
dlh-estimate suggest --data "$WORK/flat.h5" --deadline 10m --cluster "$CLUSTER" >"$WORK/flat.json" 2>"$WORK/flat.txt" ||
  { cat "$WORK/flat.txt" >&2; fail "suggest on flat features"; }
grep -q "^suggest: family: flat features, so an MLP" "$WORK/flat.txt" || { cat "$WORK/flat.txt" >&2; fail "no MLP"; }
dlh-launch train "$WORK/flat.json" --run-dir "$WORK/flatrun" --max-steps 3 --threads 1 --progress none \
  >"$WORK/flattrain.txt" 2>&1 || { cat "$WORK/flattrain.txt" >&2; fail "train the MLP"; }
check "flat features: an MLP, batch $(python3 -c "import json; print(json.load(open('$WORK/flat.json'))['batch_size'])"), trains"

echo "4. bad input"
expect_fail 3 "none of the 8 members meets the 1s deadline: the smallest, CNN 8 filters" \
  dlh-estimate suggest --data "$WORK/fm.h5" --deadline 1s --cluster "$CLUSTER" --out "$WORK/none.json"
[[ ! -e $WORK/none.json ]] || fail "an infeasible suggestion wrote its spec"
/usr/bin/python3 -c "
import numpy as np
np.savez('$WORK/one.npz', x_train=np.random.rand(40, 8, 8).astype('float32'), y_train=np.zeros(40, dtype='int64'),
         x_test=np.random.rand(8, 8, 8).astype('float32'), y_test=np.zeros(8, dtype='int64'))"
dlh-data import-numpy --npz "$WORK/one.npz" --out "$WORK/one.h5" >/dev/null
expect_fail 2 "one.h5: the training labels hold 1 class (0) of 2: a classifier needs samples of at least 2" \
  dlh-estimate suggest --data "$WORK/one.h5" --deadline 10m --cluster "$CLUSTER"
expect_fail 2 "not an HDF5 file" dlh-estimate suggest --data "$CLUSTER" --deadline 10m --cluster "$CLUSTER"
expect_fail 2 "suggest: --deadline is required" dlh-estimate suggest --data "$WORK/fm.h5" --cluster "$CLUSTER"
expect_fail 2 "suggest: --objective: accuracy or energy, got 'speed'" \
  dlh-estimate suggest --data "$WORK/fm.h5" --deadline 1h --objective speed --cluster "$CLUSTER"
