#!/bin/bash
# dlh-launch run (issue 18): a user's own program, one per rank, under mpirun -np 2. Each
# program sees torchrun's environment (the same rendezvous and run id on both ranks, no
# variable of Open MPI's), the two programs meet on MASTER_ADDR:MASTER_PORT, the plan and the
# newest checkpoint reach them; a program that fails ends the job with one line naming its
# rank, a stop signal reaches the programs and ends the job cleanly, and bad input is one
# line. The waits are guards (20 to 60 s), not timing claims.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
unset DLH_PLAN SLURM_SPANK_DLH_PLAN DLH_GPU_TYPE
# In every program's command line, so that pgrep finds what this test started and nothing else.
marker="dlh-run-test-$$-$RANDOM"

# expect_one_line CODE PATTERN CMD...: as expect_fail, and dlh-launch said it in one line.
expect_one_line() {
  expect_fail "$@"
  [[ $(grep -c '^dlh-launch' "$WORK/err.txt") -eq 1 ]] || { cat "$WORK/err.txt" >&2; fail "'${*:3}': not one line"; }
}
# value FILE NAME: NAME's value in an `env` dump ("" when absent).
value() { sed -n "s/^$2=//p" "$1" | head -n 1; }
lingering() { pgrep -f -- "$marker" || true; }

# 1. The environment: each program writes its own to $out/env-RANK.
cat >"$WORK/env.sh" <<'SH'
#!/bin/bash
env >"$1/env-$RANK"
SH
chmod +x "$WORK/env.sh"
out=$WORK/out1 && mkdir -p "$out"
mpirun -np 2 dlh-launch run --run-dir "$WORK/r1" -- "$WORK/env.sh" "$out" "$marker" 2>"$WORK/err1.txt" ||
  { cat "$WORK/err1.txt" >&2; fail "the environment run failed"; }
port=$(value "$out/env-0" MASTER_PORT) id=$(value "$out/env-0" TORCHELASTIC_RUN_ID)
[[ $port =~ ^[0-9]+$ && $port -ge 1 && $port -le 65535 ]] || fail "MASTER_PORT '$port' is not a port"
[[ -n $id ]] || fail "no TORCHELASTIC_RUN_ID"
for r in 0 1; do
  e=$out/env-$r
  [[ -f $e ]] || fail "rank $r's program did not run"
  for want in "RANK=$r" WORLD_SIZE=2 "LOCAL_RANK=$r" LOCAL_WORLD_SIZE=2 GROUP_RANK=0 \
    "ROLE_RANK=$r" ROLE_WORLD_SIZE=2 "MASTER_ADDR=$(hostname)" "MASTER_PORT=$port" \
    "TORCHELASTIC_RUN_ID=$id" "DLH_RUN_DIR=$WORK/r1"; do
    grep -qx -- "$want" "$e" || fail "rank $r: no $want (got: $(grep "^${want%%=*}=" "$e"))"
  done
  ! grep -E '^(OMPI|PMIX|PMI)_' "$e" >&2 || fail "rank $r's program sees the MPI launcher's variables"
  ! grep -E '^DLH_(CHECKPOINT|BATCH|GLOBAL_BATCH|LR)=' "$e" >&2 || fail "rank $r: a checkpoint or plan from nowhere"
done
[[ -d $WORK/r1 ]] || fail "the run folder was not created"
check "both programs: RANK, WORLD_SIZE 2, LOCAL_RANK, GROUP_RANK 0, MASTER_ADDR $(hostname), MASTER_PORT $port, TORCHELASTIC_RUN_ID $id, DLH_RUN_DIR; no OMPI_/PMIX_/PMI_ variable"
grep -q "^dlh-launch: run: $WORK/env.sh on 2 ranks (1 nodes x 2 ranks), MASTER_ADDR=$(hostname) MASTER_PORT=$port, .* no checkpoint, GLIBC_TUNABLES=glibc.malloc.trim_threshold=[0-9]*:glibc.malloc.mmap_threshold=[0-9]*, OMP_NUM_THREADS=[1-9][0-9]*$" "$WORK/err1.txt" ||
  { cat "$WORK/err1.txt" >&2; fail "no start line"; }

