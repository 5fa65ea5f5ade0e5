#!/bin/bash
# A spec and a trained model for use outside DLH (issue 45): `dlh-launch export`.
#   1. `export SPEC --pytorch prog.py` on a spec of every layer kind (conv2d with each init,
#      batch norm 2d and 1d, the pools, gelu/silu/relu, dropout, flatten, dense, residual
#      blocks with an identity and a conv shortcut, nested): the program's Net has the
#      network's parameter count, and a DLH checkpoint of a 2-rank run loads into it
#      (--from-dlh ... --evaluate) and gives DLH's own test loss (1e-5) and accuracy (the
#      same count), the export of the run folder being the same program;
#   2. `export RUN --torch m.pt --onnx m.onnx`: the state dict loads into the program's Net
#      and gives `dlh-launch predict`'s probabilities within 1e-5; the ONNX model passes
#      onnx.checker, holds the state dict's arrays by name, takes a batch of any size, and
#      its graph, run op by op with torch's functions (Debian packages no ONNX runtime),
#      gives predict's probabilities within 1e-5;
#   3. the program trains: alone (its loss falls, its result JSON) and under
#      `mpirun -np 2 dlh-launch run` (DDP over gloo, the dlh module: the run's summary
#      counts its steps and both ranks' samples, a checkpoint at the end);
#   4. bad input, one line and a non-zero exit, nothing written: a checkpoint of another
#      spec, images of another size, --torch from a spec, a missing source, no output.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
"$PY" -c "import torch, h5py, onnx" 2>/dev/null ||
  fail "no python3-torch, python3-h5py or python3-onnx (make check installs them: share/setup/install-deps.sh)"
export PYTHONPATH="$ROOT/share/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1

dlh-data synthetic --out "$WORK/data.h5" --shape 2x12x12 --classes 4 --train 960 --test 130 --seed 3 >/dev/null
# Named classes, as an import from class folders has them: the checkpoints record them and
# the ONNX file's metadata carries them.
"$PY" -c 'import h5py, json, numpy as np, sys
with h5py.File(sys.argv[1], "a") as f:
    f["class_names"] = np.bytes_(json.dumps(["ant", "bee", "cicada", "dragonfly"]))' "$WORK/data.h5"
dlh-data synthetic --out "$WORK/other.h5" --shape 1x10x10 --classes 4 --train 96 --test 20 --seed 3 >/dev/null
cat >"$WORK/spec.json" <<JSON
{
  "name": "exporttest",
  "input": {"channels": 2, "height": 12, "width": 12},
  "classes": 4,
  "init": "he_normal",
  "layers": [
    {"type": "conv2d", "filters": 6, "kernel": 3, "padding": 1},
    {"type": "batchnorm"},
    {"type": "relu"},
    {"type": "residual", "layers": [
      {"type": "conv2d", "filters": 6, "kernel": 3, "padding": 1, "init": "glorot_uniform"},
      {"type": "batchnorm", "momentum": 0.2},
      {"type": "gelu"},
      {"type": "residual", "layers": [{"type": "conv2d", "filters": 6, "kernel": 1, "init": "torch_default"}]}
    ]},
    {"type": "maxpool2d", "kernel": 2},
    {"type": "residual",
     "layers": [{"type": "conv2d", "filters": 8, "kernel": 3, "stride": 2, "padding": 1, "init": "he_uniform"},
                {"type": "silu"}],
     "shortcut": [{"type": "conv2d", "filters": 8, "kernel": 1, "stride": 2, "init": "glorot_normal", "bias_init": "zeros"}]},
    {"type": "avgpool2d", "kernel": 3, "stride": 1, "padding": 1},
    {"type": "dropout", "rate": 0.1},
    {"type": "flatten"},
    {"type": "dense", "units": 16},
    {"type": "batchnorm", "epsilon": 0.001},
    {"type": "relu"},
    {"type": "dense", "units": 4}
  ],
  "optimizer": {"type": "adam", "lr": 0.003, "weight_decay": 0.01},
  "schedule": {"warmup_epochs": 0.5, "decay": "step", "step_epochs": 1, "gamma": 0.5},
  "augment": {"crop_padding": 1, "flip": true},
  "label_smoothing": 0.05,
  "batch_size": 32, "epochs": 1, "seed": 4, "dataset": "data.h5"
}
JSON
mpirun -np 2 dlh-launch train "$WORK/spec.json" --run-dir "$WORK/run" --threads 1 --progress none \
  >"$WORK/train.log" 2>&1 || { cat "$WORK/train.log" >&2; fail "training failed"; }
