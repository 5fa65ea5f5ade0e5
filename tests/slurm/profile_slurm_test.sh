#!/bin/bash
# `dlh-estimate profile --slurm -- CMD` on a live local cluster (issue 44, part 3): nodes
# alpha1 (GPU type alpha) and beta1 (beta). A tiny program writes 'step B' lines to
# DLH_PROGRESS_FD for the batch B it is given, sleeping 0.75 ms a sample on alpha1 and
# 40 ms + 1.25 ms a sample on beta1 (a slower beta); two jobs, one per type, each running it
# at batches 16 and 32 in 2 rounds under dlh-launch run --profile (every run after the first
# with --profile-join), each profile with its node's probe, collected into one set.
# `recommend --profile SET` then says both were measured, and plans each type by the line
# through its own two points (beta's a fixed 40 ms and more a sample), not alpha's scaled by
# the peaks (2.5x a sample). Then bad input and a failing type: one line, exit 3, no set
# written.
# Needs root and the Debian slurm-wlm/munge packages; about 20 s idle.
# shellcheck source=tests/slurm/slurm.bash
source "$(dirname "$0")/slurm.bash"
need_slurm munged slurmctld slurmd sinfo sbatch scontrol scancel srun
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[[ -x $BINDIR/dlh-estimate && -x $BINDIR/dlh-launch ]] || fail "no $BINDIR/dlh-estimate or dlh-launch (build first)"
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
cd "$WORK" || exit 1

SLURM_TEST_NODES="alpha1:alpha:2:2 beta1:beta:2:2" \
  "$ROOT/share/slurm/start-cluster.sh" "$C" >"$WORK/start.txt" || { cat "$WORK/start.txt"; fail "start-cluster.sh"; }
export SLURM_CONF=$C/etc/slurm.conf
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp

cat >"$WORK/steps.sh" <<'SH'
#!/bin/bash
# steps.sh BATCH: BATCH samples a step, until stopped; slower on beta's node.
printf 'program steps.sh\nparams 1000\nsamples 64000\nepochs 2\nlr 0.05\ndevice cpu\nthreads 1\n' >&"$DLH_PROGRESS_FD"
pause=$(awk -v b="$1" 'BEGIN { printf "%.4f", 0.00075 * b }')
[[ $SLURMD_NODENAME == beta1 ]] && pause=$(awk -v b="$1" 'BEGIN { printf "%.4f", 0.04 + 0.00125 * b }')
while :; do
  sleep "$pause"
  echo "step $1" >&"$DLH_PROGRESS_FD"
done
SH
chmod +x "$WORK/steps.sh"

# ---- both types: two jobs, two profiles with probes, one set -------------------------------
rc=0
timeout 120 dlh-estimate profile --slurm --steps 10 --warmup 2 --rounds 2 --batches 16,32 --time 5m \
  --out "$WORK/set.json" -- "$WORK/steps.sh" '{batch}' >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
[[ $rc -eq 0 ]] || { cat "$WORK/out.txt" "$WORK/err.txt" >&2; for l in "$WORK"/set.*.log; do echo "== $l"; cat "$l"; done >&2; fail "profile --slurm exited $rc"; }
for t in alpha beta; do
  grep -Eq "^$t: job [0-9]+ submitted$" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "$t: no 'submitted' line"; }
  grep -Eq "^$t: done in [0-9]+ s -> $WORK/set.$t.json$" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "$t: no 'done' line"; }
  for b in 16 32; do
    grep -q "; batch $b in 2 rounds, .* s per step (their median)" "$WORK/set.$t.log" ||
      { cat "$WORK/set.$t.log" >&2; fail "$t: batch $b's second round did not join its first"; }
  done
  grep -qx "dlh-estimate: $t: profile written to $WORK/set.$t.json (2 rounds)" "$WORK/set.$t.log" ||
    { cat "$WORK/set.$t.log" >&2; fail "$t: no 'written (2 rounds)' line"; }
done
grep -qx "profiled 2 of 2 GPU types through Slurm at batches 16, 32 in 2 rounds each: alpha ($WORK/set.alpha.json), beta ($WORK/set.beta.json)" "$WORK/out.txt" ||
  { cat "$WORK/out.txt" >&2; fail "summary"; }
id=$(grep -Eo '^beta: job [0-9]+' "$WORK/err.txt" | head -1 | grep -Eo '[0-9]+$')
scontrol show job -o "$id" >"$WORK/job.txt"
for want in "JobName=dlh-profile-beta " "TresPerNode=gres:gpu:beta:1" "NodeList=beta1 " "NumCPUs=2 "; do
  grep -qF -- "$want" "$WORK/job.txt" || { cat "$WORK/job.txt" >&2; fail "job $id: no '$want'"; }
