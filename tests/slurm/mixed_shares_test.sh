#!/bin/bash
# A module user's program on a mixed alpha+beta allocation (issue 44): share/examples/
# mixed_shares.py (DDP over gloo, dlh.ShareSampler, dlh.Balancer, dlh.AllreduceTimer,
# dlh.should_stop / save_checkpoint) on a local cluster of alpha1 (GPU type alpha) and beta1
# (beta), one "GPU" each, spank_dlh.so planning from a cluster description of them.
#
#   1. `dlh-estimate profile --slurm` measures the program on alpha1 and on beta1 (both at full
#      speed): one profile set of two measured types.
#   2. `sbatch --dlh-auto=deadline=...,profile=SET,mixed -N 2 train.sbatch THROTTLE python3
#      mixed_shares.py --balance-every 5`: rank 0 on alpha1, rank 1 on beta1. Beta's rank
#      runs throttled as share/bench/balance.sh throttles it: THROTTLE puts the program, on
#      beta1 only, in a cgroup v1 CPU controller with a quota of a quarter core (without a
#      writable cgroup v1 cpu controller the test says so), and beta's rank also sleeps 20 ms
#      per sample (--sleep-per-sample). The sleep keeps beta the slower rank however the
#      machine's other work shares its cores: under make check's parallel load the quota
#      alone left alpha's rank no faster than beta's, and the Balancer rightly moved samples
#      to beta. Checks: each rank's
#      batch (DLH_RANK_BATCHES, dlh.share()) is the plan's (dlh-estimate recommend --profile
#      SET --mixed --json, the same plan); the Balancer moves samples to alpha's rank (its
#      batch grows above the plan's), the global batch exact at every step;
#   3. SIGUSR1 through the job script (scancel --signal=USR1 --batch) mid-run: every rank
#      stops at one step, rank 0 checkpoints with the Balancer's split, the job requeues,
#      and the requeued job resumes at the checkpoint's step with that split and ends at the
#      uninterrupted run's last step;
#   4. the run folder's dlh-report page passes tests/browser/check-page.sh (headless
#      Chromium; no console error, every chart drawn with data), as report_browser.sh checks.
# The waits are guards, not timing claims. Needs root, Slurm, munge, python3-torch and
# chromium; about 45 s here.
# shellcheck source=tests/slurm/slurm.bash
source "$(dirname "$0")/slurm.bash"
need_slurm munged slurmctld slurmd srun sbatch scontrol squeue scancel
need_python_module torch.distributed python3-torch
command -v chromium >/dev/null || skip_or_fail "no chromium (make check installs it)"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SO=$(cd "$BINDIR/../lib" && pwd)/spank_dlh.so
[[ -f $SO ]] || fail "no $SO (build it: make plugin)"
PY=/usr/bin/python3
PROG=$ROOT/share/examples/mixed_shares.py
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|SINFO)_' || true)
unset DLH_SPEC DLH_SAMPLES DLH_PLAN DLH_GPU_TYPE DLH_RUN_DIR DLH_CHECKPOINT DLH_STAGE_DIR
export PYTHONPATH=$ROOT/share/python OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

C=$WORK/c
CG=/sys/fs/cgroup/cpu/dlh-test-beta-$$
cleanup() {
  local rc=$?
  "$ROOT/share/slurm/stop-cluster.sh" "$C" >/dev/null 2>&1 || true
  [[ -d $CG ]] && { rmdir "$CG" 2>/dev/null || true; }
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cd "$WORK"

# share/cluster/local.json's two types, one node of one GPU each.
"$PY" - "$ROOT/share/cluster/local.json" >"$WORK/cluster.json" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1]))
for g in c["gpu_types"] + c.get("cpu_node_types", []):
    if "calibration" in g:
        g["calibration"] = os.path.join(os.path.dirname(sys.argv[1]), g["calibration"])
for n in c["node_types"]:
    n.update(gpus_per_node=1, nodes=1)