ckpt=$(ls "$WORK"/run/checkpoints/ckpt-*.h5 | tail -1)

echo "1. export SPEC --pytorch: the network, DLH's checkpoint in it, DLH's test loss"
dlh-launch export "$WORK/spec.json" --pytorch "$WORK/prog.py" 2>"$WORK/export.txt" ||
  { cat "$WORK/export.txt" >&2; fail "export --pytorch"; }
check "$(head -1 "$WORK/export.txt")"
[[ -x $WORK/prog.py ]] || fail "prog.py is not executable"
grep -q "^DATA = \"$WORK/data.h5\"" "$WORK/prog.py" || fail "the program's data set is not the spec's (resolved)"
(cd "$WORK" && "$PY" prog.py --help >/dev/null) || fail "prog.py --help"
"$PY" - "$WORK/prog.py" "$ckpt" <<'PY' || fail "the program's network"
import importlib.util, sys
import h5py
spec = importlib.util.spec_from_file_location("prog", sys.argv[1])
prog = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prog)
net = prog.Net()
params = sum(p.numel() for p in net.parameters())
sizes = []
with h5py.File(sys.argv[2]) as f:
    f["params"].visititems(lambda n, o: sizes.append(o.size) if isinstance(o, h5py.Dataset) else None)
assert params == sum(sizes), (params, sum(sizes))
assert len(prog.DLH_NAMES) == len(set(prog.DLH_NAMES.values())) and \
    set(prog.DLH_NAMES.values()) <= set(net.state_dict()), prog.DLH_NAMES
print(f"  ok: Net has the checkpoint's {params} parameters; {len(prog.DLH_NAMES)} DLH arrays mapped")
PY
(cd "$WORK" && "$PY" prog.py --from-dlh "$WORK/run" --evaluate --result "$WORK/eval.json" --threads 1) \
  >"$WORK/eval.txt" 2>&1 || { cat "$WORK/eval.txt" >&2; fail "prog.py --from-dlh --evaluate"; }
"$PY" - "$WORK/eval.json" "$WORK/run/summary.json" <<'PY' || fail "DLH's checkpoint in PyTorch"
import json, sys
e, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert e["samples"] == 130
assert round(e["test_accuracy"] * 130) == round(s["test_accuracy"] * 130), (e, s["test_accuracy"])
assert abs(e["test_loss"] - s["test_loss"]) < 1e-5 * max(1, abs(s["test_loss"])), (e["test_loss"], s["test_loss"])
print(f"  ok: DLH's checkpoint in PyTorch: test loss {e['test_loss']:.6f} (DLH {s['test_loss']:.6f}), "
      f"accuracy {e['test_accuracy']} (DLH {s['test_accuracy']})")
PY
dlh-launch export "$WORK/run" --pytorch "$WORK/from-run.py" 2>/dev/null || fail "export RUN --pytorch"
diff <(sed -n '/^class Net/,$p' "$WORK/prog.py") <(sed -n '/^class Net/,$p' "$WORK/from-run.py") ||
  fail "the run folder's program differs from the spec's"
check "export RUN --pytorch: the same program as from the spec (from class Net on)"

echo "2. export RUN --torch --onnx: predict's probabilities, ONNX's checker"
dlh-launch predict "$WORK/run" --data "$WORK/data.h5" --out "$WORK/p.h5" --threads 1 >/dev/null 2>&1 ||
  fail "dlh-launch predict"
DLH_PYTHON=$PY dlh-launch export "$WORK/run" --torch "$WORK/m.pt" --onnx "$WORK/m.onnx" \
  2>"$WORK/export2.txt" || { cat "$WORK/export2.txt" >&2; fail "export --torch --onnx"; }
