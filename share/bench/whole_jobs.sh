#!/bin/bash
# whole_jobs.sh BINDIR WORK: ten training jobs planned by `sbatch --dlh-auto` on a local
# Slurm cluster (1-4 ranks, three models, an evaluation and a checkpoint after every epoch),
# each job's predicted wall time and band against the time it took (issues 13 and 40, "whole
# jobs"). Writes WORK/jobs/jobs.jsonl (one object per job: shape, plan, time limit, measured
# seconds, the launcher's summary.json) for share/bench/report.py; prints "unavailable: ..."
# and exits 0 when the cluster cannot run here. About 20 minutes on 2 cores.
#
# The cluster file names an observation store (WORK/jobs/observations), as a site's would:
# every job leaves its record there and later plans use them, so a model's first job is
# planned from the calibration alone and its later ones from what it measured. The report
# says which figure came from where (the plan's provenance).
#
# The cluster is share/cluster/local.json with two alpha nodes (fake GPUs: CPU ranks, timed by
# share/calibration/cpu.json, or by BENCH_CALIBRATION when set: a calibration made on this
# host, as make bench does); both nodes are this machine, which the description says
# (runtime.shared_host_cores). The user's options fix each job's shape; the plugin plans the
# rest (time limit, batch split, learning rate) and predicts the job's time.
set -euo pipefail
bindir=$(cd "$1" && pwd) work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH" LC_ALL=C
so=$bindir/../lib/spank_dlh.so
calibration=${BENCH_CALIBRATION:-}
[[ -z $calibration ]] || calibration=$(realpath "$calibration")

unavailable() { echo "unavailable: $*"; exit 0; }
for b in munged slurmctld slurmd sbatch scontrol; do
  PATH="$PATH:/usr/sbin" command -v "$b" >/dev/null || unavailable "'$b' is not installed"
done
[[ $(id -u) -eq 0 ]] || unavailable "the local Slurm cluster needs root"
[[ -f $so ]] || unavailable "no $so in this build"
mkdir -p "$work/jobs"
cd "$work/jobs"
dlh-data import-fashion-mnist --out fashion-mnist.h5 >import.txt 2>&1 ||
  unavailable "dlh-data import-fashion-mnist: $(tail -1 import.txt)"
# The three models, all on Fashion-MNIST: the example CNN, an MLP and a strided CNN (no
# pooling; none of the three is in the calibration sweep). Epochs are set per job below.
python3 - "$root" "$calibration" <<'PY'
import json, sys
root, calibration = sys.argv[1], sys.argv[2]
cnn = json.load(open(f"{root}/share/examples/fashion-mnist.json"))
cnn["epochs"] = 2
json.dump(cnn, open("cnn.json", "w"), indent=1)
mlp = {"name": "fashion-mlp", "input": {"channels": 1, "height": 28, "width": 28}, "classes": 10,
       "layers": [{"type": "flatten"}, {"type": "dense", "units": 512}, {"type": "relu"},
                  {"type": "dense", "units": 256}, {"type": "relu"}, {"type": "dense", "units": 10}],
       "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9}, "batch_size": 128, "epochs": 3,
       "seed": 1, "dataset": "fashion-mnist.h5"}
json.dump(mlp, open("mlp.json", "w"), indent=1)
strided = {"name": "fashion-strided", "input": {"channels": 1, "height": 28, "width": 28},
           "classes": 10,
           "layers": [{"type": "conv2d", "filters": 32, "kernel": 3, "stride": 2, "padding": 1},
                      {"type": "relu"},
                      {"type": "conv2d", "filters": 64, "kernel": 3, "stride": 2, "padding": 1},
                      {"type": "relu"}, {"type": "flatten"}, {"type": "dense", "units": 128},
                      {"type": "relu"}, {"type": "dense", "units": 10}],
           "optimizer": {"type": "adam", "lr": 0.001}, "batch_size": 128, "epochs": 2,
           "seed": 1, "dataset": "fashion-mnist.h5"}
