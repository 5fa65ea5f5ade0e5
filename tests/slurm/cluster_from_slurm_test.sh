#!/bin/bash
# `dlh-estimate cluster --from-slurm` on a live local cluster (issue 13, part 4): two A100
# nodes in two partitions, a node of the unknown fake type alpha and a node without GPUs
# (feature cpu-local), which --cpu-calibration describes as a CPU node type (issue 46).
# Without --allow-placeholders the description holds the A100 node type (datasheet figures,
# marked "confirm"), names alpha on stderr and exits 3; with it, alpha is written with
# figures marked PLACEHOLDER. Both files work with `dlh-estimate recommend`. Needs root and
# the Debian slurm-wlm/munge packages; about 15 s.
# shellcheck source=tests/slurm/slurm.bash
source "$(dirname "$0")/slurm.bash"
need_slurm munged slurmctld slurmd sinfo
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[[ -x $BINDIR/dlh-estimate ]] || fail "no $BINDIR/dlh-estimate (build first)"
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|SINFO|DLH)_' || true)

C=$WORK/c
cleanup() {
  local rc=$?
  "$ROOT/share/slurm/stop-cluster.sh" "$C" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cd "$WORK"

SLURM_TEST_NODES="gpua1:a100:4:4 gpua2:a100:4:4 alpha1:alpha:2:4 cpu1:cpu-local:0:2" \
  SLURM_TEST_EXTRA_CONF="PartitionName=big Nodes=gpua1,gpua2 State=UP" \
  "$ROOT/share/slurm/start-cluster.sh" "$C" >"$WORK/start.txt" || { cat "$WORK/start.txt"; fail "start-cluster.sh"; }
export SLURM_CONF=$C/etc/slurm.conf
SPEC=$ROOT/share/examples/fashion-mnist.json

# ---- unknown type: named, left out, exit 3 ------------------------------------------------
rc=0
timeout 60 dlh-estimate cluster --from-slurm --out "$WORK/known.json" --name live 2>"$WORK/err.txt" || rc=$?
[[ $rc -eq 3 ]] || { cat "$WORK/err.txt" >&2; fail "cluster --from-slurm with an unknown type exited $rc, expected 3"; }
grep -q "^dlh-estimate: gpu type 'alpha' on alpha1: no datasheet figures; add its memory_gb, peak_tflops" "$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "alpha is not named"; }
grep -q "note: 1 node without GPUs (cpu1) left out" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "cpu1 not noted"; }
check "unknown type named: $(grep -m1 "'alpha'" "$WORK/err.txt" | cut -c1-110)..."
python3 - "$WORK/known.json" <<'PY' || fail "known.json: wrong content"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["name"] == "live", c["name"]
assert [g["name"] for g in c["gpu_types"]] == ["a100"], c["gpu_types"]
g = c["gpu_types"][0]
assert (g["memory_gb"], g["peak_tflops"], g["memory_bandwidth_gbs"], g["active_watts"]) == (40, 19.5, 1555, 400), g
assert g["description"].startswith("datasheet figures for NVIDIA A100 SXM4 40 GB: confirm memory_gb 40"), g["description"]
[n] = c["node_types"]
assert (n["name"], n["gpu"], n["gpus_per_node"], n["nodes"]) == ("gpu-a100", "a100", 4, 2), n
assert n["partitions"] == ["gpu", "big"], n["partitions"]
assert "2 nodes (gpua1, gpua2)" in n["description"] and "confirm" in n["description"], n["description"]
assert "inter_node is a conservative default" in c["description"], c["description"]
PY
check "known.json: gpu-a100, 4 GPUs x 2 nodes, partitions gpu+big, datasheet figures marked 'confirm'"

timeout 120 dlh-estimate recommend "$SPEC" --samples 60000 --deadline 1h --cluster "$WORK/known.json" >"$WORK/rec.txt" 2>&1 ||
  { cat "$WORK/rec.txt" >&2; fail "recommend --cluster known.json"; }
grep -q "a100: roofline" "$WORK/rec.txt" || { cat "$WORK/rec.txt" >&2; fail "recommend did not use a100"; }
grep -q "^chosen: " "$WORK/rec.txt" || { cat "$WORK/rec.txt" >&2; fail "recommend chose nothing"; }
check "recommend --cluster known.json: $(grep '^chosen: ' "$WORK/rec.txt" | cut -c1-90)"