# 1b. --malloc keep (the default): a program whose every step allocates, touches and frees
# 16 MiB in four blocks, as a PyTorch step does its activations, faults those pages in once,
# not every step (glibc's defaults give the top of the heap back after each step: about 4,100
# minor faults a step). A count of page faults, not a time.
cat >"$WORK/faults.py" <<'PY'
import resource, sys
def step():
    blocks = [bytearray(4 << 20) for _ in range(4)]
    del blocks
step()
first = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - first) // 20)
PY
faults() {  # faults MALLOC: the program's minor faults a step under dlh-launch run --malloc MALLOC
  mpirun -np 1 dlh-launch run --malloc "$1" --run-dir "$WORK/r1b" -- /usr/bin/python3 "$WORK/faults.py" "$marker" \
    2>"$WORK/err1b.txt" || { cat "$WORK/err1b.txt" >&2; fail "the --malloc $1 run failed"; }
}
kept=$(faults keep) system=$(faults system)
[[ $kept -lt 100 && $system -gt 1000 ]] || fail "minor faults a step: $kept with --malloc keep, $system with system"
! grep -q GLIBC_TUNABLES "$WORK/err1b.txt" || fail "--malloc system: the start line names tunables"
kept_own=$(GLIBC_TUNABLES=glibc.malloc.trim_threshold=0 faults keep)
[[ $kept_own -gt 1000 ]] || fail "the user's own GLIBC_TUNABLES was not kept: $kept_own faults a step"
check "--malloc keep: $kept minor faults a step where glibc's defaults (--malloc system) take $system; a user's own malloc tunable stands ($kept_own)"

# 2. The plan and the newest checkpoint (a newer temporary file is not one).
mkdir -p "$WORK/r2/checkpoints"
touch -d '3 minutes ago' "$WORK/r2/checkpoints/step-100.pt"
touch -d '1 minute ago' "$WORK/r2/checkpoints/step-300.pt"
touch -d '2 minutes ago' "$WORK/r2/checkpoints/step-200.pt"
touch "$WORK/r2/checkpoints/step-400.pt.tmp"
out=$WORK/out2 && mkdir -p "$out"
DLH_PLAN='{"format_version": 1, "global_batch": 30, "lr": 0.05, "warmup_epochs": 1}' \
  mpirun -np 2 dlh-launch run --run-dir "$WORK/r2" -- "$WORK/env.sh" "$out" "$marker" 2>"$WORK/err2.txt" ||
  { cat "$WORK/err2.txt" >&2; fail "the plan run failed"; }
for r in 0 1; do
  for want in DLH_GLOBAL_BATCH=30 DLH_BATCH=15 DLH_LR=0.05 DLH_WARMUP_EPOCHS=1 \
    "DLH_CHECKPOINT=$WORK/r2/checkpoints/step-300.pt"; do
    grep -qx -- "$want" "$out/env-$r" || fail "rank $r: no $want (got: $(grep "^${want%%=*}=" "$out/env-$r"))"
  done
done
check "DLH_PLAN global_batch 30 on 2 ranks: DLH_BATCH 15 and 15, DLH_LR 0.05; DLH_CHECKPOINT step-300.pt, the newest"

# 3. The two programs meet on MASTER_ADDR:MASTER_PORT: the port was free and both have it.
cat >"$WORK/meet.py" <<'PY'
import os, socket, sys, time
rank, host, port = int(os.environ["RANK"]), os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
out = sys.argv[1]
if rank == 0:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("", port))
    server.listen(1)
    server.settimeout(60)
    conn, _ = server.accept()
    line = conn.makefile().readline()
    conn.sendall(b"hello rank 1\n")
else:
    deadline = time.time() + 60
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=60)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
    conn.sendall(b"hello rank 0\n")
    line = conn.makefile().readline()
with open(os.path.join(out, "heard-%d" % rank), "w") as f:
    f.write(line)
