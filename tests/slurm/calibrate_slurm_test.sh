#!/bin/bash
# `dlh-estimate calibrate --slurm` on a live local cluster (issue 13, part 3): nodes alpha1
# (GPU type alpha) and beta1 (beta). A quick calibration of both types through sbatch, with
# a copy of share/cluster/local.json that has no calibration for beta: both files load,
# the copy names both, and recommend reports both as calibrated. Then what fails is named and
# the rest kept (exit 3): a type no node offers, a job that exits 0 without writing its file
# (an older calibration at the path does not pass), a job that fails (its log's last lines
# shown), --wait running out (the job cancelled) and a type the description lacks. Needs
# root and the Debian slurm-wlm/munge packages; 30 s idle, a minute on a busy 2-core machine.
# shellcheck source=tests/slurm/slurm.bash
source "$(dirname "$0")/slurm.bash"
need_slurm munged slurmctld slurmd sinfo sbatch scontrol scancel
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

SLURM_TEST_NODES="alpha1:alpha:2:2 beta1:beta:2:2" \
  "$ROOT/share/slurm/start-cluster.sh" "$C" >"$WORK/start.txt" || { cat "$WORK/start.txt"; fail "start-cluster.sh"; }
export SLURM_CONF=$C/etc/slurm.conf
SPEC=$ROOT/share/examples/fashion-mnist.json

# The site's description: local.json without beta's calibration, alpha's made absolute.
mkdir -p "$WORK/site"
python3 - "$ROOT/share/cluster/local.json" "$WORK/site/copy.json" "$ROOT/share/calibration/cpu.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["gpu_types"][0]["calibration"] = sys.argv[3]
c["gpu_types"][1].pop("calibration", None)
c.pop("cpu_node_types", None)  # GPU types only: this cluster has no CPU node
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
CL=$WORK/site/copy.json

# ---- both types: files written and loaded, the description names them -----------------------
# Inherited submission settings must not reach sbatch: a partition that does not exist, and
# the plugin's option as an enclosing --dlh-auto job would pass it on.
rc=0
SBATCH_PARTITION=nosuch SLURM_SPANK__SLURM_SPANK_OPTION_dlh_dlh_auto=deadline=1h DLH_CLUSTER=/nonexistent \
  timeout 600 dlh-estimate calibrate --slurm --quick --time 10m --cluster "$CL" --out-dir site/calibration \
  >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
[[ $rc -eq 0 ]] || { cat "$WORK/out.txt" "$WORK/err.txt" >&2; fail "calibrate --slurm exited $rc, expected 0"; }
for t in alpha beta; do
  grep -Eq "^$t: job [0-9]+ submitted$" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "$t: no 'submitted' line"; }
  # A quick job can start and end between two polls (2 s): the running line is then skipped,
  # but when it is there it names the type's node.
  ! grep -E "^$t: job [0-9]+ running on " "$WORK/err.txt" | grep -vqE " running on ${t}1$" ||
    { cat "$WORK/err.txt" >&2; fail "$t: running on another node than ${t}1"; }
  grep -Eq "^$t: done in [0-9]+ s -> site/calibration/$t.json$" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "$t: no 'done' line"; }
  dlh-estimate fit "$WORK/site/calibration/$t.json" >/dev/null || fail "$t.json does not load"
done
grep -qx "calibrated 2 of 2 GPU types through Slurm: alpha (site/calibration/alpha.json), beta (site/calibration/beta.json)" "$WORK/out.txt" ||
  { cat "$WORK/out.txt" >&2; fail "summary"; }
# The fake GPUs were timed on their nodes' CPUs (--device cpu, the default): said, for a site
# with real GPUs that left out --device cuda.
grep -q "^note: --device cpu: each GPU type was timed on its node's CPU cores" "$WORK/out.txt" ||
  { cat "$WORK/out.txt" >&2; fail "no note that --device cpu timed the GPU types on CPUs"; }
