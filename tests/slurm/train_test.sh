#!/bin/bash
# dlh-launch under a real local Slurm cluster: a batch job trains across two virtual nodes
# with `srun --mpi=pmix` (one rank per node, each bound to its fake GPU) and writes
# checkpoints; a job requeued mid-training (`scontrol requeue`) resumes from its checkpoint;
# the example job script's pre-timeout path (SIGUSR1 to the batch shell, as Slurm's
# --signal=B:USR1@... does) checkpoints, requeues and resumes. Both interrupted jobs end
# bit-identical to the uninterrupted one. Needs root and Slurm; about 40 s.
# shellcheck source=tests/slurm/slurm.bash
source "$(dirname "$0")/slurm.bash"
need_slurm munged slurmctld slurmd srun sbatch scontrol
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN)_' || true)

C=$WORK/c
cleanup() {
  local rc=$?
  "$ROOT/share/slurm/stop-cluster.sh" "$C" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
cd "$WORK"
"$ROOT/share/slurm/start-cluster.sh" "$C" >"$WORK/start.txt" || { cat "$WORK/start.txt"; fail "cluster did not start"; }
# shellcheck disable=SC1091
source "$C/env.sh"

wait_done() {  # wait_done JOB OUT: until the job has COMPLETED (fails on FAILED/CANCELLED)
  local s
  for _ in $(seq 1200); do
    s=$(state "$1")
    case $s in
      COMPLETED) return 0 ;;
      FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY)
        # A requeued job passes through its old run's end state on its way back to PENDING.
        sleep 3
        s=$(state "$1")
        case $s in PENDING | RUNNING | COMPLETING | REQUEUED) continue ;; COMPLETED) return 0 ;; esac
        cat "$2" >&2
        fail "job $1 ended $s" ;;
    esac
    sleep 0.1
  done
  cat "$2" >&2
  fail "job $1 did not finish (state $s)"
}
wait_file() {  # wait_file PATH OUT
  for _ in $(seq 1200); do [[ -e $1 ]] && return 0; sleep 0.05; done
  cat "$2" >&2
  fail "no $1"
}

dlh-data synthetic --out "$WORK/data.h5" --shape 1x16x16 --classes 6 --train 3000 --test 300 --seed 3 >/dev/null
cat >"$WORK/spec.json" <<'JSON'
{
  "name": "slurmtest",
  "input": {"channels": 1, "height": 16, "width": 16},
  "classes": 6,
  "layers": [
    {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1},
    {"type": "batchnorm"}, {"type": "relu"}, {"type": "maxpool2d", "kernel": 2},
    {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1},
    {"type": "relu"}, {"type": "maxpool2d", "kernel": 2},
    {"type": "flatten"}, {"type": "dropout", "rate": 0.2},
    {"type": "dense", "units": 64}, {"type": "relu"}, {"type": "dense", "units": 6}
  ],
  "optimizer": {"type": "adam", "lr": 0.002},
  "schedule": {"warmup_epochs": 0.5, "decay": "cosine"},
  "batch_size": 20, "epochs": 4, "seed": 9, "dataset": "data.h5"
}
JSON
TRAIN="srun --mpi=pmix dlh-launch train $WORK/spec.json --checkpoint-steps 50 --progress plain"
NODES=(-N2 --ntasks-per-node=1 --gres=gpu:1)

echo "training across two virtual nodes"
job=$(sbatch --parsable "${NODES[@]}" -o "$WORK/a.out" --wrap "$TRAIN --run-dir $WORK/a")
wait_done "$job" "$WORK/a.out"
grep -q "rank 0 on alpha1: local rank 0 (SLURM_LOCALID), GPU 0 of CUDA_VISIBLE_DEVICES=0" "$WORK/a.out" \
  || { cat "$WORK/a.out"; fail "rank 0 not on alpha1 with its GPU"; }
grep -q "rank 1 on beta1: local rank 0 (SLURM_LOCALID), GPU 0 of CUDA_VISIBLE_DEVICES=0" "$WORK/a.out" \
  || { cat "$WORK/a.out"; fail "rank 1 not on beta1 with its GPU"; }
[[ $(json_field "$WORK/a/summary.json" finished) == True ]] || fail "job a did not finish training"
[[ $(ls "$WORK/a/checkpoints" | wc -l) -ge 1 ]] || fail "no checkpoints"
crc=$(json_field "$WORK/a/summary.json" param_crc32)
check "job $job: 2 ranks on alpha1 + beta1, each on its GPU; $(ls "$WORK/a/checkpoints" | wc -l) checkpoints; param_crc32 $crc"

echo "scontrol requeue mid-training"
job=$(sbatch --parsable "${NODES[@]}" --requeue --open-mode=append -o "$WORK/b.out" --wrap "$TRAIN --run-dir $WORK/b")
wait_file "$WORK/b/checkpoints/ckpt-000000100.h5" "$WORK/b.out"
scontrol requeue "$job"
release_requeued "$job" "$WORK/b.out"
wait_done "$job" "$WORK/b.out"
grep -q "resumed from .*ckpt-" "$WORK/b.out" || { cat "$WORK/b.out"; fail "requeued job did not resume"; }
[[ $(json_field "$WORK/b/summary.json" param_crc32) == "$crc" ]] || fail "requeued job differs from job a"
check "requeued job $job $(grep -o 'resumed from .*' "$WORK/b.out" | sed "s|$WORK/||"); bit-identical to job a"

echo "pre-timeout SIGUSR1 through the example job script"
export DLH_SPEC=$WORK/spec.json DLH_DATA=$WORK/data.h5 DLH_RUN_DIR=$WORK/c-run
job=$(sbatch --parsable "${NODES[@]}" -o "$WORK/c.out" "$ROOT/share/examples/train.sbatch")
wait_file "$WORK/c-run/checkpoints" "$WORK/c.out"
for _ in $(seq 600); do grep -q "step [0-9]*/150" "$WORK/c.out" 2>/dev/null && break; sleep 0.05; done
scancel --signal=USR1 --batch "$job"
release_requeued "$job" "$WORK/c.out"
wait_done "$job" "$WORK/c.out"
grep -q "SIGUSR1 (time limit near): checkpointing and requeueing" "$WORK/c.out" || { cat "$WORK/c.out"; fail "trap did not run"; }
grep -q "resumed from .*ckpt-" "$WORK/c.out" || { cat "$WORK/c.out"; fail "job did not resume after requeue"; }
[[ $(json_field "$WORK/c-run/summary.json" param_crc32) == "$crc" ]] || fail "job c differs from job a"
check "job $job: SIGUSR1 -> checkpoint -> requeue -> $(grep -o 'resumed from .*' "$WORK/c.out" | sed "s|$WORK/||"); bit-identical"

echo "mpirun inside an allocation"
job=$(sbatch --parsable "${NODES[@]}" -o "$WORK/d.out" --wrap \
  "mpirun dlh-launch train $WORK/spec.json --run-dir $WORK/d --max-steps 30 --progress none")
wait_done "$job" "$WORK/d.out"
grep -q "rank 1 on beta1" "$WORK/d.out" || { cat "$WORK/d.out"; fail "mpirun did not place rank 1 on beta1"; }
[[ $(json_field "$WORK/d/summary.json" steps) == 30 ]] || fail "mpirun job did not train"
check "job $job: mpirun inside the allocation ran 2 ranks on alpha1 + beta1 for 30 steps"