PY
out=$WORK/out3 && mkdir -p "$out"
timeout 120 mpirun -np 2 dlh-launch run --run-dir "$WORK/r3" -- python3 "$WORK/meet.py" "$out" "$marker" 2>"$WORK/err3.txt" ||
  { cat "$WORK/err3.txt" >&2; fail "the programs did not meet"; }
[[ $(cat "$out/heard-0") == "hello rank 0" && $(cat "$out/heard-1") == "hello rank 1" ]] ||
  fail "the programs did not exchange their lines"
check "rank 0's program served on MASTER_ADDR:MASTER_PORT, rank 1's connected: a line each way"

# 4. A program that fails ends the job: one line naming its rank and code.
expect_fail 3 "^dlh-launch \[rank 1/2 [^]]*\]: error: the program (pid [0-9]*) exited with code 3: ending every rank$" \
  mpirun -np 2 dlh-launch run --run-dir "$WORK/r4" -- bash -c '[[ $RANK != 1 ]] || exit 3; exec -a "sleep-$0" sleep 60' "$marker"
[[ $(grep -c 'error:' "$WORK/err.txt") -eq 1 ]] || { cat "$WORK/err.txt" >&2; fail "not one error line"; }
sleep 1
[[ -z $(lingering) ]] || { ps -o pid,args -p "$(lingering | paste -sd,)" >&2; fail "processes linger"; }
check "nothing lingers"

# 4b. Watched from its start (issue 41): a program that reports no step and does nothing (it
# waits for a peer that never comes, or hangs in its start-up) is stalled too; before issue
# 41 only a program that had reported a step was watched, and this one ran its 60 s.
# Rank 0's program must look busy to the watch (activity.hpp): it wakes 200 times a second.
# (A shell loop of `sleep 0.1` did not: 10 wakeups and a few ms of CPU a second are below
# every threshold, so either rank could be judged first; a CI run saw rank 0.)
cat >"$WORK/idle.sh" <<'SH'
#!/bin/bash
[[ $RANK == 1 ]] && exec -a "sleep-$1" sleep 60
exec python3 -c 'import time
for _ in range(12000): time.sleep(0.005)' "$1"
SH
chmod +x "$WORK/idle.sh"
expect_fail 4 "^dlh-launch \[rank 1/2 [^]]*\]: error: the program (pid [0-9]*) reported no step and used no CPU time or I/O for [0-9]s (from [0-9.]*m\{0,1\}s after its start; --stall-timeout 3s): stalled, ending every rank$" \
  timeout 60 mpirun -np 2 dlh-launch run --run-dir "$WORK/r8b" --stall-timeout 3s -- "$WORK/idle.sh" "$marker"
sleep 1
[[ -z $(lingering) ]] || { ps -o pid,args -p "$(lingering | paste -sd,)" >&2; fail "processes linger"; }
check "nothing lingers"

# 4c. The first step is watched from the launch (issue 44): a program that reports its steps
# and has not reported one --stall-timeout + --stall-startup after its launch is stalled,
# however busy (it computes 2 ms in every 5: the idle rule of 4b never judges it; one that
# only woke 200 times a second used under a 10 ms tick of CPU time in a second of a loaded
# make check, and the idle rule rightly judged it). Its --stall-timeout is 3 s, so that the
# idle rule, which from --stall-startup on watches for as long, would need 3 s without a
# tick of CPU time to fire first: at 1 s a busy program starved for that second by a
# loaded make check (6 tests on 2 cores, 2026-12-05) was judged idle. It reports
# when it wrote on its channel, with --expect-steps, or when its plan is from its profile;
# one that never writes there (an unmodified torchrun program) is not judged by its steps.
cat >"$WORK/busy.py" <<'PY'
import os, sys, time
if sys.argv[1] == "tell":
    os.write(int(os.environ["DLH_PROGRESS_FD"]), b"device cpu\n")