c["name"] = "alpha-beta"
json.dump(c, sys.stdout, indent=1)
PY
SLURM_TEST_NODES="alpha1:alpha:1:2 beta1:beta:1:2" SLURM_TEST_CRED_EXPIRE=5 \
  SLURM_TEST_PLUGSTACK="required $SO cluster=$WORK/cluster.json" \
  "$ROOT/share/slurm/start-cluster.sh" "$C" >"$WORK/start.txt" || { cat "$WORK/start.txt"; fail "cluster did not start"; }
# shellcheck disable=SC1091
source "$C/env.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp
check "$(cat "$WORK/start.txt")"

# wait_end JOB OUT: until the job has ended for good (not a requeue's passing end); $end.
wait_end() {
  for _ in $(seq 1800); do
    end=$(state "$1")
    case $end in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY)
        sleep 1
        end=$(state "$1")
        case $end in PENDING | RUNNING | COMPLETING | REQUEUED) continue ;; esac
        return 0 ;;
    esac
    sleep 0.1
  done
  cat "$2" >&2
  fail "job $1 did not end in 3 minutes (state $end)"
}

# 2560 samples, 2 epochs of 40 steps; a step of 64 on alpha at full speed is about 20 ms.
ARGS=(--samples 2560 --epochs 2 --batch 64 --width 16)

echo "1. dlh-estimate profile --slurm: the program measured on alpha1 and on beta1"
timeout 600 dlh-estimate profile --slurm --steps 8 --warmup 2 --time 5m --out "$WORK/set.json" \
  -- "$PY" "$PROG" "${ARGS[@]}" >"$WORK/profile.out" 2>"$WORK/profile.err" ||
  { cat "$WORK/profile.out" "$WORK/profile.err" >&2; for l in "$WORK"/set.*.log; do echo "== $l"; cat "$l"; done >&2; fail "profile --slurm"; }
"$PY" - "$WORK/set.json" <<'PY' || fail "the profile set"
import json, sys
s = json.load(open(sys.argv[1]))
assert [p["gpu_type"] for p in s["profiles"]] == ["alpha", "beta"], s
for p in s["profiles"]:
    assert p["program"].startswith("mixed_shares") and p["global_batch"] == 64, p
    assert p["points"][0]["batch"] == 64 and p["probe"]["kind"] == "cpu", p
print("  " + ", ".join(f"{p['gpu_type']} {p['points'][0]['step_s'] * 1e3:.1f} ms/step of 64" for p in s["profiles"]))
PY
check "$(head -1 "$WORK/profile.out")"
echo "2. sbatch --dlh-auto=...,profile=SET,mixed -N 2: shares, throttled beta, Balancer"
# THROTTLE CMD...: on beta1, the program runs in a cgroup with a quarter of a core.
if [[ -w /sys/fs/cgroup/cpu/cgroup.procs ]] && mkdir "$CG" 2>/dev/null &&
  echo 10000 >"$CG/cpu.cfs_period_us" && echo 2500 >"$CG/cpu.cfs_quota_us"; then
  echo 16384 >"$CG/cpu.shares"
  throttle="cgroup v1 CPU quota 2.5 ms / 10 ms and 20 ms a sample on beta1"
  cat >"$WORK/throttle" <<SH
#!/bin/bash
echo "\$DLH_PLAN" >"$WORK/plan.\$SLURMD_NODENAME.json"
[[ \$SLURMD_NODENAME == beta1 ]] && echo \$\$ >"$CG/cgroup.procs" && exec "\$@" --sleep-per-sample 0.02
exec "\$@"
SH
else
  throttle="no writable cgroup v1 cpu controller: beta1's rank only sleeps 20 ms a sample"
  cat >"$WORK/throttle" <<SH