done
python3 - "$WORK/set.json" <<'PY' || fail "the set is not two profiles with probes"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["dlh_profile_set"] == 1 and [p["gpu_type"] for p in s["profiles"]] == ["alpha", "beta"], s
step = {}
for p in s["profiles"]:
    assert p["probe"]["kind"] == "cpu" and p["probe"]["sgemm_gflops"] > 0, p["probe"]
    assert p["program"].startswith("steps") and p["params"] == 1000 and p["command"][-2].endswith("steps.sh"), p
    assert p["command"][-1] in ("16", "32"), p["command"]  # {batch} put in
    # Each batch in two runs of 10 timed steps, joined: each run's step time kept, the point
    # their median.
    assert [pt["batch"] for pt in p["points"]] == [16, 32], p["points"]
    for pt in p["points"]:
        assert pt["steps"] == 20 and len(pt["rounds"]) == 2, pt
        assert abs(pt["step_s"] - sum(pt["rounds"]) / 2) <= 1e-9 * pt["step_s"], pt
    step[p["gpu_type"]] = p["points"][1]["step_s"]
# 20 ms and 80 ms of sleep, plus the loop's own time: beta clearly the slower. Not a ratio:
# on a loaded host the loop's time doubled alpha's step (40 ms: 2.44x, 2026-12-02), while the
# 60 ms more of sleep a beta step takes is a floor no load takes away.
assert step["beta"] >= 0.08 and step["beta"] > step["alpha"] + 0.03, step
print(f"  alpha {step['alpha'] * 1e3:.1f} ms, beta {step['beta'] * 1e3:.1f} ms per step of 32")
PY
check "2 jobs (beta's on beta1, gres gpu:beta:1, exclusive), batches 16 and 32 in 2 rounds each; the set holds alpha's and beta's profiles, each point the median of its rounds, with its node's probe"

# ---- recommend plans each type from its own profile ----------------------------------------
CL=$ROOT/share/cluster/local.json
timeout 60 dlh-estimate recommend --profile "$WORK/set.json" --cluster "$CL" --deadline 30d --json \
  >"$WORK/plan.json" 2>"$WORK/rec.err" || { cat "$WORK/rec.err" >&2; fail "recommend --json"; }
timeout 60 dlh-estimate recommend --profile "$WORK/set.json" --cluster "$CL" --deadline 30d \
  >"$WORK/rec.txt" 2>&1 || { cat "$WORK/rec.txt" >&2; fail "recommend"; }
grep -qx "  profiles: measured on alpha, beta" "$WORK/rec.txt" || { cat "$WORK/rec.txt" >&2; fail "no 'measured on alpha, beta' line"; }
for t in alpha beta; do
  grep -q "^  $t: profiled (set.json: 2 batches, 16-32" "$WORK/rec.txt" || { cat "$WORK/rec.txt" >&2; fail "$t not profiled"; }
done
python3 - "$WORK/plan.json" "$WORK/rec.txt" "$WORK/set.json" <<'PY' || fail "the plan does not use beta's own measurement"
import json, re, sys
plan, text, s = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), json.load(open(sys.argv[3]))
assert plan["profiled"] == {"measured": ["alpha", "beta"], "transferred": {}}, plan["profiled"]
line = {t: (float(f), float(m)) for t, f, m in
        re.findall(r"^  (\w+): profiled .*, ([0-9.]+) ms \+ ([0-9.]+) ms/sample", text, re.M)}
def fit(points):  # the planner's line through a profile's points (estimator/recommend/profile_speeds.cpp)
    w = [(pt["batch"], pt["step_s"] * 1e3) for pt in points]
    s0 = sum(1 / t**2 for b, t in w); sb = sum(b / t**2 for b, t in w); sbb = sum(b * b / t**2 for b, t in w)
    st = sum(1 / t for b, t in w); sbt = sum(b / t for b, t in w)
    per = (s0 * sbt - sb * st) / (s0 * sbb - sb * sb)
    fixed = (st - per * sb) / s0
    if per <= 0:
        return st / s0, 0.0
    return (0.0, sbt / sbb) if fixed < 0 else (fixed, per)
own = {p["gpu_type"]: fit(p["points"]) for p in s["profiles"]}
for t in ("alpha", "beta"):  # printed as %.3f ms + %.4f ms/sample
    assert abs(line[t][0] - own[t][0]) < 1e-3 and abs(line[t][1] - own[t][1]) < 1e-4, (t, line, own)
