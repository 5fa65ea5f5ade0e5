#!/bin/bash
# make bench's PyTorch side of "Training quality" (share/bench/torch_spec.py) builds the network
# a DLH spec describes, with the spec's initialisation: the same parameter count as DLH's own
# count for the example and the bench networks, each "init" convention's spread, and on the real
# Fashion-MNIST the same first-step loss as dlh-launch train (both near ln 10 with the default
# initialisation, PyTorch's); and for a residual network that uses every layer kind PyTorch has a
# twin of (residual blocks with and without a projection and nested, avgpool2d,
# globalavgpool2d, gelu, silu, batchnorm, label smoothing), a DLH checkpoint loaded into the
# PyTorch model gives DLH's test loss and accuracy, and one PyTorch SGD step from it lands on
# DLH's next checkpoint. About 40 seconds.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3  # Debian's, with python3-torch (make check installs it)
$py -c 'import torch' 2>/dev/null || fail "$py has no torch: install python3-torch (make deps)"
$py -c 'import h5py' 2>/dev/null || fail "$py has no h5py: install python3-h5py (make deps)"
export OMP_WAIT_POLICY=PASSIVE PYTHONDONTWRITEBYTECODE=1  # nothing written into the source tree

echo "== the same network: parameters counted by PyTorch and by dlh-estimate features"
specs=(share/examples/fashion-mnist.json share/bench/quality-cnn.json share/bench/quality-wide.json
  share/bench/quality-deep.json share/bench/quality-mlp.json share/bench/quality-resnet.json
  share/bench/cnn.json share/bench/mlp.json share/examples/resnet18-cifar.json share/examples/resnet50-imagenet.json)
