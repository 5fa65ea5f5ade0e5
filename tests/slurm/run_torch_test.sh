#!/bin/bash
# A user's own PyTorch program under DLH on a real local Slurm cluster (issue 18): Debian's
# python3-torch, the example share/examples/ddp_fashion.py (DistributedDataParallel, gloo,
# Fashion-MNIST from Debian's dataset-fashion-mnist), two nodes alpha1 and alpha2 with one
# "GPU" each, spank_dlh.so planning from a cluster description of them.
#
#   1. Profile: `srun -n 1 dlh-launch run --profile` at two batches writes one profile with
#      two points and what the program said of itself (parameters, samples, epochs, rate).
#   2. `sbatch --dlh-auto=deadline=...,profile=FILE -N 2 train.sbatch python3 ddp_fashion.py`:
#      the plugin plans from the profile (the same plan as dlh-estimate recommend --profile),
#      the two ranks train on alpha1 and alpha2 with the plan's batch and rate; SIGUSR1
#      through the job script makes them checkpoint and the job requeue, and the requeued
#      job resumes from DLH_CHECKPOINT and ends at the same step as an uninterrupted run.
#   3. A crash of one rank's program ends the job with DLH's line naming the rank.
#   5. Programs as users write them (issue 44), each under `sbatch --dlh-auto=...,profile=`
#      (the DDP example's profile: --dlh-auto plans a program from one):
#      share/examples/plain_torchrun.py, a torchrun-style DDP loop that knows nothing of DLH
#      (no dlh import, no progress lines): the job completes, is not ended as stalled, and its
#      run folder has summary.json that `dlh-report RUN_DIR` reads (exit 0);
#      its report page, and the DDP example's of part 2, pass tests/browser/check-page.sh
#      (headless Chromium: no console error, every chart drawn with data);
#      share/examples/fsdp_fashion.py, FSDP with the dlh module: the same checks plus its
#      steps in summary.json. PyTorch 1.13 cannot run FSDP on the CPU (the example says why:
#      under Python 3.11 torch.distributed.fsdp fails to import, a dataclass field with a
#      mutable default in torch/distributed/_shard/sharded_tensor/metadata.py; and its FSDP
#      computes on torch.cuda.current_device() whatever device_id says): the FSDP case is
#      then skipped, printing the example's own reason.
# The waits are guards, not timing claims. Needs root, Slurm, munge and python3-torch;
# about 95 s (part 5: about 6 s here).
# shellcheck source=tests/slurm/slurm.bash
source "$(dirname "$0")/slurm.bash"
need_slurm munged slurmctld slurmd srun sbatch scontrol squeue scancel
need_python_module torch.distributed python3-torch
command -v chromium >/dev/null || skip_or_fail "no chromium (make check installs it)"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SO=$(cd "$BINDIR/../lib" && pwd)/spank_dlh.so
[[ -f $SO ]] || fail "no $SO (build it: make plugin)"
PY=/usr/bin/python3
EXAMPLE=$ROOT/share/examples/ddp_fashion.py
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN)_' || true)
unset DLH_SPEC DLH_SAMPLES DLH_PLAN DLH_GPU_TYPE DLH_RUN_DIR DLH_CHECKPOINT
# The progress helper the example imports (module load dlh puts it on PYTHONPATH); one
# thread per program: both nodes are this machine.
export PYTHONPATH=$ROOT/share/python OMP_NUM_THREADS=1

