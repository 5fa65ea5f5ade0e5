#!/bin/bash
# make bench's PyTorch side of "Training quality" (share/bench/torch_spec.py) builds the network
# a DLH spec describes, with the spec's initialisation: the same parameter count as DLH's own
# count for the example and the bench networks, each "init" convention's spread, and on the real
# Fashion-MNIST the same first-step loss as dlh-launch train (both near ln 10 with the default
# initialisation, PyTorch's). About 30 seconds.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3  # Debian's, with python3-torch (make check installs it)
$py -c 'import torch' 2>/dev/null || fail "$py has no torch: install python3-torch (make deps)"
export OMP_WAIT_POLICY=PASSIVE PYTHONDONTWRITEBYTECODE=1  # nothing written into the source tree

echo "== the same network: parameters counted by PyTorch and by dlh-estimate features"
for spec in share/examples/fashion-mnist.json share/bench/quality-cnn.json share/bench/quality-wide.json \
  share/bench/quality-deep.json share/bench/quality-mlp.json share/bench/cnn.json share/bench/mlp.json; do
  dlh=$(dlh-estimate features "$ROOT/$spec" --json | $py -c "import json, sys; print(int(json.load(sys.stdin)['params']))")
  torch=$($py - "$ROOT/share/bench" "$ROOT/$spec" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import torch_spec
model = torch_spec.build_model(json.load(open(sys.argv[2])))[0]
print(sum(p.numel() for p in model.parameters()))
PY
  )
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
echo "torch_spec.sh: all checks passed"
