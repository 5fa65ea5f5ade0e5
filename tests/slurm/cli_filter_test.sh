#!/bin/bash
# The two ways a site runs `sbatch --dlh-auto`, side by side on two live clusters, submitted by
# an ordinary user this test creates (issue 11):
#   A: spank_dlh.so plans inside sbatch and sets the options (Slurm 22.05's internals);
#   B: spank_dlh.so register-only + share/slurm/cli_filter.lua (cli_filter/lua, documented
#      interfaces only): the same planning code, run by `dlh-estimate slurm-plan` as the user.
# Both must give the same request and DLH_PLAN; keep what the user set; apply the site's
# plugstack limits; refuse a FIFO or another user's file without hanging anybody or showing a
# byte of it; leave jobs without --dlh-auto (also jobs submitted from inside a --dlh-auto job)
# untouched; deliver the plan under --export=NONE; say that srun --dlh-auto inside a job is
# ignored; plan for the nodes -w names and -x leaves out. Nothing here runs as root in
# slurmctld: job_submit.lua is gone.
# shellcheck source=tests/slurm/slurm.bash
source "$(dirname "$0")/slurm.bash"
need_slurm munged slurmctld slurmd sbatch scontrol useradd runuser
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[[ -e $BINDIR/../lib/spank_dlh.so ]] || fail "no $BINDIR/../lib/spank_dlh.so"
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|DLH)_' || true)

# An ordinary user, and copies of everything they read (the checkout may sit in a folder
# only root can enter). Both clusters use the same installation: PREFIX/{bin,lib}.
USER_NAME=dlh-test-user
id "$USER_NAME" >/dev/null 2>&1 || useradd --no-create-home --shell /bin/bash "$USER_NAME"
chmod 755 "$WORK"
mkdir -p "$WORK/dlh/bin" "$WORK/dlh/lib" "$WORK/share" "$WORK/calibration" "$WORK/u"
cp "$BINDIR/dlh-estimate" "$BINDIR/dlh-data" "$WORK/dlh/bin/"
cp "$BINDIR/../lib/spank_dlh.so" "$WORK/dlh/lib/"
cp "$ROOT/share/examples/fashion-mnist.json" "$ROOT/share/cluster/local.json" "$WORK/share/"
# local.json names ../calibration/cpu.json: the tests' fixed calibration, whose figures the
# expectations below are (tests/util/fixture_calibration.py).
python3 "$ROOT/tests/util/fixture_calibration.py" "$BINDIR/dlh-estimate" "$WORK/calibration/cpu.json"
chown "$USER_NAME" "$WORK/u"
SO=$WORK/dlh/lib/spank_dlh.so SPEC=$WORK/share/fashion-mnist.json CLUSTER=$WORK/share/local.json
SITE="cluster=$CLUSTER default-deadline=30m"