check "2 jobs, progress: $(grep -m1 -E 'running|pending' "$WORK/err.txt"); $(grep -m1 done "$WORK/err.txt")"
id=$(grep -Eo '^alpha: job [0-9]+' "$WORK/err.txt" | head -1 | grep -Eo '[0-9]+$')
scontrol show job -o "$id" >"$WORK/job.txt"
for want in "JobName=dlh-calibrate-alpha " "TresPerNode=gres:gpu:alpha:1" "NumCPUs=2 " "Partition=gpu " "TimeLimit=00:10:00"; do
  grep -qF -- "$want" "$WORK/job.txt" || { cat "$WORK/job.txt" >&2; fail "job $id: no '$want'"; }
done
check "job $id: dlh-calibrate-alpha, gres gpu:alpha:1, exclusive (both CPUs), SBATCH_PARTITION ignored, 10 min"
python3 - "$CL" "$ROOT/share/cluster/local.json" <<'PY' || fail "copy.json: wrong content"
import json, sys
c, orig = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
cal = {g["name"]: g.get("calibration") for g in c["gpu_types"]}
assert cal == {"alpha": "calibration/alpha.json", "beta": "calibration/beta.json"}, cal
for g in c["gpu_types"] + orig["gpu_types"]:
    g.pop("calibration", None)
orig.pop("cpu_node_types", None)  # the copy has none (above)
assert c == orig, "other fields changed"
assert list(c) == list(orig) and [list(g) for g in c["gpu_types"]] == [list(g) for g in orig["gpu_types"]]
PY
check "copy.json: alpha and beta name calibration/TYPE.json, everything else kept"
# A deadline no calibration misses: what is checked is that both types are found calibrated,
# and a calibration timed on a loaded machine (make check runs tests side by side) is slow.
timeout 120 dlh-estimate recommend "$SPEC" --samples 60000 --deadline 30d --cluster "$CL" --mixed >"$WORK/rec.txt" 2>&1 ||
  { cat "$WORK/rec.txt" >&2; fail "recommend --cluster copy.json"; }
for t in alpha beta; do
  grep -q "^  $t: calibrated ($t.json)" "$WORK/rec.txt" || { cat "$WORK/rec.txt" >&2; fail "recommend: $t not calibrated"; }
done
check "recommend: $(grep -m1 '  beta: calibrated' "$WORK/rec.txt" | cut -c1-70)"

# ---- what fails is named, the rest kept --------------------------------------------------
# beta's job exits 0 without writing (a stand-in sbatch empties its command): the
# calibration of the first run, still at the path, must not pass for a new one.
mkdir -p "$WORK/fakebin"
REAL_SBATCH=$(command -v sbatch)
cat >"$WORK/fakebin/sbatch" <<EOF
#!/bin/bash
args=("\$@")
if [[ " \$* " == *" --job-name=dlh-calibrate-beta "* ]]; then
  for i in "\${!args[@]}"; do [[ \${args[i]} != --wrap=* ]] || args[i]=--wrap=true; done
fi
exec "$REAL_SBATCH" "\${args[@]}"
EOF
chmod +x "$WORK/fakebin/sbatch"
cp "$CL" "$WORK/copy-before.json"
alpha_before=$(stat -c %Y.%i "$WORK/site/calibration/alpha.json")
sleep 1
rc=0
PATH="$WORK/fakebin:$PATH" timeout 600 dlh-estimate calibrate --slurm --quick --types gamma,alpha,beta \
  --cluster "$CL" --out-dir site/calibration >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
[[ $rc -eq 3 ]] || { cat "$WORK/out.txt" "$WORK/err.txt" >&2; fail "partial calibration exited $rc, expected 3"; }
grep -qx "dlh-estimate: gamma: not calibrated: no node offers GRES gpu:gamma (sinfo)" "$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "gamma not named"; }
grep -Eq "^dlh-estimate: beta: not calibrated: job [0-9]+ COMPLETED \(exit code 0\) but did not write site/calibration/beta.json \(it holds an older calibration\)$" "$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "beta's missing file not reported"; }
grep -qx "calibrated 1 of 3 GPU types through Slurm: alpha (site/calibration/alpha.json); not calibrated: beta, gamma" "$WORK/out.txt" ||
  { cat "$WORK/out.txt" >&2; fail "summary"; }