# ---- --allow-placeholders: alpha written, marked PLACEHOLDER --------------------------------
timeout 60 dlh-estimate cluster --from-slurm --allow-placeholders >"$WORK/all.json" 2>"$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "cluster --from-slurm --allow-placeholders"; }
grep -q "gpu type 'alpha' on alpha1: no datasheet figures; wrote PLACEHOLDER figures" "$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "placeholder not reported"; }
python3 - "$WORK/all.json" <<'PY' || fail "all.json: wrong content"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["name"] == "slurm", c["name"]
assert [g["name"] for g in c["gpu_types"]] == ["a100", "alpha"], c["gpu_types"]
assert c["gpu_types"][1]["description"].startswith("PLACEHOLDER figures"), c["gpu_types"][1]
nodes = {n["name"]: (n["gpu"], n["gpus_per_node"], n["nodes"], n["partitions"]) for n in c["node_types"]}
assert nodes == {"gpu-a100": ("a100", 4, 2, ["gpu", "big"]), "gpu-alpha": ("alpha", 2, 1, ["gpu"])}, nodes
assert "PLACEHOLDER" in c["node_types"][1]["description"]
assert "PLACEHOLDER figures for GPU types without a datasheet: alpha" in c["description"]
PY
check "--allow-placeholders (stdout): gpu-a100 and gpu-alpha, alpha marked PLACEHOLDER, exit 0"
timeout 120 dlh-estimate recommend "$SPEC" --samples 60000 --deadline 1h --cluster "$WORK/all.json" --types alpha >"$WORK/rec.txt" 2>&1 ||
  { cat "$WORK/rec.txt" >&2; fail "recommend --cluster all.json --types alpha"; }
grep -q "alpha: roofline" "$WORK/rec.txt" || { cat "$WORK/rec.txt" >&2; fail "recommend did not use alpha"; }
check "recommend --cluster all.json --types alpha: $(grep '^chosen: ' "$WORK/rec.txt" | cut -c1-80)"

# ---- --cpu-calibration: the node without GPUs is a CPU node type, found by its feature --------
timeout 60 dlh-estimate cluster --from-slurm --cpu-calibration "$ROOT/share/calibration/cpu.json" \
  --out "$WORK/cpu.json" 2>"$WORK/err.txt" || rc=$?
grep -q "1 CPU node types of 1 nodes" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "no CPU node type drafted"; }
python3 - "$WORK/cpu.json" <<'PY' || fail "cpu.json: wrong content"
import json, sys
c = json.load(open(sys.argv[1]))
[t] = c["cpu_node_types"]
assert (t["name"], t["nodes"], t["cores"], t["feature"]) == ("cpu-2c", 1, 2, "cpu-local"), t
assert t["calibration"].endswith("share/calibration/cpu.json"), t["calibration"]
assert "confirm" in t["description"], t["description"]
PY
timeout 120 dlh-estimate recommend "$SPEC" --samples 60000 --deadline 1h --cluster "$WORK/cpu.json" --types cpu >"$WORK/rec.txt" 2>&1 ||
  { cat "$WORK/rec.txt" >&2; fail "recommend --cluster cpu.json --types cpu"; }
grep -qE "^  1  1x[12] cpu-2c x[12]t " "$WORK/rec.txt" || { cat "$WORK/rec.txt" >&2; fail "recommend did not plan the CPU node"; }
check "--cpu-calibration: cpu-2c (feature cpu-local); recommend --types cpu: $(grep -E '^  1  ' "$WORK/rec.txt" | cut -c1-60)"

# ---- nothing describable; sinfo failing -------------------------------------------------------
sinfo -h -N -O 'NodeList:|,Gres:|,Partition:|,CPUs:|,Memory:|,Features:|' | grep -v '|gpu:a100' >"$WORK/sinfo.txt"
rc=0
dlh-estimate cluster --from-slurm --sinfo "$WORK/sinfo.txt" --out "$WORK/none.json" 2>"$WORK/err.txt" || rc=$?
[[ $rc -eq 3 && ! -e $WORK/none.json ]] || { cat "$WORK/err.txt" >&2; fail "only unknown types: exit $rc, or a file was written"; }
grep -q "nothing written" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "no 'nothing written'"; }
check "only unknown types (--sinfo FILE): exit 3, $(tail -1 "$WORK/err.txt" | cut -c1-80)"
mkdir -p "$WORK/fakebin"
printf '#!/bin/sh\necho "sinfo: error: Unable to contact slurm controller (connect failure)" >&2\nexit 1\n' >"$WORK/fakebin/sinfo"
chmod +x "$WORK/fakebin/sinfo"
expect_fail 1 "sinfo failed (exit status 1): sinfo: error: Unable to contact" \
  env PATH="$WORK/fakebin:$PATH" dlh-estimate cluster --from-slurm --out "$WORK/x.json"
[[ ! -e $WORK/x.json ]] || fail "a failing sinfo left a file"