end = time.time() + float(sys.argv[2])
while time.time() < end:  # 2 ms of CPU in every 5: busy in whole 10 ms ticks of CPU time
    spin = time.perf_counter() + 0.002
    while time.perf_counter() < spin:
        pass
    time.sleep(0.003)
PY
B=(timeout 60 mpirun -np 1 dlh-launch run --run-dir "$WORK/r8c" --stall-timeout 3s --stall-startup 1s)
first_step="^dlh-launch \[rank 0/1 [^]]*\]: error: the program (pid [0-9]*) reported no step in the [0-9]s since its launch (--stall-timeout 3s + --stall-startup 1s; it reports steps:"
expect_fail 4 "$first_step it wrote on DLH_PROGRESS_FD): stalled, ending every rank$" \
  "${B[@]}" -- python3 "$WORK/busy.py" tell 30 "$marker"
check "$(grep error: "$WORK/err.txt")"
expect_fail 4 "$first_step --expect-steps): stalled" "${B[@]}" --expect-steps -- python3 "$WORK/busy.py" quiet 30 "$marker"
expect_fail 4 "$first_step its plan is from its profile): stalled" \
  env DLH_PLAN='{"format_version": 1, "global_batch": 8, "lr": 0.05, "profile": "busy.profile.json"}' \
  "${B[@]}" -- python3 "$WORK/busy.py" quiet 30 "$marker"
"${B[@]}" -- python3 "$WORK/busy.py" quiet 3 "$marker" 2>"$WORK/err8c.txt" ||
  { cat "$WORK/err8c.txt" >&2; fail "a program that never wrote on its channel was judged by its steps"; }
sleep 0.5
[[ -z $(lingering) ]] || { ps -o pid,args -p "$(lingering | paste -sd,)" >&2; fail "processes linger"; }
check "--expect-steps and a plan from a profile likewise; a program that never wrote on its channel ran its 3 s"

# 5. Rank 1's program killed by SIGKILL while rank 0's sleeps: the whole job ends.
cat >"$WORK/sleeper.py" <<'PY'
import os, signal, sys, time
out, rank = sys.argv[1], os.environ["RANK"]
def note(signal_number, frame):
    with open(os.path.join(out, "usr1-" + rank), "w") as f:
        f.write("usr1\n")
def stop(signal_number, frame):
    with open(os.path.join(out, "term-" + rank), "w") as f:
        f.write("term\n")
    sys.exit(0)
signal.signal(signal.SIGUSR1, note)
signal.signal(signal.SIGTERM, stop)
with open(os.path.join(out, "pid-" + rank + ".tmp"), "w") as f:
    f.write(str(os.getpid()))
os.rename(os.path.join(out, "pid-" + rank + ".tmp"), os.path.join(out, "pid-" + rank))
time.sleep(60)
PY
# start_sleepers OUT: both programs running (each wrote its pid), the job's pid in $job.
start_sleepers() {
  mkdir -p "$1"
  setsid mpirun -np 2 dlh-launch run --run-dir "$WORK/r5" -- python3 "$WORK/sleeper.py" "$1" "$marker" \
    >"$1/stdout" 2>"$1/stderr" &
  job=$!
  for ((i = 0; i < 600; ++i)); do
    [[ -f $1/pid-0 && -f $1/pid-1 ]] && return 0
    kill -0 $job 2>/dev/null || { cat "$1/stderr" >&2; fail "the job ended before its programs ran"; }
    sleep 0.1
  done
  kill -- -$job 2>/dev/null
  fail "the programs did not start within 60 s"
}
# end_within SECONDS: the job ended, its exit code in $rc.
end_within() {
  timeout "$1" tail --pid=$job -f /dev/null || { kill -KILL -- -$job 2>/dev/null; fail "the job still runs $1 s on"; }
  rc=0
  wait $job || rc=$?
}
out=$WORK/out5
start_sleepers "$out"
victim=$(cat "$out/pid-1")
kill -KILL "$victim"
end_within 20
[[ $rc -eq 137 ]] || { cat "$out/stderr" >&2; fail "mpirun exited $rc, expected 137"; }
line=$(grep -E "^dlh-launch \[rank 1/2 [^]]*\]: error: the program \(pid $victim\) was killed by SIGKILL: ending every rank$" "$out/stderr" || true)
[[ -n $line && $(grep -c 'error:' "$out/stderr") -eq 1 ]] || { cat "$out/stderr" >&2; fail "not one line naming SIGKILL"; }
check "${line#*error: }; exit code 137"
sleep 1
[[ -z $(lingering) ]] || { ps -o pid,args -p "$(lingering | paste -sd,)" >&2; fail "processes linger"; }
check "nothing lingers (rank 0's program died with its rank)"

