#!/bin/bash
# make bench, "A rank's memory: predicted against measured": what `dlh-estimate features`
# predicts a model needs at a batch (memory_bytes, the figure recommend fits into a device's
# memory and a pipeline's stages into a cap) against the peak resident memory of
# `dlh-launch train` running it on this machine's CPU engine (summary.json's
# rank_process.peak_rss_mib, the process's ru_maxrss).
#   memory.sh BINDIR WORK   writes WORK/memory/ (results.json, logs): bench.sh's `measure`
# One rank, 1 thread, 2 steps of synthetic data of each model's input shape; the run ends with
# its final checkpoint, as every run does. The process's own share (libraries, MPI, the loader,
# start-up) is measured the same way with a model of 7,850 parameters. Each model runs at two
# batches, so that what grows with the batch (activations, workspace) is measured apart from
# what does not (parameters, gradients, optimizer state, the checkpoint's copy). Two models
# also run as pipelines of 2 stages on 2 ranks, each stage's rank against its stage's figure.
# About 2 minutes on 2 cores (ResNet-50 at 224x224 most of it).
set -euo pipefail
bindir=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
export PATH="$bindir:$PATH" LC_ALL=C OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=${2:?usage: memory.sh BINDIR WORK}
out=$work/memory
rm -rf "$out"
mkdir -p "$out"
t_begin=$SECONDS

dlh-data synthetic --out "$out/gray28.h5" --shape 1x28x28 --classes 10 --train 600 --test 16 --seed 5 >/dev/null
dlh-data synthetic --out "$out/rgb32.h5" --shape 3x32x32 --classes 10 --train 128 --test 16 --seed 5 >/dev/null
dlh-data synthetic --out "$out/rgb224.h5" --shape 3x224x224 --classes 1000 --train 8 --test 2 --seed 6 >/dev/null

# mlp NAME WIDTH HIDDEN: an MLP on 1x28x28 of HIDDEN layers of WIDTH, SGD with momentum.
mlp() {
  $py - "$out/$1.json" "$2" "$3" <<'PY'
import json, sys
path, width, hidden = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
layers = [{"type": "flatten"}]
for _ in range(hidden):
    layers += [{"type": "dense", "units": width}, {"type": "relu"}]
layers.append({"type": "dense", "units": 10})
json.dump({"name": path.rsplit("/", 1)[-1][:-5], "input": {"channels": 1, "height": 28, "width": 28},
           "classes": 10, "layers": layers,
           "optimizer": {"type": "sgd", "lr": 0.01, "momentum": 0.9},
           "batch_size": 128, "epochs": 1, "dataset": "gray28.h5"}, open(path, "w"), indent=1)
PY
}
mlp base-softmax 10 0  # flatten and one dense layer: the process's own share
mlp mlp-2048x3 2048 3
mlp mlp-5632x3 5632 3
# Held out: a network of the layers the cases above do not use (a strided convolution, GELU,
# SiLU, average and global pooling, Adam), written after the CPU engine's count was, as were
# the rows of quality-resnet.json and cnn-deep.json below (held_out in results.json).
$py - "$out/smooth-adam.json" <<'PY'
import json, sys
json.dump({"name": "smooth-adam", "input": {"channels": 3, "height": 32, "width": 32},
           "classes": 10, "layers": [
               {"type": "conv2d", "filters": 48, "kernel": 3, "stride": 2, "padding": 1},
               {"type": "gelu"},
               {"type": "conv2d", "filters": 96, "kernel": 3, "padding": 1},
               {"type": "batchnorm"}, {"type": "silu"},
               {"type": "avgpool2d", "kernel": 2},
               {"type": "conv2d", "filters": 128, "kernel": 3, "padding": 1},
               {"type": "relu"}, {"type": "globalavgpool2d"}, {"type": "flatten"},
               {"type": "dropout", "rate": 0.2}, {"type": "dense", "units": 10}],
           "optimizer": {"type": "adam", "lr": 0.001},
           "batch_size": 64, "epochs": 1, "dataset": "rgb32.h5"}, open(sys.argv[1], "w"), indent=1)
PY

# NAME SPEC DATA BATCH BATCH
cases=(
  "base-softmax $out/base-softmax.json gray28.h5 16 128"
  "mlp-2048x3 $out/mlp-2048x3.json gray28.h5 16 128"
  "mlp-5632x3 $out/mlp-5632x3.json gray28.h5 16 128"
  "fashion-mnist $root/share/examples/fashion-mnist.json gray28.h5 16 128"
  "bench-cnn $root/share/bench/cnn.json gray28.h5 16 128"
  "quality-wide $root/share/bench/quality-wide.json gray28.h5 16 128"
  "quality-deep $root/share/bench/quality-deep.json gray28.h5 16 128"
  "resnet18-cifar $root/share/examples/resnet18-cifar.json rgb32.h5 8 32"
  "resnet50-imagenet $root/share/examples/resnet50-imagenet.json rgb224.h5 1 2"
  "quality-resnet $root/share/bench/quality-resnet.json gray28.h5 16 128 held-out"
  "cnn-deep $root/share/bench/cnn-deep.json gray28.h5 16 128 held-out"
  "smooth-adam $out/smooth-adam.json rgb32.h5 16 64 held-out"
)
: >"$out/rows.jsonl"
for c in "${cases[@]}"; do
  read -r name spec data b1 b2 held <<<"$c"
  for b in "$b1" "$b2"; do
    run=$out/run-$name-$b
    dlh-estimate features "$spec" --batch "$b" --engine cpu --json >"$out/features-$name-$b.json"
    dlh-launch train "$spec" --data "$out/$data" --batch-size "$b" --run-dir "$run" --max-steps 2 \
      --threads 1 --no-eval --progress none --no-resume --no-plan --checkpoint-seconds 0 \
      --no-epoch-checkpoints >"$out/train-$name-$b.log" 2>&1 ||
      { tail -3 "$out/train-$name-$b.log" >&2; echo "memory.sh: $name at batch $b did not train" >&2; exit 1; }
    $py - "$name" "$spec" "$b" "$out/features-$name-$b.json" "$run/summary.json" "${held:-}" \
      >>"$out/rows.jsonl" <<'PY'
