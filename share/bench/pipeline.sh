#!/bin/bash
# make bench, "Pipeline parallelism: the bubble, and the largest network under a memory cap"
# (issue 47):
# 1. the example Fashion-MNIST spec on this machine (mpirun, 1 OpenBLAS thread a rank), on 1
#    rank, on 2 ranks data-parallel, and as 2 pipeline stages with 2, 4 and 8 micro-batches:
#    samples/s, the bubble the stages measure (summary.json parallel.bubble_measured: seconds
#    passing and waiting for activations over compute seconds) against GPipe's
#    (P - 1) / (M + P - 1), and the estimator's step (dlh-estimate recommend on
#    share/cluster/local.json's alpha, 2 ranks) against the measured one;
# 2. MLPs of growing width (3 hidden layers) under a 0.5 GB device cap, planned by
#    dlh-estimate recommend --memory-cap on 2 to 4 ranks: whole on every rank or as a pipeline,
#    and the widest of each; the widest that only a pipeline holds then trains 20 steps as
#    planned, its ranks' peak RSS against the plan's memory per rank.
#   pipeline.sh BINDIR WORK   (about 4 minutes on 2 cores; BENCH_PIPELINE_ROUNDS rounds, 3)
# Writes WORK/pipeline/pipeline.json, or WORK/pipeline/unavailable.
set -euo pipefail
bindir=$(cd "$1" && pwd) out=$2/pipeline
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH" LC_ALL=C OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
py=/usr/bin/python3
steps=${BENCH_PIPELINE_STEPS:-150} cap=${BENCH_PIPELINE_CAP:-0.5}
rounds=${BENCH_PIPELINE_ROUNDS:-3}
rm -rf "$out"
mkdir -p "$out"
unavailable() { echo "$*" >"$out/unavailable"; echo "unavailable: $*" >&2; exit 0; }
command -v mpirun >/dev/null || unavailable "mpirun is not installed"
# The cluster the estimator plans on: share/cluster/local.json, its alpha timed by
# BENCH_CALIBRATION when set (make bench: its calibration of this host, as the whole jobs are
# planned; 2026-12-02 on an AVX-512 host the shipped cpu.json, which check-calibration refuses
# there, predicted the steps 74-77% long), else by the calibration local.json names.
cluster=$root/share/cluster/local.json
export PIPELINE_PLANNED_WITH="the calibration local.json names"
if [[ -n ${BENCH_CALIBRATION:-} ]]; then
  cluster=$out/cluster.json
  PIPELINE_PLANNED_WITH="make bench's calibration of this host"
  $py - "$root/share/cluster/local.json" "$BENCH_CALIBRATION" "$cluster" <<'PY'
import json, sys
source, calibration, out = sys.argv[1:]
c = json.load(open(source))
for g in c["gpu_types"] + c.get("cpu_node_types", []):
    if g.get("calibration"):
        g["calibration"] = calibration
json.dump(c, open(out, "w"), indent=1)
PY
fi
dlh-data import-fashion-mnist --out "$out/fashion-mnist.h5" >"$out/import.txt" 2>&1 ||
  unavailable "dlh-data import-fashion-mnist: $(tail -1 "$out/import.txt")"

# 1. The example spec, pipelined and not.
for m in 0 2 4 8; do
  $py - "$root/share/examples/fashion-mnist.json" "$m" >"$out/fm-m$m.json" <<'PY'
import json, sys
spec, m = json.load(open(sys.argv[1])), int(sys.argv[2])
if m:
    spec["parallel"] = {"pipeline_stages": 2, "micro_batches": m}
print(json.dumps(spec, indent=1))
PY
done
train() {  # train NAME RANKS SPEC
  mpirun -np "$2" dlh-launch train "$3" --data "$out/fashion-mnist.h5" --run-dir "$out/$1" \
    --threads 1 --progress none --no-resume --max-steps "$steps" --checkpoint-seconds 0 \
    --no-epoch-checkpoints >"$out/$1.log" 2>&1 || unavailable "run $1 failed: $(tail -1 "$out/$1.log")"
  echo "$1: done" >&2
}
# Rounds, the configurations rotated in each, so that a slow spell of this noisy machine (the
# same 2-stage run measured 53.8 and 59.7 ms a step half an hour apart) falls on every
# configuration alike; each is judged by the median of its rounds.
configs=("np1 1 $out/fm-m0.json" "dp2 2 $out/fm-m0.json" "pipe-m2 2 $out/fm-m2.json"
         "pipe-m4 2 $out/fm-m4.json" "pipe-m8 2 $out/fm-m8.json")