json.dump(strided, open("strided.json", "w"), indent=1)
c = json.load(open(f"{root}/share/cluster/local.json"))
c.pop("cpu_node_types", None)  # alpha's and beta's nodes only: no CPU node in this part
for g in c["gpu_types"]:
    if "calibration" in g:
        g["calibration"] = calibration or f"{root}/share/calibration/{g['calibration'].split('/')[-1]}"
for n in c["node_types"]:
    if n["gpu"] == "alpha":
        n["nodes"] = 2
c["observations"] = "observations"
json.dump(c, open("cluster.json", "w"), indent=1)
PY
rm -rf observations
mkdir -m 1777 observations

# shellcheck source=share/bench/local_cluster.bash
source "$root/share/bench/local_cluster.bash"
bench_cluster_start "alpha1:alpha:2:2 alpha2:alpha:2:2" "$work/jobs/cluster.json"

# The job: the batch script's own clock around srun is what the time limit must cover.
cat >job.sh <<'EOF'
#!/bin/bash
t0=$EPOCHREALTIME
{ printenv DLH_PLAN || printenv SLURM_SPANK_DLH_PLAN || echo null; } >"plan-$SLURM_JOB_ID.json"
srun --mpi=pmix dlh-launch train "$JOB_SPEC" --data fashion-mnist.h5 --run-dir "run-$SLURM_JOB_ID" \
  --epochs "$DLH_TRAIN_EPOCHS" --progress plain
rc=$?
t1=$EPOCHREALTIME
echo "job-seconds $(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}') rc $rc"
exit $rc
EOF
touch records-seen  # no job's record yet (submit)

# submit NAME SPEC EPOCHS SBATCH-OPTIONS...: one job, waited for, one line of jobs.jsonl.
submit() {
  local name=$1 spec=$2 epochs=$3 extra=("${@:4}") id state limit
  id=$(JOB_SPEC=$spec DLH_TRAIN_EPOCHS=$epochs sbatch --parsable -o "$name.out" -e "$name.err" \
    --export=ALL --dlh-auto="spec=$spec,samples=60000,eval-samples=10000,epochs=$epochs,deadline=30m" \
    "${extra[@]}" job.sh) ||
    { echo "unavailable: sbatch for $name failed: $(tail -1 "$name.err" 2>/dev/null)"; return 1; }
  bench_wait_job "$id" 900
  limit=$(scontrol show job "$id" | grep -o 'TimeLimit=[^ ]*' | cut -d= -f2)
  # The job's observation record is the store's newest since the last job (each job is
  # waited for; records-seen marks the last): its probe of the node at the job's end (half a
  # second of sgemm) shows how fast this shared host was then, beside the job's own time.
  record=$(find observations -maxdepth 1 -name '*.json' -newer records-seen -printf '%T@ %p\n' |
    sort -n | tail -1 | cut -d' ' -f2)
  touch records-seen
  PYTHONPATH="$root/share/bench" python3 - "$name" "$spec" "$id" "$state" "$limit" "${extra[*]}" "$record" <<'PY' >>jobs.jsonl
import glob, json, sys
from slurm_job import job_record
name, spec, job, state, limit, options, record = sys.argv[1:]
try:
    kept = json.load(open(record))
    probe = kept["where"]["probe"] or {}
except (OSError, ValueError, KeyError, TypeError):
    kept, probe = None, {}
print(json.dumps({"name": name, "spec": spec, "job": job, "state": state, "options": options,
                  "order": sum(1 for _ in open("jobs.jsonl")) if glob.glob("jobs.jsonl") else 0,
                  "node_sgemm_gflops": (probe.get("sgemm_gflops_by_threads") or [None])[0],
                  "record": kept, **job_record(job, f"{name}.out", limit)}))
PY
  echo "$name: job $id $state, limit $limit, $(grep -o 'job-seconds [0-9.]*' "$name.out" || echo 'no time')" >&2
}

