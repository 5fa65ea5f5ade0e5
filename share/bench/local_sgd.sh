#!/bin/bash
# make bench, "Local SGD against synchronous training on a fast and a slow link" (issue 47):
# the example Fashion-MNIST spec at one global batch, trained by 1 rank (one host) and by 2
# ranks (one per host) synchronously, with local SGD (period 4 and 16) and stale-synchronously
# (staleness 1 and 2, and on the slow link staleness 2 without its own steps; "sync" in the spec),
# first on the hosts' own link, then with host2's link shaped to 100 Mbit/s each way (tc tbf on
# both ends of its veth pair). The hosts are network namespaces of this machine on a local
# Slurm cluster (start-cluster.sh SLURM_TEST_NETNS=1), so MPI goes over TCP between them.
# For each run: samples/s, the speed-up against 1 rank, time to a target test accuracy and the
# final test accuracy after the same epochs.
#   local_sgd.sh BINDIR WORK   (about 20 minutes on 2 cores)
# Writes WORK/local_sgd/local_sgd.json, or WORK/local_sgd/unavailable when Slurm, root, tc or
# the data set are missing. Knobs: BENCH_LOCAL_EPOCHS (2), BENCH_LOCAL_RATE (100mbit).
set -euo pipefail
bindir=$(cd "$1" && pwd) out=$2/local_sgd
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH:/usr/sbin" LC_ALL=C OPENBLAS_NUM_THREADS=1
py=/usr/bin/python3
epochs=${BENCH_LOCAL_EPOCHS:-2} rate=${BENCH_LOCAL_RATE:-100mbit}
rm -rf "$out"
mkdir -p "$out"
unavailable() { echo "$*" >"$out/unavailable"; echo "unavailable: $*" >&2; exit 0; }

for b in munged slurmctld slurmd srun ip nsenter tc; do
  command -v "$b" >/dev/null || unavailable "'$b' is not installed"
done
[[ $(id -u) -eq 0 ]] || unavailable "the local Slurm cluster needs root"
dlh-data import-fashion-mnist --out "$out/fashion-mnist.h5" >"$out/import.txt" 2>&1 ||
  unavailable "dlh-data import-fashion-mnist: $(tail -1 "$out/import.txt")"
# stale2sums: staleness 2 with the sums alone, late (no own steps: "own_gradient_first":
# false), on the slow link only: its accuracy is the same on both, and it shows what the own
# steps (Delayed Gradient Averaging, the default) buy.
modes=(sync local4 local16 stale1 stale2)
for mode in "${modes[@]}" stale2sums; do
  $py - "$root/share/examples/fashion-mnist.json" "$mode" >"$out/$mode.json" <<'PY'
import json, sys
spec, mode = json.load(open(sys.argv[1])), sys.argv[2]
if mode.startswith("local"):
    spec["sync"] = {"mode": "local_sgd", "period": int(mode[len("local"):])}
elif mode.startswith("stale"):
    spec["sync"] = {"mode": "stale_sync", "staleness": int(mode[len("stale")])}
    if mode.endswith("sums"):
        spec["sync"]["own_gradient_first"] = False
print(json.dumps(spec, indent=1))
PY
done

cluster=$(mktemp -d /tmp/dlhl-XXXX)  # short: pmix's socket paths must stay under 108 bytes
stop() {
  bash "$root/share/slurm/stop-cluster.sh" "$cluster" >/dev/null 2>&1 || true
  rm -rf "$cluster"
}
trap stop EXIT
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|DLH)_' || true)
SLURM_TEST_NETNS=1 SLURM_TEST_NODES="host1:cpu:0:4 host2:cpu:0:4" \
  bash "$root/share/slurm/start-cluster.sh" "$cluster" >"$out/start.txt" 2>&1 ||
  unavailable "share/slurm/start-cluster.sh failed: $(tail -1 "$out/start.txt")"
# shellcheck source=/dev/null
source "$cluster/env.sh"
read -r _ ns2 _ link2 < <(grep '^host2 ' "$cluster/hosts.txt")

