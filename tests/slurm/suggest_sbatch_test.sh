#!/bin/bash
# A network suggested and trained in one line (issue 45): `sbatch --dlh-auto=deadline=T,
# spec=suggest,data=FILE train.sbatch` on a local cluster of alpha1 and beta1 (spank_dlh.so
# planning from share/cluster/local.json's types):
#   1. dry-run: the plugin prints suggest's reasons and the spec, writes nothing, submits
#      nothing;
#   2. the job: the plugin writes the spec to the submit folder (dlh-suggested-NAME-HASH.json), its
#      line says so, the job gets DLH_SPEC and DLH_DATA, and train.sbatch trains that spec to
#      its last step (the run's spec is the suggested one);
#   3. bad input, one line, nothing submitted: spec=suggest without a data set, a data set
#      whose training labels hold one class, a file that is not a data set;
#   4. the real Fashion-MNIST with a 10-minute deadline (issue 45): the suggested network,
#      as planned (its allocation, batch, learning rate and schedule), reaches 90% test
#      accuracy at an evaluation that the plan puts inside the job's time limit and the
#      deadline. The test cancels the job once it has (an epoch or three; the whole
#      10-epoch run's wall time is judged by make bench's part "suggested"), to keep make
#      check's time.
# About 2 minutes here (1 of them training on both cores). Needs root, Slurm and munge.
# shellcheck source=tests/slurm/slurm.bash
source "$(dirname "$0")/slurm.bash"
need_slurm munged slurmctld slurmd srun sbatch scontrol squeue
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SO=$(cd "$BINDIR/../lib" && pwd)/spank_dlh.so
[[ -f $SO ]] || fail "no $SO (build it: make plugin)"
PY=/usr/bin/python3
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|SINFO)_' || true)
unset DLH_SPEC DLH_DATA DLH_SAMPLES DLH_PLAN DLH_GPU_TYPE DLH_RUN_DIR DLH_CHECKPOINT DLH_STAGE_DIR
export OPENBLAS_NUM_THREADS=1

C=$WORK/c
cleanup() {
  local rc=$?
  "$ROOT/share/slurm/stop-cluster.sh" "$C" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cd "$WORK"
SLURM_TEST_NODES="alpha1:alpha:1:2 beta1:beta:1:2" \
  SLURM_TEST_PLUGSTACK="required $SO cluster=$ROOT/share/cluster/local.json" \
  "$ROOT/share/slurm/start-cluster.sh" "$C" >"$WORK/start.txt" || { cat "$WORK/start.txt" >&2; fail "cluster did not start"; }
# shellcheck disable=SC1091
source "$C/env.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp
check "$(cat "$WORK/start.txt")"
dlh-data synthetic --out "$WORK/bars.h5" --shape 1x12x12 --classes 4 --train 640 --test 64 --seed 2 >/dev/null

echo "1. dry-run: suggest's reasons and the spec, nothing written or submitted"
rc=0
sbatch --dlh-auto=deadline=3m,spec=suggest,data=bars.h5,epochs=2,dry-run "$ROOT/share/examples/train.sbatch" \
  >"$WORK/dry.out" 2>"$WORK/dry.err" || rc=$?
grep -q "^suggest: chosen: CNN .* the largest of the 8 members that meets it" "$WORK/dry.out" ||
  { cat "$WORK/dry.out" "$WORK/dry.err" >&2; fail "no suggestion in the dry run (exit $rc)"; }
grep -q '"name": "bars"' "$WORK/dry.out" || { cat "$WORK/dry.out" >&2; fail "no spec in the dry run"; }
! ls "$WORK"/dlh-suggested-bars-*.json >/dev/null 2>&1 || fail "a dry run wrote the spec"
[[ -z $(squeue -h -o %i) ]] || fail "a dry run submitted a job"
check "$(grep '^suggest: chosen' "$WORK/dry.out" | cut -c1-150)"

echo "2. the job trains the suggested spec"
job=$(sbatch --parsable --dlh-auto=deadline=3m,spec=suggest,data=bars.h5,epochs=2 -o "$WORK/job.out" \
  "$ROOT/share/examples/train.sbatch" 2>"$WORK/sbatch.err") || { cat "$WORK/sbatch.err" >&2; fail "sbatch refused"; }
grep -q "spec: suggested CNN .* for $WORK/bars.h5, written to $WORK/dlh-suggested-bars-[0-9a-f]\{8\}.json (DLH_SPEC)" "$WORK/sbatch.err" ||
  { cat "$WORK/sbatch.err" >&2; fail "the plugin's line does not name the suggested spec"; }
check "$(grep -o 'dlh: .*' "$WORK/sbatch.err" | cut -c1-200)"
# The plan's limit is short (deadline=3m): beside the other tests of make check the job may
# meet it, get train.sbatch's USR1 and be requeued (section 4 lifts its limit for the same
# reason). What this checks is the spec it trains, not the plan's time.
scontrol update JobId="$job" TimeLimit=30:00 || fail "could not lift job $job's limit"
for _ in $(seq 3000); do
  s=$(state "$job")
  [[ $s == PENDING || $s == RUNNING || $s == CONFIGURING || $s == COMPLETING || -z $s ]] || break
  sleep 0.1
done
[[ $s == COMPLETED ]] || { cat "$WORK/job.out" >&2; fail "job $job ended $s"; }
"$PY" - "$(ls "$WORK"/dlh-suggested-bars-*.json)" "$(ls -d "$WORK"/runs/*-"$job")" <<'PY' || { cat "$WORK/job.out" >&2; fail "the job's run"; }
import json, sys
spec = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2] + "/summary.json"))
assert s["name"] == spec["name"] == "bars", (s["name"], spec["name"])
assert s["steps"] == s["total_steps"] and s["finished"], (s["steps"], s["total_steps"])
print(f"  ok: job trained {sys.argv[1].split('/')[-1]} to its last step ({s['steps']}), "
      f"test accuracy {s['test_accuracy']:.3f}")