#!/bin/bash
echo "\$DLH_PLAN" >"$WORK/plan.\$SLURMD_NODENAME.json"
[[ \$SLURMD_NODENAME == beta1 ]] && exec "\$@" --sleep-per-sample 0.02
exec "\$@"
SH
fi
chmod +x "$WORK/throttle"
echo "  throttle: $throttle"
job=$(sbatch --parsable --dlh-auto=deadline=30m,profile=set.json,mixed -N 2 -o "$WORK/a.out" \
  "$ROOT/share/examples/train.sbatch" "$WORK/throttle" "$PY" "$PROG" "${ARGS[@]}" --balance-every 5 \
  --log-every 5 --sleep-per-step 0.01 --result "$WORK/result" 2>"$WORK/sbatch.err") ||
  { cat "$WORK/sbatch.err" >&2; fail "sbatch refused the job"; }
grep -q "dlh: 1 node x 1 alpha GPU + 1 node x 1 beta GPU, 2 tasks" "$WORK/sbatch.err" ||
  { cat "$WORK/sbatch.err" >&2; fail "no mixed plan line from the plugin"; }
check "$(grep -o 'dlh: .*' "$WORK/sbatch.err" | head -1)"
# SIGUSR1 once the Balancer has moved the split (a step line's rank batches are no longer the
# plan's), so the checkpoint carries a moved split. Not at a fixed step: under make check's
# load both ranks' steps stretched (alpha 310 ms, beta 303 ms a step of 64 when profiled), the
# dead band widened with the noise, and at step 33 the split was still the plan's. With 3 ms a
# sample on beta, one loaded make check ran all 80 steps at [33, 31]: the sleep's 93 ms a step
# was inside the noise of steps near a second; 20 ms a sample (620 ms a step) is not.
moved="" planned=""
for _ in $(seq 4800); do
  [[ -n $planned ]] || planned=$(grep -o "rank 0/2 on alpha1: .*(rank batches \[[0-9]*, [0-9]*\]" \
    "$WORK/a.out" 2>/dev/null | grep -o "\[[0-9]*, [0-9]*\]$" | head -1) || true
  [[ -n $planned ]] && moved=$(grep "^mixed_shares: epoch .* rank batches \[" "$WORK/a.out" |
    grep -vF "rank batches $planned" | head -1) || true
  [[ -n $moved ]] && break
  grep -q "stopping at step\|: done: step" "$WORK/a.out" 2>/dev/null && break
  sleep 0.05
