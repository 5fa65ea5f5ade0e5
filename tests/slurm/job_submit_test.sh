#!/bin/bash
# The documented fallback: spank_dlh.so with `register-only` plus job_submit/lua
# (share/slurm/job_submit.lua) in slurmctld gives the same job request as the plugin's own
# rewrite in sbatch: the same GRES, nodes, tasks per node, time limit and DLH_PLAN; explicit
# user values kept; an impossible deadline refused; jobs without the option untouched.
# shellcheck source=tests/slurm/slurm.bash
source "$(dirname "$0")/slurm.bash"
need_slurm munged slurmctld slurmd sbatch scontrol
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SO=$(cd "$BINDIR/../lib" && pwd)/spank_dlh.so
[[ -e $SO ]] || fail "no $SO"
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN)_' || true)

A=$WORK/a B=$WORK/b
cleanup() {
  local rc=$?
  "$ROOT/share/slurm/stop-cluster.sh" "$A" >/dev/null 2>&1 || true
  "$ROOT/share/slurm/stop-cluster.sh" "$B" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
cd "$WORK"
SPEC=$ROOT/share/examples/fashion-mnist.json
CLUSTER=$ROOT/share/cluster/local.json
AUTO="spec=$SPEC,samples=60000,deadline=30m"

# Cluster A: the plugin rewrites the request in sbatch.
SLURM_TEST_PLUGSTACK="required $SO cluster=$CLUSTER" \
  "$ROOT/share/slurm/start-cluster.sh" "$A" >"$WORK/a.txt" || { cat "$WORK/a.txt"; fail "cluster A"; }
# Cluster B: the plugin only registers the option; slurmctld's job_submit.lua plans.
mkdir -p "$B/etc"
cp "$ROOT/share/slurm/job_submit.lua" "$B/etc/job_submit.lua"
DLH_ESTIMATE=$BINDIR/dlh-estimate DLH_CLUSTER=$CLUSTER SLURM_TEST_EXTRA_CONF="JobSubmitPlugins=lua" \
  SLURM_TEST_PLUGSTACK="required $SO register-only" \
  "$ROOT/share/slurm/start-cluster.sh" "$B" >"$WORK/b.txt" || { cat "$WORK/b.txt"; fail "cluster B"; }

fields() {  # fields CLUSTER JOB: the scheduling fields of a job, one line
  SLURM_CONF=$1/etc/slurm.conf scontrol show job "$2" |
    grep -oE '(TresPerNode|NumNodes|NtasksPerN:B:S:C|TimeLimit)=[^ ]+' | sort | paste -sd' '
}
submit() {  # submit CLUSTER OUT ARGS...: the job id
  local c=$1 out=$2; shift 2
  SLURM_CONF=$c/etc/slurm.conf sbatch --parsable -o "$out" "$@"
}
on() { local c=$1; shift; SLURM_CONF=$c/etc/slurm.conf "$@"; }
wait_output() {  # wait_output FILE: until the job wrote it
  for _ in $(seq 600); do [[ -s $1 ]] && return 0; sleep 0.05; done
  fail "no output in $1"
}

echo "same request through the plugin and through job_submit.lua"
ja=$(submit "$A" "$WORK/a.out" --dlh-auto="$AUTO" --wrap 'echo "$DLH_PLAN"')
jb=$(submit "$B" "$WORK/b.out" --dlh-auto="$AUTO" --wrap 'echo "$DLH_PLAN"' 2>"$WORK/b.err")
fa=$(fields "$A" "$ja") fb=$(fields "$B" "$jb")
[[ "$fa" == "$fb" ]] || fail "plugin gives '$fa', job_submit.lua gives '$fb'"
[[ "$fa" == *"gres:gpu:alpha:2"* ]] || fail "unexpected request: $fa"
grep -q "dlh: least energy of" "$WORK/b.err" || { cat "$WORK/b.err"; fail "no message from job_submit.lua"; }
check "both: $fa; sbatch says: $(grep -o 'dlh: .*' "$WORK/b.err")"
wait_output "$WORK/a.out"
wait_output "$WORK/b.out"
python3 - "$WORK/a.out" "$WORK/b.out" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
for p in (a, b):
    p.pop("why", None)  # names how many allocations were free; the rest must agree
assert a == b, f"plans differ:\n{a}\n{b}"
PY
check "DLH_PLAN in the job is the same both ways"

echo "explicit values are kept"
jb=$(submit "$B" /dev/null --dlh-auto="$AUTO" --time=45 --gres=gpu:beta:1 --wrap true 2>/dev/null)
fb=$(fields "$B" "$jb")
[[ "$fb" == *"TimeLimit=00:45:00"* && "$fb" == *"gres:gpu:beta:1"* ]] || fail "user values lost: $fb"
check "--time=45 --gres=gpu:beta:1 kept: $fb"

echo "impossible deadline and jobs without the option"
rc=0
submit "$B" /dev/null --dlh-auto="spec=$SPEC,samples=60000,deadline=2m" --wrap true >/dev/null 2>"$WORK/imp.err" || rc=$?
[[ $rc -ne 0 ]] || fail "impossible deadline was accepted"
grep -q "dlh: fastest allocation misses the 2m deadline" "$WORK/imp.err" || { cat "$WORK/imp.err"; fail "no reason given"; }
check "refused: $(grep -o 'dlh: .*' "$WORK/imp.err")"
jb=$(submit "$B" /dev/null -N1 --wrap true)
fb=$(fields "$B" "$jb")
[[ "$fb" != *gres* ]] || fail "a job without --dlh-auto was changed: $fb"
check "a job without --dlh-auto is untouched: $fb"