PY

# A second submission from the same folder with other epochs suggests another spec: it gets a
# file of its own, and the first job's spec is left as it was (one shared name was rewritten
# under a pending job).
first=$(ls "$WORK"/dlh-suggested-bars-*.json)
cp "$first" "$WORK/first-spec.json"
held=$(sbatch --parsable --hold --dlh-auto=deadline=3m,spec=suggest,data=bars.h5,epochs=3 -o /dev/null \
  "$ROOT/share/examples/train.sbatch" 2>"$WORK/sbatch2.err") || { cat "$WORK/sbatch2.err" >&2; fail "second sbatch refused"; }
scancel "$held"
[[ $(ls "$WORK"/dlh-suggested-bars-*.json | wc -l) -eq 2 ]] && cmp -s "$first" "$WORK/first-spec.json" ||
  { ls "$WORK"; fail "the second suggestion did not get a file of its own, or changed the first"; }
check "a second suggestion (epochs 3) got its own file; the first job's spec is unchanged"

echo "3. bad input: one line, nothing submitted"
sbatch_refused() {  # PATTERN DLH-AUTO: sbatch refuses with PATTERN on stderr and no job
  local rc=0
  sbatch --dlh-auto="$2" "$ROOT/share/examples/train.sbatch" >/dev/null 2>"$WORK/bad.err" || rc=$?
  [[ $rc != 0 ]] || fail "sbatch --dlh-auto=$2 was accepted"
  grep -q -- "$1" "$WORK/bad.err" || { cat "$WORK/bad.err" >&2; fail "no '$1' for --dlh-auto=$2"; }
  check "$(grep -o -- "$1.*" "$WORK/bad.err" | head -1 | cut -c1-160)"
}
sbatch_refused "spec=suggest: needs the data set (data=FILE, or DLH_DATA in the environment)" "deadline=3m,spec=suggest"
"$PY" -c "
import numpy as np
np.savez('$WORK/one.npz', x_train=np.random.rand(40, 8, 8).astype('float32'), y_train=np.zeros(40, dtype='int64'),
         x_test=np.random.rand(8, 8, 8).astype('float32'), y_test=np.zeros(8, dtype='int64'))"
dlh-data import-numpy --npz "$WORK/one.npz" --out "$WORK/one.h5" >/dev/null
sbatch_refused "one.h5: the training labels hold 1 class (0) of 2" "deadline=3m,spec=suggest,data=one.h5"
sbatch_refused "not an HDF5 file" "deadline=3m,spec=suggest,data=$ROOT/share/cluster/local.json"
[[ $(squeue -h -o %i | wc -l) == 0 ]] || fail "a refused sbatch left a job"
! ls "$WORK"/dlh-suggested-one-*.json >/dev/null 2>&1 || fail "a refused suggestion wrote its spec"