check "$(grep "wrote .*m.onnx" "$WORK/export2.txt")"
"$PY" - "$WORK/prog.py" "$WORK/m.pt" "$WORK/m.onnx" "$WORK/p.h5" "$WORK/data.h5" <<'PY' || fail "the exported models"
import importlib.util, sys
import h5py, numpy as np, onnx, torch
from onnx import numpy_helper
spec = importlib.util.spec_from_file_location("prog", sys.argv[1])
prog = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prog)
x, _ = prog.load_split(sys.argv[5], "test")
with h5py.File(sys.argv[4]) as f:
    want = f["probabilities"][()]
net = prog.Net()
net.load_state_dict(torch.load(sys.argv[2]))
net.eval()
with torch.no_grad():
    got = torch.softmax(net(x), 1).numpy()
err = float(np.abs(got - want).max())
assert err < 1e-5, err
print(f"  ok: m.pt in the program's Net: predict's probabilities within {err:.1e}")
model = onnx.load(sys.argv[3])
onnx.checker.check_model(model, full_check=True)
# The metadata says how to feed it: the data set's raw values standardised by it are the
# program's inputs (the loader's).
import json
meta = {p.key: json.loads(p.value) for p in model.metadata_props}
assert {"dlh.input_scale", "dlh.input_mean", "dlh.input_std"} <= set(meta), meta
assert meta["dlh.class_names"] == ["ant", "bee", "cicada", "dragonfly"], meta
with h5py.File(sys.argv[5]) as f:
    raw = f["test/images"][()].astype(np.float64)
mean, std = (np.asarray(meta[k]).reshape(-1, 1, 1) for k in ("dlh.input_mean", "dlh.input_std"))
fed = (raw * meta["dlh.input_scale"][0] - mean) / std
assert np.abs(fed - x.numpy()).max() < 1e-5, np.abs(fed - x.numpy()).max()
print(f"  ok: m.onnx's metadata: inputs x * {meta['dlh.input_scale'][0]:.6g}, then (x - mean) / std, "
      f"mean {meta['dlh.input_mean']}, std {meta['dlh.input_std']}: the loader's inputs; "
      f"classes {meta['dlh.class_names']}")
dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
assert dims[0] == "batch" and dims[1:] == list(prog.INPUT_SHAPE), dims
weights = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in model.graph.initializer}
state = {k: v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}
assert set(weights) == set(state) and all(torch.equal(weights[k], state[k]) for k in state), \
    sorted(set(weights) ^ set(state))
# The graph run node by node with torch's functions (Debian packages no ONNX runtime): each
# op as the ONNX operator specification defines it, for the ops this exporter writes.
F = torch.nn.functional
def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
def pads2d(p):  # ONNX [top, left, bottom, right] -> F.pad's (left, right, top, bottom)
    return (p[1], p[3], p[0], p[2])
