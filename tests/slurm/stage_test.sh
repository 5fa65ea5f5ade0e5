#!/bin/bash
# Staging the data set onto each node (issue 19): the example job script with DLH_STAGE_DIR
# copies the data set to a folder of each node's own (%n: two `slurmd -N` on this one host
# stand for two hosts' local disks) with `dlh-data stage` in one task per node, and the
# ranks train from their node's copy (dlh-launch train --data DIR/%n/FILE). A second job
# finds both copies current and does not copy again. Needs root and Slurm; about 30 s.
# shellcheck source=tests/slurm/slurm.bash
source "$(dirname "$0")/slurm.bash"
need_slurm munged slurmctld slurmd srun sbatch scontrol
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN)_' || true)
unset DLH_PLAN DLH_STAGE_DIR DLH_TRAIN_ARGS

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
check "$(cat "$WORK/start.txt")"

# wait_end JOB OUT: until the job has ended for good; its state in $end. A rank that crashes
# in MPI_Init (a rare Open MPI/PMIx fault seen once in CI) makes the job script requeue the
# job, which Slurm holds for 2 minutes before it runs again: the wait outlasts that.
wait_end() {
  wait_completed "$1" 900
  end=$(state "$1")
  case $end in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) return 0 ;; esac
  cat "$2" >&2
  fail "job $1 did not end in 15 minutes (state $end)"
}

dlh-data synthetic --out "$WORK/data.h5" --shape 1x16x16 --classes 6 --train 2000 --test 200 --seed 3 >/dev/null
cat >"$WORK/spec.json" <<'JSON'
{
  "name": "stagetest",
  "input": {"channels": 1, "height": 16, "width": 16},
  "classes": 6,
  "layers": [
    {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1}, {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"}, {"type": "dense", "units": 6}
  ],
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
  "batch_size": 40, "epochs": 1, "seed": 9, "dataset": "data.h5"
}
JSON
export DLH_SPEC=$WORK/spec.json DLH_DATA=$WORK/data.h5 DLH_STAGE_DIR="$WORK/local/%n"
NODES=(-N2 --ntasks-per-node=1 --gres=gpu:1)

for attempt in first second; do
  job=$(DLH_RUN_DIR=$WORK/run-$attempt sbatch --parsable "${NODES[@]}" -o "$WORK/$attempt.out" "$ROOT/share/examples/train.sbatch")
  wait_end "$job" "$WORK/$attempt.out"
  [[ $end == COMPLETED ]] || { cat "$WORK/$attempt.out" >&2; fail "job $job ended $end"; }
  [[ $(json_field "$WORK/run-$attempt/summary.json" finished) == True ]] || { cat "$WORK/$attempt.out" >&2; fail "job $job did not finish training"; }
  for node in alpha1 beta1; do
    dlh-data inspect "$WORK/local/$node/data.h5" >/dev/null || fail "no good copy of the data set on $node"
  done
  lines=$(grep -E "^(staged|already staged) $WORK/data.h5 on (alpha1|beta1): " "$WORK/$attempt.out" | sort)
  [[ $(wc -l <<<"$lines") -eq 2 ]] || { cat "$WORK/$attempt.out" >&2; fail "not one staging line per node"; }
  check "job $job trained from its nodes' copies: $(sed "s|$WORK/||g; s|\$|; |" <<<"$lines" | tr -d '\n')"
  # Spoil the shared file's HDF5 signature, keeping its size and time: the second job finds
  # the copies current, and can only train if its ranks read them, not the shared file.
  if [[ $attempt == first ]]; then
    touch -r "$WORK/data.h5" "$WORK/time.ref"
    printf 'XXXXXXXX' | dd of="$WORK/data.h5" bs=1 seek=0 conv=notrunc status=none
    touch -r "$WORK/time.ref" "$WORK/data.h5"
    ! dlh-data inspect "$WORK/data.h5" >/dev/null 2>&1 || fail "the shared file still reads"
  fi
done
grep -q "^already staged .* on alpha1: " "$WORK/second.out" && grep -q "^already staged .* on beta1: " "$WORK/second.out" ||
  { cat "$WORK/second.out" >&2; fail "the second job copied again"; }
check "the second job found both copies current and trained from them (the shared file spoilt)"

# A program given to the job script (issue 44) gets the same: its data set (DLH_DATA) staged to
# each node, the copy's path in DLH_DATA ("%n" expanded by dlh-launch run on each rank), and
# the run's report. The shared file is still spoilt: the program reads the copies or fails.
cat >"$WORK/program.sh" <<'SH'
#!/bin/bash
echo "$DLH_DATA" >"$DLH_RUN_DIR/data-$RANK"
dlh-data inspect "$DLH_DATA" >/dev/null || exit 1
for step in 1 2 3; do echo "step 40 loss=0.$step" >&"$DLH_PROGRESS_FD"; done
SH
chmod +x "$WORK/program.sh"
job=$(DLH_RUN_DIR=$WORK/run-program sbatch --parsable "${NODES[@]}" -o "$WORK/program.out" "$ROOT/share/examples/train.sbatch" "$WORK/program.sh")
wait_end "$job" "$WORK/program.out"
[[ $end == COMPLETED ]] || { cat "$WORK/program.out" >&2; fail "job $job (a program) ended $end"; }
[[ $(grep -cE "^already staged $WORK/data.h5 on (alpha1|beta1): " "$WORK/program.out") -eq 2 ]] ||
  { cat "$WORK/program.out" >&2; fail "the program's data set was not staged on both nodes"; }
[[ $(cat "$WORK/run-program/data-0") == "$WORK/local/alpha1/data.h5" && $(cat "$WORK/run-program/data-1") == "$WORK/local/beta1/data.h5" ]] ||
  fail "the programs' DLH_DATA: $(cat "$WORK"/run-program/data-*)"
[[ $(json_field "$WORK/run-program/summary.json" steps) == 3 && -s $WORK/run-program/report.html ]] ||
  { cat "$WORK/program.out" >&2; fail "the program's run has no summary or report"; }
check "job $job: a program read its node's copy through DLH_DATA on each node (alpha1, beta1), and the script wrote its report (3 steps)"