# The runtime's start-up (srun, MPI, reading the data, building the engine, the observation
# record's probe of the node, exiting) is a constant of the site, not of the model:
# local.json's runtime was measured on one host, and hosts of this kind differ. As a site
# would, measure it here before planning: srun of a three-step training that writes an
# observation record (to a store of its own), 1 rank on 1 node and 2 ranks on 2 nodes,
# twice each. startup_s: the wall time less the launcher's own train_seconds (those steps);
# launch_s: the wall time less the launcher's wall_seconds (its process from start to
# summary), what no record sees. Their medians go into the cluster file the plugin reads.
probe() {
  local t0 t1
  t0=$EPOCHREALTIME
  srun --mpi=pmix "$@" dlh-launch train mlp.json --data fashion-mnist.h5 --run-dir probe \
    --no-resume --max-steps 3 --no-eval --no-epoch-checkpoints --progress none \
    --observations probe-store >probe.log 2>&1 || return 1
  t1=$EPOCHREALTIME
  python3 -c 'import json, sys
s = json.load(open("probe/summary.json"))
t = float(sys.argv[2]) - float(sys.argv[1])
print("%.3f %.3f" % (t - s["train_seconds"], t - s["wall_seconds"]))' "$t0" "$t1" >>startup.txt
}
: >startup.txt
rm -rf probe-store && mkdir -m 700 probe-store
for _ in 1 2; do
  probe -N1 -n1 && probe -N2 -n2 --ntasks-per-node=1 ||
    unavailable "the start-up probe (srun dlh-launch train --max-steps 3) failed: $(tail -1 probe.log)"
done
python3 - <<'PY' >&2
import json, statistics
probes = [tuple(map(float, l.split())) for l in open("startup.txt")]
startup = [p[0] for p in probes]
launch = [p[1] for p in probes]
c = json.load(open("cluster.json"))
c["runtime"]["startup_s"] = round(statistics.median(startup), 2)
c["runtime"]["launch_s"] = min(c["runtime"]["startup_s"], round(statistics.median(launch), 2))
c["runtime"]["description"] = (
    "measured by whole_jobs.sh on this host, srun of a three-step training with its "
    "observation record: startup_s its wall time less its train_seconds, median of " +
    ", ".join(f"{p:.2f}" for p in startup) + " s; launch_s its wall time less its "
    "wall_seconds, median of " + ", ".join(f"{p:.2f}" for p in launch) + " s")
json.dump(c, open("cluster.json", "w"), indent=1)
print(f"start-up probes: {', '.join(f'{p:.2f}' for p in startup)} s; runtime.startup_s "
      f"{c['runtime']['startup_s']} s; launch {', '.join(f'{p:.2f}' for p in launch)} s, "
      f"runtime.launch_s {c['runtime']['launch_s']} s (local.json: 2 and 0.2)")
PY

# The links, measured as a site would before planning: local.json's inter_node is a guess for
# two fake nodes of one machine, and its intra_node was fitted to mpirun's shared memory,
# where srun's ranks (not bound to cores) wait longer. dlh-launch bench-allreduce under srun,
# 2 ranks on one node and 2 nodes of 1 rank, fitted by dlh-estimate comm (piecewise), become
# alpha's node type's intra_node and the cluster's inter_node.
link() {
  local name=$1
  shift
  srun --mpi=pmix "$@" dlh-launch bench-allreduce --min-bytes 4K --max-bytes 16M --factor 2 \
    --repeats 5 --json "link-$name.json" >"link-$name.log" 2>&1 &&
    dlh-estimate comm "link-$name.json" --json >"link-$name-fit.json" 2>>"link-$name.log"
}
link within -N1 -n2 && link across -N2 -n2 --ntasks-per-node=1 ||
  unavailable "the link probe (srun dlh-launch bench-allreduce) failed: $(tail -1 link-*.log)"
python3 - <<'PY' >&2
import json
within, across = (json.load(open(f"link-{n}-fit.json")) for n in ("within", "across"))
c = json.load(open("cluster.json"))
for n in c["node_types"]:
    if n["gpu"] == "alpha":
        n["intra_node"] = within["link"]
c["inter_node"] = across["link"]
json.dump(c, open("cluster.json", "w"), indent=1)
def text(fit):
    regimes = fit["link"].get("regimes") or [fit["link"]]
    return ", ".join(f"{r['bandwidth_gbs']:.2f} GB/s" for r in regimes)