# PyTorch's counts in one process: importing torch takes seconds, ten times over under load.
mapfile -t torch_counts < <($py - "$ROOT/share/bench" "${specs[@]/#/$ROOT/}" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import torch_spec
for path in sys.argv[2:]:
    model = torch_spec.build_model(json.load(open(path)))[0]
    print(sum(p.numel() for p in model.parameters()))
PY
)
((${#torch_counts[@]} == ${#specs[@]})) || fail "PyTorch counted ${#torch_counts[@]} of ${#specs[@]} networks"
for i in "${!specs[@]}"; do
  spec=${specs[i]} torch=${torch_counts[i]}
  dlh=$(dlh-estimate features "$ROOT/$spec" --json | $py -c "import json, sys; print(int(json.load(sys.stdin)['params']))")
  [[ $dlh == "$torch" ]] || fail "$spec: DLH counts $dlh parameters, the PyTorch model $torch"
  check "$spec: $dlh parameters on both sides"
done

echo "== each \"init\" gives its spread in the PyTorch model (conv 5x5x16 -> 32, fan_in 400, fan_out 800)"
$py - "$ROOT/share/bench" <<'PY' || fail "torch_spec.py's initialisations"
import json, math, sys
sys.path.insert(0, sys.argv[1])
import torch, torch_spec
torch.manual_seed(3)
fan_in, fan_out = 16 * 25, 32 * 25
want = {"he_normal": math.sqrt(2 / fan_in), "he_uniform": math.sqrt(2 / fan_in),
        "glorot_normal": math.sqrt(2 / (fan_in + fan_out)),
        "glorot_uniform": math.sqrt(2 / (fan_in + fan_out)),
        "torch_default": 1 / math.sqrt(3 * fan_in)}
for init, std in want.items():
    spec = {"input": {"channels": 16, "height": 8, "width": 8}, "classes": 10, "init": init,
            "layers": [{"type": "conv2d", "filters": 32, "kernel": 5},
                       {"type": "dense", "units": 10}]}
    conv = torch_spec.build_model(spec)[0][0]
    got = conv.weight.std().item()
    bias_zero = bool((conv.bias == 0).all())
    assert abs(got / std - 1) < 0.05, f"{init}: weight std {got:.5f}, want {std:.5f}"
    assert bias_zero == (init != "torch_default"), f"{init}: bias zero {bias_zero}"
    print(f"  ok: {init}: weight std {got:.5f} (formula {std:.5f}), bias {'zeros' if bias_zero else 'U(±1/sqrt(fan_in))'}")
PY

echo "== first-step loss on Fashion-MNIST: DLH and PyTorch from one spec"
dlh-data import-fashion-mnist --out "$WORK/fm.h5" >/dev/null
for net in quality-cnn quality-wide; do
  spec=$ROOT/share/bench/$net.json
  dlh-launch train "$spec" --data "$WORK/fm.h5" --run-dir "$WORK/$net" --max-steps 1 --no-eval \
    --progress none --no-resume --checkpoint-seconds 0 --no-epoch-checkpoints --threads 2 >/dev/null 2>&1 ||
    fail "$net: dlh-launch train"
  dlh_loss=$($py -c 'import json, sys; print(next(json.loads(l)["loss"] for l in open(sys.argv[1]) if "\"loss\"" in l))' \
    "$WORK/$net/metrics.jsonl")
  $py "$ROOT/share/bench/torch_spec.py" --spec "$spec" --epochs 1 --train-limit 128 --threads 2 \
    --out "$WORK/$net.torch.json" >"$WORK/$net.torch.log" 2>&1 || { cat "$WORK/$net.torch.log"; fail "$net: torch_spec.py"; }
  torch_loss=$(json_field "$WORK/$net.torch.json" first_step_loss)
  $py - "$dlh_loss" "$torch_loss" <<'PY' || fail "$net: first-step loss DLH $dlh_loss, PyTorch $torch_loss"
import math, sys
d, t = float(sys.argv[1]), float(sys.argv[2])
assert abs(d - math.log(10)) < 0.15 and abs(t - math.log(10)) < 0.15, (d, t)
PY
  check "$net: first-step loss DLH $(printf %.4f "$dlh_loss"), PyTorch $(printf %.4f "$torch_loss") (ln 10 = 2.3026)"
done
echo "== parity: DLH's checkpoints evaluated and trained on by PyTorch give DLH's figures"
# A training split of exactly one batch makes every step an epoch, so each step is followed
# by its checkpoint and a test-set evaluation (metrics.jsonl's "eval"), and the one batch
# holds the same samples on both sides whatever the order. 2,000 test images. 30 steps, so
# that the network's outputs depend on every layer's details: on a network fresh from its
# initialisation the test loss is near ln 10 whatever the layers do (PyTorch's tanh-GELU in
# place of DLH's exact one: test losses 1.4e-6 apart after 2 steps, 1.5e-4 after 29, and the
# last step's update 1.2e-2 of the step's change away; count_include_pad=False for avgpool2d:
# 1.4e-4 after 1 step, 9e-2 after 29). The last 2 checkpoints are kept.
$py - "$WORK/fm.h5" "$WORK/small.npz" <<'PY' || fail "writing the small data set"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    np.savez(sys.argv[2], x_train=f["train/images"][:128], y_train=f["train/labels"][:128],
             x_test=f["test/images"][:2000], y_test=f["test/labels"][:2000])
PY
dlh-data import-numpy --npz "$WORK/small.npz" --out "$WORK/small.h5" --classes 10 >/dev/null ||
  fail "dlh-data import-numpy of the small set"
# parity-plain: the layers PyTorch's twin had before residual networks (checks the check);
# parity-resnet: every new kind: residual blocks with the identity, with a projection
# shortcut and one inside another, avgpool2d with padding (padded cells count) and without,
# globalavgpool2d straight into dense, gelu, silu, batch norm inside the blocks, label
# smoothing.
cat >"$WORK/parity-plain.json" <<'JSON'
{"name": "parity-plain", "input": {"channels": 1, "height": 28, "width": 28}, "classes": 10,
 "layers": [
  {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
  {"type": "batchnorm", "momentum": 0.5},
  {"type": "relu"},
  {"type": "maxpool2d", "kernel": 2},
  {"type": "conv2d", "filters": 16, "kernel": 3, "stride": 2, "padding": 1},
  {"type": "batchnorm"},
  {"type": "relu"},
  {"type": "flatten"},
  {"type": "dense", "units": 10}],
 "optimizer": {"type": "sgd", "lr": 0.03, "momentum": 0.9, "weight_decay": 5e-4},
 "batch_size": 128, "epochs": 30, "seed": 3, "dataset": "small.h5"}
JSON
cat >"$WORK/parity-resnet.json" <<'JSON'
{"name": "parity-resnet", "input": {"channels": 1, "height": 28, "width": 28}, "classes": 10,
 "label_smoothing": 0.1, "init": "he_normal",
 "layers": [
  {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
  {"type": "batchnorm", "momentum": 0.5},
  {"type": "gelu"},
  {"type": "avgpool2d", "kernel": 3, "stride": 2, "padding": 1},
  {"type": "residual", "layers": [
    {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
    {"type": "batchnorm", "momentum": 0.5},
    {"type": "silu"},
    {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
    {"type": "batchnorm"}]},
  {"type": "relu"},
  {"type": "residual", "layers": [
    {"type": "conv2d", "filters": 16, "kernel": 3, "stride": 2, "padding": 1},
    {"type": "batchnorm"},
    {"type": "gelu"},
    {"type": "residual", "layers": [
      {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1},
      {"type": "batchnorm"}]},
    {"type": "silu"}],
   "shortcut": [
    {"type": "conv2d", "filters": 16, "kernel": 1, "stride": 2},
    {"type": "batchnorm", "momentum": 0.5}]},
  {"type": "silu"},
  {"type": "avgpool2d", "kernel": 2},
  {"type": "globalavgpool2d"},
  {"type": "dense", "units": 10}],
 "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4},
 "batch_size": 128, "epochs": 30, "seed": 3, "dataset": "small.h5"}
JSON
for net in parity-plain parity-resnet; do
  dlh-launch train "$WORK/$net.json" --data "$WORK/small.h5" --run-dir "$WORK/$net" --keep 2 \
    --progress none --no-resume --checkpoint-seconds 0 --threads 2 --device cpu >"$WORK/$net.log" 2>&1 ||
    { cat "$WORK/$net.log"; fail "$net: dlh-launch train"; }
  $py - "$ROOT/share/bench" "$WORK/$net.json" "$WORK/small.h5" "$WORK/$net" <<'PY' || fail "$net: DLH and PyTorch disagree"
import glob, json, math, os, sys
sys.path.insert(0, sys.argv[1])
import h5py, numpy as np, torch, torch_spec
from torch import nn

spec = json.load(open(sys.argv[2]))
data, run = sys.argv[3], sys.argv[4]
torch.set_num_threads(2)
smoothing = float(spec.get("label_smoothing", 0))


def split(f, name):  # as the loader (LoadSplit): uint8 * float32(1/255/std) + float32(-mean/std)
    mean, std = float(f.attrs["mean"]), float(f.attrs["std"])
    a, b = np.float32(1.0 / 255.0 / std), np.float32(-mean / std)
    x = f[name + "/images"][()]
    assert x.dtype == np.uint8, x.dtype
    return (torch.from_numpy(x.astype(np.float32) * a + b),
            torch.from_numpy(f[name + "/labels"][()].astype(np.int64)))


with h5py.File(data, "r") as f:
    train_x, train_y = split(f, "train")
    test_x, test_y = split(f, "test")
evals, step_loss = {}, {}
for line in open(os.path.join(run, "metrics.jsonl")):
    r = json.loads(line)
    if r.get("event") == "eval":
        evals[r["step"]] = r
    elif "event" not in r and "loss" in r:
        step_loss[r["step"]] = r["loss"]
ckpts = sorted(glob.glob(os.path.join(run, "checkpoints", "ckpt-*.h5")))
assert len(ckpts) == 2, ckpts

# (1) Each checkpoint in PyTorch, eval mode, on the test set: DLH's test loss (with the
# spec's label smoothing) within 1e-4 relative, the same accuracy (one sample of slack).
model, steps = torch_spec.build_model(spec)[0], []
for path in ckpts:
    step = int(torch_spec.load_dlh_checkpoint(model, path)["step"])
    steps.append(step)
    loss, acc = torch_spec.evaluate(model, test_x, test_y, label_smoothing=smoothing)
    d = evals[step]
    rel = abs(loss - d["test_loss"]) / abs(d["test_loss"])
    print(f"  ok: step {step}: test loss DLH {d['test_loss']:.6f}, PyTorch {loss:.6f} (relative "
          f"difference {rel:.1e}); test accuracy DLH {d['test_accuracy']:.4f}, PyTorch {acc:.4f}")
    assert rel < 1e-4, f"step {step}: the test losses differ by {rel:.1e} relative"
    assert abs(acc - d["test_accuracy"]) * len(test_y) < 1.5, f"step {step}: the accuracies differ"

# (2) Backward and SGD: from the last but one checkpoint (parameters, batch-norm buffers,
# momentum), one PyTorch step on the same batch gives DLH's loss of the last step and lands on
# the last checkpoint: per array, the difference within 1e-3 of the step's change, plus float32 noise
# (1e-5 per value: a conv bias before batch norm has a gradient of zero, only noise).
model, decayed, plain = torch_spec.build_model(spec)
torch_spec.load_dlh_checkpoint(model, ckpts[0])
opt = torch_spec.make_optimizer(spec, decayed, plain)
with h5py.File(ckpts[0], "r") as f:
    for n, t in model.dlh_params:
        if isinstance(t, nn.Parameter):
            opt.state[t]["momentum_buffer"] = torch.from_numpy(
                f["optimizer/" + n + "/momentum"][()]).reshape(t.shape).clone()
before = {n: t.detach().clone() for n, t in model.dlh_params}
model.train()
assert steps[1] == steps[0] + 1, steps
last = steps[1]
for g in opt.param_groups:  # the rate of the last step (0-based step last - 1, one step an epoch)
    g["lr"] = torch_spec.learning_rate(spec, int(spec["epochs"]), last - 1, 1)
opt.zero_grad()
loss = nn.functional.cross_entropy(model(train_x), train_y, label_smoothing=smoothing)
loss.backward()
opt.step()
rel = abs(float(loss) - step_loss[last]) / step_loss[last]
print(f"  ok: step {last}: training loss DLH {step_loss[last]:.6f}, PyTorch {float(loss):.6f} "
      f"(relative difference {rel:.1e})")
assert rel < 1e-4, f"step {last}: the training losses differ by {rel:.1e} relative"
worst, bad = (0.0, ""), []
with h5py.File(ckpts[1], "r") as f:
    for n, t in model.dlh_params:
        group = "buffers/" if n.endswith(("/running_mean", "/running_var")) else "params/"
        want = torch.from_numpy(f[group + n][()]).reshape(t.shape)
        change, diff = float((want - before[n]).norm()), float((t.detach() - want).norm())
        if diff > 1e-3 * change + 1e-5 * math.sqrt(t.numel()):
            bad.append(f"{n}: differs by {diff:.2e}, the step changed it by {change:.2e}")
        if change > 1e-5 * math.sqrt(t.numel()):
            worst = max(worst, (diff / change, n))
assert not bad, f"step {last} from step {last - 1}'s checkpoint: " + "; ".join(bad)
print(f"  ok: step {last} from step {last - 1}'s checkpoint: all {len(before)} arrays match DLH's, "
      f"the largest difference {worst[0]:.1e} of the step's change ({worst[1]})")
PY
  check "$net: DLH and PyTorch agree"
done
echo "== the one-cycle schedule: DLH's rate at every step is PyTorch's OneCycleLR"
# 128 training samples at batch 16: 8 steps an epoch, 3 epochs, so both phases have steps.
$py - "$WORK/parity-plain.json" "$WORK/onecycle.json" <<'PY' || fail "writing the one-cycle spec"
import json, sys
spec = json.load(open(sys.argv[1]))
spec.update(name="onecycle", batch_size=16, epochs=3,
            schedule={"decay": "onecycle", "pct_start": 0.25, "div_factor": 10, "final_div_factor": 100})
json.dump(spec, open(sys.argv[2], "w"))
PY
dlh-launch train "$WORK/onecycle.json" --data "$WORK/small.h5" --run-dir "$WORK/onecycle" --no-eval \
  --progress none --no-resume --checkpoint-seconds 0 --no-epoch-checkpoints --threads 2 --device cpu \
  >"$WORK/onecycle.log" 2>&1 || { cat "$WORK/onecycle.log"; fail "onecycle: dlh-launch train"; }
$py - "$ROOT/share/bench" "$WORK/onecycle.json" "$WORK/onecycle/metrics.jsonl" <<'PY' ||
import json, sys
sys.path.insert(0, sys.argv[1])
import torch, torch_spec
spec = json.load(open(sys.argv[2]))
# DLH logs the rate each step trained with, under that step's number (counted from 1).
dlh = {r["step"]: r["lr"] for r in map(json.loads, open(sys.argv[3])) if "lr" in r and "loss" in r}
total = 3 * 8
assert sorted(dlh) == list(range(1, total + 1)), sorted(dlh)
max_lr = float(spec["optimizer"]["lr"])
opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=max_lr)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=max_lr, total_steps=total, pct_start=0.25,
                                            div_factor=10, final_div_factor=100, anneal_strategy="cos",
                                            three_phase=False, cycle_momentum=False)
worst = 0.0
for step in range(total):
    torch_lr = opt.param_groups[0]["lr"]
    twin = torch_spec.learning_rate(spec, 3, step, 8)
    for name, lr in (("DLH", dlh[step + 1]), ("torch_spec.py", twin)):
        assert abs(lr - torch_lr) <= 1e-12 + 1e-9 * torch_lr, f"step {step}: {name} {lr}, OneCycleLR {torch_lr}"
    worst = max(worst, abs(dlh[step + 1] - torch_lr) / torch_lr)
    opt.step()
    sched.step()
print(f"  ok: {total} steps from {dlh[1]:.4g} up to {max(dlh.values()):.4g} and down to {dlh[total]:.4g}: "
      f"DLH, torch_spec.py and OneCycleLR agree (largest relative difference {worst:.1e})")
PY
  fail "onecycle: DLH's rates are not PyTorch's"

echo "torch_spec.sh: all checks passed"