# 6. Signals to the ranks reach the programs: SIGUSR1 is passed on and the job goes on;
# SIGTERM is passed on, the programs write a file and exit 0, and so does everything.
out=$WORK/out6
start_sleepers "$out"
ranks=$(pgrep -f -- "^dlh-launch run --run-dir $WORK/r5 -- python3 $WORK/sleeper.py $out $marker" || true)
[[ $(wc -w <<<"$ranks") -eq 2 ]] || { pgrep -af -- "$marker" >&2; fail "not two rank processes: $ranks"; }
kill -USR1 $ranks
for ((i = 0; i < 600; ++i)); do
  [[ -f $out/usr1-0 && -f $out/usr1-1 ]] && break
  sleep 0.1
done
[[ -f $out/usr1-0 && -f $out/usr1-1 ]] || fail "SIGUSR1 did not reach both programs"
kill -0 $job 2>/dev/null || fail "the job ended after SIGUSR1"
check "SIGUSR1 to both ranks reached both programs; the job goes on"
kill -TERM $ranks
end_within 60
[[ $rc -eq 0 ]] || { cat "$out/stderr" >&2; fail "mpirun exited $rc after the programs stopped cleanly"; }
[[ -f $out/term-0 && -f $out/term-1 ]] || fail "SIGTERM did not reach both programs"
! grep 'error' "$out/stderr" >&2 || fail "an error line for a stop asked for"
sleep 1
[[ -z $(lingering) ]] || { ps -o pid,args -p "$(lingering | paste -sd,)" >&2; fail "processes linger"; }
check "SIGTERM to both ranks: both programs saved and exited 0, the job exited 0, nothing lingers"

# 7. Bad input: one line each.
L=(mpirun -np 2 dlh-launch run)
expect_one_line 2 "^dlh-launch: run: missing the program: dlh-launch run \[options\] -- CMD ARGS\.\.\.$" "${L[@]}" --run-dir "$WORK/r7"
expect_one_line 2 "^dlh-launch: run: missing the program: " "${L[@]}" --run-dir "$WORK/r7" --
expect_one_line 2 "^dlh-launch: run: unrecognised option '--bogus' (see dlh-launch run --help)$" "${L[@]}" --bogus -- true
expect_one_line 2 "^dlh-launch: --master-port: must be 1 to 65535, got 70000$" "${L[@]}" --master-port 70000 -- true
expect_one_line 2 "^dlh-launch: --malloc: must be keep or system, got 'jemalloc'$" "${L[@]}" --malloc jemalloc -- true
expect_one_line 127 "^dlh-launch: error: run: cannot execute 'no-such-program-$marker': command not found (PATH) (rank 0 on " \
  "${L[@]}" --run-dir "$WORK/r7" -- "no-such-program-$marker"
chmod -x "$WORK/env.sh"
expect_one_line 127 "^dlh-launch: error: run: cannot execute '$WORK/env.sh': Permission denied" \
  "${L[@]}" --run-dir "$WORK/r7" -- "$WORK/env.sh" "$WORK"
[[ -z $(lingering) ]] || fail "processes linger"

# 8. A stalled program: rank 1's reports three steps on DLH_PROGRESS_FD, then none, while
# rank 0's goes on; with --stall-timeout 2s rank 1 ends the job with exit code 4.
cat >"$WORK/stall.sh" <<'SH'
#!/bin/bash
for ((i = 1; ; ++i)); do
  echo "step 8" >&"$DLH_PROGRESS_FD"
  [[ $RANK == 1 && $i -ge 3 ]] && exec -a "sleep-$1" sleep 60
  sleep 0.1
