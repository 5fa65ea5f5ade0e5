#!/bin/bash
# A plan with "lr_source": "find" (sbatch --dlh-auto=...,lr=find): dlh-launch train runs the
# range test on its ranks before training, stores it, trains with the suggestion and says so
# (start line, summary.json, RUN_DIR/lr.json); a second job with the same spec and batch reuses
# the stored result without a sweep; a resumed run keeps the rate its folder recorded;
# `lr-find --store` writes where train looks; bad inputs give one line and exit code 2.
source "$(dirname "$0")/common.bash"
cd "$WORK"

dlh-data synthetic --out s.h5 --shape 1x8x8 --classes 4 --train 2000 --test 100 --seed 5 >/dev/null
cat >spec.json <<'JSON'
{"name": "tiny", "input": {"channels": 1, "height": 8, "width": 8}, "classes": 4,
 "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1}, {"type": "batchnorm"},
            {"type": "relu"}, {"type": "flatten"}, {"type": "dense", "units": 4}],
 "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9}, "batch_size": 16, "epochs": 1,
 "seed": 3, "dataset": "s.h5"}
JSON
plan() { echo "{\"format_version\": 1, \"global_batch\": $1, \"lr\": 0.2, \"lr_source\": \"${2:-find}\"}"; }
train() {  # RUN_DIR BATCH [options]: 2 ranks under the plan for BATCH
  local dir=$1 batch=$2; shift 2
  DLH_PLAN=$(plan "$batch") mpirun -np 2 "$BINDIR/dlh-launch" train spec.json --threads 1 \
    --run-dir "$dir" --progress none --no-epoch-checkpoints --checkpoint-seconds 0 "$@" 2>&1
}
py() { python3 -c "import json, sys; $1" "${@:2}"; }
summary_lr() { py "print(json.load(open(sys.argv[1]))['lr'])" "$1/summary.json"; }

echo "no stored result: the job sweeps on its 2 ranks, stores it and trains with the suggestion"
train runs/a 32 >a.txt
grep -q "^dlh-launch: lr [0-9.]* for batch 32 from lr-find runs/lr-find-[0-9a-f]*-b32.json: no stored range test, so it ran now" a.txt \
  || { cat a.txt; fail "no line saying where the rate came from"; }
grep -q "lr-find tiny on 2 rank(s)" a.txt || fail "the sweep did not run on 2 ranks"
stored=$(ls runs/lr-find-*-b32.json)
[[ $(echo "$stored" | wc -l) -eq 1 && -f ${stored%.json}.svg ]] || fail "not one stored result with its plot"
found=$(py "s = json.load(open(sys.argv[1]))['suggestion']; assert s['status'] == 'ok', s; print(s['lr'])" "$stored")
# 2000 samples hold 62 batches of 32: 61 rates (and the loss before them), not the default 100.
[[ $(py "print(json.load(open(sys.argv[1]))['sweep']['steps'])" "$stored") == 61 ]] || fail "sweep not fitted to one epoch"
check "stored $stored: suggestion $found, sweep fitted to one epoch (61 steps)"
py "s = json.load(open(sys.argv[1])); assert abs(s['lr'] - $found) < 1e-12 * $found, s['lr']
assert s['lr_source'] == 'lr-find $stored', s['lr_source']" runs/a/summary.json || fail "summary.json"
py "r = json.load(open(sys.argv[1])); assert r['batch'] == 32 and abs(r['lr'] - $found) < 1e-12 * $found, r" \
  runs/a/lr.json || fail "runs/a/lr.json"
grep -q "^dlh-launch: plan: global batch 32, lr [0-9.]* (lr-find $stored)" a.txt || { cat a.txt; fail "start line"; }
check "trained with it: summary.json lr_source 'lr-find $stored', runs/a/lr.json, start line"

echo "the same spec and batch again: the stored result, no sweep"
sum=$(md5sum <"$stored")
train runs/b 32 >b.txt
! grep -q "lr-find tiny on" b.txt || fail "swept again"
grep -q "from lr-find $stored (stored)" b.txt || { cat b.txt; fail "no 'stored' line"; }
[[ $(summary_lr runs/b) == $(summary_lr runs/a) && $(md5sum <"$stored") == "$sum" ]] || fail "other rate or rewritten"
check "runs/b used $stored as it was"

echo "a resumed run keeps its recorded rate; a new one takes the stored result as it is now"
py "r = json.load(open(sys.argv[1])); r['suggestion']['lr'] = 0.0123; json.dump(r, open(sys.argv[1], 'w'))" "$stored"
train runs/a 32 >a2.txt
grep -q "kept from runs/a/lr.json" a2.txt || { cat a2.txt; fail "resume did not keep the rate"; }
[[ $(summary_lr runs/a) == "$found" ]] || fail "resume changed the rate"
train runs/c 32 >c.txt
[[ $(summary_lr runs/c) == 0.0123 ]] || fail "runs/c did not take the stored 0.0123"
check "runs/a kept $found, runs/c took the stored 0.0123"

