#!/bin/bash
# make bench, "A suggested network to a deadline" (issue 45): `dlh-estimate suggest --data
# fashion-mnist.h5 --deadline 10m` on the local cluster description, then that spec trained
# as a user would submit it, `sbatch --dlh-auto=spec=suggested.json,deadline=10m,...`, on a
# local Slurm cluster of two fake-GPU alpha nodes (this machine; share/cluster/local.json,
# alpha timed by BENCH_CALIBRATION when set, else share/calibration/cpu.json).
#   suggested.sh BINDIR WORK   (3-8 minutes on 2 cores; root, Slurm, munge)
# Writes WORK/suggested/result.json (the suggestion's table, the plan, the job's time, limit
# and final test accuracy) or WORK/suggested/unavailable with the reason.
set -euo pipefail
bindir=$(cd "$1" && pwd) work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH" LC_ALL=C
so=$bindir/../lib/spank_dlh.so
calibration=${BENCH_CALIBRATION:-}
[[ -z $calibration ]] || calibration=$(realpath "$calibration")
out=$work/suggested
rm -rf "$out"
mkdir -p "$out"
cd "$out"
unavailable() { echo "$*" >"$out/unavailable"; echo "unavailable: $*" >&2; exit 0; }
for b in munged slurmctld slurmd sbatch scontrol; do
  PATH="$PATH:/usr/sbin" command -v "$b" >/dev/null || unavailable "'$b' is not installed"
done
[[ $(id -u) -eq 0 ]] || unavailable "the local Slurm cluster needs root"
[[ -f $so ]] || unavailable "no $so in this build"
dlh-data import-fashion-mnist --out fashion-mnist.h5 >import.txt 2>&1 ||
  unavailable "dlh-data import-fashion-mnist: $(tail -1 import.txt)"
python3 - "$root" "$calibration" <<'PY'
import json, sys
root, calibration = sys.argv[1], sys.argv[2]
c = json.load(open(f"{root}/share/cluster/local.json"))
c.pop("cpu_node_types", None)  # alpha's and beta's nodes only: no CPU node in this part
for g in c["gpu_types"]:
    if "calibration" in g:
        g["calibration"] = calibration or f"{root}/share/calibration/{g['calibration'].split('/')[-1]}"
c["node_types"] = [n for n in c["node_types"] if n["gpu"] == "alpha"]
for n in c["node_types"]:
    n["nodes"] = 2
json.dump(c, open("cluster.json", "w"), indent=1)
PY
dlh-estimate suggest --data fashion-mnist.h5 --deadline 10m --cluster cluster.json \
  --out suggested.json 2>suggest.txt || unavailable "dlh-estimate suggest: $(tail -1 suggest.txt)"

# shellcheck source=share/bench/local_cluster.bash
source "$root/share/bench/local_cluster.bash"
bench_cluster_start "alpha1:alpha:2:2 alpha2:alpha:2:2" "$out/cluster.json"

cat >job.sh <<'EOF'
#!/bin/bash
t0=$EPOCHREALTIME
{ printenv DLH_PLAN || printenv SLURM_SPANK_DLH_PLAN || echo null; } >"plan-$SLURM_JOB_ID.json"
srun --mpi=pmix dlh-launch train suggested.json --run-dir "run-$SLURM_JOB_ID" --progress plain
rc=$?
echo "job-seconds $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {print b - a}') rc $rc"
exit $rc
EOF
id=$(sbatch --parsable -o job.out -e job.err --export=ALL \
  --dlh-auto="spec=suggested.json,samples=60000,eval-samples=10000,deadline=10m" job.sh \
  2>sbatch.err) || unavailable "sbatch failed: $(tail -1 sbatch.err)"
bench_wait_job "$id" 1800
limit=$(scontrol show job "$id" | grep -o 'TimeLimit=[^ ]*' | cut -d= -f2)
PYTHONPATH="$root/share/bench" python3 - "$id" "$state" "$limit" <<'PY' >result.json
import json, sys
from slurm_job import job_record
job, state, limit = sys.argv[1:]
r = job_record(job, "job.out", limit)
rows = [l.strip() for l in open("suggest.txt") if l.startswith("|") or l.startswith("suggest:")]
spec = json.load(open("suggested.json"))
print(json.dumps({"job": job, "state": state, "time_limit": limit, "time_limit_s": r["time_limit_s"],
                  "job_seconds": r["job_seconds"], "rc": r["rc"],
                  "test_accuracy": r["summary"].get("test_accuracy"), "plan": r["plan"],
                  "suggest": rows, "spec_layers": len(spec["layers"]), "epochs": spec["epochs"],
                  "sbatch": [l.strip() for l in open("sbatch.err") if "dlh:" in l][:1]}))
PY
