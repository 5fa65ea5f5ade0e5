#!/bin/bash
# CPU nodes in the pool (issue 46), end to end: a local cluster of alpha1, beta1 (one fake
# GPU each) and cpu1, a CPU node whose feature is share/cluster/local.json's CPU node type
# cpu-local; spank_dlh.so plans from that file.
#   1. dry-run with the GPUs busy: the plan puts the job on cpu-local and says why; sbatch
#      would get ranks, threads and the node type's feature, and no --gres;
#   2. the job: planned onto cpu1 (NumCPUs and the feature in scontrol), trained by
#      train.sbatch with the planned threads (dlh-launch's line, and the plan in summary.json);
#   3. types=gpu keeps it off CPU nodes: planned on a GPU type, the job waits for it;
#   4. the user's --gres means GPUs, and types=cpu with it is refused in one line.
# About 20 s here. Needs root, Slurm and munge.
# shellcheck source=tests/slurm/slurm.bash
source "$(dirname "$0")/slurm.bash"
need_slurm munged slurmctld slurmd srun sbatch scontrol squeue
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SO=$(cd "$BINDIR/../lib" && pwd)/spank_dlh.so
[[ -f $SO ]] || fail "no $SO (build it: make plugin)"
PY=/usr/bin/python3
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|SINFO)_' || true)
unset DLH_SPEC DLH_DATA DLH_SAMPLES DLH_PLAN DLH_GPU_TYPE DLH_RUN_DIR DLH_CHECKPOINT DLH_STAGE_DIR
# The plan's threads must reach the ranks: a user's OPENBLAS_NUM_THREADS would win over them.
unset OPENBLAS_NUM_THREADS

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
SLURM_TEST_NODES="alpha1:alpha:1:2 beta1:beta:1:2 cpu1:cpu-local:0:2" \
  SLURM_TEST_PLUGSTACK="required $SO cluster=$ROOT/share/cluster/local.json" \
  "$ROOT/share/slurm/start-cluster.sh" "$C" >"$WORK/start.txt" || { cat "$WORK/start.txt" >&2; fail "cluster did not start"; }
# shellcheck disable=SC1091
source "$C/env.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp
check "$(cat "$WORK/start.txt")"
dlh-data synthetic --out "$WORK/small.h5" --shape 1x8x8 --classes 4 --train 480 --test 48 --seed 5 >/dev/null
export DLH_DATA=$WORK/small.h5 DLH_SPEC=$ROOT/share/examples/synthetic-small.json
auto="samples=480,deadline=10m"

# Both GPU nodes busy: a job holds each one's GPU.
for t in alpha beta; do
  sbatch --parsable --gres=gpu:$t:1 -o /dev/null --wrap "sleep 600" >"$WORK/hold-$t.id" ||
    fail "could not submit the $t holder"
done
for _ in $(seq 300); do
  [[ $(squeue -h -t RUNNING -o %i | wc -l) == 2 ]] && break
  sleep 0.1
done
[[ $(squeue -h -t RUNNING -o %i | wc -l) == 2 ]] || fail "the GPU holders did not start"

echo "1. dry-run: the GPUs are busy, the plan takes the CPU node and says why"
rc=0
sbatch --dlh-auto="$auto,dry-run" "$ROOT/share/examples/train.sbatch" >"$WORK/dry.out" 2>"$WORK/dry.err" || rc=$?
grep -q "^free now: node-alpha 0/1, node-beta 0/1, cpu-local 1/1" "$WORK/dry.out" ||
  { cat "$WORK/dry.out" "$WORK/dry.err" >&2; fail "the live state does not see the CPU node free (exit $rc)"; }
grep -q "^note: on CPU nodes: no GPU node that can take this job is free now" "$WORK/dry.out" ||
  { cat "$WORK/dry.out" >&2; fail "the dry run does not say why CPU nodes"; }
grep -qE "^sbatch would get: --nodes=1 --ntasks-per-node=[12] --cpus-per-task=[12] --constraint=cpu-local --time=" "$WORK/dry.out" ||
  { cat "$WORK/dry.out" >&2; fail "not a CPU request"; }
! grep -q "^sbatch would get:.*--gres" "$WORK/dry.out" || fail "a CPU plan asks for GPUs"
check "$(grep '^sbatch would get' "$WORK/dry.out")"

echo "2. the job runs on cpu1 with the planned threads"
job=$(sbatch --parsable --dlh-auto="$auto" -o "$WORK/job.out" "$ROOT/share/examples/train.sbatch" 2>"$WORK/sbatch.err") ||
  { cat "$WORK/sbatch.err" >&2; fail "sbatch refused"; }
