#!/bin/bash
# make bench, "A program with shares on a mixed allocation" (issue 44): a user's PyTorch
# program (share/examples/mixed_shares.py: DDP over gloo, dlh.ShareSampler, optionally
# dlh.Balancer) on 2 ranks of truly different speed, set up as share/bench/balance.sh sets up
# the built-in trainer's: rank 0 an alpha, rank 1 a beta of share/cluster/local.json, beta
# slowed by a cgroup v1 CPU quota to the estimator's beta/alpha speed ratio, 1 thread per
# rank, each rank bound to its own core, both cgroups 16x the default cpu.shares.
#   mixed_shares.sh BINDIR WORK    (about 8 minutes on 2 cores; root and cgroup v1)
# Writes WORK/mixed_shares/setup.json and runs.jsonl (one line per run), or
# WORK/mixed_shares/unavailable with the reason.
#
# The throttle, as the balancing section sets it: the program's profile on alpha (dlh-launch
# run --profile, one rank), then `dlh-estimate recommend --profile P --mixed`, whose table
# ranks one alpha + one beta mix with each type's per-GPU batch (beta's transferred from
# alpha's profile by the peaks); their ratio is the estimator's speed ratio and beta's quota.
# The plan, as `dlh-estimate profile --slurm` makes it on a cluster (runs from 2026-12-01T16Z
# on; earlier runs planned the split from alpha's profile alone): the program profiled on
# beta as well, under that quota, and the split of the global batch planned from the set of
# both measured profiles. A quota of 39% of a core does not give 39% of the core's speed to
# this program (2026-12-01: 27-30%; it needs more CPU time a sample after each throttled
# gap), which the peaks cannot know and the measured profile does.
# Where the ideal's rest goes (measured 2026-12-07 with the program's own timestamps, split
# [100, 28], 160 steps): the throttle lets beta run in bursts of its quota each 10 ms period,
# so its step takes one period or two (its compute at 28 samples: 6.5 / 11.5 / 20.1 ms,
# p10 / p50 / p90), and the allreduce, once the later rank arrives, takes 0.6 / 3.0 / 8.8 ms
# where an unthrottled pair takes 0.6: a beta out of quota answers at its next period. With
# no allreduce at all (each rank's steps alone, side by side) the same split ran at 90% of
# the ideal; with it, 66-82% (DDP with DLH's timed hook, without a hook, or one allreduce
# by hand: the same within the noise). A sweep of splits ([92, 36] to [116, 12], 3 rounds) peaked at
# 72-82% ([100, 28] or [104, 24]). So this throttle, not the split, holds the ratio under 85%
# here; a quota period of 2556 us (1000 us of quota, CFS's least) left the allreduce 4 ms.
# Configurations, in an order reversed every other round: even (DLH_PLAN with an even
# split), planned (the plan's split), balanced (the plan's split and dlh.Balancer,
# --balance-every 10), and side by side (each rank's program alone at the whole global
# batch, 1 rank each, both at once on their own cores and under the same throttle; the
# ideal is the sum of their rates).
set -euo pipefail
bindir=$(cd "$1" && pwd) work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH" LC_ALL=C
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=$root/share/python
unset DLH_PLAN DLH_RUN_DIR DLH_CHECKPOINT
py=/usr/bin/python3
prog=$root/share/examples/mixed_shares.py
out=$work/mixed_shares
rm -rf "$out"
mkdir -p "$out"
steps=${MIXED_STEPS:-160}    # per run; the first `warm` are not timed
warm=40
rounds=${MIXED_ROUNDS:-5}
every=10
global=${MIXED_BATCH:-128}
# The quota's period, as the balancing section's. CFS takes no quota under 1000 us, so a
# shorter period needs period * ratio >= 1000. Tried 2026-12-04 with 3000: the plan's shares
# reached 72-77% of the ideal, as with 10000 (76%): the period is not where the rest goes.
period_us=${MIXED_PERIOD_US:-10000}
cgroot=/sys/fs/cgroup/cpu
args=(--samples 20480 --epochs 3 --width 16 --log-every 100000 --warm-steps "$warm")

