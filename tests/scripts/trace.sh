#!/bin/bash
# dlh-launch train --trace FILE writes one Chrome/Perfetto timeline of every rank (2 ranks
# under mpirun): valid JSON, both ranks named, every step's forward, backward and optimizer
# on each rank, and gradient buckets whose allreduce starts while backward still runs (none
# with --no-overlap). Also: a run stopped by --max-steps or by SIGTERM still writes it, a
# missing folder is bad input, and metrics.jsonl puts the run on a time axis (start, signal
# and end records, "t" on every record).
source "$(dirname "$0")/common.bash"

dlh-data synthetic --out "$WORK/data.h5" --shape 1x16x16 --classes 6 --train 600 --test 120 --seed 5 >/dev/null
# 9,670 parameters: with --bucket-mb 0.01 (10,485 bytes) the gradients make 3 buckets.
cat >"$WORK/spec.json" <<'JSON'
{
  "name": "tracetest",
  "input": {"channels": 1, "height": 16, "width": 16},
  "classes": 6,
  "layers": [
    {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
    {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2},
    {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1},
    {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2},
    {"type": "flatten"},
    {"type": "dense", "units": 32},
    {"type": "relu"},
    {"type": "dense", "units": 6}
  ],
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
  "batch_size": 20,
  "epochs": 2,
  "seed": 4,
  "dataset": "data.h5"
}
JSON

train() {  # train RUN_DIR [options]
  local dir=$1; shift
  mpirun -np 2 dlh-launch train "$WORK/spec.json" --run-dir "$dir" --progress plain --threads 1 \
    --bucket-mb 0.01 "$@"
}

# check_trace FILE STEPS OVERLAP: the trace's structure; OVERLAP is "some" or "none". Prints
# how many steps had a bucket allreduce in flight during backward and for how long.
check_trace() {
  python3 - "$@" <<'PY'
import json, os, sys
from collections import defaultdict
path, steps, want = sys.argv[1], int(sys.argv[2]), sys.argv[3]
t = json.load(open(path))
ev = t["traceEvents"]
meta = t["metadata"]
assert t["displayTimeUnit"] == "ms", t["displayTimeUnit"]
assert meta["world_size"] == 2 and meta["run"] == "tracetest", meta
assert meta["steps"] == steps and meta["dropped_events"] == 0, meta
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
assert sorted(names) == [0, 1] and all(names[r].startswith(f"rank {r} (") for r in names), names
lanes = {(e["pid"], e["args"]["name"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
for r in (0, 1):
    for lane in ("step", "compute", "allreduce"):
        assert (r, lane) in lanes, f"rank {r} has no lane '{lane}': {sorted(lanes)}"
x = [e for e in ev if e["ph"] == "X"]
by = defaultdict(list)  # (rank, step, name) -> slices
for e in x:
    by[(e["pid"], e.get("args", {}).get("step"), e["name"])].append(e)
for r in (0, 1):
    for s in range(1, steps + 1):
        for name in ("step", "data wait", "forward", "backward", "allreduce wait", "optimizer"):
            assert len(by[(r, s, name)]) == 1, f"rank {r} step {s}: {len(by[(r, s, name)])} '{name}' slices"
buckets = [e for e in x if e["name"] == "allreduce"]
ids = {e["args"]["bucket"] for e in buckets}
assert len(ids) >= 2, f"only buckets {ids}: the model should make at least 2"
assert all(e["args"]["bytes"] > 0 for e in buckets)
for r in (0, 1):
    for s in range(1, steps + 1):
        got = sorted(e["args"]["bucket"] for e in buckets if e["pid"] == r and e["args"]["step"] == s)
        assert got == sorted(ids), f"rank {r} step {s}: buckets {got}, expected {sorted(ids)}"
# Slices on one lane nest or follow each other: the viewers draw nothing else right.
lane = defaultdict(list)
for e in x:
    lane[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
for key, sl in lane.items():
    sl.sort(key=lambda s: (s[0], -s[1]))
    open_ = []
    for a, b, n in sl:
        while open_ and open_[-1][1] <= a + 1e-3:
            open_.pop()
        assert not open_ or b <= open_[-1][1] + 1e-3, f"lane {key}: '{n}' [{a}, {b}] overlaps {open_[-1]}"
        open_.append((a, b, n))
# The overlap: bucket allreduces in flight while the same rank's backward of the same step runs.
overlapped, total_ms, backward_ms = 0, 0.0, 0.0
for r in (0, 1):
    for s in range(1, steps + 1):
        bw = by[(r, s, "backward")][0]
        backward_ms += bw["dur"] / 1000
        b0, b1 = bw["ts"], bw["ts"] + bw["dur"]
        spans = sorted((max(e["ts"], b0), min(e["ts"] + e["dur"], b1)) for e in buckets
                       if e["pid"] == r and e["args"]["step"] == s and e["ts"] < b1)
        if not spans:
            continue
        overlapped += 1
        end = b0
        for a, b in spans:  # the union of the bucket slices inside backward
            total_ms += max(0.0, b - max(a, end)) / 1000
            end = max(end, b)
n = 2 * steps
print(f"{overlapped} of {n} rank-steps had a bucket allreduce in flight during backward, "
      f"mean {total_ms / max(overlapped, 1):.3f} ms per such step (backward: mean {backward_ms / n:.3f} ms); "
      f"{len(buckets) // n} buckets per step, {len(ev)} events in {os.path.getsize(path)} bytes")
if want == "some":
    assert overlapped > 0, "no bucket allreduce started before the end of its step's backward"
    assert all(e["args"]["overlapped"] == 1 for e in buckets if e["args"]["bucket"] == 0)
else:
    assert overlapped == 0, f"--no-overlap, yet {overlapped} rank-steps overlapped"
    assert all(e["args"]["overlapped"] == 0 for e in buckets)
PY
}

echo "a whole run (60 steps, checkpoints, evaluations)"
train "$WORK/a" --trace "$WORK/a.json" --checkpoint-steps 20 2>"$WORK/a.log" || { cat "$WORK/a.log"; fail "run a failed"; }
grep -q "trace: $WORK/a.json (open it in https://ui.perfetto.dev)" "$WORK/a.log" || { cat "$WORK/a.log"; fail "no trace line"; }
summary=$(check_trace "$WORK/a.json" 60 some) || fail "$WORK/a.json: see above"
check "$summary"
python3 - "$WORK/a.json" <<'PY' || fail "checkpoint, evaluation or setup slices missing"
import json, sys
x = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
def count(name, pid=None):
    return sum(1 for e in x if e["name"] == name and (pid is None or e["pid"] == pid))
# Checkpoints at steps 20, 30 (epoch end), 40, 60: the snapshot on rank 0, the write on its lane.
assert count("checkpoint", 0) == 4 and count("checkpoint", 1) == 4, count("checkpoint")
assert count("checkpoint snapshot", 0) == 4 and count("checkpoint snapshot", 1) == 0
writes = sorted(e["args"]["step"] for e in x if e["name"] == "checkpoint write")
assert writes == [20, 30, 40, 60] and all(e["pid"] == 0 for e in x if e["name"] == "checkpoint write"), writes
assert count("evaluation") == 4, count("evaluation")  # 2 epochs x 2 ranks
for name in ("load inputs", "start engine", "control allreduce"):
    assert count(name, 0) >= 1 and count(name, 1) >= 1, name
PY
check "checkpoint snapshots, background writes (steps 20, 30, 40, 60) and evaluations are on it"

echo "--no-overlap, stopped by --max-steps"
train "$WORK/b" --trace "$WORK/b.json" --no-overlap --max-steps 25 2>"$WORK/b.log" || { cat "$WORK/b.log"; fail "run b failed"; }
summary=$(check_trace "$WORK/b.json" 25 none) || fail "$WORK/b.json: see above"
check "--max-steps 25 wrote it; with --no-overlap: $summary"

echo "a long run streams its events (issue 41)"
# About 10 events a step per rank: 8,000 steps pass the 65,536 a rank holds in memory, so each
# rank writes its part in the run folder while it trains ("trace write" slices); rank 0 then
# joins the parts into the file and the parts go.
train "$WORK/l" --trace "$WORK/l.json" --epochs 300 --max-steps 8000 2>"$WORK/l.log" || { cat "$WORK/l.log"; fail "run l failed"; }
summary=$(python3 -c 'import json, sys
t = json.load(open(sys.argv[1]))
ev, meta = t["traceEvents"], t["metadata"]
assert meta["steps"] == 8000 and meta["dropped_events"] == 0, meta
for r in (0, 1):
    steps = sorted(e["args"]["step"] for e in ev if e["pid"] == r and e["name"] == "step")
    assert steps == list(range(1, 8001)), f"rank {r}: {len(steps)} step slices"
    writes = sum(1 for e in ev if e["pid"] == r and e["name"] == "trace write")
    assert writes >= 1, f"rank {r} wrote no part while training"
print(f"{len(ev)} events, every step of both ranks, " + " and ".join(
    str(sum(1 for e in ev if e["pid"] == r and e["name"] == "trace write")) for r in (0, 1)) +
    " writes of the parts while training")' "$WORK/l.json") || fail "$WORK/l.json: see above"
[[ ! -e $WORK/l/trace ]] || fail "the parts are left in $WORK/l/trace: $(ls "$WORK/l/trace")"
check "8,000 steps: $summary; the parts are gone"

echo "bad input"
expect_fail 2 "--trace: $WORK/missing/t.json: folder $WORK/missing does not exist" \
  train "$WORK/c" --trace "$WORK/missing/t.json"
[[ $(grep -c "^dlh-launch" "$WORK/err.txt") -eq 1 ]] || fail "more than one line for one error"
[[ ! -e $WORK/c ]] || fail "the run folder was created before the error"

echo "stopped by SIGTERM"
# 600000 steps (minutes even at this model's 5000 steps/s: 500 epochs once ended before the
# signal came on a fast machine); the ranks are the dlh-launch processes whose parent is a
# dlh-launch (the guard, docs/reference/dlh-launch.md, "A rank that dies"). They are stopped
# before the signal and continued after it, so that it cannot race the run's end.
setsid bash -c "$(declare -f train); WORK='$WORK'; train '$WORK/d' --trace '$WORK/d.json' --epochs 20000" \
  >"$WORK/d.log" 2>&1 &
pid=$!
ranks=()
for _ in $(seq 600); do
  if [[ -f $WORK/d/metrics.jsonl ]] && (($(grep -c samples_per_s "$WORK/d/metrics.jsonl") >= 5)); then
    mapfile -t ranks < <(for p in $(pgrep -s "$pid" -x dlh-launch); do
      [[ $(ps -o comm= -p "$(ps -o ppid= -p "$p" | tr -d ' ')" 2>/dev/null) == dlh-launch ]] && echo "$p"
    done)
    ((${#ranks[@]} == 2)) && break
  fi
  kill -0 "$pid" 2>/dev/null || { cat "$WORK/d.log"; fail "run d ended before it was signalled"; }
  sleep 0.1
done
((${#ranks[@]} == 2)) || { cat "$WORK/d.log"; fail "did not find 2 training ranks"; }
kill -STOP "${ranks[@]}"
[[ ! -e $WORK/d/summary.json ]] || { cat "$WORK/d.log"; fail "run d ended before it was signalled"; }
kill -TERM "${ranks[@]}"
kill -CONT "${ranks[@]}"
rc=0; wait "$pid" || rc=$?
[[ -f $WORK/d.json ]] || { cat "$WORK/d.log"; fail "no trace after SIGTERM (exit $rc)"; }
python3 - "$WORK/d.json" "$WORK/d/metrics.jsonl" <<'PY' || { cat "$WORK/d.log"; fail "trace or metrics.jsonl after SIGTERM: see above"; }
import json, sys
t = json.load(open(sys.argv[1]))
sig = [e for e in t["traceEvents"] if e["ph"] == "i" and e["name"] == "signal"]
assert {e["pid"] for e in sig} == {0, 1} and all(e["args"]["signal"] == "SIGTERM" for e in sig), sig
recs = [json.loads(l) for l in open(sys.argv[2])]
assert all(isinstance(r.get("t"), float) for r in recs), [r for r in recs if "t" not in r][:1]
# A checkpoint's "t" is when its file was on disk, before the step records written meanwhile.
times = [r["t"] for r in recs if r.get("event") != "checkpoint"]
assert times == sorted(times), "t goes backwards"
for i, r in enumerate(recs):
    if r.get("event") == "checkpoint":
        assert recs[i - 1]["t"] - 60 < r["t"] <= recs[i + 1]["t"], recs[i - 1:i + 2]
start, end, signal = recs[0], recs[-1], [r for r in recs if r.get("event") == "signal"]
assert start["event"] == "start" and start["step"] == 0 and start["resumed_from"] is None, start
assert start["world_size"] == 2 and start["hosts"] == 1 and start["rank_batches"] == [10, 10], start
assert start["spec_name"] == "tracetest" and start["total_steps"] == 600000 and start["device"] == "cpu", start
assert start["run_id"] and "plan" not in start, start
assert len(signal) == 1 and signal[0]["signal"] == "SIGTERM", signal
assert signal[0]["checkpoint"].endswith(f"ckpt-{signal[0]['step']:09d}.h5"), signal[0]
assert end["event"] == "end" and end["finished"] is False and end["stop_signal"] == "SIGTERM", end
assert end["step"] == signal[0]["step"] == t["metadata"]["last_step"], (end, signal)
assert 0 < end["train_seconds"] <= end["t"] - start["t"] + 1, (start, end)
print(f"  ok: metrics.jsonl: start at step 0, signal SIGTERM at step {end['step']} with its "
      f"checkpoint, end after {end['train_seconds']:.2f} s of training; 't' on all {len(recs)} records")
PY
check "SIGTERM at step $(json_field "$WORK/d/summary.json" steps) (exit $rc): the trace is written, with the signal on both ranks"

# Resumed: the start record names the checkpoint it resumed from.
stopped=$(json_field "$WORK/d/summary.json" steps)
train "$WORK/d" --max-steps $((stopped + 5)) --epochs 20000 2>"$WORK/d2.log" || { cat "$WORK/d2.log"; fail "resumed run failed"; }
python3 - "$WORK/d/metrics.jsonl" <<'PY' || fail "the resumed run's start record: see above"
import json, sys
starts = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "start"]
assert len(starts) == 2 and starts[1]["resumed_from"].endswith(f"ckpt-{starts[1]['step']:09d}.h5"), starts
assert starts[1]["run_id"] != starts[0]["run_id"], starts
end = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "end"][-1]
assert end["step"] == starts[1]["step"] + 5 and end["stop_signal"] is None and not end["finished"], end
PY
check "the resumed run's start record names its checkpoint"