print(f"links: within a node {text(within)} (piecewise MAPE {within['mape_piecewise']:.1f}%), "
      f"across nodes {text(across)} (piecewise MAPE {across['mape_piecewise']:.1f}%)")
PY

# epochs_for NAME EPOCHS FACTOR: the epochs that make a job run about LONG_S seconds, from
# job NAME's measured seconds over its EPOCHS, times FACTOR for a shape that runs that much
# slower; at least 2. Hosts of this kind differ by 2x and more, so fixed epochs that make a
# two-minute job on one host make a one-minute job on another (2026-11-29: none of the ten
# reached two minutes, and the goal on limits of such jobs went unmeasured).
LONG_S=160
epochs_for() {
  awk -v s="$(grep -o 'job-seconds [0-9.]*' "$1.out" | cut -d' ' -f2)" -v e="$2" -v f="$3" \
    -v t="$LONG_S" 'BEGIN { n = s > 0 ? int(t / (s / e * f)) + 1 : 2; print (n < 2 ? 2 : n) }'
}

# A model's first job is planned from the calibration alone; later ones of the same model
# learn from the store. The last three are sized to run two minutes or more (LONG_S), where
# a limit must stay within 1.5x the job: their epochs come from an earlier job of the same
# model (cnn-2x2's four ranks on two cores take about twice cnn-1x2's time an epoch).
submit cnn-1x1 cnn.json 2 --nodes=1 --gres=gpu:alpha:1
submit mlp-1x1 mlp.json 3 --nodes=1 --gres=gpu:alpha:1
submit strided-1x2 strided.json 2 --nodes=1 --gres=gpu:alpha:2 --ntasks-per-node=2
submit cnn-1x2 cnn.json 2 --nodes=1 --gres=gpu:alpha:2 --ntasks-per-node=2
submit mlp-2x1 mlp.json 3 --nodes=2 --gres=gpu:alpha:1 --ntasks-per-node=1
submit mlp-2x2 mlp.json 3 --nodes=2 --gres=gpu:alpha:2 --ntasks-per-node=2
submit strided-1x1 strided.json 3 --nodes=1 --gres=gpu:alpha:1
submit cnn-2x2 cnn.json "$(epochs_for cnn-1x2 2 2)" --nodes=2 --gres=gpu:alpha:2 --ntasks-per-node=2
submit cnn-1x2-long cnn.json "$(epochs_for cnn-1x2 2 1)" --nodes=1 --gres=gpu:alpha:2 --ntasks-per-node=2
submit strided-2x1-long strided.json "$(epochs_for strided-1x1 3 1)" --nodes=2 --gres=gpu:alpha:1 \
  --ntasks-per-node=1

# What a later build needs to plan these jobs again from the same measurements
# (share/bench/replay_jobs.py): the cluster file, the calibration, the specs, and per job its
# options, epochs, measured time, the plan's prediction and its observation record, in the
# order the jobs ran. bench.sh keeps it with the run's results. Paths are this run's folder's
# names only (the calibration's and the store's are named by replay_jobs.py).
python3 - "${calibration:-$root/share/calibration/cpu.json}" <<'PY'
import json, sys
cluster = json.load(open("cluster.json"))
for g in cluster["gpu_types"]:
    if "calibration" in g:
        g["calibration"] = "calibration.json"
cluster["observations"] = "observations"
jobs = []
for line in open("jobs.jsonl"):
    j = json.loads(line)
    plan = j.get("plan") or {}
    jobs.append({"name": j["name"], "spec": j["spec"], "options": j["options"],
                 "epochs": plan.get("epochs"), "job_seconds": j["job_seconds"],
                 "predicted_s": (plan.get("predicted") or {}).get("total_s"),
                 "record": j.get("record")})
saved = {"cluster": cluster, "calibration": json.load(open(sys.argv[1])),
         "specs": {name: json.load(open(name)) for name in ("cnn.json", "mlp.json", "strided.json")},
         "jobs": jobs}
json.dump(saved, open("saved-jobs.json", "w"), sort_keys=True)
PY