def run(node, ins, a):
    op = node.op_type
    if op == "Conv":
        assert a.get("group", 1) == 1 and a.get("dilations", [1, 1]) == [1, 1]
        return F.conv2d(F.pad(ins[0], pads2d(a.get("pads", [0] * 4))), ins[1],
                        ins[2] if len(ins) > 2 else None, stride=a.get("strides", [1, 1]))
    if op == "BatchNormalization":
        x, g, b, m, v = ins
        return F.batch_norm(x, m, v, g, b, False, 0.0, a.get("epsilon", 1e-5))
    if op in ("MaxPool", "AveragePool"):
        k, s = a["kernel_shape"], a.get("strides", [1, 1])
        x = ins[0]
        if op == "MaxPool":
            return F.max_pool2d(F.pad(x, pads2d(a.get("pads", [0] * 4)), value=-math.inf), k, s)
        assert a.get("count_include_pad", 0) == 1 or not any(a.get("pads", [0])), a
        return F.avg_pool2d(F.pad(x, pads2d(a.get("pads", [0] * 4))), k, s)
    if op == "Pad":
        p = ins[1].tolist()  # [x1_begin.., x1_end..]
        n = len(p) // 2
        flat = [v for d in reversed(range(n)) for v in (p[d], p[d + n])]
        return F.pad(ins[0], flat, value=float(ins[2]) if len(ins) > 2 and ins[2] is not None else 0.0)
    if op == "GlobalAveragePool":
        return ins[0].mean((2, 3), keepdim=True)
    if op == "Gemm":
        y = ins[0] @ (ins[1].t() if a.get("transB") else ins[1])
        return y * a.get("alpha", 1.0) + (ins[2] * a.get("beta", 1.0) if len(ins) > 2 else 0)
    if op == "Flatten":
        return ins[0].reshape(int(np.prod(ins[0].shape[:a.get("axis", 1)])), -1)
    if op == "Constant":
        return torch.from_numpy(numpy_helper.to_array(a["value"]).copy())
    if op == "Reshape":
        return ins[0].reshape([int(d) if d else ins[0].shape[i] for i, d in enumerate(ins[1].tolist())])
    if op == "Shape":
        return torch.tensor(ins[0].shape, dtype=torch.int64)
    if op == "Gather":
        return torch.index_select(ins[0], a.get("axis", 0), ins[1].reshape(-1)).reshape(
            ins[1].shape if ins[1].dim() else ())
    if op == "Unsqueeze":
        out = ins[0]
        for d in sorted(ins[1].tolist()):
            out = out.unsqueeze(d)
        return out
    if op == "Concat":
        return torch.cat(ins, a["axis"])
    simple = {"Relu": torch.relu, "Sigmoid": torch.sigmoid, "Erf": torch.erf,
              "Identity": lambda x: x, "Dropout": lambda x, *rest: x}
    if op in simple:
        return simple[op](*ins)
    binary = {"Add": torch.add, "Mul": torch.mul, "Div": torch.div, "Sub": torch.sub}
    if op in binary:
        return binary[op](*ins)
    raise AssertionError(f"no reference for ONNX op {op}")
import math
values = dict(weights)
values[model.graph.input[0].name] = x
with torch.no_grad():
    for node in model.graph.node:
        out = run(node, [values[i] if i else None for i in node.input], attrs(node))
        values[node.output[0]] = out
onnx_probs = torch.softmax(values[model.graph.output[0].name], 1).numpy()
onnx_err = float(np.abs(onnx_probs - want).max())
assert onnx_err < 1e-5, onnx_err
kinds = sorted({n.op_type for n in model.graph.node})
print(f"  ok: m.onnx passes onnx.checker, holds the state dict's {len(state)} arrays by name; run "
      f"op by op ({', '.join(kinds)}), predict's probabilities within {onnx_err:.1e}")
PY

echo "3. the program trains, alone and under dlh-launch run"
# 4 epochs of 30 steps: the mean training loss of the last below the first's (the test
# accuracy of so short a run on this noisy set moves with the seed: 31-52% at 3 epochs).
(cd "$WORK" && "$PY" prog.py --threads 1 --epochs 4 --log-every 30 --result "$WORK/alone.json" --save "$WORK/alone.pt") \
  >"$WORK/alone.txt" 2>&1 || { cat "$WORK/alone.txt" >&2; fail "prog.py alone"; }
"$PY" - "$WORK/alone.json" <<'PY' || { cat "$WORK/alone.txt" >&2; fail "the program's own training"; }
import json, sys
r = json.load(open(sys.argv[1]))
assert r["steps"] == 120 and r["world_size"] == 1 and r["rank_batches"] == [32], r
first, last = r["epochs"][0], r["epochs"][-1]
assert last["train_loss"] < first["train_loss"], r["epochs"]
print(f"  ok: alone: 4 epochs, mean training loss {first['train_loss']:.3f} -> {last['train_loss']:.3f}, "
      f"test accuracy {last['test_accuracy']:.3f}")
PY
[[ -s $WORK/alone.pt ]] || fail "--save wrote nothing"
mpirun -np 2 dlh-launch run --run-dir "$WORK/prun" -- "$PY" "$WORK/prog.py" --threads 1 --max-steps 12 \
  --log-every 4 >"$WORK/prun.txt" 2>&1 || { cat "$WORK/prun.txt" >&2; fail "dlh-launch run -- prog.py"; }