# train NAME MODE SRUN-OPTIONS...: one srun of the whole training, every output line stamped
# with the seconds since srun started (the time of each epoch's evaluation line).
train() {
  local name=$1 mode=$2 t0 line rc
  shift 2
  cut -d' ' -f1 /proc/loadavg >"$out/$name.load"
  t0=$EPOCHREALTIME
  srun --mpi=pmix "$@" dlh-launch train "$out/$mode.json" --data "$out/fashion-mnist.h5" \
    --run-dir "$out/$name" --epochs "$epochs" --threads 1 --progress plain --no-resume \
    --checkpoint-seconds 0 --no-epoch-checkpoints 2>&1 |
    while IFS= read -r line; do
      printf '%s %s\n' "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')" "$line"
    done >"$out/$name.log"
  rc=${PIPESTATUS[0]}
  cut -d' ' -f1 /proc/loadavg >>"$out/$name.load"
  ((rc == 0)) && [[ -f $out/$name/summary.json ]] ||
    unavailable "srun $* (run $name) failed with exit code $rc: $(tail -1 "$out/$name.log")"
  echo "$name: $(grep -o 'done: .*accuracy [0-9.]*%' "$out/$name.log" | head -1), $(tail -1 "$out/$name.log" | cut -d' ' -f1) s" >&2
}
two=(-N2 --ntasks-per-node=1)
train np1 sync -N1 -n1
for mode in "${modes[@]}"; do train "fast-$mode" "$mode" "${two[@]}"; done
# host2's link, shaped each way: towards host2 on the bridge's side, from host2 in its namespace.
tc qdisc add dev "$link2" root tbf rate "$rate" burst 64kb latency 200ms
nsenter "--net=/run/netns/$ns2" tc qdisc add dev eth0 root tbf rate "$rate" burst 64kb latency 200ms
for mode in "${modes[@]}" stale2sums; do train "slow-$mode" "$mode" "${two[@]}"; done
tc qdisc del dev "$link2" root 2>/dev/null || true

$py - "$out" "$epochs" "$rate" <<'PY'
import json, re, statistics, sys
out, epochs, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def run(name):
    steps, evals = [], []
    for r in map(json.loads, open(f"{out}/{name}/metrics.jsonl")):
        if r.get("event") == "eval":
            evals.append({"epoch": r["epoch"], "test_accuracy": r["test_accuracy"]})
        elif "event" not in r:
            steps.append(r)
    log = open(f"{out}/{name}.log").read()
    seen = [float(t) for t in re.findall(r"^([0-9.]+) epoch \d+/\d+: test accuracy", log, re.M)]
    for e, t in zip(evals, seen):
        e["seconds"] = t
    summary = json.load(open(f"{out}/{name}/summary.json"))
    # The rate over whole periods: the steps after the 32nd, every one (an average lands on
    # one step in 4 or 16, so a median would miss it).
    later = steps[32:]
    rate = sum(128 for _ in later) / sum(s["time"]["total"] for s in later)
    return {"samples_per_s": rate, "evals": evals, "final_test_accuracy": summary["test_accuracy"],
            "job_seconds": float(log.splitlines()[-1].split()[0]),
            "allreduce_s_per_step": statistics.mean(s["time"]["allreduce"] for s in later),
            "averages": summary.get("sync", {}).get("averages", 0),
            "stale_wait_s": summary.get("sync", {}).get("wait_s"),
            "load_average_before_after": [float(x) for x in open(f"{out}/{name}.load").read().split()]}

modes = ("sync", "local4", "local16", "stale1", "stale2")
names = ["np1"] + [f"{link}-{m}" for link in ("fast", "slow") for m in modes] + ["slow-stale2sums"]
runs = {n: run(n) for n in names}
for r in runs.values():
    r["speedup_vs_1_rank"] = r["samples_per_s"] / runs["np1"]["samples_per_s"]
# What dlh-launch said of Open MPI's TCP eager limit (launcher/comm/tcp_eager.hpp): None for a
# build from before it raised the limit.
eager = re.search(r"Open MPI's TCP eager limit: ([0-9.]+ MiB)", open(f"{out}/slow-sync.log").read())
json.dump({"spec": "share/examples/fashion-mnist.json", "epochs": epochs, "global_batch": 128,
           "threads_per_rank": 1, "slow_link": rate, "tcp_eager_limit": eager and eager[1],
           "runs": runs}, open(f"{out}/local_sgd.json", "w"), indent=1)
for n, r in runs.items():
    print(f"{n:<14} {r['samples_per_s']:7.0f} samples/s  x{r['speedup_vs_1_rank']:.2f}  "
          f"allreduce {1000 * r['allreduce_s_per_step']:6.1f} ms/step  final {r['final_test_accuracy']:.2%}  "
          f"job {r['job_seconds']:.0f} s")
PY