A=$WORK/a B=$WORK/b
cleanup() {
  local rc=$?
  "$ROOT/share/slurm/stop-cluster.sh" "$A" >/dev/null 2>&1 || true
  "$ROOT/share/slurm/stop-cluster.sh" "$B" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
cd "$WORK/u"

# Both clusters: alpha1, beta1 and cpu1, a node of local.json's CPU node type cpu-local.
export SLURM_TEST_NODES="alpha1:alpha:2:8 beta1:beta:2:8 cpu1:cpu-local:0:2"
SLURM_TEST_PLUGSTACK="required $SO $SITE" \
  "$ROOT/share/slurm/start-cluster.sh" "$A" >"$WORK/a.txt" || { cat "$WORK/a.txt"; fail "cluster A"; }
mkdir -p "$B/etc"
cp "$ROOT/share/slurm/cli_filter.lua" "$B/etc/cli_filter.lua"
SLURM_TEST_EXTRA_CONF="CliFilterPlugins=cli_filter/lua" \
  SLURM_TEST_PLUGSTACK="required $SO register-only $SITE" \
  "$ROOT/share/slurm/start-cluster.sh" "$B" >"$WORK/b.txt" || { cat "$WORK/b.txt"; fail "cluster B"; }
chmod -R a+rX "$A/etc" "$B/etc"

fields() {  # fields CLUSTER JOB: the scheduling fields of a job, one line
  SLURM_CONF=$1/etc/slurm.conf scontrol show job "$2" |
    grep -oE '(TresPer[A-Za-z]+|NumNodes|NumTasks|NtasksPerN:B:S:C|TimeLimit)=[^ ]+' |
    sed -E 's/^NumNodes=([0-9]+)-\1$/NumNodes=\1/' | sort | paste -sd' '
}  # (NumNodes reads 1-1 until the job starts, 1 after)
as_user() {  # as_user CLUSTER CMD...: CMD as the ordinary user, on that cluster
  local c=$1; shift
  runuser -u "$USER_NAME" -- env SLURM_CONF="$c/etc/slurm.conf" PATH="$PATH" "$@"
}
submit() {  # submit CLUSTER OUT ARGS...: the job id (stderr in $WORK/u/submit.err)
  local c=$1 out=$2; shift 2
  as_user "$c" sbatch --parsable -o "$out" "$@" 2>"$WORK/u/submit.err"
}
wait_done() {  # wait_done CLUSTER JOB: until the job left the queue
  for _ in $(seq 600); do
    [[ -z $(SLURM_CONF=$1/etc/slurm.conf squeue -h -j "$2" 2>/dev/null) ]] && return 0
    sleep 0.1
  done
  fail "job $2 did not end"
}
newest_job() {  # newest_job CLUSTER: the highest job id slurmctld knows (finished ones too)
  SLURM_CONF=$1/etc/slurm.conf scontrol -o show job 2>/dev/null | grep -oE '^JobId=[0-9]+' |
    cut -d= -f2 | sort -n | tail -1
}
AUTO="spec=$SPEC,samples=60000"

echo "same request and DLH_PLAN both ways; site default-deadline=30m applied; mixed=no,dry-run=no"
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  j=$(submit "$d" "$WORK/u/$c.plan" --dlh-auto="$AUTO,mixed=no,dry-run=no" --wrap 'echo "$DLH_PLAN"') ||
    { cat "$WORK/u/submit.err"; fail "$c: submission refused"; }
  declare "f$c=$(fields "$d" "$j")"
  grep -q "deadline 30m (least energy" "$WORK/u/submit.err" || { cat "$WORK/u/submit.err"; fail "$c: no summary"; }
  wait_done "$d" "$j"
done
[[ "$fA" == "$fB" ]] || fail "plugin gives '$fA', cli_filter.lua gives '$fB'"
# Two alpha ranks: sbatch hands the job OPENBLAS_NUM_THREADS=1 (tests/scripts/common.bash),
# so each rank computes with one thread, and both paths plan with it.
[[ "$fA" == *"gres:gpu:alpha:2"* ]] || fail "unexpected request: $fA"
python3 - "$WORK/u/A.plan" "$WORK/u/B.plan" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a == b, f"plans differ:\n{a}\n{b}"
assert a["deadline_s"] == 1800, a["deadline_s"]
PY
check "both: $fA, the same DLH_PLAN"

echo "a job script's --signal gets the same fitted lead both ways (issue 40)"
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  j=$(submit "$d" "$WORK/u/$c.signal" --signal=B:USR1@120 --dlh-auto="$AUTO" --wrap 'echo "$DLH_PLAN"') ||
    { cat "$WORK/u/submit.err"; fail "$c: submission with --signal refused"; }
  grep -o -- "--signal=[^ ]* (your lead fitted to the limit" "$WORK/u/submit.err" >"$WORK/u/$c.lead" ||
    { cat "$WORK/u/submit.err"; fail "$c: no fitted signal lead"; }
  wait_done "$d" "$j"
done
cmp -s "$WORK/u/A.lead" "$WORK/u/B.lead" || fail "signal: plugin '$(cat "$WORK/u/A.lead")', cli_filter.lua '$(cat "$WORK/u/B.lead")'"
python3 - "$WORK/u/A.signal" "$WORK/u/B.signal" "$(cat "$WORK/u/A.lead")" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a == b, f"plans differ:\n{a}\n{b}"
assert f"@{a['signal_lead_s']} " in sys.argv[3], (a["signal_lead_s"], sys.argv[3])
assert a["time_limit_s"] - a["signal_lead_s"] - 60 >= a["predicted"]["upper_s"] - 1, a
PY
check "both: $(cat "$WORK/u/A.lead")"

echo "a mix (mixed, -N 2): the same one-job request and node names both ways (issue 14)"
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  j=$(submit "$d" "$WORK/u/$c.mix" -N 2 --dlh-auto="$AUTO,mixed" --wrap 'echo "$DLH_PLAN"') ||
    { cat "$WORK/u/submit.err"; fail "$c: mixed submission refused"; }
  declare "m$c=$(fields "$d" "$j") $(SLURM_CONF=$d/etc/slurm.conf scontrol show job "$j" | grep -oE 'Features=[^ ]+')"
  wait_done "$d" "$j"
done
[[ "$mA" == "$mB" ]] || fail "mixed: plugin gives '$mA', cli_filter.lua gives '$mB'"
[[ "$mA" == *"Features=[alpha*1&beta*1]"* && "$mA" == *"gres:gpu:2"* ]] || fail "unexpected mixed request: $mA"
python3 - "$WORK/u/A.mix" "$WORK/u/B.mix" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a == b, f"plans differ:\n{a}\n{b}"
assert [p["node_names"] for p in a["allocation"]["parts"]] == [["alpha1"], ["beta1"]], a
PY
check "both: $mA, the same DLH_PLAN with node_names"

echo "-x alpha1 and -w beta1: planned on beta both ways"
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  j=$(submit "$d" /dev/null -x alpha1 --dlh-auto="$AUTO" --wrap true) ||
    { cat "$WORK/u/submit.err"; fail "$c: -x alpha1 refused"; }
  grep -q -- "your --exclude=alpha1 left out: node-alpha 0 nodes" "$WORK/u/submit.err" ||
    { cat "$WORK/u/submit.err"; fail "$c: the summary does not say what -x left out"; }
  declare "x$c=$(fields "$d" "$j")"
  wait_done "$d" "$j"
  j=$(submit "$d" /dev/null -w beta1 --dlh-auto="$AUTO" --wrap true) ||
    { cat "$WORK/u/submit.err"; fail "$c: -w beta1 refused"; }
  declare "w$c=$(fields "$d" "$j")"
  wait_done "$d" "$j"
done
[[ "$xA" == "$xB" && "$wA" == "$wB" ]] || fail "-x/-w: plugin gives '$xA' / '$wA', cli_filter.lua '$xB' / '$wB'"
[[ "$xA" == *"gres:gpu:beta:"* && "$wA" == *"gres:gpu:beta:"* ]] || fail "-x alpha1 / -w beta1 not on beta: $xA / $wA"
check "both: $xA"

echo "a CPU node (types=cpu): the same request both ways, CPUs and a feature, no GPUs (issue 46)"
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  j=$(submit "$d" "$WORK/u/$c.cpu" --dlh-auto="$AUTO,types=cpu" --wrap 'echo "$DLH_PLAN"') ||
    { cat "$WORK/u/submit.err"; fail "$c: CPU submission refused"; }
  grep -q "dlh: 1 CPU node cpu-local x .*; on CPU nodes: types= allows no GPU type" "$WORK/u/submit.err" ||
    { cat "$WORK/u/submit.err"; fail "$c: the summary does not say CPU node"; }
  declare "c$c=$(fields "$d" "$j") $(SLURM_CONF=$d/etc/slurm.conf scontrol show job "$j" | grep -oE '(Features|CPUs/Task)=[^ ]+' | paste -sd' ')"
  wait_done "$d" "$j"
done
[[ "$cA" == "$cB" ]] || fail "CPU: plugin gives '$cA', cli_filter.lua gives '$cB'"
[[ "$cA" == *"Features=cpu-local"* && "$cA" == *"CPUs/Task="* && "$cA" != *"gpu"* ]] || fail "unexpected CPU request: $cA"
python3 - "$WORK/u/A.cpu" "$WORK/u/B.cpu" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a == b, f"plans differ:\n{a}\n{b}"
[part] = a["allocation"]["parts"]
assert part["device"] == "cpu" and part["gpu"] == "cpu-local", part
PY
check "both: $cA"

echo "explicit values kept, the same way; DLH_SPEC from the user's environment"
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  j=$(as_user "$d" env DLH_SPEC="$SPEC" sbatch --parsable -o /dev/null --dlh-auto=samples=60000,deadline=1h \
    --time=2 --gres=gpu:beta:1 --wrap true 2>"$WORK/u/submit.err") || { cat "$WORK/u/submit.err"; fail "$c refused"; }
  f=$(fields "$d" "$j")
  [[ "$f" == *"TimeLimit=00:02:00"* && "$f" == *"TresPerNode=gres:gpu:beta:1"* ]] || fail "$c: user values lost: $f"
  grep -q "yours kept: --gres=gpu:beta:1 --time=00:02:00; warning: your --time=00:02:00 is shorter than the" \
    "$WORK/u/submit.err" || { cat "$WORK/u/submit.err"; fail "$c: no warning about the short --time"; }
  declare "k$c=$f"
done
[[ "$kA" == "$kB" ]] || fail "plugin keeps '$kA', cli_filter.lua '$kB'"
check "--time=2 --gres=gpu:beta:1 kept both ways, with a warning: $kA"

echo "--gpus-per-socket is a GPU request; --ntasks-per-node=1 on plugin-chosen nodes"
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  j=$(submit "$d" /dev/null --dlh-auto="$AUTO" --gpus-per-socket=alpha:1 --sockets-per-node=1 --wrap true) ||
    { cat "$WORK/u/submit.err"; fail "$c: --gpus-per-socket refused"; }
  f=$(fields "$d" "$j")
  [[ $f == *TresPerSocket=gres:gpu:alpha:1* && $f != *TresPerNode* ]] || fail "$c: --gpus-per-socket: $f"
  j=$(submit "$d" /dev/null --dlh-auto="$AUTO,types=alpha,max-gpus=1" --ntasks-per-node=1 --wrap true) ||
    { cat "$WORK/u/submit.err"; fail "$c: --ntasks-per-node refused"; }
  f=$(fields "$d" "$j")
  [[ $f == *"NumNodes=1 "* && $f == *"NumTasks=1 "* ]] || fail "$c: --ntasks-per-node=1: $f"
  grep -q "1 task, time" "$WORK/u/submit.err" || { cat "$WORK/u/submit.err"; fail "$c: wrong task count"; }
done
check "TresPerSocket kept, no --gres added; tasks follow the user's --ntasks-per-node"

echo "a FIFO as spec: refused at once, nobody waits; another user's file: not a byte shown"
mkfifo "$WORK/u/fifo.json"
chown "$USER_NAME" "$WORK/u/fifo.json"
printf '{"SECRET-MARKER-1234": "top secret line"}\n' >"$WORK/secret.json"
chmod 600 "$WORK/secret.json"
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  ( rc=0
    timeout 30 runuser -u "$USER_NAME" -- env SLURM_CONF="$d/etc/slurm.conf" \
      sbatch --dlh-auto="spec=$WORK/u/fifo.json,samples=5" --wrap true >"$WORK/u/fifo.out" 2>&1 || rc=$?
    echo $rc >"$WORK/u/fifo.rc" ) &
  fifo_pid=$!
  t0=$(date +%s%N)
  SLURM_CONF=$d/etc/slurm.conf timeout 30 sbatch -o /dev/null --wrap true >/dev/null || fail "$c: plain sbatch failed"
  took_ms=$((($(date +%s%N) - t0) / 1000000))
  ((took_ms < 20000)) || fail "$c: a plain sbatch took ${took_ms} ms while a FIFO spec was pending"
  wait "$fifo_pid"
  [[ $(cat "$WORK/u/fifo.rc") == 1 ]] || { cat "$WORK/u/fifo.out"; fail "$c: FIFO spec: exit $(cat "$WORK/u/fifo.rc")"; }
  grep -q "fifo.json: cannot read: not a regular file" "$WORK/u/fifo.out" || { cat "$WORK/u/fifo.out"; fail "$c: FIFO message"; }
  rc=0
  as_user "$d" sbatch --dlh-auto="spec=$WORK/secret.json,samples=5" --wrap true >"$WORK/u/secret.out" 2>&1 || rc=$?
  [[ $rc -ne 0 ]] || fail "$c: a spec the user cannot read was accepted"
  grep -q "secret.json: cannot read: Permission denied" "$WORK/u/secret.out" || { cat "$WORK/u/secret.out"; fail "$c: message"; }
  ! grep -q "SECRET-MARKER\|top secret" "$WORK/u/secret.out" || fail "$c: the secret reached the user"
  check "$c: plain sbatch in ${took_ms} ms; $(grep -o 'dlh: .*' "$WORK/u/fifo.out" | head -1); $(grep -o 'dlh: .*' "$WORK/u/secret.out" | head -1)"
done

echo "an impossible deadline is refused, nothing queued; jobs without --dlh-auto untouched"
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  before=$(newest_job "$d")
  ! submit "$d" /dev/null --dlh-auto="$AUTO,deadline=1m30s" --wrap true >/dev/null || fail "$c: impossible deadline accepted"
  grep -q "dlh: no allocation meets the 1m30s deadline" "$WORK/u/submit.err" || { cat "$WORK/u/submit.err"; fail "$c: no reason"; }
  [[ $(newest_job "$d") == "$before" ]] || fail "$c: a job was queued ($(newest_job "$d") after $before)"
  j=$(submit "$d" /dev/null -N1 --wrap true)
  f=$(fields "$d" "$j")
  [[ "$f" != *gres* && "$f" != *"TimeLimit=00:"* ]] || fail "$c: a job without --dlh-auto was changed: $f"
done
check "refused with one line; plain jobs untouched"

echo "inside a --dlh-auto job: a nested sbatch is not planned, srun --dlh-auto is ignored aloud"
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  j=$(submit "$d" "$WORK/u/$c.nested" --dlh-auto="$AUTO" --wrap \
    'sbatch --parsable -o /dev/null --wrap true; srun true && echo srun-ok; srun --dlh-auto=deadline=2h true 2>&1') ||
    { cat "$WORK/u/submit.err"; fail "$c: refused"; }
  wait_done "$d" "$j"
  nested=$(head -1 "$WORK/u/$c.nested")
  [[ $nested =~ ^[0-9]+$ ]] || { cat "$WORK/u/$c.nested"; fail "$c: the nested sbatch failed"; }
  f=$(fields "$d" "$nested")
  [[ "$f" != *gres* && "$f" != *"TimeLimit=00:"* ]] || fail "$c: the nested job $nested was planned: $f"
  grep -q srun-ok "$WORK/u/$c.nested" || { cat "$WORK/u/$c.nested"; fail "$c: srun inside the job failed"; }
  grep -q "dlh: --dlh-auto is ignored by srun inside job $j" "$WORK/u/$c.nested" ||
    { cat "$WORK/u/$c.nested"; fail "$c: srun --dlh-auto was silently ignored"; }
done
check "nested job untouched: $f; srun says it ignores --dlh-auto"

echo "--export=NONE: the plan still reaches the job (SLURM_SPANK_DLH_PLAN)"
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  j=$(submit "$d" "$WORK/u/$c.none" --export=NONE --dlh-auto="$AUTO" --wrap 'echo "${DLH_PLAN:-none}"; echo "$SLURM_SPANK_DLH_PLAN"') ||
    { cat "$WORK/u/submit.err"; fail "$c: refused"; }
  wait_done "$d" "$j"
  [[ $(head -1 "$WORK/u/$c.none") == none ]] || fail "$c: --export=NONE let DLH_PLAN through?"
  sed -n 2p "$WORK/u/$c.none" | python3 -c 'import json,sys; p=json.load(sys.stdin); assert p["global_batch"] > 0' ||
    { cat "$WORK/u/$c.none"; fail "$c: no SLURM_SPANK_DLH_PLAN in the job"; }
done
check "SLURM_SPANK_DLH_PLAN in the job both ways"

echo "spec=suggest: the spec written to the submit folder, DLH_SPEC and DLH_DATA in the job"
dlh-data synthetic --out "$WORK/u/bars.h5" --shape 1x12x12 --classes 4 --train 320 --test 32 >/dev/null
chown "$USER_NAME" "$WORK/u/bars.h5"
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  rm -f "$WORK"/u/dlh-suggested-bars-*.json
  j=$(submit "$d" "$WORK/u/$c.suggest" --dlh-auto="deadline=1h,spec=suggest,data=bars.h5,epochs=1" \
    --wrap 'echo "$DLH_SPEC $DLH_DATA"') || { cat "$WORK/u/submit.err"; fail "$c: spec=suggest refused"; }
  wait_done "$d" "$j"
  suggested=$(ls "$WORK"/u/dlh-suggested-bars-*.json 2>/dev/null | head -1)
  [[ -n $suggested && $(cat "$WORK/u/$c.suggest") == "$suggested $WORK/u/bars.h5" ]] ||
    { cat "$WORK/u/$c.suggest" "$WORK/u/submit.err"; fail "$c: the job got no DLH_SPEC/DLH_DATA"; }
  python3 -c "import json, sys; assert json.load(open(sys.argv[1]))['name'] == 'bars'" \
    "$suggested" || fail "$c: no suggested spec in the submit folder"
  [[ $(stat -c %U "$suggested") == "$USER_NAME" ]] || fail "$c: the spec is not the user's"
done
check "both: $(grep -o 'spec: suggested [^;]*' "$WORK/u/submit.err" | cut -c1-120)"

echo "a calibration measured with another engine is named in sbatch's output (issue 13)"
python3 - "$WORK/calibration/cpu.json" <<'PY'
import json, sys
path = sys.argv[1]
c = json.load(open(path))
c["engine"] = dict(c.get("engine", {"compiler": "", "blas": ""}), fingerprint="000000000000")
c["engine"].pop("sources", None)  # no file list: the fingerprint decides
json.dump(c, open(path, "w"))
PY
for c in A B; do
  d=$A; [[ $c == B ]] && d=$B
  submit "$d" /dev/null --dlh-auto="$AUTO" --wrap true >/dev/null || { cat "$WORK/u/submit.err"; fail "$c: refused"; }
  grep -q "warning: alpha's calibration cpu.json: measured with engine 000000000000, this build's engine is" \
    "$WORK/u/submit.err" || { cat "$WORK/u/submit.err"; fail "$c: the stale calibration was not named"; }
done
check "$(grep -o "warning: alpha's calibration[^;]*" "$WORK/u/submit.err")"
