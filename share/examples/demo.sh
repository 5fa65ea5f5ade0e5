#!/bin/bash
# make demo: a real local Slurm cluster (two virtual nodes with fake GPUs of two types),
# `sbatch --dlh-auto` choosing the allocation for a deadline, training Fashion-MNIST with
# `srun --mpi=pmix dlh-launch` as the job, its progress followed live, the final accuracy and
# checkpoint printed, and the cluster stopped.
#   demo.sh BUILDDIR [EPOCHS]
# DLH_DEMO_WORK=DIR: the demo's folder (data, calibration, observations, run) instead of
# BUILDDIR/demo; share/bench/demo.sh gives an empty one to run the demo as on a fresh machine.
# Besides its output, the demo leaves WORK/demo-result.json: the plan's whole-job prediction
# and band, and the job's run time in Slurm.
set -euo pipefail
build=$(cd "$1" && pwd) epochs=${2:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${DLH_DEMO_WORK:-$build/demo}
plugin=$build/lib/spank_dlh.so
export PATH="$build/bin:$PATH"
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN)_' || true)

mkdir -p "$work"
cluster=$(mktemp -d /tmp/dlh-demo-XXXXXX)  # short: Slurm's pmix socket paths are limited
trap '"$root/share/slurm/stop-cluster.sh" "$cluster" >/dev/null 2>&1 || true; rm -rf "$cluster"' EXIT

echo "== 1. data: Debian's dataset-fashion-mnist -> $work/fashion-mnist.h5"
[[ -s $work/fashion-mnist.h5 ]] || dlh-data import-fashion-mnist --out "$work/fashion-mnist.h5"

echo "== 2. calibration: the shipped one if it describes this machine and build, carried here by"
echo "   this machine's probe if only its speed differs, else this machine's own"
shipped=$root/share/calibration  # one CPU calibration per OpenBLAS kernel family
transferred=$work/calibration/cpu-transferred.json
mkdir -p "$work/calibration"
rm -f "$transferred"
# check-calibration probes this host (a few seconds) and chooses the shipped calibration that
# fits it best: 0 matches, 2 transfers (and writes the transferred calibration), 1 refused
# (another engine or OpenBLAS kernel type, no probe recorded, a machine too different): then
# only this machine's own calibration will do.
rc=0
dlh-estimate check-calibration "$shipped" --transfer-out "$transferred" >"$work/check.txt" 2>&1 || rc=$?
sed 's/^/   /' "$work/check.txt"
mine=
if ((rc == 0)); then
  mine=$(sed -n '1s/: .*//p' "$work/check.txt")  # the shipped calibration that matched
elif ((rc == 2)) && [[ -s $transferred ]]; then
  mine=$transferred
  echo "   using the shipped calibration transferred to this machine: $mine"
elif ((rc != 0)); then
  # A calibration times one engine on one CPU; another makes every prediction wrong. This
  # machine's own calibration from an earlier demo stands while it is not refused (a busy
  # machine's probe may read a little slower: that is "transfers", not another machine).
  mine=$work/calibration/cpu.json
  own=0
  [[ -s $mine ]] && { dlh-estimate check-calibration "$mine" >/dev/null 2>&1 || own=$?; } || own=1
  if ((own == 1)); then
    echo "   calibrating this machine (about three minutes)"
    dlh-estimate calibrate --device cpu --out "$mine" | sed 's/^/   /'
  fi
  echo "   using $mine"
fi
# The local cluster's description, with this machine's calibration where it has one, and an
# observation store: the job leaves a record of what it measured there, and the next demo's
# plan predicts from it (docs/reference/observations.md).
description=$work/cluster.json
mkdir -p "$work/observations" && chmod 1777 "$work/observations"
python3 - "$root/share/cluster/local.json" "$mine" "$description" "$work/observations" <<'PY'
import json, os, sys
source, mine, out, store = sys.argv[1:]
c = json.load(open(source))
for g in c["gpu_types"] + c.get("cpu_node_types", []):
    if g.get("calibration"):
        g["calibration"] = mine or os.path.join(os.path.dirname(source), g["calibration"])
c["observations"] = store
json.dump(c, open(out, "w"), indent=2)
PY

echo "== 3. a local Slurm cluster with spank_dlh.so in plugstack.conf"
SLURM_TEST_PLUGSTACK="required $plugin cluster=$description" \
  "$root/share/slurm/start-cluster.sh" "$cluster"
# shellcheck disable=SC1091
source "$cluster/env.sh"
sinfo -N -o '   %N %T %G'