done
SH
chmod +x "$WORK/stall.sh"
expect_fail 4 "^dlh-launch \[rank 1/2 [^]]*\]: error: the program (pid [0-9]*) reported no step for 2s (its last, step 3, ended [0-9]*s ago; --stall-timeout 2s): stalled, ending every rank$" \
  timeout 60 mpirun -np 2 dlh-launch run --run-dir "$WORK/r8" --stall-timeout 2s -- "$WORK/stall.sh" "$marker"
sleep 1
[[ -z $(lingering) ]] || { ps -o pid,args -p "$(lingering | paste -sd,)" >&2; fail "processes linger"; }
check "nothing lingers"

# 8b. Energy per rank around the program (issue 44), with the trainer's meter: RAPL on a fake
# powercap tree, read by the node's first rank (rank 1's is covered by it). Rank 0's program
# adds 0.5 J to the counter per step, 5 steps: summary.json's energy is exactly 2.5 J, rank 0's
# step records carry energy_j, and the observation record the run's joules. DLH_DATA reaches
# the programs with %n expanded to the node's name (a data set staged per node).
mkdir -p "$WORK/rapl/intel-rapl:0" && mkdir -m 1777 "$WORK/obs"
echo 1000000 >"$WORK/rapl/intel-rapl:0/energy_uj"
echo 100000000000 >"$WORK/rapl/intel-rapl:0/max_energy_range_uj"
cat >"$WORK/joules.sh" <<'SH'
#!/bin/bash
echo "device cpu" >&"$DLH_PROGRESS_FD"
for ((i = 1; i <= 5; ++i)); do
  sleep 0.25
  [[ $RANK != 0 ]] || echo $((1000000 + i * 500000)) >"$1/rapl/intel-rapl:0/energy_uj"
  echo "step 8 loss=0.5" >&"$DLH_PROGRESS_FD"
done
echo "$DLH_DATA" >"$1/data-$RANK"
SH
chmod +x "$WORK/joules.sh"
DLH_POWERCAP_DIR=$WORK/rapl DLH_DATA="$WORK/stage/%n/d.h5" timeout 60 mpirun -np 2 dlh-launch run \
  --run-dir "$WORK/r8e" --observations "$WORK/obs" -- "$WORK/joules.sh" "$WORK" "$marker" 2>"$WORK/err8e.txt" ||
  { cat "$WORK/err8e.txt" >&2; fail "the energy run failed"; }
python3 - "$WORK/r8e" "$WORK/obs" <<'PY' || { cat "$WORK/err8e.txt" >&2; fail "the program's energy is not in its records"; }
import glob, json, sys
e = json.load(open(sys.argv[1] + "/summary.json"))["energy"]
assert e["measured"] and e["source"] == "rapl" and e["joules_per_rank"] == [2.5, None], e
assert abs(e["joules_total"] - 2.5) < 1e-9 and abs(e["joules_per_sample"] - 2.5 / 80) < 1e-12, e
steps = [r for r in map(json.loads, open(sys.argv[1] + "/metrics.jsonl")) if "event" not in r]
assert len(steps) == 5 and all("energy_j" in r for r in steps), steps
(record,) = glob.glob(sys.argv[2] + "/**/*.json", recursive=True)
text = json.dumps(json.load(open(record)))
assert '"energy_j": 2.5' in text, text
PY
for r in 0 1; do
  [[ $(cat "$WORK/data-$r") == "$WORK/stage/$(hostname)/d.h5" ]] || fail "rank $r: DLH_DATA $(cat "$WORK/data-$r")"
done
check "energy: 2.5 J by RAPL (rank 0's node; rank 1 covered), energy_j in the step records and the observation record; DLH_DATA with %n expanded"