grep -q "2 rank(s) on cpu, batch \[16, 16\] of 32" "$WORK/prun.txt" || { cat "$WORK/prun.txt" >&2; fail "no 2-rank DDP run"; }
"$PY" - "$WORK/prun" <<'PY' || { cat "$WORK/prun.txt" >&2; fail "the program's run under DLH"; }
import glob, json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["steps"] == 12, s["steps"]
ckpts = glob.glob(sys.argv[1] + "/checkpoints/ckpt-00000012.pt")
assert ckpts, "no checkpoint at the end"
print(f"  ok: under dlh-launch run, 2 ranks: {s['steps']} steps in summary.json, {ckpts[0].split('/')[-1]}")
PY

echo "4. bad input: one line, nothing written"
cat >"$WORK/other.json" <<JSON
{"name": "otherspec", "input": {"channels": 2, "height": 12, "width": 12}, "classes": 4,
 "layers": [{"type": "flatten"}, {"type": "dense", "units": 4}],
 "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 32, "epochs": 1, "dataset": "data.h5"}
JSON
dlh-launch export "$WORK/other.json" --pytorch "$WORK/other.py" 2>/dev/null || fail "export other.json"
expect_fail 1 "a checkpoint of spec 'exporttest', not of this network ('otherspec')" \
  "$PY" "$WORK/other.py" --from-dlh "$ckpt" --evaluate
expect_fail 1 "other.h5: /test/images holds samples of shape (1, 10, 10), the network takes (2, 12, 12)" \
  "$PY" "$WORK/prog.py" --from-dlh "$ckpt" --evaluate --data "$WORK/other.h5"
expect_fail 1 "export: /bin/false failed (exit 1) on .*ckpt-.*h5; nothing written" \
  env DLH_PYTHON=/bin/false dlh-launch export "$WORK/run" --torch "$WORK/bad.pt" --onnx "$WORK/bad.onnx"
[[ ! -e $WORK/bad.onnx ]] || fail "a failed export wrote bad.onnx"
# With --pytorch too, the program was written before the weights failed, and that is said.
expect_fail 1 "export: /bin/false failed (exit 1) on .*ckpt-.*h5; no weights written (the program .*bad-prog.py was)" \
  env DLH_PYTHON=/bin/false dlh-launch export "$WORK/run" --pytorch "$WORK/bad-prog.py" --torch "$WORK/bad.pt"
[[ -s $WORK/bad-prog.py && ! -e $WORK/bad.pt ]] || fail "a failed --torch: the program not kept, or weights written"
# An output's folder is checked before the checkpoint is read and Python started.
printf '#!/bin/sh\ntouch "%s/python-ran"\n' "$WORK" >"$WORK/fake-python"
chmod +x "$WORK/fake-python"
for option in --onnx --torch --pytorch; do
  expect_fail 1 "export: $option: $WORK/nodir/m: folder $WORK/nodir does not exist" \
    env DLH_PYTHON="$WORK/fake-python" dlh-launch export "$WORK/run" $option "$WORK/nodir/m"
done
expect_fail 1 "export: --onnx: $WORK/nodir/m.onnx: folder $WORK/nodir does not exist" \
  env DLH_PYTHON="$WORK/fake-python" dlh-launch export "$WORK/run" --pytorch "$WORK/early.py" \
  --onnx "$WORK/nodir/m.onnx"
[[ ! -e $WORK/python-ran && ! -e $WORK/early.py ]] || fail "export ran Python or wrote before refusing"
expect_fail 2 "export: --torch and --onnx export a trained model: .*other.json is not a checkpoint" \
  dlh-launch export "$WORK/other.json" --torch "$WORK/bad.pt"
expect_fail 2 "export: give --pytorch, --torch or --onnx" dlh-launch export "$WORK/spec.json"
expect_fail 1 "nope.json: cannot read" dlh-launch export "$WORK/nope.json" --pytorch "$WORK/bad.py"
expect_fail 2 "export: missing SOURCE" dlh-launch export --pytorch "$WORK/bad.py"
[[ ! -e $WORK/bad.pt && ! -e $WORK/bad.py ]] || fail "a refused export wrote a file"
