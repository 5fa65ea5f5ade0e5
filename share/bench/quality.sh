#!/bin/bash
# make bench, "Training quality: DLH against PyTorch on Fashion-MNIST": the same networks
# trained by dlh-launch train and by PyTorch (share/bench/torch_spec.py) on the real data
# (Debian's dataset-fashion-mnist, 60,000 training and 10,000 test images), side by side:
# training-loss curves, test accuracy after every epoch, and the training time to a target
# test accuracy.
#   quality.sh BINDIR WORK   (6 networks x 2 frameworks x BENCH_QUALITY_EPOCHS epochs x
#                             BENCH_QUALITY_ROUNDS rounds: about 9 minutes per epoch and round
#                             for (a)-(e) and 1 more for (f) on 2 cores, so 50 to 55 minutes
#                             with the defaults)
# Writes WORK/quality/quality.json (every number), WORK/quality/quality.md (the section for
# BENCHMARKS.md) and WORK/quality/goals.jsonl (one goal per network), or
# WORK/quality/unavailable when the data set, torch or a run is missing; the section also goes
# to stdout. Knobs:
# BENCH_QUALITY_EPOCHS (5), BENCH_QUALITY_ROUNDS (1), BENCH_QUALITY_TARGET (test accuracy, 0.88),
# BENCH_QUALITY_REUSE (0; 1: keep the runs already in WORK/quality, train the missing ones),
# BENCH_QUALITY_NETS (every network; a comma-separated list of the names below, e.g.
# BENCH_QUALITY_NETS=resnet, trains, reports and writes goals for those alone: cnn wide example
# deep mlp resnet; the section then holds those networks only, so bench.sh, which stores it as
# the whole quality part, does not set it).
#
# The networks: (a) share/bench/quality-cnn.json (share/bench/cnn.json's layers, Adam lr 1e-3,
# batch 64), (b) share/bench/quality-wide.json (5x5 convolutions of 32 and 64 filters, a
# 1024-unit dense layer and dropout 0.4; Adam lr 1e-3, batch 64), (c) the example spec
# share/examples/fashion-mnist.json as it is (batch norm, dropout, SGD with Nesterov momentum,
# weight decay, warm-up + cosine), (d) share/bench/quality-deep.json (share/bench/cnn-deep.json's
# layers: two convolutions before each pool) and (e) share/bench/quality-mlp.json
# (share/bench/mlp.json's layers, batch 128), both with Adam lr 1e-3, so that every network of
# the throughput tables is also trained to the end, and (f) share/bench/quality-resnet.json, a
# small ResNet (a 16-filter convolution, batch norm and pool, then two residual blocks of two
# 3x3 convolutions with batch norm: an identity shortcut at 16 filters, then a 1x1 projection
# shortcut where the block halves the size to 7x7 and doubles the filters to 32; Adam lr 1e-3,
# batch 64); each for BENCH_QUALITY_EPOCHS epochs (the schedule spans them). Both sides read
# the same spec file: same model, initialisation (the spec's; none of these files names one,
# so its default), optimizer, schedule, batch and epochs; both draw a
# new random order of the training set every epoch and drop its last partial batch. The
# random streams differ (initial weights, order, dropout masks), so the curves agree
# statistically, not step by step. Round r uses seed r on both sides. One process, 2 threads
# each (dlh-launch --threads 2; torch.set_num_threads(2), OMP_WAIT_POLICY=PASSIVE as in
# bench.sh: libgomp's spinning workers would otherwise compete with the process's own
# threads on this 2-core machine), run one after the other, alternating which goes first.
#
# Times are training seconds since the first step began, evaluations excluded (DLH: from
# metrics.jsonl's `t`, less the gaps between each epoch's last step and its `eval` record;
# PyTorch: time.perf_counter around the epochs), so data loading and start-up count on
# neither side; the evaluation seconds and the whole process's seconds are in quality.json.
set -euo pipefail
bindir=$(cd "$1" && pwd) work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH" LC_ALL=C OPENBLAS_NUM_THREADS=2
py=/usr/bin/python3
out=$work/quality
# BENCH_QUALITY_REUSE=1 keeps the runs already in WORK/quality and trains only the missing
# ones (delete a run's files to train it again, e.g. after the machine was busy during it).
[[ ${BENCH_QUALITY_REUSE:-0} == 1 ]] || rm -rf "$out"
mkdir -p "$out"
rm -f "$out/unavailable"
epochs=${BENCH_QUALITY_EPOCHS:-5} rounds=${BENCH_QUALITY_ROUNDS:-1} target=${BENCH_QUALITY_TARGET:-0.88}
threads=2  # one process on the 2 cores, each side
source_dir=/usr/share/datasets/fashion-mnist