unavailable() { echo "$*" >"$out/unavailable"; exit 0; }
[[ $(id -u) -eq 0 ]] || unavailable "the CPU throttle needs root (a cgroup per rank)"
$py -c 'import torch.distributed' 2>/dev/null || unavailable "$py cannot import torch.distributed (python3-torch)"
[[ -w $cgroot/cpu.cfs_quota_us || -d $cgroot && -w $cgroot ]] ||
  unavailable "no writable cgroup v1 cpu controller at $cgroot"
cg=$cgroot/dlh-bench-mixed-beta-$$ cga=$cgroot/dlh-bench-mixed-alpha-$$
cleanup() {
  local g
  for g in "$cg" "$cga"; do [[ -d $g ]] && rmdir "$g" 2>/dev/null || true; done
}
trap cleanup EXIT

# mix TEXT: the per-GPU batches of recommend's first mix of one alpha and one beta, "A B ROW".
mix() {
  $py - "$1" <<'PY'
import re, sys
for line in open(sys.argv[1]):
    m = re.search(r"\d+x\d+ (\w+) \(b(\d+)\) \+ \d+x\d+ (\w+) \(b(\d+)\)", line)
    if m and {m[1], m[3]} == {"alpha", "beta"}:
        b = {m[1]: m[2], m[3]: m[4]}
        print(b["alpha"], b["beta"], " ".join(line.split()[:9]))
        break
else:
    sys.exit("dlh-estimate recommend --profile --mixed ranked no mix of alpha and beta")
PY
}
# plan NAME ALPHA_BATCH WHY: WORK/plan-NAME.json, a DLH_PLAN of one alpha and one beta rank.
plan() {
  $py - "$out/plan-$1.json" "$global" "$2" "$3" <<'PY'
import json, sys
glob, alpha = int(sys.argv[2]), int(sys.argv[3])
part = lambda gpu, batch: {"node_type": "node-" + gpu, "gpu": gpu, "nodes": 1,
                           "gpus_per_node": 1, "per_gpu_batch": batch}
json.dump({"format_version": 1, "global_batch": glob, "lr": 0.05, "warmup_epochs": 0,
           "why": sys.argv[4], "allocation": {"parts": [part("alpha", alpha),
                                                        part("beta", glob - alpha)],
                                              "nodes": 2, "gpus": 2, "tasks_per_node": 1}},
          open(sys.argv[1], "w"))
PY
}
recommend() {  # recommend PROFILE OUT [CLUSTER]
  dlh-estimate recommend --profile "$1" --cluster "${3:-$root/share/cluster/local.json}" \
    --mixed --top 50 --deadline 30d >"$2" 2>&1 || true
}

# The throttle: the program's profile on alpha at the global batch, then the estimator's mix.
(cd "$out" && mpirun -np 1 --cpu-set 0 --bind-to core dlh-launch run --run-dir "$out/profile-run" \
  --profile 12 --profile-warmup 3 --gpu-type alpha --profile-out "$out/profile.json" \
  -- $py "$prog" "${args[@]}" --batch "$global") >"$out/profile.txt" 2>&1 ||
  unavailable "the program's profile failed: $(tail -1 "$out/profile.txt")"
recommend "$out/profile.json" "$out/recommended.txt"
read -r peak_alpha peak_beta peak_row < <(mix "$out/recommended.txt") ||
  unavailable "no mixed plan: $(tail -1 "$out/recommended.txt")"
quota=$(( (peak_beta * period_us + peak_alpha / 2) / peak_alpha ))
mkdir "$cg" "$cga"
echo "$period_us" >"$cg/cpu.cfs_period_us"
echo "$quota" >"$cg/cpu.cfs_quota_us"
echo 16384 >"$cg/cpu.shares"
echo 16384 >"$cga/cpu.shares"