# 9. --profile: a program reporting 'step 32' every 50 ms and describing itself; timed after
# 2 warm-up steps for 10, stopped with SIGTERM, the profile written; a second run at another
# batch adds a point. The profile run's DLH_RUN_DIR is a temporary folder, gone afterwards.
cat >"$WORK/steps.sh" <<'SH'
#!/bin/bash
# steps.sh OUT BATCH STEPS MARKER: BATCH samples a step, STEPS steps (or until stopped).
# It computes with the OMP_NUM_THREADS it is given, or with $THREADS of its own.
echo "$DLH_RUN_DIR" >"$1/run_dir"
echo "$OMP_NUM_THREADS" >"$1/omp"
printf 'params 1000\nsamples 6400\nepochs 2\nlr 0.05\ndevice cpu\nthreads %s\n' "${THREADS:-$OMP_NUM_THREADS}" >&"$DLH_PROGRESS_FD"
trap 'echo stopped >"$1/stopped"; exit 0' TERM
for ((i = 1; i <= $3; ++i)); do
  sleep 0.05
  echo "step $2" >&"$DLH_PROGRESS_FD"
done
SH
chmod +x "$WORK/steps.sh"
out=$WORK/out9 && mkdir -p "$out"
P=(mpirun -np 1 dlh-launch run --profile 10 --profile-warmup 2 --gpu-type alpha --profile-out "$WORK/p.json")
timeout 60 "${P[@]}" -- "$WORK/steps.sh" "$out" 32 1000000 "$marker" 2>"$WORK/err9.txt" ||
  { cat "$WORK/err9.txt" >&2; fail "the profile run failed"; }
grep -q "^dlh-launch: run: profile: 10 steps of 32 samples, .* on alpha; $WORK/p.json now holds 1 batch (32)" "$WORK/err9.txt" ||
  { cat "$WORK/err9.txt" >&2; fail "no profile line"; }
[[ -f $out/stopped ]] || fail "the program was not stopped with SIGTERM"
[[ ! -e $(cat "$out/run_dir") ]] || fail "the profile run's folder $(cat "$out/run_dir") is still there"
# The launcher offered the rank's share of its CPUs (mpirun -np 1 binds the rank to a core).
[[ $(cat "$out/omp") =~ ^[1-9][0-9]*$ ]] || fail "OMP_NUM_THREADS '$(cat "$out/omp")' for the program"
python3 - "$WORK/p.json" "$(cat "$out/omp")" <<'PY' || fail "the profile is not what the program reported"
import json, sys
p, omp = json.load(open(sys.argv[1])), int(sys.argv[2])
assert p["dlh_profile"] == 1 and p["gpu_type"] == "alpha", p
assert (p["params"], p["samples"], p["epochs"], p["lr"], p["device"]) == (1000, 6400, 2, 0.05, "cpu"), p
assert p["cpu_threads"] == p["threads_offered"] == omp, p
(pt,) = p["points"]
assert pt["batch"] == 32 and pt["steps"] == 10, pt
assert 0.04 < pt["step_s"] < 1 and pt["step_s_min"] <= pt["step_s"] <= pt["step_s_max"], pt
PY
timeout 60 "${P[@]}" -- "$WORK/steps.sh" "$out" 64 1000000 "$marker" 2>"$WORK/err9.txt" ||
  { cat "$WORK/err9.txt" >&2; fail "the second profile run failed"; }
grep -q "now holds 2 batches (32, 64)" "$WORK/err9.txt" || { cat "$WORK/err9.txt" >&2; fail "the second batch was not added"; }
# Batch 32 again as a second round: its point keeps both runs' step times and their median.
timeout 60 "${P[@]}" --profile-join -- "$WORK/steps.sh" "$out" 32 1000000 "$marker" 2>"$WORK/err9.txt" ||
  { cat "$WORK/err9.txt" >&2; fail "the joined profile run failed"; }
grep -q "now holds 2 batches (32, 64); batch 32 in 2 rounds, .* s per step (their median)" "$WORK/err9.txt" ||
  { cat "$WORK/err9.txt" >&2; fail "no joined round in the profile line"; }