unavailable() { echo "$*" >"$out/unavailable"; echo "unavailable: $*" >&2; exit 0; }
[[ -d $source_dir ]] || unavailable "the Fashion-MNIST data set ($source_dir, Debian's dataset-fashion-mnist) is not installed"
$py -c 'import numpy, torch' 2>/dev/null || unavailable "$py has no torch or numpy (Debian's python3-torch)"
[[ -s $out/fm.h5 ]] ||
  dlh-data import-fashion-mnist --out "$out/fm.h5" --source "$source_dir" >"$out/import.log" 2>&1 ||
  unavailable "dlh-data import-fashion-mnist failed: $(tail -1 "$out/import.log")"

nets=("cnn:$root/share/bench/quality-cnn.json" "wide:$root/share/bench/quality-wide.json"
      "example:$root/share/examples/fashion-mnist.json" "deep:$root/share/bench/quality-deep.json"
      "mlp:$root/share/bench/quality-mlp.json" "resnet:$root/share/bench/quality-resnet.json")
# BENCH_QUALITY_NETS: some networks alone, in the order above; each keeps its place in the
# list, so which side starts it is the same as in a run of them all.
only=${BENCH_QUALITY_NETS:-}
for n in ${only//,/ }; do
  [[ " ${nets[*]%%:*} " == *" $n "* ]] ||
    { echo "BENCH_QUALITY_NETS: no network '$n' (networks: ${nets[*]%%:*})" >&2; exit 2; }
done
chosen=()
for entry in "${nets[@]}"; do
  [[ -z $only || ",$only," == *",${entry%%:*},"* ]] && chosen+=("$entry")
done
((${#chosen[@]})) || { echo "BENCH_QUALITY_NETS: no network named in '$only'" >&2; exit 2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; }
load() { cut -d' ' -f1 /proc/loadavg; }  # the machine may be shared: say how busy it was

# dlh NET ROUND SPEC: one dlh-launch train run, into $out/NET-rROUND-dlh/.
dlh() {
  local run=$out/$1-r$2-dlh t0 before
  [[ -s $run.process.json ]] && return 0  # kept from an earlier run (BENCH_QUALITY_REUSE=1)
  rm -rf "$run"
  before=$(load) t0=$(now)
  dlh-launch train "$3" --data "$out/fm.h5" --run-dir "$run" --epochs "$epochs" --threads "$threads" \
    --device cpu --no-resume --checkpoint-seconds 0 --no-epoch-checkpoints --progress none \
    >"$run.log" 2>&1 || unavailable "dlh-launch train ($1, round $2) failed: $(tail -1 "$run.log")"
  echo "{\"process_seconds\": $(elapsed "$t0"), \"load_before_after\": [$before, $(load)]}" >"$run.process.json"
}
# pytorch NET ROUND SPEC: one torch_spec.py run, into $out/NET-rROUND-torch.json.
pytorch() {
  local run=$out/$1-r$2-torch t0 before
  [[ -s $run.process.json ]] && return 0  # kept from an earlier run (BENCH_QUALITY_REUSE=1)
  before=$(load) t0=$(now)
  OMP_WAIT_POLICY=PASSIVE $py "$root/share/bench/torch_spec.py" --spec "$3" --epochs "$epochs" \
    --threads "$threads" --seed "$2" --out "$run.json" >"$run.log" 2>&1 ||
    unavailable "torch_spec.py ($1, round $2) failed: $(tail -1 "$run.log")"
  echo "{\"process_seconds\": $(elapsed "$t0"), \"load_before_after\": [$before, $(load)]}" >"$run.process.json"
}

for ((round = 1; round <= rounds; round++)); do
  for i in "${!nets[@]}"; do
    entry=${nets[$i]}
    net=${entry%%:*} spec=${entry#*:}
    [[ -z $only || ",$only," == *",$net,"* ]] || continue
    # The spec as both sides train it: this round's seed, the epochs, the imported data.
    variant=$out/$net-r$round.json
    $py - "$spec" "$variant" "$round" "$epochs" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["seed"], s["epochs"], s["dataset"] = int(sys.argv[3]), int(sys.argv[4]), "fm.h5"
json.dump(s, open(sys.argv[2], "w"), indent=2)
PY
    echo "quality: $net, round $round/$rounds, $epochs epochs" >&2
    # Which side starts alternates from one network to the next and, for each network, from
    # one round to the next: with one round, every other network starts with PyTorch.
    if (((round + i) % 2)); then
      dlh "$net" "$round" "$variant"
      pytorch "$net" "$round" "$variant"
    else
      pytorch "$net" "$round" "$variant"
      dlh "$net" "$round" "$variant"
    fi
  done
done

$py - "$out" "$root" "$epochs" "$rounds" "$target" "$threads" "${chosen[@]}" <<'PY'
import json, os, sys
out, root, epochs, rounds, target = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
threads = int(sys.argv[6])
nets = [e.split(":", 1) for e in sys.argv[7:]]
TOLERANCE = 0.003  # the goal's tolerance: DLH's final test accuracy may trail PyTorch's by 0.3 points


def dlh_run(run):
    """The per-epoch figures of one dlh-launch train run, from its metrics.jsonl."""
    recs = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if l.strip()]
    start = next(r for r in recs if r.get("event") == "start")
    steps = [r for r in recs if "event" not in r]
    evals = {r["epoch"]: r for r in recs if r.get("event") == "eval"}
    per_epoch, eval_before = [], 0.0
    for e in range(1, epochs + 1):
        s = [r for r in steps if r["epoch"] == e]
        ev = evals[e]
        last_t = s[-1]["t"]
        eval_s = ev["t"] - last_t  # the evaluation: from the epoch's last step record to its eval record
        per_epoch.append({"epoch": e, "step": s[-1]["step"], "steps": len(s),
                          "train_loss": sum(r["loss"] for r in s) / len(s),
                          "train_accuracy": sum(r["accuracy"] for r in s) / len(s),
                          "test_loss": ev["test_loss"], "test_accuracy": ev["test_accuracy"],
                          "seconds": last_t - start["t"] - eval_before,
                          "seconds_with_eval": ev["t"] - start["t"], "eval_seconds": eval_s})
        eval_before += eval_s
    return {"first_step_loss": steps[0]["loss"], "steps_per_epoch": per_epoch[0]["steps"],
            "epochs": per_epoch, "step_loss": [r["loss"] for r in steps],
            "train_seconds": per_epoch[-1]["seconds"], "eval_seconds": eval_before,
            "device": start.get("device")}


def torch_run(path):
    r = json.load(open(path))
    keep = ("first_step_loss", "steps_per_epoch", "epochs", "step_loss", "train_seconds",
            "eval_seconds", "torch", "init", "load_seconds", "train_samples", "test_samples")
    return {k: r[k] for k in keep}


def blocks(x, w=100):  # means of consecutive w-step blocks (the last one may be shorter)
    return [sum(x[i:i + w]) / len(x[i:i + w]) for i in range(0, len(x), w)]


def time_to_target(per_epoch):
    hit = next((e for e in per_epoch if e["test_accuracy"] >= target), None)
    return (hit["seconds"], hit["epoch"]) if hit else (None, None)


def mean(xs):
    return sum(xs) / len(xs)


result = {"epochs": epochs, "rounds": rounds, "seeds": list(range(1, rounds + 1)),
          "target_test_accuracy": target, "goal_tolerance": TOLERANCE, "threads": threads,
          "networks": {}}
for net, spec_path in nets:
    spec = json.load(open(spec_path))
    runs = {"dlh": [], "pytorch": []}
    for rnd in range(1, rounds + 1):
        for fw, r in (("dlh", dlh_run(f"{out}/{net}-r{rnd}-dlh")), ("pytorch", torch_run(f"{out}/{net}-r{rnd}-torch.json"))):
            proc = json.load(open(f"{out}/{net}-r{rnd}-{'dlh' if fw == 'dlh' else 'torch'}.process.json"))
            r.update(proc, seed=rnd)
            r["loss_curve_100"] = blocks(r.pop("step_loss"))
            r["time_to_target_s"], r["epoch_reaching_target"] = time_to_target(r["epochs"])
            r["final_test_accuracy"] = r["epochs"][-1]["test_accuracy"]
            runs[fw].append(r)
        # Same data, batch and drop-last policy: the same number of steps per epoch.
        if runs["dlh"][-1]["steps_per_epoch"] != runs["pytorch"][-1]["steps_per_epoch"]:
            sys.exit(f"{net}, round {rnd}: DLH ran {runs['dlh'][-1]['steps_per_epoch']} steps per epoch, "
                     f"PyTorch {runs['pytorch'][-1]['steps_per_epoch']}")
    # Means over the rounds, per epoch.
    summary = {}
    for fw, rs in runs.items():
        per_epoch = [{k: mean([r["epochs"][e][k] for r in rs])
                      for k in ("train_loss", "train_accuracy", "test_loss", "test_accuracy", "seconds",
                                "seconds_with_eval", "eval_seconds")} | {"epoch": e + 1}
                     for e in range(epochs)]
        t, ep = time_to_target(per_epoch)
        reached = [r["time_to_target_s"] for r in rs if r["time_to_target_s"] is not None]
        summary[fw] = {"epochs": per_epoch, "first_step_loss": mean([r["first_step_loss"] for r in rs]),
                       "final_test_accuracy": mean([r["final_test_accuracy"] for r in rs]),
                       "time_to_target_s": t, "epoch_reaching_target": ep,
                       "runs_reaching_target": len(reached),
                       "seconds_per_epoch": mean([r["train_seconds"] for r in rs]) / epochs,
                       "eval_seconds_per_epoch": mean([r["eval_seconds"] for r in rs]) / epochs,
                       "process_seconds": mean([r["process_seconds"] for r in rs])}
    diff = summary["dlh"]["final_test_accuracy"] - summary["pytorch"]["final_test_accuracy"]
    result["networks"][net] = {
        "spec": os.path.relpath(spec_path, root), "spec_name": spec.get("name"),
        "batch_size": spec["batch_size"], "optimizer": spec["optimizer"], "schedule": spec.get("schedule"),
        "init": spec.get("init", "default"), "summary": summary, "runs": runs,
        "final_accuracy_diff": diff, "goal_met": diff >= -TOLERANCE - 1e-12}
first = result["networks"][nets[0][0]]["runs"]["pytorch"][0]
result["train_samples"], result["test_samples"] = first["train_samples"], first["test_samples"]
json.dump(result, open(f"{out}/quality.json", "w"), indent=1)

# ---- markdown and goals
titles = {"cnn": "(a) small CNN", "wide": "(b) wide CNN", "example": "(c) the example spec",
          "deep": "(d) deep CNN", "mlp": "(e) MLP", "resnet": "(f) small ResNet"}


def layers_text(layers):
    """The layers in one line, from the spec's list: "conv 3x3x32 pad 1, relu, maxpool 2, ...";
    a residual block as "residual [main path | shortcut]", the shortcut "identity" where the
    spec gives none."""
    out = []
    for l in layers:
        t = l["type"]
        if t == "conv2d":
            out.append(f"conv {l['kernel']}x{l['kernel']}x{l['filters']}" +
                       (f" stride {l['stride']}" if l.get("stride", 1) != 1 else "") +
                       (f" pad {l['padding']}" if l.get("padding", 0) else ""))
        elif t == "maxpool2d":
            out.append(f"maxpool {l['kernel']}" + (f" stride {l['stride']}" if l.get("stride", l["kernel"]) != l["kernel"] else "") +
                       (f" pad {l['padding']}" if l.get("padding", 0) else ""))
        elif t == "dense":
            out.append(f"dense {l['units']}")
        elif t == "dropout":
            out.append(f"dropout {l['rate']:g}")
        elif t == "residual":
            shortcut = layers_text(l.get("shortcut") or []) or "identity"
            out.append(f"residual [{layers_text(l['layers'])} | {shortcut}]")
        else:
            out.append(t)
    return ", ".join(out)



def opt_text(o, sched):
    if o["type"] == "adam":
        t = f"Adam lr {o['lr']:g}"
    else:
        t = f"SGD lr {o['lr']:g}" + (f", momentum {o['momentum']:g}" if o.get("momentum") else "") + \
            (" (Nesterov)" if o.get("nesterov") else "")
    if o.get("weight_decay"):
        t += f", weight decay {o['weight_decay']:g}"
    if sched:
        parts = []
        if sched.get("warmup_epochs"):
            parts.append(f"{sched['warmup_epochs']:g}-epoch warm-up")
        if sched.get("decay", "constant") != "constant":
            parts.append(f"{sched['decay']} decay")
        if parts:
            t += ", " + " + ".join(parts)
    return t


def secs(x):
    return "not reached" if x is None else f"{x:.0f} s"


plural = lambda n, word: f"{n} {word}" + ("" if n == 1 else "s")
pct = lambda x: f"{100 * x:.2f}%"
L = ["## Training quality: DLH against PyTorch on Fashion-MNIST", ""]
torch_version = result["networks"][nets[0][0]]["runs"]["pytorch"][0]["torch"]
L += [f"share/bench/quality.sh: each network trained by `dlh-launch train --threads {threads}` and by PyTorch "
      f"{torch_version} (share/bench/torch_spec.py, the same spec file: model, initialisation, optimizer, "
      f"schedule, batch), {plural(epochs, 'epoch')} on the {result['train_samples']:,} training images, a new random "
      f"order every epoch, one process with {threads} threads each, alternating; "
      + (f"{rounds} rounds (seeds 1-{rounds}), figures are their means" if rounds > 1 else "seed 1")
      + f". Test accuracy on the {result['test_samples']:,} test images after every epoch; times are training seconds since the "
      "first step, evaluations excluded. The random streams (initial weights, data order, dropout) differ "
      "between the two, so the curves agree statistically, not step by step.", ""]
for net, _ in nets:
    n = result["networks"][net]
    d, p = n["summary"]["dlh"], n["summary"]["pytorch"]
    L += [f"### {titles.get(net, net)}: {n['spec']}", "",
          f"{layers_text(json.load(open(os.path.join(root, n['spec'])))['layers'])}; {opt_text(n['optimizer'], n['schedule'])}, "
          f"batch {n['batch_size']}, initialisation: "
          + (n["init"] if n["init"] != "default" else f"the spec's default ({n['runs']['pytorch'][0]['init']})") + ".", "",
          "| epoch | DLH train loss | PyTorch train loss | DLH test acc | PyTorch test acc | DLH time | PyTorch time |",
          "|---|---|---|---|---|---|---|"]
    for a, b in zip(d["epochs"], p["epochs"]):
        L.append(f"| {a['epoch']} | {a['train_loss']:.4f} | {b['train_loss']:.4f} | {pct(a['test_accuracy'])} | "
                 f"{pct(b['test_accuracy'])} | {a['seconds']:.0f} s | {b['seconds']:.0f} s |")
    tt = lambda s: secs(s["time_to_target_s"]) + (f" (epoch {s['epoch_reaching_target']})" if s["epoch_reaching_target"] else "")
    L += ["",
          f"First-step loss: DLH {d['first_step_loss']:.4f}, PyTorch {p['first_step_loss']:.4f}. "
          f"Time to {100 * target:g}% test accuracy: DLH {tt(d)}, PyTorch {tt(p)}. "
          f"Training time per epoch: DLH {d['seconds_per_epoch']:.1f} s, PyTorch {p['seconds_per_epoch']:.1f} s "
          f"(evaluation {d['eval_seconds_per_epoch']:.1f} s and {p['eval_seconds_per_epoch']:.1f} s). "
          f"Final test accuracy: DLH {pct(d['final_test_accuracy'])}, PyTorch {pct(p['final_test_accuracy'])}, "
          f"difference {100 * n['final_accuracy_diff']:+.2f} points.", ""]
open(f"{out}/quality.md", "w").write("\n".join(L))

def swing(n):
    """The largest change of test accuracy between consecutive epochs, over every run of a
    network: the yardstick for how far one run's final accuracy is from another's."""
    return max((abs(b["test_accuracy"] - a["test_accuracy"]) for rs in n["runs"].values()
                for r in rs for a, b in zip(r["epochs"], r["epochs"][1:])), default=0.0)


with open(f"{out}/goals.jsonl", "w") as g:  # whole: BENCH_QUALITY_REUSE keeps the folder
    for net, _ in nets:
        n = result["networks"][net]
        d, p = n["summary"]["dlh"], n["summary"]["pytorch"]
        g.write(json.dumps({
            "goal": f"Fashion-MNIST, {titles.get(net, net)} ({n['spec']}): DLH's final test accuracy after "
                    f"{plural(epochs, 'epoch')} ≥ PyTorch's (within {100 * TOLERANCE:g} points)",
            "measured": f"DLH {pct(d['final_test_accuracy'])}, PyTorch {pct(p['final_test_accuracy'])} "
                        f"({100 * n['final_accuracy_diff']:+.2f} points)",
            "met": n["goal_met"],
            "limit": f"one run per side and seed; between consecutive epochs the test accuracy moved by up "
                     f"to {100 * swing(n):.2f} points in these runs"}) + "\n")
print(open(f"{out}/quality.md").read())
PY