done
[[ -n $moved ]] || { cat "$WORK/a.out" >&2; fail "job $job: the Balancer did not move the plan's split $planned before the run ended or stopped"; }
echo "  the Balancer moved the split: ${moved#mixed_shares: }"
scancel --signal=USR1 --batch "$job"
release_requeued "$job" "$WORK/a.out"
wait_end "$job" "$WORK/a.out"
[[ $end == COMPLETED ]] || { cat "$WORK/a.out" >&2; fail "job $job ended $end"; }
out=$(cat "$WORK/a.out")
# The plan the job's ranks got (DLH_PLAN, as the throttle wrapper saw it on each node).
cmp -s "$WORK/plan.alpha1.json" "$WORK/plan.beta1.json" || fail "the nodes got different plans"
read -r ga gb global measured < <("$PY" - "$WORK/plan.alpha1.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
parts = p["allocation"]["parts"]
assert [(q["gpu"], q["nodes"], q["gpus_per_node"]) for q in parts] == [("alpha", 1, 1), ("beta", 1, 1)], parts
print(parts[0]["per_gpu_batch"], parts[1]["per_gpu_batch"], p["global_batch"],
      ",".join(p.get("profiled", {}).get("measured", [])))
PY
)
[[ -n $global ]] || fail "no mixed plan of alpha and beta in DLH_PLAN"
[[ $measured == alpha,beta ]] || fail "the plan does not use both types' measurements (measured: $measured)"
check "the job's plan: alpha $ga + beta $gb = global $global, from the profiles measured on $measured"
run=$(ls -d "$WORK"/runs/*-"$job")
for r in 0 1; do
  b=$([[ $r == 0 ]] && echo "$ga" || echo "$gb")
  share=$("$PY" -c "print(f'{$b / $global:.4f}')")
  grep -q "^mixed_shares: rank $r/2 on $([[ $r == 0 ]] && echo alpha1 || echo beta1): batch $b of global $global (rank batches \[$ga, $gb\], share $share)" <<<"$out" ||
    { echo "$out" >&2; fail "rank $r did not get the plan's batch $b"; }
done
check "rank 0 on alpha1: batch $ga, rank 1 on beta1: batch $gb of global $global (DLH_RANK_BATCHES [$ga, $gb], dlh.share())"
stop=$(grep -o "SIGUSR1: stopping at step [0-9]*" <<<"$out" | grep -o "[0-9]*$" | head -1)
[[ -n $stop ]] || { echo "$out" >&2; fail "no stop on SIGUSR1"; }
resumed=$(grep -o "mixed_shares: resumed from .* at step [0-9]* .*" <<<"$out" | head -1)
[[ $resumed == *" at step $stop "* && $resumed == *"ckpt-$(printf %08d "$stop").pt"* ]] ||
  { echo "$out" >&2; fail "the requeued job did not resume from step $stop's checkpoint"; }
steps=$((2 * ((2560 + global - 1) / global)))
grep -q "^mixed_shares: done: step $steps," <<<"$out" || { echo "$out" >&2; fail "the resumed run did not end at step $steps"; }
"$PY" - "$WORK/result" "$ga" "$gb" "$global" "$stop" "$steps" "$resumed" <<'PY' || { echo "$out" >&2; fail "the balanced, resumed run"; }
import ast, json, re, sys
res, ga, gb, glob, stop, steps, resumed = sys.argv[1], *map(int, sys.argv[2:7]), sys.argv[7]
r = [json.load(open(f"{res}.rank{i}.json")) for i in (0, 1)]
a, b = r[0]["batches"], r[1]["batches"]  # the resumed run's steps
assert len(a) == len(b) == steps - stop and r[0]["step"] == steps, (len(a), len(b), steps, stop)
assert all(x + y == glob for x, y in zip(a, b)), "the global batch moved"
hist = r[0]["history"]
assert hist == r[1]["history"] and hist[0] == [0, [ga, gb]], hist
assert len(hist) >= 2 and hist[-1][1][0] > ga, f"alpha's batch did not grow: {hist}"
assert all(h[1][0] >= hist[1][1][0] for h in hist[1:]) or hist[-1][1][0] > ga, hist
split = ast.literal_eval(re.search(r"split (\[.*?\])", resumed)[1])
assert split[0] > ga and a[0] == split[0] and b[0] == split[1], (split, a[:3], b[:3])
print(f"  splits {' -> '.join(f'{h[1]}@{h[0]}' for h in hist)}; resumed with {split}; "
      f"last step {a[-1]} + {b[-1]}")
PY
check "Balancer ($throttle): alpha's batch $ga -> $(grep -o 'split \[[0-9]*' <<<"$out" | tail -1 | tr -d '[' | cut -d' ' -f2), global $global every step"
check "job $job: SIGUSR1 -> stopped at step $stop, checkpoint, requeued, resumed at step $stop with the Balancer's split, done at step $steps"

echo "3. the run's dlh-report page in headless Chromium"
dlh-report "$run" >"$WORK/report.txt" 2>&1 || { cat "$WORK/report.txt" >&2; fail "dlh-report $run"; }
SHOTS=${SCREENSHOT_DIR:-$BINDIR/../screenshots}
mkdir -p "$SHOTS"
page=$(bash "$ROOT/tests/browser/check-page.sh" "$run/report.html" "$SHOTS/report-mixed-shares.png" 2>&1) ||
  { echo "$page" >&2; fail "the report page failed in the browser"; }
check "report.html: ${page#*: }"