# A rank's command: this shell joins its cgroup, then becomes dlh-launch run.
throttled=(bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg")
full=(bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cga")
# The ranks' command lines: alpha's and beta's alone (side by side), a 2-rank job's.
alpha=(dlh-launch run --run-dir "$out/run-alpha" -- "$py" "$prog" "${args[@]}" --result "$out/r-alpha")
beta=(dlh-launch run --run-dir "$out/run-beta" -- "$py" "$prog" "${args[@]}" --result "$out/r-beta")
job=(dlh-launch run --run-dir "$out/run-job" -- "$py" "$prog" "${args[@]}" --result "$out/r-job")

# The plan: the program profiled on beta as well, on its core under its quota, and the split
# planned from the set of both profiles (docs/reference/dlh-estimate.md, "Profiles measured
# on every type").
# Each type at two batches, a quarter of the global batch and the global batch (the range
# the split's batches fall in), so that each profile has its fixed part a step as well as
# its part a sample (run.md, "Planning from a profile"): under the quota the fixed part
# costs beta 2.5x its time on alpha. (The throttle's profile above stays apart: one batch,
# as the balancing section's throttle is set.)
# In rounds (runs from 2026-12-07 on; one run a point before): this host's speed drifts for
# minutes, and one slow 20-step run at the global batch (23.3 ms a step where the program's
# jobs ran it in 17.5-18.5) made the plan [92, 36], which ran 15-25% slower than [100, 28] in
# a sweep of splits (2026-12-07). Each point is the median of its rounds (dlh-launch run
# --profile-join), the runs taking turns by batch and type, the type first swapped every round.
profile_rounds=${MIXED_PROFILE_ROUNDS:-3}
profile() {  # profile TYPE CPU BATCH [THROTTLE...]: BATCH joins WORK/profile-TYPE.json
  local type=$1 cpu=$2 batch=$3
  shift 3
  (cd "$out" && mpirun -np 1 --cpu-set "$cpu" --bind-to core "$@" dlh-launch run \
    --run-dir "$out/profile-run-$type" --profile 20 --profile-warmup 3 --profile-join --gpu-type "$type" \
    --profile-out "$out/profile-$type.json" -- $py "$prog" "${args[@]}" --batch "$batch") \
    >"$out/profile-$type.txt" 2>&1 ||
    unavailable "the program's profile on $type failed: $(tail -1 "$out/profile-$type.txt")"
}
for ((r = 0; r < profile_rounds; ++r)); do
  for batch in $((global / 4)) "$global"; do  # the global batch last: the profile's global batch
    if ((r % 2 == 0)); then
      profile alpha 0 "$batch" "${full[@]}"
      profile beta 1 "$batch" "${throttled[@]}"
    else
      profile beta 1 "$batch" "${throttled[@]}"
      profile alpha 0 "$batch" "${full[@]}"
    fi
  done
done
$py - "$out/profile-alpha.json" "$out/profile-beta.json" "$out/profiles.json" <<'PY'
import json, sys
json.dump({"dlh_profile_set": 1, "profiles": [json.load(open(p)) for p in sys.argv[1:3]]},
          open(sys.argv[3], "w"))
PY
# The split is planned for what runs here, one alpha rank and one beta rank: local.json with
# one GPU a node, whose mix of one of each has per-GPU batches that are the split itself.
# (Runs before 2026-12-04T14Z scaled the 2 + 2 GPU mix of local.json to the global batch,
# which keeps the batches' ratio but not their balance: a step's fixed part does not scale.
# With beta's fixed part at 6.5 ms a step, that gave [120, 8] where 1 + 1 plans [106, 22].)
$py - "$root/share/cluster/local.json" "$out/cluster-1-rank-per-type.json" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1]))
for n in c["node_types"]:
    n["gpus_per_node"] = 1
for g in c["gpu_types"]:  # a calibration path is relative to the description's folder
    if "calibration" in g:
        g["calibration"] = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), g["calibration"])
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
recommend "$out/profiles.json" "$out/recommended-set.txt" "$out/cluster-1-rank-per-type.json"
read -r set_alpha set_beta set_row < <(mix "$out/recommended-set.txt") ||
  unavailable "no mixed plan from both profiles: $(tail -1 "$out/recommended-set.txt")"
((set_alpha + set_beta == global)) ||
  unavailable "the mix of one alpha and one beta splits $((set_alpha + set_beta)) samples, not $global"
planned=$set_alpha
plan planned "$planned" "the estimator's mix, from both types' profiles"
plan even $((global / 2)) "even"
# The goal's ratio is the planned run's rate over its round's ideal, and this host's speed
# drifts by 20% within minutes (2026-12-01: alpha alone 1921-3042 samples/s in one run): so
# the planned run is always next to its round's side by side run, which goes first in every
# other round (runs before 2026-12-01T17Z rotated all four, the two up to two runs apart).
configs=(side-by-side planned balanced even)
order=$(IFS=,; echo "${configs[*]}" | sed 's/-/ /g; s/,/, /g')
$py - "$out/setup.json" "$peak_alpha" "$peak_beta" "$peak_row" "$set_alpha" "$set_beta" \
  "$set_row" "$global" "$planned" "$quota" "$period_us" "$steps" "$warm" "$rounds" "$every" \
  "$order" "$profile_rounds" <<'PY'