C=$WORK/c
cleanup() {
  local rc=$?
  "$ROOT/share/slurm/stop-cluster.sh" "$C" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
cd "$WORK"
# browser_check NAME PAGE: the page in headless Chromium (tests/browser/check-page.sh: no
# console error, every chart drawn with data), its screenshot kept as report-NAME.png; what
# the check saw in $page_seen.
SHOTS=${SCREENSHOT_DIR:-$BINDIR/../screenshots}
mkdir -p "$SHOTS"
browser_check() {
  local page
  page=$(bash "$ROOT/tests/browser/check-page.sh" "$2" "$SHOTS/report-$1.png" 2>&1) ||
    { echo "$page" >&2; fail "$1: the report page failed in the browser"; }
  page_seen=${page#*: }
}

# share/cluster/local.json's alpha type on two nodes of one GPU each.
"$PY" - "$ROOT/share/cluster/local.json" >"$WORK/cluster.json" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1]))
alpha = next(g for g in c["gpu_types"] if g["name"] == "alpha")
alpha["calibration"] = os.path.join(os.path.dirname(sys.argv[1]), alpha["calibration"])
c.pop("cpu_node_types", None)  # a program's plan is for GPU types (profile or not)
node = next(n for n in c["node_types"] if n["gpu"] == "alpha")
node.update(gpus_per_node=1, nodes=2)
c.update(name="two-alpha", gpu_types=[alpha], node_types=[node])
json.dump(c, sys.stdout, indent=1)
PY
SLURM_TEST_NODES="alpha1:alpha:1:4 alpha2:alpha:1:4" SLURM_TEST_CRED_EXPIRE=5 \
  SLURM_TEST_PLUGSTACK="required $SO cluster=$WORK/cluster.json" \
  "$ROOT/share/slurm/start-cluster.sh" "$C" >"$WORK/start.txt" || { cat "$WORK/start.txt"; fail "cluster did not start"; }
# shellcheck disable=SC1091
source "$C/env.sh"
check "$(cat "$WORK/start.txt")"

# wait_end JOB OUT: until the job has ended for good; its state in $end.
wait_end() {
  for _ in $(seq 2400); do
    end=$(state "$1")
    case $end in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY)
        # A requeued job passes through its old run's end state on its way back to PENDING.
        sleep 2
        end=$(state "$1")
        case $end in PENDING | RUNNING | COMPLETING | REQUEUED) continue ;; esac
        return 0 ;;
    esac
    sleep 0.1
  done
  cat "$2" >&2
  ps -eo pid,ppid,stat,etime,args | grep -E '[d]lh-launch|[d]dp_fashion|[s]run' >&2 || true
  fail "job $1 did not end in 4 minutes (state $end)"
}
DATA=(--max-samples 1920 --max-test-samples 1000)

echo "1. the profile of one rank, at two batches"
for batch in 32 64; do
  srun -N1 -n1 --mpi=pmix dlh-launch run --profile 12 --profile-warmup 3 --gpu-type alpha \
    --profile-out "$WORK/ddp.profile.json" -- "$PY" "$EXAMPLE" "${DATA[@]}" --epochs 2 --batch "$batch" \
    >"$WORK/profile-$batch.out" 2>&1 || { cat "$WORK/profile-$batch.out" >&2; fail "the profile at batch $batch failed"; }
done
grep -h "^dlh-launch: run: profile:" "$WORK"/profile-*.out | sed 's/^/  /'
"$PY" - "$WORK/ddp.profile.json" <<'PY' || fail "the profile is not the program's"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["gpu_type"] == "alpha" and p["program"] == "ddp_fashion", p
assert [q["batch"] for q in p["points"]] == [32, 64] and all(q["steps"] == 12 for q in p["points"]), p
assert p["params"] > 100000 and p["samples"] == 1920 and p["epochs"] == 2, p
assert p["global_batch"] == 64 and abs(p["lr"] - 0.05) < 1e-12 and p["device"] == "cpu", p
assert p["cpu_threads"] == 1, p
PY
check "profile: batches 32 and 64, $(json_field "$WORK/ddp.profile.json" params) parameters, 1920 samples, 2 epochs, global batch 64, lr 0.05, cpu x 1 thread"

echo "2. sbatch --dlh-auto=...,profile=: DDP on two nodes, SIGUSR1, requeue, resume"
dlh-estimate recommend --profile "$WORK/ddp.profile.json" --cluster "$WORK/cluster.json" --deadline 20m \
  --json >"$WORK/expected.json" 2>"$WORK/estimate.err" || { cat "$WORK/estimate.err" >&2; fail "dlh-estimate recommend --profile"; }
# --sleep-per-step: a run long enough to be interrupted mid-epoch.
job=$(sbatch --parsable --dlh-auto=deadline=20m,profile=ddp.profile.json -N 2 -o "$WORK/a.out" \
  "$ROOT/share/examples/train.sbatch" "$PY" "$EXAMPLE" "${DATA[@]}" --epochs 2 --log-every 5 \
  --sleep-per-step 0.15 2>"$WORK/sbatch.err") || { cat "$WORK/sbatch.err" >&2; fail "sbatch refused the job"; }