# Scaled by the peaks (0.05 / 0.02 TFLOP/s) beta would be 2.5x alpha; each type's line is its own
# profile's (above), and beta's is the slower. Not a ratio: a loaded host doubled alpha's 20 ms of
# sleep (93.9 ms against 164.3 ms, 1.75x: CI 2026-12-02), while the 56 ms more of sleep a beta
# step of 32 takes is a floor no load takes away.
at32 = {t: f + 32 * m for t, (f, m) in line.items()}
assert at32["beta"] > at32["alpha"] + 30, line
print("  " + ", ".join(f"{t} {f:.1f} ms + {m:.3f} ms/sample" for t, (f, m) in sorted(line.items())) +
      f" (alpha's by the peaks alone: {line['alpha'][0]:.1f} ms + {line['alpha'][1] * 2.5:.3f} ms/sample)")
PY
check "recommend: $(grep -m1 'profiles:' "$WORK/rec.txt" | sed 's/^ *//'); beta planned from its own, slower profile"

# One type only: the other is transferred, and the plan says from which.
timeout 60 dlh-estimate recommend --profile "$WORK/set.alpha.json" --cluster "$CL" --deadline 30d \
  >"$WORK/rec1.txt" 2>&1 || { cat "$WORK/rec1.txt" >&2; fail "recommend one profile"; }
grep -qx "  profiles: measured on alpha; transferred to beta (from alpha)" "$WORK/rec1.txt" ||
  { cat "$WORK/rec1.txt" >&2; fail "no transfer line"; }
grep -q "^  beta: scaled from alpha's profile (set.alpha.json): FLOP/s x0.40" "$WORK/rec1.txt" ||
  { cat "$WORK/rec1.txt" >&2; fail "beta not scaled from alpha"; }
check "one type's profile: $(grep -m1 'profiles:' "$WORK/rec1.txt" | sed 's/^ *//')"

# ---- failures: one line each, exit 3, the set not written ----------------------------------
cp "$WORK/set.json" "$WORK/set.before"
rc=0
timeout 60 dlh-estimate profile --slurm --types beta,gamma --steps 3 --warmup 1 --out "$WORK/set.json" \
  -- /bin/false >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
[[ $rc -eq 3 ]] || { cat "$WORK/out.txt" "$WORK/err.txt" >&2; fail "failing program: exit $rc, expected 3"; }
grep -qx "dlh-estimate: gamma: not profiled: no node offers GRES gpu:gamma (sinfo)" "$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "gamma not named"; }
grep -Eq "^dlh-estimate: beta: not profiled: job [0-9]+ FAILED, exit code 1 \(NonZeroExitCode\)$" "$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "beta's failed job not named"; }
grep -q "^dlh-estimate: $WORK/set.json: not written: beta, gamma not profiled$" "$WORK/err.txt" ||
  { cat "$WORK/err.txt" >&2; fail "the set's fate not said"; }
cmp -s "$WORK/set.json" "$WORK/set.before" || fail "a failed run changed the set"
check "failing program: $(grep -m1 'beta: not profiled' "$WORK/err.txt" | cut -c1-80); set unchanged"

expect_fail 2 "profile --slurm: missing -- CMD ARGS" dlh-estimate profile --slurm --out "$WORK/x.json"
expect_fail 2 "profile --slurm: --steps: must be 1 to 1000000, got 0" dlh-estimate profile --slurm --steps 0 -- true
expect_fail 2 "profile --slurm: --rounds: must be 1 to 100, got 0" dlh-estimate profile --slurm --rounds 0 -- true
expect_fail 2 'profile --slurm: --batches: "x" is not a batch (a whole number 1 to 1000000)' \
  dlh-estimate profile --slurm --batches 16,x -- true '{batch}'
expect_fail 2 "profile --slurm: --batches: 16 is given twice" dlh-estimate profile --slurm --batches 16,16 -- true '{batch}'
expect_fail 2 "profile --slurm: --batches: the command holds no {batch} to put each batch in" \
  dlh-estimate profile --slurm --batches 16,32 -- true --batch 16
expect_fail 2 "profile --slurm: the command holds {batch}: give the batches to put there with --batches B1,B2" \
  dlh-estimate profile --slurm -- true --batch '{batch}'
expect_fail 2 "the folder $WORK/none does not exist" dlh-estimate profile --slurm --out "$WORK/none/x.json" -- true
echo '{"dlh_profile_set": 1, "profiles": [{"dlh_profile": 1, "gpu_type": "alpha", "points": [{"batch": 1, "step_s": 1, "steps": 1}]}, {"dlh_profile": 1, "gpu_type": "alpha", "points": [{"batch": 1, "step_s": 1, "steps": 1}]}]}' >"$WORK/twice.json"
expect_fail 2 "twice.json: profiles\[1\].gpu_type: \"alpha\" is measured twice" \
  dlh-estimate recommend --profile "$WORK/twice.json" --cluster "$CL" --deadline 1h
[[ -z $(squeue -h) ]] || fail "bad input queued a job: $(squeue -h)"
check "bad input: one line each, exit 2, nothing queued"