echo "4. Fashion-MNIST, 10 minutes: the suggested network reaches 90% inside its plan"
[[ -d /usr/share/datasets/fashion-mnist ]] || fail "no Fashion-MNIST (make check installs dataset-fashion-mnist)"
dlh-data import-fashion-mnist --out "$WORK/fm.h5" --source /usr/share/datasets/fashion-mnist >/dev/null
job=$(sbatch --parsable --dlh-auto=deadline=10m,spec=suggest,data=fm.h5 -o "$WORK/fm.out" \
  "$ROOT/share/examples/train.sbatch" 2>"$WORK/fm.err") || { cat "$WORK/fm.err" >&2; fail "sbatch refused"; }
grep -q "spec: suggested CNN .* for $WORK/fm.h5" "$WORK/fm.err" || { cat "$WORK/fm.err" >&2; fail "no suggested spec"; }
check "$(grep -o 'dlh: .*' "$WORK/fm.err" | head -1 | cut -c1-160)"
# The plan's limit is read first; then the job's limit is lifted so that make check's load
# (six tests at a time on two cores ran this job 3-5x slower than a quiet node) cannot end
# it. The verdict is the plan's: 90% reached at an evaluation that the plan's own predicted
# phases (the start record of metrics.jsonl) place inside the limit it set and the 10
# minutes. The time it took here is said, never judged: no timed assertions in tests. On a
# quiet machine, make bench's part "suggested" judges the whole run's wall time. (The job
# trains on 1 thread here, OPENBLAS_NUM_THREADS above, and the plan counts that 1 thread:
# the plugin's line says "planned with 1 thread a CPU rank".)
for _ in $(seq 600); do
  s=$(state "$job")
  [[ $s == PENDING || $s == CONFIGURING ]] || break
  sleep 0.2
done
limit=$(scontrol show job "$job" | grep -o 'TimeLimit=[^ ]*' | cut -d= -f2)
scontrol update JobId="$job" TimeLimit=30:00 || fail "could not lift job $job's limit"
start=$(date -d "$(scontrol show job "$job" | grep -o 'StartTime=[^ ]*' | cut -d= -f2)" +%s)
verdict=
for _ in $(seq 600); do  # 20 minutes at most (a guard, not a verdict)
  s=$(state "$job")
  metrics=$(ls "$WORK"/runs/*-"$job"/metrics.jsonl 2>/dev/null || true)
  if [[ -n $metrics ]]; then
    verdict=$("$PY" - "$metrics" "$start" "$limit" <<'PY'
import json, sys
path, start, limit = sys.argv[1], float(sys.argv[2]), sys.argv[3]
days, _, clock = limit.rpartition("-")  # [D-]HH:MM:SS
limit_s = int(days or 0) * 86400 + sum(int(v) * 60 ** i for i, v in enumerate(reversed(clock.split(":"))))
records = []
for line in open(path):
    try:
        records.append(json.loads(line))
    except ValueError:  # the line being written
        pass
first = next((r for r in records if r.get("event") == "start"), None)
hit = next((r for r in records if r.get("event") == "eval" and r["test_accuracy"] >= 0.90), None)
if first and hit:
    predicted = first["plan"]["predicted"]
    phases = predicted["phases"]
    # The phases that grow with the steps done, taken in proportion; the rest (start-up,
    # data, staging) whole.
    grows = sum(phases.get(k, 0) for k in ("steps_s", "warmup_s", "eval_s", "checkpoint_s"))
    done = hit["step"] / first["total_steps"]
    planned = predicted["total_s"] - grows * (1 - done)
    assert 0 < planned <= min(limit_s, 600), \
        f"the plan puts epoch {hit['epoch']} (90%) at {planned:.0f} s, past its limit {limit}"
    print(f"epoch {hit['epoch']}: test accuracy {100 * hit['test_accuracy']:.2f}%, which the plan "
          f"puts {planned:.0f} s after the start (time limit {limit}, deadline 10m); here "
          f"{hit['t'] - start:.0f} s")
PY
    ) || { cat "$WORK/fm.out" >&2; fail "the evaluations"; }
    [[ -z $verdict ]] || break
  fi
  [[ $s == PENDING || $s == RUNNING || $s == CONFIGURING || $s == COMPLETING || -z $s ]] || break
  sleep 2
done
[[ -n $verdict ]] || { cat "$WORK/fm.out" >&2; fail "job $job ($s) did not reach 90% test accuracy"; }
scancel "$job"
check "the suggested spec, as planned: $verdict; cancelled there"