import json, sys
name, spec, batch, features, summary, held = sys.argv[1:]
f, s = json.load(open(features)), json.load(open(summary))
rss = s["rank_process"]["peak_rss_mib"]
row = {"model": name, "spec": spec, "batch": int(batch), "params": f["params"],
       "activation_elements": f["activation_elements"], "predicted_bytes": f["memory_bytes"],
       "peak_rss_mib": rss[0] if isinstance(rss, list) else rss}
if held:
    row["held_out"] = True
print(json.dumps(row))
PY
    rm -rf "$run"
  done
  echo "== memory: $name measured, $((SECONDS - t_begin)) s" >&2
done

# Pipelines: 2 stages of 4 micro-batches on 2 ranks; each stage's figure (features
# --pipeline-stages) against its rank's peak, less that rank's share in a 2-rank run of the
# 7,850-parameter model.
mpirun -np 2 --oversubscribe dlh-launch train "$out/base-softmax.json" --data "$out/gray28.h5" \
  --batch-size 32 --run-dir "$out/run-base2" --max-steps 2 --threads 1 --no-eval --progress none \
  --no-resume --no-plan --checkpoint-seconds 0 --no-epoch-checkpoints >"$out/train-base2.log" 2>&1 ||
  { tail -3 "$out/train-base2.log" >&2; echo "memory.sh: the 2-rank base did not train" >&2; exit 1; }
# NAME SPEC DATA REPLICA_BATCH
pipelines=(
  "mlp-5632x3 $out/mlp-5632x3.json gray28.h5 128"
  "resnet18-cifar $root/share/examples/resnet18-cifar.json rgb32.h5 32"
)
for c in "${pipelines[@]}"; do
  read -r name spec data b <<<"$c"
  piped=$out/$name-2-stages.json run=$out/run-$name-2-stages
  $py - "$spec" "$piped" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["parallel"] = {"pipeline_stages": 2, "micro_batches": 4}
json.dump(s, open(sys.argv[2], "w"), indent=1)
PY
  dlh-estimate features "$piped" --batch "$b" --engine cpu --json >"$out/features-$name-2-stages.json"
  mpirun -np 2 --oversubscribe dlh-launch train "$piped" --data "$out/$data" --batch-size "$b" \
    --run-dir "$run" --max-steps 2 --threads 1 --no-eval --progress none --no-resume --no-plan \
    --checkpoint-seconds 0 --no-epoch-checkpoints >"$out/train-$name-2-stages.log" 2>&1 ||
    { tail -3 "$out/train-$name-2-stages.log" >&2; echo "memory.sh: $name in 2 stages did not train" >&2; exit 1; }
  $py - "$name" "$spec" "$b" "$out/features-$name-2-stages.json" "$run/summary.json" \
    "$out/run-base2/summary.json" >>"$out/rows.jsonl" <<'PY'
import json, sys
name, spec, batch, features, summary, base = sys.argv[1:]
f, s, b = json.load(open(features)), json.load(open(summary)), json.load(open(base))
peaks, shares = s["rank_process"]["peak_rss_mib"], b["rank_process"]["peak_rss_mib"]
for stage, predicted in enumerate(f["stage_memory_bytes"]):
    print(json.dumps({"model": f"{name}, stage {stage} of 2", "spec": spec, "batch": int(batch),
                      "stage": stage, "micro_batches": 4, "params": f["params"],
                      "activation_elements": f["activation_elements"],
                      "predicted_bytes": predicted, "peak_rss_mib": peaks[stage],
                      "share_rss_mib": shares[stage]}))
PY
  rm -rf "$run"
  echo "== memory: $name in 2 stages measured, $((SECONDS - t_begin)) s" >&2
done
rm -rf "$out/run-base2"
rm -f "$out"/*.h5
$py - "$out" "$root" "$((SECONDS - t_begin))" <<'PY'
import json, os, sys
out, root, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(l) for l in open(os.path.join(out, "rows.jsonl"))]
for r in rows:
    r["spec"] = os.path.relpath(r["spec"], root) if r["spec"].startswith(root) else \
        "generated by share/bench/memory.sh"
json.dump({"rows": rows, "threads": 1, "steps": 2, "seconds": seconds,
           "load_average": open("/proc/loadavg").read().split()[0]},
          open(os.path.join(out, "results.json"), "w"), indent=1)
PY