grep -q "dlh: 2 nodes x 1 alpha GPU, 2 tasks" "$WORK/sbatch.err" || { cat "$WORK/sbatch.err" >&2; fail "no plan line from the plugin"; }
check "$(grep -o 'dlh: .*' "$WORK/sbatch.err" | head -1)"
for _ in $(seq 1200); do grep -q "step 2[0-9] loss" "$WORK/a.out" 2>/dev/null && break; sleep 0.1; done
grep -q "step 2[0-9] loss" "$WORK/a.out" || { cat "$WORK/a.out" >&2; fail "job $job did not reach step 20"; }
scancel --signal=USR1 --batch "$job"
release_requeued "$job" "$WORK/a.out"
wait_end "$job" "$WORK/a.out"
[[ $end == COMPLETED ]] || { cat "$WORK/a.out" >&2; fail "job $job ended $end"; }
out=$(cat "$WORK/a.out")
grep -q "^dlh-launch: run: $PY on 2 ranks (2 nodes x 1 ranks), " <<<"$out" || { echo "$out" >&2; fail "not 2 ranks on 2 nodes"; }
global=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["global_batch"])' "$WORK/expected.json")
grep -q "batch $((global / 2)) per rank (from DLH_BATCH), global batch $global" <<<"$out" || { echo "$out" >&2; fail "the plan's batch did not reach the program"; }
grep -q "SIGUSR1: stopping at step" <<<"$out" || { echo "$out" >&2; fail "no stop on SIGUSR1"; }
resumed=$(grep -o "resumed from .* at step [0-9]*" <<<"$out" | head -1)
[[ -n $resumed ]] || { echo "$out" >&2; fail "the requeued job did not resume"; }
# 1920 samples on 2 ranks at the plan's global batch: ceil(960 / per-rank batch) steps an epoch.
steps=$((2 * ((960 + global / 2 - 1) / (global / 2))))
grep -q "^done: step $steps," <<<"$out" || { echo "$out" >&2; fail "the resumed run did not end at step $steps"; }
run=$(ls -d "$WORK"/runs/*-"$job")
[[ $(json_field "$run/result.json" world_size) == 2 ]] || fail "result.json: not 2 ranks"
check "job $job: 2 ranks on alpha1 + alpha2, global batch $global from the plan; SIGUSR1, requeued, ${resumed#resumed from $WORK/}; done at step $steps, test accuracy $(json_field "$run/result.json" test_accuracy)"
dlh-report "$run" >"$WORK/ddp.report.txt" 2>&1 || { cat "$WORK/ddp.report.txt" >&2; fail "ddp: dlh-report $run failed"; }
browser_check ddp "$run/report.html"
check "ddp: report.html: $page_seen"

echo "3. a profile that cannot be read: one line, nothing queued"
rc=0
sbatch --dlh-auto=deadline=20m,profile=missing.profile.json -N 2 "$ROOT/share/examples/train.sbatch" \
  "$PY" "$EXAMPLE" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
grep -q "dlh: $WORK/missing.profile.json: cannot read" "$WORK/err.txt" && [[ $rc -ne 0 ]] ||
  { cat "$WORK/err.txt" >&2; fail "sbatch with an unreadable profile: exit $rc"; }
[[ -z $(squeue -h) ]] || fail "a job was queued"
check "exit $rc: $(grep -o 'dlh: .*' "$WORK/err.txt" | head -1)"

echo "4. one rank's program crashes: the job ends with DLH's line"
job=$(DLH_MAX_RESTARTS=0 sbatch --parsable --dlh-auto=deadline=20m,profile=ddp.profile.json -N 2 \
  -o "$WORK/b.out" "$ROOT/share/examples/train.sbatch" "$PY" "$EXAMPLE" "${DATA[@]}" --epochs 1 \
  --crash-at-step 5 --crash-rank 1 2>/dev/null)
wait_end "$job" "$WORK/b.out"
line=$(grep -E "^dlh-launch \[rank 1/2 alpha2\]: error: the program \(pid [0-9]+\) exited with code 3: ending every rank$" "$WORK/b.out" || true)
[[ -n $line && $end == FAILED ]] || { cat "$WORK/b.out" >&2; fail "job $job: no line naming rank 1's crash, or it ended $end"; }
check "job $job ended $end: ${line#*error: }"

# run_program NAME ARGS...: submits train.sbatch with the program under --dlh-auto and waits;
# the job's output in $WORK/NAME.out, its run folder in $run.
run_program() {
  local name=$1 job
  shift
  job=$(sbatch --parsable --dlh-auto=deadline=20m,profile=ddp.profile.json -N 2 -o "$WORK/$name.out" \
    "$ROOT/share/examples/train.sbatch" "$PY" "$@" 2>"$WORK/$name.sbatch.err") ||
    { cat "$WORK/$name.sbatch.err" >&2; fail "$name: sbatch refused the job"; }
  wait_end "$job" "$WORK/$name.out"
  [[ $end == COMPLETED ]] || { cat "$WORK/$name.out" >&2; fail "$name: job $job ended $end"; }
  ! grep -qE "stalled|reported no step" "$WORK/$name.out" || { cat "$WORK/$name.out" >&2; fail "$name: job $job was taken for stalled"; }
  run=$(ls -d "$WORK"/runs/*-"$job")
  [[ -f $run/summary.json ]] || { cat "$WORK/$name.out" >&2; ls -l "$run" >&2; fail "$name: no $run/summary.json"; }
  dlh-report "$run" >"$WORK/$name.report.txt" 2>&1 || { cat "$WORK/$name.report.txt" >&2; fail "$name: dlh-report $run failed"; }
  [[ -s $run/report.html ]] || fail "$name: dlh-report wrote no $run/report.html"
  jobid=$job
}

echo "5. programs as users write them, under sbatch --dlh-auto=...,profile="
run_program plain "$ROOT/share/examples/plain_torchrun.py" --steps 30 --sleep-per-step 0.02
grep -q "^plain_torchrun: done: 30 steps" "$WORK/plain.out" || { cat "$WORK/plain.out" >&2; fail "plain_torchrun did not finish"; }
grep -q "^plain_torchrun: rank 1/2, master " "$WORK/plain.out" || { cat "$WORK/plain.out" >&2; fail "plain_torchrun: not 2 ranks"; }
check "plain torchrun program (no dlh): job $jobid COMPLETED on 2 ranks, summary.json (finished $(json_field "$run/summary.json" finished)), dlh-report exit 0"
browser_check plain "$run/report.html"
check "plain: report.html: $page_seen"

FSDP=$ROOT/share/examples/fsdp_fashion.py
FDATA=(--max-samples 640 --max-test-samples 200 --epochs 1 --log-every 5)
# Can this PyTorch run FSDP here? The example alone (a process group of one) says.
if ! probe=$(cd "$WORK" && env -u RANK -u WORLD_SIZE MASTER_PORT="$(free_port)" \
  timeout 120 "$PY" "$FSDP" --max-samples 64 --max-test-samples 32 --batch 32 2>&1) &&
  grep -qE "^fsdp_fashion: torch .*(cannot import FSDP|FSDP cannot run on)" <<<"$probe"; then
  echo "  SKIP fsdp_fashion.py: $(grep -E '^fsdp_fashion: torch ' <<<"$probe" | head -1 | cut -c1-300)"
else
  [[ $probe == *"fsdp_fashion: done: step 2"* ]] || { echo "$probe" >&2; fail "fsdp_fashion.py alone failed"; }
  run_program fsdp "$FSDP" "${FDATA[@]}"
  grep -q "^fsdp_fashion: done: step " "$WORK/fsdp.out" || { cat "$WORK/fsdp.out" >&2; fail "fsdp_fashion did not finish"; }
  steps=$(json_field "$run/summary.json" steps)
  [[ $steps -gt 0 ]] || fail "fsdp: summary.json has no steps"
  check "FSDP example: job $jobid COMPLETED on 2 ranks, summary.json with $steps steps, dlh-report exit 0"
fi