echo "== 4. sbatch --dlh-auto: DLH picks GPUs, nodes, tasks and time limit for a 30 min deadline"
auto="deadline=30m,spec=$root/share/examples/fashion-mnist.json,samples=60000"
[[ -n $epochs ]] && auto+=",epochs=$epochs" && export DLH_TRAIN_ARGS="--epochs $epochs"
rm -rf "$work/run" "$work/job.out" "$work/demo-result.json"
export DLH_SPEC=$root/share/examples/fashion-mnist.json DLH_DATA=$work/fashion-mnist.h5 DLH_RUN_DIR=$work/run
cd "$work"
echo "   \$ sbatch --dlh-auto=$auto share/examples/train.sbatch"
job=$(sbatch --parsable --dlh-auto="$auto" -o "$work/job.out" "$root/share/examples/train.sbatch" \
  2>"$work/sbatch.txt") || { cat "$work/sbatch.txt" >&2; exit 1; }
cat "$work/sbatch.txt" >&2
scontrol show job "$job" | grep -E 'NumNodes|TimeLimit|TresPerNode' | sed 's/^ */   /'

echo "== 5. the job (output $work/job.out)"
touch "$work/job.out"
tail -n +1 -f "$work/job.out" &
tailer=$!
while :; do
  s=$(scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
  case $s in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) break ;; esac
  sleep 1
done
sleep 1
kill "$tailer" 2>/dev/null || true
[[ $s == COMPLETED ]] || { echo "demo: job $job ended $s"; exit 1; }

echo "== 6. result"
# The job as Slurm saw it (the batch script's whole run: start-up, training, and the test-set
# predictions and report after it), set against the plan's whole-job prediction and band.
slurm_job=$(scontrol show job "$job")
PYTHONPATH="$root/share/bench" python3 - "$work/run/summary.json" "$work/sbatch.txt" "$work/demo-result.json" \
  "$(grep -o 'RunTime=[^ ]*' <<<"$slurm_job" | cut -d= -f2)" \
  "$(grep -o 'TimeLimit=[^ ]*' <<<"$slurm_job" | cut -d= -f2)" \
  "$(grep -o 'Restarts=[0-9]*' <<<"$slurm_job" | cut -d= -f2)" <<'PY'
import json, sys
from slurm_job import limit_seconds  # Slurm's [D-]HH:MM:SS as seconds
summary, sbatch, out, run_time, limit, restarts = sys.argv[1:]
s = json.load(open(summary))
print(f"   final test accuracy {100 * s['test_accuracy']:.2f}% after {s['steps']} steps on "
      f"{s['ranks']} rank{'' if s['ranks'] == 1 else 's'}, {s['train_seconds']:.0f} s of training")
print(f"   checkpoint: {s['last_checkpoint']}")
def human(x):
    return f"{round(x) // 60}m{round(x) % 60:02d}s"
p = s.get("prediction") or {}
job_s = limit_seconds(run_time)
line = next((l.strip() for l in open(sbatch) if "dlh:" in l), "")
origin = line.split("; step time ", 1)[1].split(";")[0] if "; step time " in line else None
result = {"job_seconds": job_s, "time_limit": limit, "restarts": int(restarts or 0),
          "launcher_seconds": s.get("wall_seconds"), "predicted_s": p.get("total_s"),
          "upper_s": p.get("upper_s"), "origin": origin, "sbatch": line,
          "test_accuracy": s.get("test_accuracy")}
json.dump(result, open(out, "w"), indent=1)
if p.get("total_s"):
    err = 100 * (p["total_s"] - job_s) / job_s
    band = (f", {'inside' if job_s <= p['upper_s'] else 'outside'} its 90% band (<= "
            f"{human(p['upper_s'])})" if p.get("upper_s") else "")
    print(f"   the job ran {human(job_s)} in Slurm (limit {limit}); the plan predicted "
          f"{human(p['total_s'])} ({err:+.0f}%{band}); step time {origin or 'not named'}")
PY

echo "== 7. the report: every chart of the run in one page (dlh-report)"
dlh-report "$work/run" | sed 's/^/   /'
# train.sbatch applied the model to the test split after the run (dlh-launch predict):
# the page's Results section draws what results.json holds.
python3 - "$work/run/results.json" "$work/run/report.html" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
page = open(sys.argv[2]).read()
pair = r["most_confused"][0] if r.get("most_confused") else None
print(f"   results: test accuracy {100 * r['accuracy']:.2f}%, macro F1 {r['macro_f1']:.3f}"
      + (f", most confused: {pair['true_name'] or pair['true']} taken for "
         f"{pair['predicted_name'] or pair['predicted']} {pair['count']} times" if pair else ""))
shown = ["confusion matrix" if "dlh-confusion" in page else None,
         f"{len(r['misclassified'])} misclassified images" if "data:image/bmp;base64" in page else None]
print(f"   the report's Results section shows: {', '.join(s for s in shown if s) or 'nothing (see results.json)'}")
PY
echo "   open it in a browser; on a cluster: dlh-report RUN --serve 8080 and ssh -L 8080:localhost:8080"