python3 - "$WORK/p.json" <<'PY' || fail "batch 32 is not the median of its two rounds"
import json, sys
p = json.load(open(sys.argv[1]))
pt = {q["batch"]: q for q in p["points"]}
assert len(pt[32]["rounds"]) == 2 and pt[32]["steps"] == 20, pt
assert abs(pt[32]["step_s"] - sum(pt[32]["rounds"]) / 2) < 1e-12, pt
assert "rounds" not in pt[64], pt
PY
check "profile: 10 steps of 32 samples, then of 64, then of 32 again as a second round: $(python3 -c "import json,sys; print([(q['batch'], round(q['step_s'], 3)) for q in json.load(open(sys.argv[1]))['points']])" "$WORK/p.json") s per step; the program stopped by SIGTERM, its temporary run folder removed"
# A program that sets its own thread count is planned at it, and told so (2026-12-07: pinned
# to 1 thread on 2 cores, it was planned at 2 and predicted 42% fast).
THREADS=7 timeout 60 mpirun -np 1 dlh-launch run --profile 10 --profile-warmup 2 --gpu-type alpha \
  --profile-out "$WORK/pinned.json" -- "$WORK/steps.sh" "$out" 32 1000000 "$marker" 2>"$WORK/err9.txt" ||
  { cat "$WORK/err9.txt" >&2; fail "the pinned profile run failed"; }
dlh-estimate recommend --profile "$WORK/pinned.json" --cluster "$ROOT/share/cluster/local.json" \
  --types alpha --deadline 1h >"$WORK/pinned.txt" 2>&1 || { cat "$WORK/pinned.txt"; fail "recommend --profile pinned.json"; }
grep -q "warning: pinned.json: the program computes with 7 threads of its own (offered $(cat "$out/omp") when profiled)" \
  "$WORK/pinned.txt" || { cat "$WORK/pinned.txt"; fail "no word of the program's own thread count"; }
check "OMP_NUM_THREADS=$(cat "$out/omp") offered; a program computing with 7 of its own is planned so: $(grep -o 'warning: pinned.json: the program[^(]*' "$WORK/pinned.txt")"
cp "$WORK/p.json" "$WORK/p.before"
expect_one_line 2 "^dlh-launch: $WORK/p.json: profiled on alpha, this run is on beta: use another --profile-out$" \
  mpirun -np 1 dlh-launch run --profile 10 --profile-warmup 2 --gpu-type beta --profile-out "$WORK/p.json" -- "$WORK/steps.sh" "$out" 16 1000000 "$marker"
expect_fail 1 "^dlh-launch: error: run: --profile 10: the program exited with code 0 after 5 steps, 12 needed" \
  "${P[@]}" -- "$WORK/steps.sh" "$out" 16 5 "$marker"
[[ $(grep -c '^dlh-launch.*error' "$WORK/err.txt") -eq 1 ]] || { cat "$WORK/err.txt" >&2; fail "not one error line"; }
cmp -s "$WORK/p.json" "$WORK/p.before" || fail "a failed profile run changed $WORK/p.json"
expect_one_line 2 "^dlh-launch: --profile: times the program on one device: start it as one task (srun -n 1, mpirun -np 1), not 2$" \
  mpirun -np 2 dlh-launch run --profile 10 -- true
echo '{"dlh_profile": 1, "points": []}' >"$WORK/bad.json"
expect_one_line 2 "^dlh-launch: $WORK/bad.json: points" \
  mpirun -np 1 dlh-launch run --profile 10 --profile-out "$WORK/bad.json" -- true
expect_one_line 2 "^dlh-launch: --profile-out: only with --profile STEPS$" \
  mpirun -np 1 dlh-launch run --profile-out "$WORK/x.json" -- true
expect_one_line 2 "^dlh-launch: --profile-join: only with --profile STEPS$" \
  mpirun -np 1 dlh-launch run --profile-join -- true
expect_one_line 2 "^dlh-launch: --stall-timeout: " mpirun -np 1 dlh-launch run --stall-timeout soon -- true
[[ -z $(lingering) ]] || fail "processes linger"