[[ $(stat -c %Y.%i "$WORK/site/calibration/alpha.json") != "$alpha_before" ]] || fail "alpha.json not rewritten"
cmp -s "$CL" "$WORK/copy-before.json" || fail "copy.json changed although alpha's path is the same"
check "gamma, alpha, beta: exit 3; $(grep -m1 'beta: not' "$WORK/err.txt" | cut -c1-100)..."

# A job that fails: its state, exit code and the last lines of its log.
rc=0
timeout 600 dlh-estimate calibrate --slurm --quick --types alpha --device nosuch --out-dir "$WORK/bad" \
  >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
[[ $rc -eq 3 ]] || { cat "$WORK/err.txt" >&2; fail "a failing job: exit $rc, expected 3"; }
grep -Eq "^dlh-estimate: alpha: not calibrated: job [0-9]+ FAILED, exit code 2 \(NonZeroExitCode\)$" "$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "failed job not reported"; }
grep -q "^  | dlh-estimate: --device: must be cpu, cuda or cuda:N, got 'nosuch'" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "log tail not shown"; }
[[ ! -e $WORK/bad/alpha.json ]] || fail "a failed job left a calibration"
check "failing job: $(grep -m1 'alpha: not' "$WORK/err.txt" | cut -c1-80); $(grep -m1 '  | ' "$WORK/err.txt" | cut -c1-60)"

# --wait runs out: the job is cancelled and named.
rc=0
timeout 600 dlh-estimate calibrate --slurm --types beta --wait 3s --out-dir "$WORK/slow" --cluster "$CL" \
  >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
[[ $rc -eq 3 ]] || { cat "$WORK/err.txt" >&2; fail "--wait 3s: exit $rc, expected 3"; }
grep -Eq "^dlh-estimate: beta: not calibrated: no result within --wait 3s \(job [0-9]+ .*\); cancelled$" "$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "timeout not reported"; }
id=$(grep -Eo '^beta: job [0-9]+' "$WORK/err.txt" | head -1 | grep -Eo '[0-9]+$')
for _ in $(seq 50); do
  state=$(scontrol show job -o "$id" | grep -Eo 'JobState=[A-Z_]+')
  [[ $state == JobState=CANCELLED ]] && break
  sleep 0.2
done
[[ $state == JobState=CANCELLED ]] || fail "job $id not cancelled: $state"
cmp -s "$CL" "$WORK/copy-before.json" || fail "copy.json changed by a run that calibrated nothing"
check "--wait 3s: job $id $state, exit 3, copy.json unchanged"

# A type calibrated but not described: kept, named, exit 3.
python3 - "$CL" "$WORK/only-beta.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["gpu_types"] = [g for g in c["gpu_types"] if g["name"] == "beta"]
c["node_types"] = [n for n in c["node_types"] if n["gpu"] == "beta"]
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
rc=0
timeout 600 dlh-estimate calibrate --slurm --quick --types alpha --out-dir "$WORK/cal3" --cluster "$WORK/only-beta.json" \
  >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
[[ $rc -eq 3 && -s $WORK/cal3/alpha.json ]] || { cat "$WORK/err.txt" >&2; fail "alpha not in the description: exit $rc, expected 3 and alpha.json"; }
grep -qx "dlh-estimate: $WORK/only-beta.json: gpu_types: no GPU type 'alpha' for cal3/alpha.json; add it with dlh-estimate cluster --from-slurm" "$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "alpha's absence not reported"; }
check "not in the description: $(grep -m1 'no GPU type' "$WORK/err.txt" | sed "s|$WORK/||" | cut -c1-100)..."

# Bad input fails before anything is submitted.
echo '{"name": "x"}' >"$WORK/bad.json"
expect_fail 2 "bad.json: gpu_types: " dlh-estimate calibrate --slurm --cluster "$WORK/bad.json" --out-dir "$WORK/none"
expect_fail 2 "time" dlh-estimate calibrate --slurm --time soon --out-dir "$WORK/none"
[[ -z $(squeue -h) ]] || fail "bad input queued a job: $(squeue -h)"
expect_fail 2 "use --out-dir" dlh-estimate calibrate --slurm --out "$WORK/x.json"
