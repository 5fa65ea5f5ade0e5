#!/bin/bash
# Background checkpoint writes survive a crash at any moment. A run whose checkpoints take a
# while to write (25 MB after every step, so that a write runs most of the time) is
# SIGKILLed 8 times, 4 times at random moments and 4 times aimed at a write in progress, and
# started again with the same command each time. After every kill each ckpt-*.h5 in the
# folder validates, stale *.tmp.* files may be there but are never taken, and the restart
# resumes from the newest file without a warning. At least one kill must have cut a write
# short (its temporary file is still there after the kill), or the test proved nothing. The
# last restart runs to the end; its parameters and optimizer state are bit-identical to
# those of a run that was never interrupted, and metrics.jsonl has every write it made.
#
# What a failure means: a file named ckpt-*.h5 that does not validate (a write that is not
# atomic: renamed before it is complete, or written in place); a restart that skips a file
# (the loader recovers from an older one and the run would still end bit-identical, which is
# why a "skipped" warning fails the test on its own: a crash must never leave a bad file);
# a newest checkpoint older than the one before the kill (the old file deleted before the new
# one was in place: a restart from scratch also ends bit-identical); a restart from another
# step than the newest file's, or from a temporary file; or final parameters that differ: a
# snapshot that is not the state of its step (taken before or after the update, or changed
# by the next steps while it is written). The checksum is computed over what was written, so
# only the bit-for-bit comparison sees that.
#
# The moments come from a fixed RANDOM seed and are printed; where they land in a write
# depends on the machine's load. Odd rounds kill at a random moment after the run starts
# training (its "allreduce: ..." line, the last before the first step, after the resume: a
# kill during start-up cannot meet a write), 0 to 10 times the time the uninterrupted run
# took for its final write. A kill there misses a write about half the time: the writer
# waits while the loop takes the next snapshot, and the temporary file exists only from its
# creation to the rename. So even rounds aim: they wait for the run's first, second or
# third temporary file to appear and kill at a random moment 0 to 1/2 write time later (the
# file exists for most of a write's time: the rest is the scan for stale files, the folder's
# fsync and the rotation). A random round is cut short when the run has gone 6 steps (it
# goes about 2 to 5 here: a step waits for the previous step's write and takes its
# snapshot, which costs more than the write on this machine) and an aimed one goes at most
# 3, so the 8 rounds go at most 36 of the 40 steps, around 20: about the first epoch's end,
# never the run's.
source "$(dirname "$0")/common.bash"
# One rank without mpirun: a singleton. By default Open MPI 4 starts an orted for it (half
# a second each time); isolated, it does not. Other MPIs ignore the variable.
export OMPI_MCA_ess_singleton_isolated=1

# 32x32 inputs into a dense layer of 2048: 2.1M parameters, with Adam's two moments a 25 MB
# file. 320 / 16 = 20 steps an epoch, 40 in all; a checkpoint after every step, 2 kept.
dlh-data synthetic --out "$WORK/data.h5" --shape 1x32x32 --classes 8 --train 320 --test 64 --seed 6 >/dev/null
cat >"$WORK/spec.json" <<'JSON'
{
  "name": "crashtest",
  "input": {"channels": 1, "height": 32, "width": 32},
  "classes": 8,
  "layers": [
    {"type": "flatten"},
    {"type": "dense", "units": 2048},
    {"type": "relu"},
    {"type": "dropout", "rate": 0.1},
    {"type": "dense", "units": 8}
  ],
  "optimizer": {"type": "adam", "lr": 0.001},
  "schedule": {"warmup_epochs": 0.25, "decay": "cosine"},
  "batch_size": 16,
  "epochs": 3,
  "seed": 13,
  "dataset": "data.h5"
}
JSON
# 3 epochs of 20 steps. With 2 (40 steps) the 8 kills could use up the run: under load an
# aimed round advanced 8 steps (the writer coalesces snapshots when steps outrun writes), and
# on 2026-12-02 round 7 resumed at step 35 and finished before its kill.
TOTAL=60
train=(dlh-launch train "$WORK/spec.json" --threads 1 --progress plain)
crashing=(--checkpoint-steps 1 --keep 2)
run=$WORK/run
ckdir=$run/checkpoints