grep -qE "dlh: 1 CPU node cpu-local x [12] ranks? x [12] threads?, " "$WORK/sbatch.err" ||
  { cat "$WORK/sbatch.err" >&2; fail "the plugin's line does not name the CPU node type"; }
grep -q "; on CPU nodes: no GPU node that can take this job is free now" "$WORK/sbatch.err" ||
  { cat "$WORK/sbatch.err" >&2; fail "the plugin's line does not say why CPU nodes"; }
check "$(grep -o 'dlh: .*' "$WORK/sbatch.err" | cut -c1-160)"
scontrol show job "$job" >"$WORK/show.txt"
grep -q "Features=cpu-local" "$WORK/show.txt" || { cat "$WORK/show.txt" >&2; fail "the job does not ask for the CPU node's feature"; }
! grep -q "TresPerNode=.*gpu" "$WORK/show.txt" || { cat "$WORK/show.txt" >&2; fail "the job asks for GPUs"; }
threads=$(grep -o 'CPUs/Task=[0-9]*' "$WORK/show.txt" | cut -d= -f2)
[[ $threads =~ ^[12]$ ]] || { cat "$WORK/show.txt" >&2; fail "CPUs/Task is '$threads'"; }
for _ in $(seq 1200); do
  s=$(state "$job")
  [[ $s == PENDING || $s == RUNNING || $s == CONFIGURING || $s == COMPLETING || -z $s ]] || break
  sleep 0.1
done
[[ $s == COMPLETED ]] || { cat "$WORK/job.out" >&2; fail "job $job ended $s"; }
grep -q "NodeList=cpu1" <(scontrol show job "$job") || fail "job $job did not run on cpu1"
grep -q "dlh-launch: $threads CPU engine threads per rank: as the plan (DLH_PLAN) asked on CPU nodes" "$WORK/job.out" ||
  { cat "$WORK/job.out" >&2; fail "the ranks did not take the plan's $threads threads"; }
"$PY" - "$(ls -d "$WORK"/runs/*-"$job")" "$threads" <<'PY' || { cat "$WORK/job.out" >&2; fail "the job's run"; }
import json, sys
run, threads = sys.argv[1], int(sys.argv[2])
s = json.load(open(run + "/summary.json"))
assert s["steps"] == s["total_steps"] and s["finished"], (s["steps"], s["total_steps"])
plan = json.loads(open(run + "/plan.json").read()) if __import__("os").path.exists(run + "/plan.json") else None
if plan is not None:
    part = plan["allocation"]["parts"][0]
    assert part["device"] == "cpu" and part["threads_per_rank"] == threads, part
print(f"  ok: trained to its last step ({s['steps']}) on cpu1, {threads} thread(s) a rank, "
      f"test accuracy {s['test_accuracy']:.3f}")
PY

echo "3. types=gpu: never a CPU node; the plan waits for a GPU"
out=$(sbatch --parsable --dlh-auto="$auto,types=gpu" -o /dev/null "$ROOT/share/examples/train.sbatch" 2>&1) ||
  { echo "$out" >&2; fail "sbatch types=gpu refused"; }
gpu_job=$(tail -1 <<<"$out")
grep -qE "dlh: 1 node x [12] (alpha|beta) GPUs?" <<<"$out" || { echo "$out" >&2; fail "types=gpu did not plan a GPU type"; }
grep -q "planned on all nodes (may wait)" <<<"$out" || { echo "$out" >&2; fail "types=gpu does not say it waits"; }
grep -q "Features=cpu-local" <(scontrol show job "$gpu_job") && fail "types=gpu asked for the CPU node"
check "$(grep -o 'dlh: .*' <<<"$out" | cut -c1-100)"
scancel "$gpu_job"

echo "4. a --gres of the user's means GPUs"
rc=0
sbatch --gres=gpu:1 --dlh-auto="$auto,types=cpu" -o /dev/null "$ROOT/share/examples/train.sbatch" >/dev/null 2>"$WORK/bad.err" || rc=$?
[[ $rc != 0 ]] || fail "types=cpu with --gres was accepted"
grep -q "types: allows no GPU type, and your --gres/--gpus asks for GPUs" "$WORK/bad.err" ||
  { cat "$WORK/bad.err" >&2; fail "no one-line refusal"; }
check "$(grep -o 'types: allows.*' "$WORK/bad.err")"
