#!/bin/bash
# make bench, "Adaptive batch balancing": two ranks of truly different speed on this machine,
# trained with the even split, the estimator's planned split and the adaptive split.
#   balance.sh BINDIR WORK    (about 3 minutes on 2 cores; root and cgroup v1 for the throttle)
# Writes WORK/balance/setup.json and WORK/balance/runs.jsonl (one line per run) for
# report.py's "balance" section, or WORK/balance/unavailable with the reason.
#
# Rank 0 is an "alpha", rank 1 a "beta" of share/cluster/local.json, whose peaks make beta
# about 0.4 of alpha. The estimator (`dlh-estimate recommend --mixed --json`) splits the batch
# by that ratio; here beta is made that slow for real: its process runs in a cgroup whose CPU
# quota (cpu.cfs_quota_us over a 10 ms period, short next to a step so every step sees the
# same share) is the estimator's beta/alpha ratio of one core. Every rank has 1 thread and
# mpirun binds each to its own core. The machine is shared, and under load a quota binds
# no one (every process gets less than it anyway): both ranks' cgroups also get 16x the
# default cpu.shares, so that each rank has its core (beta its quota of it) for the few
# minutes this takes, whatever else runs. Each rank's own rate is measured at the whole global
# batch under the same binding and throttle, alone (the other core idle) and side by side (both
# 1-rank runs at once, as the job's ranks run); the ideal is the sum of the two rates.
set -euo pipefail
bindir=$(cd "$1" && pwd) work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH" LC_ALL=C
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
py=/usr/bin/python3
out=$work/balance
rm -rf "$out"
mkdir -p "$out"
steps=${BALANCE_STEPS:-160}    # per run; the first `warm` are not timed
warm=40
rounds=${BALANCE_ROUNDS:-3}
every=10                       # --balance-every: decisions at steps 10, 20, 30, ...
global=${BALANCE_BATCH:-128}
period_us=${BALANCE_PERIOD_US:-10000}
cgroot=/sys/fs/cgroup/cpu

unavailable() { echo "$*" >"$out/unavailable"; exit 0; }
[[ $(id -u) -eq 0 ]] || unavailable "the CPU throttle needs root (a cgroup per rank)"
[[ -w $cgroot/cpu.cfs_quota_us || -d $cgroot && -w $cgroot ]] ||
  unavailable "no writable cgroup v1 cpu controller at $cgroot"
cg=$cgroot/dlh-bench-beta-$$ cga=$cgroot/dlh-bench-alpha-$$
cleanup() {
  local g
  for g in "$cg" "$cga"; do [[ -d $g ]] && rmdir "$g" 2>/dev/null || true; done
}
trap cleanup EXIT

# The spec of the bench CNN at the global batch, on a synthetic set of its shape.
$py - "$root/share/bench/cnn.json" "$out/spec.json" "$global" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["batch_size"] = int(sys.argv[3])
s["dataset"] = "data.h5"
json.dump(s, open(sys.argv[2], "w"), indent=2)
PY
dlh-data synthetic --out "$out/data.h5" --shape 1x28x28 --classes 10 --train 30000 --test 100 >/dev/null

# The estimator's split for one alpha and one beta. On this cluster its fastest plan is one
# alpha (the "GPUs" share 2 cores), so the JSON plan has one part; its table also ranks the
# mix it balanced (2 alpha + 2 beta, each GPU of a type with its per-GPU batch). The ratio of
# those batches is the estimator's beta/alpha speed ratio, and a 2-GPU plan with the same
# ratio (the JSON plan's fields, two parts of one GPU) is what it gives one of each.
rec=(dlh-estimate recommend "$out/spec.json" --samples 60000 --cluster "$root/share/cluster/local.json"
  --mixed --objective time --top 50)
"${rec[@]}" --json >"$out/recommended.json" 2>"$out/recommend.err" || true
"${rec[@]}" >"$out/recommended.txt" 2>>"$out/recommend.err" || true
$py - "$out/recommended.json" "$out/recommended.txt" "$global" "$period_us" "$out/plan.json" \
  "$out/setup.json" "$steps" "$warm" "$rounds" "$every" <<'PY' ||
import json, re, sys
rec = json.load(open(sys.argv[1]))
glob, period = int(sys.argv[3]), int(sys.argv[4])
mix = None
for line in open(sys.argv[2]):
    m = re.search(r"\d+x\d+ (\w+) \(b(\d+)\) \+ \d+x\d+ (\w+) \(b(\d+)\)", line)
    if m:
        mix = {m[1]: int(m[2]), m[3]: int(m[4])}
        row = " ".join(line.split()[:9])
        break
if not mix or set(mix) != {"alpha", "beta"}:
    sys.exit("dlh-estimate recommend --mixed ranked no mix of alpha and beta")
a, b = mix["alpha"], mix["beta"]
ratio = b / a
alpha = round(glob * a / (a + b))
part = lambda gpu, batch: {"node_type": "node-" + gpu, "gpu": gpu, "nodes": 1,
                           "gpus_per_node": 1, "per_gpu_batch": batch}
plan = dict(rec, global_batch=glob, allocation={
    "parts": [part("alpha", alpha), part("beta", glob - alpha)],
    "nodes": 2, "gpus": 2, "tasks_per_node": 1})