for ((r = 1; r <= rounds; r++)); do
  for ((k = 0; k < ${#configs[@]}; k++)); do
    read -r name ranks spec <<<"${configs[$(((k + r - 1) % ${#configs[@]}))]}"
    train "$name-r$r" "$ranks" "$spec"
  done
done
for m in 2 4 8; do
  dlh-estimate recommend "$out/fm-m$m.json" --cluster "$cluster" \
    --types alpha --max-gpus 2 --samples 60000 --json >"$out/plan-m$m.json" 2>"$out/plan-m$m.err" ||
    unavailable "dlh-estimate recommend (micro-batches $m): $(tail -1 "$out/plan-m$m.err")"
done
# The same calibration's step for the 2-rank data-parallel run (the fastest plan on 2 ranks of
# 1 thread): how far the calibration itself is from these rounds, beside the pipelines' error.
dlh-estimate recommend "$out/fm-m0.json" --cluster "$cluster" --types alpha --max-gpus 2 \
  --objective time --samples 60000 --json >"$out/plan-dp2.json" 2>"$out/plan-dp2.err" ||
  unavailable "dlh-estimate recommend (2 ranks): $(tail -1 "$out/plan-dp2.err")"
# The forward each backward runs again is priced at the forward's share of the stage's FLOPs:
# that share against the forwards timed, every validation model's layers one by one, by the
# same calibration (validate --layers; about 10 s). Only reported: no goal rests on it.
dlh-estimate validate --calibration "${BENCH_CALIBRATION:-$root/share/calibration/cpu.json}" \
  --layers --set all --rounds 3 --threads 1 --markdown >"$out/layers.md" 2>"$out/layers.err" ||
  { echo "validate --layers: $(tail -1 "$out/layers.err")" >"$out/layers.md"; }

# 2. The widest MLP under the cap, whole and pipelined.
widths=(512 1024 1536 2048 2560 3072 3584 4096 4608 5120 5632 6144)
dlh-data synthetic --out "$out/mlp.h5" --shape 1x28x28 --classes 10 --train 2560 --test 128 \
  --seed 3 >/dev/null
for w in "${widths[@]}"; do
  cat >"$out/mlp-$w.json" <<JSON
{"name": "mlp-$w", "input": {"channels": 1, "height": 28, "width": 28}, "classes": 10,
 "layers": [{"type": "flatten"}, {"type": "dense", "units": $w}, {"type": "relu"},
            {"type": "dense", "units": $w}, {"type": "relu"}, {"type": "dense", "units": $w},
            {"type": "relu"}, {"type": "dense", "units": 10}],
 "optimizer": {"type": "sgd", "lr": 0.01, "momentum": 0.9}, "batch_size": 128, "epochs": 1,
 "dataset": "$out/mlp.h5"}
JSON
  dlh-estimate recommend "$out/mlp-$w.json" --cluster "$cluster" \
    --types alpha --max-gpus 4 --samples 2560 --memory-cap "$cap" --json \
    >"$out/mlp-plan-$w.json" 2>"$out/mlp-plan-$w.err" || true
done
widest=$($py - "$out" "${widths[@]}" <<'PY'
import json, os, sys
out, widths = sys.argv[1], sys.argv[2:]
best = ""
for w in widths:
    p = f"{out}/mlp-plan-{w}.json"
    if os.path.getsize(p) and json.load(open(p)).get("parallel"):
        best = w
print(best)
PY
)
if [[ -n $widest ]]; then
  ranks=$($py -c "import json,sys; p=json.load(open(sys.argv[1])); print(p['allocation']['gpus'])" "$out/mlp-plan-$widest.json")
  mpirun -np "$ranks" dlh-launch train "$out/mlp-$widest.json" --plan "$out/mlp-plan-$widest.json" \
    --run-dir "$out/mlp-run" --threads 1 --progress none --no-resume --max-steps 20 \
    --checkpoint-seconds 0 --no-epoch-checkpoints >"$out/mlp-run.log" 2>&1 ||
    unavailable "the $widest-wide MLP's pipeline failed: $(tail -1 "$out/mlp-run.log")"
  echo "mlp-$widest: trained as planned on $ranks ranks" >&2
fi

$py - "$out" "$steps" "$cap" "$rounds" "$widest" "${widths[@]}" <<'PY'
import json, os, statistics, sys
out, steps, cap, rounds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
widest, widths = sys.argv[5], sys.argv[6:]

def one(name):
    recs = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl")]
    later = [r for r in recs if "loss" in r][20:]
    s = json.load(open(f"{out}/{name}/summary.json"))
    return {"step_s": statistics.median(r["time"]["total"] for r in later),
            "parallel": s.get("parallel"),
            "peak_rss_mib": s.get("rank_process", {}).get("peak_rss_mib")}

def run(name):
    # Each round's median step; the configuration's step is the median of the rounds, and its
    # bubble and memory those of that round (the upper middle one for an even count).
    each = sorted((one(f"{name}-r{r}") for r in range(1, rounds + 1)), key=lambda x: x["step_s"])
    mid = dict(each[len(each) // 2])
    mid["round_steps_s"] = [x["step_s"] for x in each]
    mid["samples_per_s"] = 128 / mid["step_s"]
    return mid

runs = {n: run(n) for n in ["np1", "dp2", "pipe-m2", "pipe-m4", "pipe-m8"]}
for m in (2, 4, 8):
    plan = json.load(open(f"{out}/plan-m{m}.json"))
    runs[f"pipe-m{m}"]["predicted_step_s"] = plan["predicted"]["step_s"]
    runs[f"pipe-m{m}"]["planned_bubble"] = plan.get("parallel", {}).get("bubble")
    runs[f"pipe-m{m}"]["planned_stage_busy_s"] = plan.get("parallel", {}).get("stage_busy_s")
plan = json.load(open(f"{out}/plan-dp2.json"))
if plan["allocation"]["gpus"] == 2:
    runs["dp2"]["predicted_step_s"] = plan["predicted"]["step_s"]
mlp = []
for w in widths:
    p = f"{out}/mlp-plan-{w}.json"
    row = {"width": int(w)}
    if os.path.getsize(p):
        plan = json.load(open(p))
        par = plan.get("parallel")
        row.update(mode="pipeline" if par else "whole", gpus=plan["allocation"]["gpus"],
                   stages=par["pipeline_stages"] if par else 1,
                   memory_per_rank_bytes=par["memory_per_gpu_bytes"] if par else None)
    else:
        row.update(mode="refused", why=open(f"{out}/mlp-plan-{w}.err").read().strip()[-200:])
    hidden = int(w)
    row["params"] = 784 * hidden + hidden + 2 * (hidden * hidden + hidden) + hidden * 10 + 10
    mlp.append(row)
trained = None
if widest:
    s = json.load(open(f"{out}/mlp-run/summary.json"))
    trained = {"width": int(widest), "steps": s["steps"], "parallel": s.get("parallel"),
               "peak_rss_mib": s.get("rank_process", {}).get("peak_rss_mib")}
json.dump({"spec": "share/examples/fashion-mnist.json", "steps": steps, "rounds": rounds,
           "global_batch": 128,
           "cap_gb": cap, "runs": runs, "mlp": mlp, "trained": trained,
           "planned_with": os.environ.get("PIPELINE_PLANNED_WITH", "")},
          open(f"{out}/pipeline.json", "w"), indent=1)
for n, r in runs.items():
    par = r["parallel"] or {}
    print(f"{n:<8} {r['samples_per_s']:6.0f} samples/s  bubble {par.get('bubble_measured', 0):.2f} "
          f"(predicted {par.get('bubble_predicted', 0):.2f})  step {1000 * r['step_s']:.1f} ms "
          f"(predicted {1000 * r.get('predicted_step_s', 0):.1f})")
for row in mlp:
    print(row)
print("trained:", trained)
PY