import json, sys
a = sys.argv[1:]
pa, pb, sa, sb, glob, planned = int(a[1]), int(a[2]), int(a[4]), int(a[5]), int(a[7]), int(a[8])
json.dump({"recommended": {"alpha": pa, "beta": pb, "row": a[3]}, "ratio": pb / pa,
           "recommended_set": {"alpha": sa, "beta": sb, "row": a[6]}, "planned_ratio": sb / sa,
           "planned": [planned, glob - planned], "global_batch": glob,
           "quota_us": int(a[9]), "period_us": int(a[10]), "steps": int(a[11]),
           "warm": int(a[12]), "rounds": int(a[13]), "every": int(a[14]),
           "order": a[15], "plan_for": "one alpha and one beta", "profile_rounds": int(a[16]),
           "load_before": open("/proc/loadavg").read().split()[:3]},
          open(a[0], "w"))
PY

run() {  # run CONFIG: one run, then its line(s) of runs.jsonl
  local config=$1
  rm -rf "$out"/run-* "$out"/r-*
  case $config in
    side-by-side)
      { mpirun -np 1 --cpu-set 1 --bind-to core "${throttled[@]}" "${beta[@]}" --batch "$global" \
          --max-steps "$steps" >"$out/log-beta.txt" 2>&1 & }
      local pid=$!
      mpirun -np 1 --cpu-set 0 --bind-to core "${full[@]}" "${alpha[@]}" --batch "$global" \
        --max-steps $((3 * steps)) || { wait $pid || true; false; }
      wait $pid || { cat "$out/log-beta.txt"; false; }
      ;;
    even | planned | balanced)
      local p=$out/plan-$config.json extra=()
      [[ $config == balanced ]] && { p=$out/plan-planned.json; extra=(--balance-every "$every"); }
      DLH_PLAN=$(cat "$p") mpirun -np 1 -x DLH_PLAN "${full[@]}" \
        "${job[@]}" --max-steps "$steps" "${extra[@]}" : \
        -np 1 -x DLH_PLAN "${throttled[@]}" "${job[@]}" --max-steps "$steps" "${extra[@]}"
      ;;
  esac >"$out/log.txt" 2>&1 || { cat "$out/log.txt" >&2; echo "mixed_shares.sh: $config failed" >&2; exit 1; }
  $py - "$out" "$config" "$warm" "$steps" >>"$out/runs.jsonl" <<'PY'
import json, sys
out, config, warm, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def rate(r):  # the samples/s of steps warm+1 .. last, from the step ends
    t = r["step_ends"]
    return r["global_batch"] * (last - warm) / (t[last - 1] - t[warm - 1])
if config == "side-by-side":
    for name in ("alpha", "beta"):
        r = json.load(open(f"{out}/r-{name}.rank0.json"))
        print(json.dumps({"config": "pair-" + name, "rate": rate(r)}))
else:
    r = [json.load(open(f"{out}/r-job.rank{i}.json")) for i in (0, 1)]
    assert all(a + b == r[0]["global_batch"] for a, b in zip(r[0]["batches"], r[1]["batches"]))
    print(json.dumps({"config": config, "rate": rate(r[0]), "split": [r[0]["batches"][-1], r[1]["batches"][-1]],
                      "planned": r[0]["planned"], "changes": len(r[0]["history"]) - 1,
                      "history": r[0]["history"]}))
PY
}

for ((round = 0; round < rounds; ++round)); do
  for ((k = 0; k < ${#configs[@]}; ++k)); do
    if ((round % 2 == 0)); then run "${configs[k]}"; else run "${configs[${#configs[@]} - 1 - k]}"; fi
  done
done
$py - "$out/setup.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["load_after"] = open("/proc/loadavg").read().split()[:3]
json.dump(s, open(sys.argv[1], "w"))
PY