names() { [[ ! -d $ckdir ]] || find "$ckdir" -maxdepth 1 -name "$1" -printf '%f\n' | LC_ALL=C sort; }
ckpts() { names 'ckpt-[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9].h5'; }  # oldest first
tmps() { names 'ckpt-*.h5.tmp.*'; }
step_of() { local s=${1#ckpt-}; echo $((10#${s%%.*})); }  # ckpt-000000042.h5[.tmp.*] -> 42
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# validate FILE: FILE loads and validates (format, checksum) on its own: a run whose folder
# holds only a hard link to it resumes from it and stops at once (--max-steps: its step).
# In the background, beside the next round (the link keeps the file should the run's
# rotation delete it); validated() waits for every one started and checks it.
pending=()
validate() {
  local name step v
  name=$(basename "$1")
  step=$(step_of "$name")
  v=$WORK/validate/$name
  rm -rf "$v" && mkdir -p "$v/checkpoints" && ln "$1" "$v/checkpoints/$name"
  "${train[@]}" --run-dir "$v" --no-eval --max-steps "$step" >"$v.log" 2>&1 &
  pending+=("$! $v $name $step")
}
validated() {
  local p vpid v name step rc
  for p in "${pending[@]}"; do
    read -r vpid v name step <<<"$p"
    rc=0
    wait "$vpid" || rc=$?
    if ((rc != 0)) || ! grep -q "resumed from $v/checkpoints/$name at step $step " "$v.log" ||
      grep -q warning "$v.log"; then
      cat "$v.log" >&2
      fail "$name does not validate"
    fi
  done
  pending=()
}

# resumed_from LOG FILE: the run of LOG resumed from FILE (none: from scratch), no warning.
resumed_from() {
  local log=$1 file=$2
  grep -q warning "$log" && { cat "$log" >&2; fail "$(basename "$log"): the restart printed a warning"; }
  if [[ -z $file ]]; then
    grep -q "resumed from" "$log" && { cat "$log" >&2; fail "$(basename "$log"): resumed, but there was no checkpoint"; }
  else
    grep -q "resumed from $ckdir/$file at step $(step_of "$file") " "$log" ||
      { cat "$log" >&2; fail "$(basename "$log"): did not resume from $file, the newest checkpoint"; }
  fi
  return 0
}

# nap SECONDS: sleep without starting a process (read times out on a pipe nobody writes to):
# between seeing a write begin and the kill, every millisecond counts.
exec {never}<> <(:)
nap() { read -rt "$1" -u "$never" || true; }

# kill_run SID: SIGKILL the run's process group at once (a node failure; a builtin, so no
# time passes before it), then anything else left in its session, and wait until none is.
kill_run() {
  local sid=$1 pids
  kill -KILL -- -"$sid" 2>/dev/null || true
  pids=$(pgrep -s "$sid" | tr '\n' ' ' || true)
  # shellcheck disable=SC2086
  [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
  { wait "$sid"; } 2>/dev/null || true
  for _ in $(seq 250); do pgrep -s "$sid" >/dev/null || return 0; sleep 0.02; done
  fail "processes of session $sid survived SIGKILL: $(pgrep -s "$sid" | tr '\n' ' ')"
}

# The reference writes only its final checkpoint: how often a run checkpoints must not change
# what it computes either.
echo "uninterrupted run"
t0=$(now_ms)
"${train[@]}" --run-dir "$WORK/ref" --checkpoint-steps 0 --checkpoint-seconds 0 --no-epoch-checkpoints \
  >"$WORK/ref.log" 2>&1 || { cat "$WORK/ref.log" >&2; fail "uninterrupted run failed"; }
crc_ref=$(json_field "$WORK/ref/summary.json" param_crc32)
final=$(basename "$(json_field "$WORK/ref/summary.json" last_checkpoint)")
[[ $final == "$(printf "ckpt-%09d.h5" "$TOTAL")" ]] || fail "uninterrupted run's last checkpoint is $final"
size=$(stat -c %s "$WORK/ref/checkpoints/$final")
((size > 20000000)) || fail "checkpoint is only $size bytes: too small to take a while to write"
write_ms=$(python3 -c 'import json, sys
e = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "checkpoint"]
print(round(1000 * e[-1]["write_s"]) if e else "")' "$WORK/ref/metrics.jsonl")
[[ -n $write_ms ]] || fail "uninterrupted run: no checkpoint event in metrics.jsonl"
check "uninterrupted: $(($(now_ms) - t0)) ms, param_crc32 $crc_ref, $final of $((size / 1000000)) MB written in $write_ms ms"

echo "killed at random moments"
RANDOM=4242
declare -A checked  # "name inode size mtime" of every older file validated so far
hits=0 aimed_hits=0 newest="" prev_step=0
for round in $(seq 8); do
  before=$(tmps)
  log=$WORK/round$round.log
  t0=$(now_ms)
  setsid "${train[@]}" --run-dir "$run" "${crashing[@]}" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 3000); do
    grep -q "allreduce: " "$log" && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "round $round: the run ended before it trained"; }
    nap 0.01
  done
  grep -q "allreduce: " "$log" || { cat "$log" >&2; fail "round $round: the run did not start training in 30 s"; }
  start_ms=$(($(now_ms) - t0))
  if ((round % 2)); then
    ms=$((RANDOM % 1000 * 10 * write_ms / 1000))
    when="$ms ms after training started"
    # Early, should the run have gone 6 steps already (a slow final write in the reference).
    cap=$ckdir/$(printf "ckpt-%09d.h5" $((prev_step + 6)))
    end=$(($(now_ms) + ms))
    while t=${EPOCHREALTIME/./} && ((t / 1000 < end)); do
      [[ -e $cap ]] && { when="$when, cut to $((t / 1000 - end + ms)) ms at step $((prev_step + 6))"; break; }
      nap 0.005
    done
    ms=0
  else
    # Aimed: at a random moment of the run's write number `nth`, counted from when its
    # temporary file appears (polled every 5 ms).
    nth=$((1 + RANDOM % 3)) ms=$((RANDOM % 1000 * write_ms / 2000)) seen=0
    declare -A known=()
    for t in $before; do known[$t]=1; done
    for _ in $(seq 6000); do
      for t in "$ckdir"/ckpt-*.h5.tmp.*; do
        [[ -e $t && -z ${known[${t##*/}]:-} ]] || continue
        known[${t##*/}]=1
        ((++seen))
      done
      ((seen >= nth)) && break
      kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "round $round: the run ended before its kill"; }
      nap 0.005
    done
    ((seen >= nth)) || fail "round $round: no write $nth began in 30 s"
    when="$ms ms into write $nth"
  fi
  nap "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "round $round: the run ended before its kill"; }
  kill_run "$pid"
  [[ ! -e $run/summary.json ]] || fail "round $round: the run finished before its kill (too fast)"
  resumed_from "$log" "$newest"  # what the previous kill left

  # The newest file is validated by the next restart; every older one beside it.
  validated
  mapfile -t files < <(ckpts)
  newest=$(ckpts | tail -1)
  for f in "${files[@]}"; do
    [[ $f == "$newest" ]] && continue
    key="$f $(stat -c '%i %s %Y' "$ckdir/$f")"
    [[ -n ${checked[$key]:-} ]] && continue
    validate "$ckdir/$f"
    checked[$key]=1
  done
  step=0
  [[ -z $newest ]] || step=$(step_of "$newest")
  ((step >= prev_step)) || fail "round $round: the newest checkpoint went back from step $prev_step to $step"
  prev_step=$step
  cut=$(comm -13 <(echo "$before") <(tmps) | grep . || true)
  what="no write in flight"
  if [[ -n $cut ]]; then
    ((++hits))
    ((round % 2)) || ((++aimed_hits))
    t=$(echo "$cut" | tail -1)
    what="cut short: $t, $(($(stat -c %s "$ckdir/$t") / 1000000)) of $((size / 1000000)) MB written"
  fi
  check "round $round: killed $when (start-up $start_ms ms); newest ${newest:-none} of ${#files[@]}; $what"
done
validated
((hits >= 1)) || fail "none of the 8 kills cut a checkpoint write short: the test proved nothing"
check "$hits of 8 kills cut a write short ($((hits - aimed_hits)) of the 4 at random moments, $aimed_hits of the 4 aimed)"

echo "restart to the end"
left=$(tmps | paste -sd ' ')
"${train[@]}" --run-dir "$run" "${crashing[@]}" >"$WORK/last.log" 2>&1 ||
  { cat "$WORK/last.log" >&2; fail "the last restart failed"; }
resumed_from "$WORK/last.log" "$newest"
check "$(grep -o 'resumed from .*' "$WORK/last.log" | sed "s|$WORK/||")${left:+; temporary files left: $left}"
[[ -z $(tmps) ]] || fail "stale temporary files were not removed: $(tmps | tr '\n' ' ')"
[[ $(json_field "$run/summary.json" finished) == True && $(json_field "$run/summary.json" steps) == "$TOTAL" ]] ||
  fail "did not finish at step $TOTAL"
crc=$(json_field "$run/summary.json" param_crc32)
[[ $crc == "$crc_ref" ]] || fail "param_crc32 $crc after the crashes != $crc_ref uninterrupted"
for group in /params /optimizer; do
  h5diff "$WORK/ref/checkpoints/$final" "$ckdir/$final" "$group" >/dev/null ||
    fail "h5diff: $group of $final differs from the uninterrupted run's"
done
check "bit-identical to the uninterrupted run: param_crc32 $crc, h5diff /params and /optimizer equal"

# Every record in metrics.jsonl is whole (a kill may come at any moment), and the background
# writes reported themselves: {"event": "checkpoint", "step", "path", "write_s", "bytes"}.
# The last run, from the newest file the kills left on, wrote one after each of its steps.
python3 - "$run/metrics.jsonl" "$size" "$prev_step" "$TOTAL" <<'PY' || fail "metrics.jsonl: see above"
import json, os, sys
size, resumed, total = map(int, sys.argv[2:])
events = []
for n, line in enumerate(open(sys.argv[1]), 1):
    try:
        r = json.loads(line)
    except ValueError:
        sys.exit(f"metrics.jsonl line {n} is not JSON: {line[:80]!r}")
    if r.get("event") == "checkpoint":
        events.append(r)
if not events:
    sys.exit("metrics.jsonl: no checkpoint event")
for e in events:
    name = os.path.basename(e["path"])
    if name != f"ckpt-{e['step']:09d}.h5" or not e["write_s"] > 0 or e["bytes"] != size:
        sys.exit(f"metrics.jsonl: bad checkpoint event {e}")
last = sorted(e["step"] for e in events if e["step"] > resumed)
if last != list(range(resumed + 1, total + 1)):
    sys.exit(f"metrics.jsonl: the last run, resumed at step {resumed}, logged checkpoints of steps {last}")
print(f"  ok: metrics.jsonl: every line whole; {len(events)} checkpoint events of {size} bytes, "
      f"one for each step the last run took ({resumed + 1} to {total})")
PY
