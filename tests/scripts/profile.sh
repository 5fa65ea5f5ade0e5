#!/bin/bash
# dlh-estimate profile: a real CPU step of the bench networks, layer by layer. Checks what
# must hold whatever the machine's speed: every layer timed once per direction where the
# engine runs it, the GEMM FLOPs of the products the engine runs, the GEMM layers' own
# ceiling and column copies, the floor and the text's summary lines; how a calibration divides
# the step (--calibration); and bad input.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

echo "the bench CNN (convolution first: every layer runs backward)"
dlh-estimate profile "$ROOT/share/bench/cnn.json" --threads 2 --steps 3 --warmup 1 --json \
  >"$WORK/cnn.json" || fail "profile cnn failed"
python3 - "$WORK/cnn.json" "$ROOT/share/bench/cnn.json" <<'PY' || fail "cnn profile: see above"
import json, sys
p, spec = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert [l["kind"] for l in p["layers"]] == [l["type"] for l in spec["layers"]], p["layers"]
assert p["batch"] == 64 and p["threads"] == 2 and p["steps"] == 3 and p["blas_core"], p
assert p["sgemm_gflops"] > 0 and p["copy_gbs"] > 0 and p["step_s"] > 0, p
# Each ReLU and 2x2 pool after a convolution runs inside it (launcher/nn/layers/fuse.hpp): no
# time of its own, no tensors, no roofline; the dense layer's ReLU runs alone.
fused = {l["index"]: l["fused_into"] for l in p["layers"] if "fused_into" in l}
assert fused == {1: 0, 2: 0, 4: 3, 5: 3}, fused
for l in p["layers"]:
    if "fused_into" in l:
        assert l["forward_s"] == l["backward_s"] == l["roofline_s"] == l["bytes"] == 0, l
        continue
    assert l["forward_s"] > 0 and l["backward_s"] > 0 and l["roofline_s"] > 0, l
    gemm = l["kind"] in ("conv2d", "dense")
    assert ("gemm_alone_s" in l) == gemm and (not gemm or l["gemm_alone_s"] > 0), l
    # A convolution's column copies (im2col, col2im) are timed alone too; no other layer has any.
    conv = l["kind"] == "conv2d"
    assert ("columns_s" in l) == conv and (not conv or l["columns_s"] > 0), l
# conv 32->64, 3x3 on 14x14: forward, weight and input gradient, 64 samples.
conv = p["layers"][3]
assert conv["flops"] == 3 * 2 * 64 * (32 * 9) * (14 * 14) * 64, conv["flops"]
# The first convolution computes no input gradient: two products.
assert p["layers"][0]["flops"] == 2 * 2 * 32 * 9 * (28 * 28) * 64, p["layers"][0]["flops"]
parts = p["loss_s"] + p["update_s"] + sum(l["gemm_alone_s"] + l.get("columns_s", 0)
                                          if "gemm_alone_s" in l else
                                          min(l["forward_s"] + l["backward_s"], l["roofline_s"])
                                          for l in p["layers"])
assert abs(p["floor_s"] - parts) < 1e-12 and p["floor_samples_per_s"] == 64 / p["floor_s"], p
print(f"  ok: 10 layers, step {p['step_s'] * 1e3:.2f} ms, floor {p['floor_s'] * 1e3:.2f} ms "
      f"(OpenBLAS core {p['blas_core']})")
PY
check "cnn: every layer timed both ways or fused; GEMM FLOPs as the engine runs them; the floor adds up"

echo "the bench MLP (flatten first: no backward for it, no input gradient for the first dense)"
dlh-estimate profile "$ROOT/share/bench/mlp.json" --batch 32 --steps 2 --warmup 0 --json \
  >"$WORK/mlp.json" || fail "profile mlp failed"
python3 - "$WORK/mlp.json" <<'PY' || fail "mlp profile: see above"
import json, sys
p = json.load(open(sys.argv[1]))
flatten, dense = p["layers"][0], p["layers"][1]
assert p["batch"] == 32 and p["threads"] == 1, p
assert flatten["kind"] == "flatten" and flatten["backward_s"] == 0, flatten
assert dense["flops"] == 2 * (2 * 32 * 1024 * 784), dense
assert p["layers"][3]["flops"] == 3 * (2 * 32 * 1024 * 1024), p["layers"][3]
PY
check "mlp: flatten has no backward; the first dense layer two products, the second three"

echo "text"
dlh-estimate profile "$ROOT/share/bench/cnn.json" --steps 1 --warmup 0 >"$WORK/cnn.txt" ||
  fail "profile text failed"
for line in "OpenBLAS core" "GEMM layers (conv2d, dense):" "column copies (im2col, col2im) alone:" \
  "other layers:" "roofline of the layers:" "floor of this engine design"; do
  grep -q "$line" "$WORK/cnn.txt" || { cat "$WORK/cnn.txt"; fail "no '$line' in the text"; }
done
[[ $(grep -c "^  [0-9]" "$WORK/cnn.txt") -eq 10 ]] || { cat "$WORK/cnn.txt"; fail "not 10 layer rows"; }
[[ $(grep -c "^  [1245] .*runs inside layer [03] (fused" "$WORK/cnn.txt") -eq 4 ]] ||
  { cat "$WORK/cnn.txt"; fail "the fused ReLUs and pools are not shown as such"; }
check "$(sed -n 2p "$WORK/cnn.txt")"

echo "how a calibration divides the step (--calibration)"
dlh-estimate profile "$ROOT/share/bench/cnn.json" --steps 1 --warmup 0 --json \
  --calibration "$ROOT/share/calibration/cpu.json" >"$WORK/divided.json" ||
  fail "profile --calibration failed"
python3 - "$WORK/divided.json" <<'PY' || fail "profile --calibration: see above"
import json, sys
p = json.load(open(sys.argv[1]))
shares = [l["predicted_share"] for l in p["layers"]]
assert abs(sum(shares) - 1) < 1e-9 and all(s >= 0 for s in shares), shares
# A fused layer has no time of its own, predicted or measured.
assert all(l["predicted_share"] == 0 for l in p["layers"] if "fused_into" in l), p["layers"]
assert p["calibration"].endswith("cpu.json") and 0 <= p["largest_cut_error"] <= 100, p
PY
dlh-estimate profile "$ROOT/share/bench/cnn.json" --steps 1 --warmup 0 \
  --calibration "$ROOT/share/calibration/cpu.json" >"$WORK/divided.txt" || fail "profile text failed"
grep -q "predicted: how .*cpu.json divides the layers' time (its layer model)" "$WORK/divided.txt" ||
  { cat "$WORK/divided.txt"; fail "no 'predicted:' line"; }
check "$(tail -1 "$WORK/divided.txt" | cut -c1-110)"
echo '{"format_version": 1}' >"$WORK/bad-cal.json"
expect_fail 2 "bad-cal.json: device: required" \
  dlh-estimate profile "$ROOT/share/bench/cnn.json" --calibration "$WORK/bad-cal.json"

echo "bad input"
expect_fail 2 "$WORK/missing.json: cannot read" dlh-estimate profile "$WORK/missing.json"
expect_fail 2 "profile: --steps: must be at least 1" dlh-estimate profile "$ROOT/share/bench/cnn.json" --steps 0
expect_fail 2 "profile: --threads: must be 1 to 1024" dlh-estimate profile "$ROOT/share/bench/cnn.json" --threads 0
expect_fail 2 "profile: missing SPEC" dlh-estimate profile
[[ ! -s $WORK/out.txt ]] || fail "bad input printed to stdout"