json.dump(plan, open(sys.argv[5], "w"))
json.dump({"recommended": {"alpha": a, "beta": b, "row": row},
           "ratio": ratio, "planned": [alpha, glob - alpha], "global_batch": glob,
           "quota_us": round(ratio * period), "period_us": period, "steps": int(sys.argv[7]),
           "warm": int(sys.argv[8]), "rounds": int(sys.argv[9]), "every": int(sys.argv[10]),
           "load_before": open("/proc/loadavg").read().split()[:3]},
          open(sys.argv[6], "w"))
PY
  unavailable "no mixed plan: $(tail -1 "$out/recommend.err")"
quota=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['quota_us'])" "$out/setup.json")
mkdir "$cg" "$cga"
echo "$period_us" >"$cg/cpu.cfs_period_us"
echo "$quota" >"$cg/cpu.cfs_quota_us"
echo 16384 >"$cg/cpu.shares"
echo 16384 >"$cga/cpu.shares"
export DLH_PLAN
DLH_PLAN=$(cat "$out/plan.json")

# A rank's command: this shell joins its cgroup, then becomes dlh-launch.
throttled=(bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg")
full=(bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cga")
trainer=(dlh-launch train "$out/spec.json" --data "$out/data.h5" --no-resume --no-eval
  --progress none --checkpoint-seconds 0 --no-epoch-checkpoints --threads 1)
train=("${trainer[@]}" --run-dir "$out/run" --max-steps "$steps")

run() {  # run CONFIG: one run, then one line of runs.jsonl (two for side-by-side)
  local config=$1
  rm -rf "$out/run" "$out/run-beta"
  case $config in
    side-by-side)
      # Each rank alone at the whole batch, both at once: each on its own core while the other
      # core works, as in the 2-rank job. Alpha runs 3x the steps so that it is still running
      # while beta does its steps; its rate comes from the same steps as every other run's.
      { mpirun -np 1 --cpu-set 1 --bind-to core "${throttled[@]}" "${trainer[@]}" --no-plan \
          --run-dir "$out/run-beta" --max-steps "$steps" >"$out/log-beta.txt" 2>&1 & }
      local beta=$!
      mpirun -np 1 --cpu-set 0 --bind-to core "${full[@]}" "${trainer[@]}" --no-plan \
        --run-dir "$out/run" --max-steps $((3 * steps)) || { wait $beta || true; false; }
      wait $beta || { cat "$out/log-beta.txt"; false; }
      ;;
    alone-alpha) mpirun -np 1 "${full[@]}" "${train[@]}" --no-plan ;;
    alone-beta) mpirun -np 1 "${throttled[@]}" "${train[@]}" --no-plan ;;
    even) mpirun -np 1 -x DLH_PLAN "${full[@]}" "${train[@]}" --batch-size $global : \
      -np 1 -x DLH_PLAN "${throttled[@]}" "${train[@]}" --batch-size $global ;;
    planned) mpirun -np 1 -x DLH_PLAN "${full[@]}" "${train[@]}" --balance off : \
      -np 1 -x DLH_PLAN "${throttled[@]}" "${train[@]}" --balance off ;;
    adaptive) mpirun -np 1 -x DLH_PLAN "${full[@]}" "${train[@]}" --balance adaptive --balance-every $every : \
      -np 1 -x DLH_PLAN "${throttled[@]}" "${train[@]}" --balance adaptive --balance-every $every ;;
    adaptive-even) mpirun -np 1 -x DLH_PLAN "${full[@]}" "${train[@]}" --batch-size $global --balance adaptive \
      --balance-every $every : -np 1 -x DLH_PLAN "${throttled[@]}" "${train[@]}" \
      --batch-size $global --balance adaptive --balance-every $every ;;
  esac >"$out/log.txt" 2>&1 || { cat "$out/log.txt" >&2; echo "balance.sh: $config failed" >&2; exit 1; }
  if [[ $config == side-by-side ]]; then
    record "$out/run" pair-alpha "$steps"
    record "$out/run-beta" pair-beta "$steps"
  else
    record "$out/run" "$config" "$steps"
  fi
}

record() {  # record RUN CONFIG STEPS: the line of runs.jsonl for one run folder
  $py - "$1" "$2" "$warm" "$3" >>"$out/runs.jsonl" <<'PY'
import json, sys
run, config, warm, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
s = json.load(open(run + "/summary.json"))
steps = [json.loads(l) for l in open(run + "/metrics.jsonl") if '"samples_per_s"' in l]
timed = steps[warm:last]
batch = sum(s["rank_batches"])
rate = batch * len(timed) / sum(r["time"]["total"] for r in timed)
hist = s.get("balance", {}).get("history", [])
print(json.dumps({"config": config, "rate": rate, "steps": len(timed),
                  "wait_s": s["rank_step_seconds"]["allreduce"],
                  "compute_s": s["rank_step_seconds"]["compute"],
                  "split": s["rank_batches"], "changes": max(0, len(hist) - 1),
                  "history": hist}))
PY
}

configs=(alone-alpha alone-beta side-by-side even planned adaptive adaptive-even)
for ((round = 0; round < rounds; ++round)); do
  # Rotated each round, so that no configuration always runs first or after the same one.
  for ((k = 0; k < ${#configs[@]}; ++k)); do
    run "${configs[(k + round) % ${#configs[@]}]}"
  done
done
$py - "$out/setup.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["load_after"] = open("/proc/loadavg").read().split()[:3]
json.dump(s, open(sys.argv[1], "w"))
PY