echo "lr-find --store beforehand; DLH_LR_CACHE points train at it"
dlh-launch lr-find spec.json --threads 1 --batch 16 --steps 40 --store cache >store.txt
cached=$(ls cache/lr-find-*-b16.json)
grep -q "; $cached, plot" store.txt || { cat store.txt; fail "--store did not write $cached"; }
DLH_LR_CACHE=cache train runs/d 16 >d.txt
! grep -q "lr-find tiny on" d.txt || fail "swept although $cached was there"
[[ $(summary_lr runs/d) == $(py "print(json.load(open(sys.argv[1]))['suggestion']['lr'])" "$cached") ]] || fail "rate"
check "runs/d trained with $cached"

echo "a stored test that found no minimum: the plan's linear-scaled rate, with a warning"
py "r = json.load(open(sys.argv[1])); r['batch'] = 48
r['suggestion'] = {'status': 'no_clear_minimum', 'lr': None, 'note': 'flat'}
json.dump(r, open(sys.argv[2], 'w'))" "$stored" "${stored/-b32/-b48}"
train runs/j 48 >j.txt
grep -q "^dlh-launch: warning: lr 0.2 from the plan, linear scaling: lr-find ${stored/-b32/-b48} found no clear minimum (flat)" j.txt \
  || { cat j.txt; fail "no warning"; }
! grep -q "lr-find tiny on" j.txt || fail "swept although a result was stored"
[[ $(summary_lr runs/j) == 0.2 ]] || fail "not the plan's rate"
check "lr 0.2 and a warning naming ${stored/-b32/-b48}"

echo "another user's file in a shared runs folder: ignored, and the test's result kept in the run's folder"
mkdir -m 1777 shared
planted=shared/$(basename "$stored")
py "r = json.load(open(sys.argv[1])); r['suggestion']['lr'] = 1000; json.dump(r, open(sys.argv[2], 'w'))" "$stored" "$planted"
chmod 666 "$planted"  # writable by others: not this user's own (as root, chown would be the same)
sum=$(md5sum <"$planted")
train shared/k 32 >k.txt || { cat k.txt; fail "a planted file stopped the job"; }
grep -q "^dlh-launch: warning: $planted: writable by its group or others: ignored; the range test's result goes to shared/k/$(basename "$stored")$" k.txt ||
  { cat k.txt; fail "no warning naming the planted file and where the result goes"; }
grep -q "lr-find tiny on 2 rank(s)" k.txt || fail "the sweep did not run"
[[ -f shared/k/$(basename "$stored") && $(md5sum <"$planted") == "$sum" ]] || fail "the result was not kept in shared/k, or the planted file changed"
py "s = json.load(open(sys.argv[1])); assert s['lr'] != 1000 and s['lr_source'] == 'lr-find shared/k/$(basename "$stored")', s" \
  shared/k/summary.json || fail "trained with the planted rate"
check "planted lr 1000 ignored; swept, stored in shared/k, trained with its own rate"

echo "no plan key, or linear: linear scaling, no sweep"
DLH_PLAN=$(plan 32 linear) dlh-launch train spec.json --threads 1 --run-dir runs/e --progress none \
  --no-epoch-checkpoints --checkpoint-seconds 0 >e.txt 2>&1
py "s = json.load(open(sys.argv[1])); assert s['lr'] == 0.2 and s['lr_source'] == 'plan, linear scaling', s" \
  runs/e/summary.json || fail "linear plan"
[[ ! -e runs/e/lr.json ]] || fail "a linear plan wrote lr.json"
check "lr 0.2 from the plan's linear scaling"

echo "bad input: one line, exit 2"
one_line() { [[ $(wc -l <"$WORK/err.txt") -eq 1 ]] || { cat "$WORK/err.txt" >&2; fail "not one line"; }; }
run1() { DLH_PLAN=$1 dlh-launch train spec.json --threads 1 --run-dir "$2" --progress none "${@:3}"; }
expect_fail 2 '^dlh-launch: error: DLH_PLAN: lr_source: must be "find" or "linear", got "foo"$' \
  run1 "$(plan 32 foo)" runs/f
one_line
[[ ! -e runs/f ]] || fail "a bad plan created its run folder"
mkdir -p bad && echo "{" >"bad/$(basename "${cached/-b16/-b64}")"
expect_fail 2 "^dlh-launch: error: bad/lr-find-[0-9a-f]*-b64.json: " env DLH_LR_CACHE=bad \
  DLH_PLAN="$(plan 64)" dlh-launch train spec.json --threads 1 --run-dir runs/g --progress none
one_line
mkdir -p runs/h && echo '{"lr": -1, "batch": 32, "source": "x"}' >runs/h/lr.json
expect_fail 2 '^dlh-launch: error: runs/h/lr.json: lr: must be a positive number, got -1$' run1 "$(plan 32)" runs/h
one_line
expect_fail 2 "^dlh-launch: error: lr_source find: the range test needs 11 batches of 256 in one epoch, .*s.h5 has 2000" \
  run1 "$(plan 256)" runs/i
one_line
expect_fail 2 "^dlh-launch: --store: names the files itself, not with --out or --plot" \
  dlh-launch lr-find spec.json --store cache --out x.json
one_line
