#!/bin/bash
# share/gpu/torch_best.py (PyTorch at its best on the GPU, issue 43) runs only on a lent GPU,
# so its logic is tested here on the CPU: --smoke (tiny batches, ResNet-50 at 64x64, 1 round,
# the CUDA-only variants skipped) must write a JSON with a row for every model and variant,
# images/s and FLOPs where a row ran, the skip's reason where it did not, and its table.
# About 10 seconds on 2 cores.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3  # Debian's, with python3-torch (make check installs it)
$py -c 'import torch' 2>/dev/null || fail "$py has no torch: install python3-torch (make deps)"
export OMP_WAIT_POLICY=PASSIVE PYTHONDONTWRITEBYTECODE=1  # nothing written into the source tree

echo "== torch_best.py --smoke on the CPU"
$py "$ROOT/share/gpu/torch_best.py" --smoke --out "$WORK/best.json" >"$WORK/out.txt" 2>"$WORK/err.txt" ||
  { cat "$WORK/out.txt" "$WORK/err.txt" >&2; fail "torch_best.py --smoke exited non-zero"; }
check "exit 0: $(tail -1 "$WORK/out.txt")"
grep -q '^model .*images/s.*TFLOP/s' "$WORK/out.txt" || { cat "$WORK/out.txt" >&2; fail "no table printed"; }
check "the table is printed last"

$py - "$WORK/best.json" <<'PY' || fail "the JSON's shape"
import json, math, sys
r = json.load(open(sys.argv[1]))
for key in ("tool", "date", "torch", "device", "rounds", "peaks_tflops", "anchors", "rows", "best", "seconds"):
    assert key in r, f"no {key!r}"
assert r["smoke"] is True and r["device"] == "cpu" and r["rounds"] == 1
models = {"resnet50", "resnet18", "cnn-large", "fashion-mnist"}
variants = {"fp32-nchw-eager", "fp32-cl-eager", "bf16-cl-eager", "fp32-cl-graph", "bf16-cl-compile"}
got = {(x["model"], x["variant"]) for x in r["rows"]}
assert got == {(m, v) for m in models for v in variants}, f"rows: {sorted(got)}"
for x in r["rows"]:
    name = f"{x['model']} {x['variant']}"
    for key in ("batch", "input", "precision", "layout", "mode", "status", "images_per_s"):
        assert key in x, f"{name}: no {key!r}"
    if x["mode"] == "eager":
        assert x["status"] == "ok", f"{name}: {x['status']}"
        v = x["images_per_s"]
        assert len(v) == 1 and v[0] > 0 and x["min"] <= x["median"] <= x["max"], f"{name}: {v}"
        assert math.isfinite(x["loss_last"]), f"{name}: loss {x['loss_last']}"
        assert x["steps"] >= 3, f"{name}: {x['steps']} steps"
        # FLOPs per image from the estimator (torch 1.13 has no FLOP counter), so TFLOP/s.
        assert x["flops_per_image"] and x["tflops_median"] > 0, f"{name}: no FLOPs"
        assert x["layout"] == ("NCHW" if "nchw" in x["variant"] else "channels_last")
    elif x["mode"] == "graph":
        assert x["status"] == "skipped: CUDA graphs need a GPU", f"{name}: {x['status']}"
    else:
        assert x["status"].startswith("skipped: torch.compile") or x["status"] == "ok", f"{name}: {x['status']}"
assert next(x for x in r["rows"] if x["model"] == "resnet50")["input"] == "3x64x64"
# FLOPs per image follow the models: ResNet-18 at 32x32 (3.34 G) and ResNet-50 at 64x64 (2.0 G)
# above cnn-large (0.70 G), above the Fashion CNN (0.026 G).
fl = {x["model"]: x["flops_per_image"] for x in r["rows"] if x["variant"] == "fp32-nchw-eager"}
assert min(fl["resnet50"], fl["resnet18"]) > fl["cnn-large"] > fl["fashion-mnist"], fl
assert set(r["best"]) == {f"{m} {p}" for m in models for p in ("fp32", "bf16")}, sorted(r["best"])
print(f"  ok: {len(r['rows'])} rows; eager rows timed, graph and compile rows skipped with their reason; "
      f"FLOPs per image {', '.join(f'{m} {v / 1e9:.2f} G' for m, v in fl.items())}; {r['seconds']} s")
PY
