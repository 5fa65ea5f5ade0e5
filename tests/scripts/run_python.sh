#!/bin/bash
# A PyTorch program using share/python's `dlh` module under dlh-launch run (issue 44): two
# ranks on gloo with an unequal plan ([12, 4] of a global batch of 16). Its progress lines
# become the run's metrics.jsonl and summary.json, dlh-report shows them, the module's
# sampler gives each rank its share, SIGUSR1 sets its should-stop flag (checkpoint, exit 0),
# and the next run resumes from the launcher's DLH_CHECKPOINT, the program's own file.
# Outside DLH the module changes nothing, and its sampler's slices are checked on their own.
source "$(dirname "$0")/common.bash"
unset DLH_PLAN SLURM_SPANK_DLH_PLAN DLH_GPU_TYPE
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3  # Debian's, with python3-torch (make check installs it)
$py -c 'import torch' 2>/dev/null || fail "$py has no torch: install python3-torch (make deps)"
export PYTHONPATH="$ROOT/share/python"
marker="dlh-run-python-$$-$RANDOM"

# 1. The sampler's slices, pure Python: each step the next global batch of the epoch's order
# cut in rank order, proportional, the same steps on every rank, every sample each epoch,
# another order the next epoch.
$py - <<'PY' || fail "the sampler's slices"
import dlh
for size, batches, drop in ((100, [12, 4], False), (100, [12, 4], True), (7, [3, 1, 2], False),
                            (64, [8, 8], False)):
    g = sum(batches)
    steps = size // g if drop else -(-size // g)
    parts = [dlh.share_slice(size, batches, r, epoch=3, seed=1, drop_last=drop)
             for r in range(len(batches))]
    assert [len(p) for p in parts] == [steps * b for b in batches], (size, batches, parts)
    whole = [i for k in range(steps) for p, b in zip(parts, batches) for i in p[k * b:(k + 1) * b]]
    assert whole == dlh.share_slice(size, [g], 0, epoch=3, seed=1, drop_last=drop), "not step by step"
    if not drop:
        assert set(whole) == set(range(size)), "a sample left out"
    assert parts[0] == dlh.share_slice(size, batches, 0, epoch=3, seed=1, drop_last=drop)
assert dlh.share_slice(100, [12, 4], 0, epoch=4, seed=1) != dlh.share_slice(100, [12, 4], 0, epoch=3, seed=1)
assert dlh.share_slice(5, [2, 2], 1, shuffle=False) == [2, 3, 1, 2]  # padded from the start
assert dlh.share_slice(5, [2, 2], 0, shuffle=False) == [0, 1, 4, 0]
s = dlh.ShareSampler(100, rank=1, rank_batches=[12, 4])
assert (len(s), s.batch_size, s.steps) == (28, 4, 7) and list(s) == dlh.share_slice(100, [12, 4], 1)
PY
check "sampler: [12, 4] of 100 samples: 84 and 28 indices, 7 steps each, each step the next 16 in rank order, reshuffled per epoch"

# 2. Outside DLH: no handler, no channel, the plain defaults.
env -u DLH_RUN_DIR -u DLH_PROGRESS_FD -u DLH_BATCH -u DLH_GLOBAL_BATCH -u DLH_RANK_BATCHES \
  -u DLH_LR -u DLH_CHECKPOINT -u RANK -u WORLD_SIZE $py - <<'PY' || fail "the module outside DLH"
import signal, dlh
assert not dlh.in_dlh() and not dlh.reporting()
assert dlh.catch_signals() is False and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
assert dlh.should_stop() is False and dlh.stop_signal() is None and dlh.exit_code() == 0
assert (dlh.batch(default=32), dlh.global_batch(), dlh.lr(default=0.1), dlh.plan()) == (32, None, 0.1, {})
assert dlh.rank_batches(8) == [8] and dlh.share() == 1.0 and dlh.checkpoint_path() is None
dlh.step(8, loss=0.5, epoch=1); dlh.evaluation(epoch=1, test_accuracy=0.5)
dlh.checkpoint_saved("/x", 1); dlh.resumed(1)
assert len(dlh.ShareSampler(10, batch_size=4)) == 12  # one rank: 3 steps of 4, padded
PY
check "outside DLH: no signal handler, no channel, plain defaults, reporting does nothing"

# 2b. should_stop(agree=True)'s schedule: 2 ranks over gloo, steps of 10 ms, a stop asked for
# on rank 1 alone at step 60. The ranks agree about every 0.25 s, not every step, at the
# same calls, and both stop at the same step, within 0.25 s and a step or two of the ask.
cat >"$WORK/agree.py" <<'PY'
import json, os, sys, time
import torch.distributed as dist
import dlh, dlh.stop
dist.init_process_group("gloo", init_method="env://")
rank, started = dist.get_rank(), []
real = dist.all_reduce
def counting(tensor, *a, **k):
    started.append(step)
    return real(tensor, *a, **k)
dist.all_reduce = counting
step = 0
while not dlh.should_stop(agree=True):
    step += 1
    time.sleep(0.01)
    if rank == 1 and step == 60:
        dlh.stop._requested = 1  # as SIGUSR1's handler does
    assert step < 500, "no stop"
# The agreed stop stands on every rank, asked again with or without agree (rank 0 learned of
# it only from rank 1), and no further collective starts.
calls = len(started)
assert dlh.should_stop(agree=True) and dlh.should_stop(), "an agreed stop did not stand"
assert len(started) == calls, "a call after the agreed stop started another all_reduce"
json.dump({"stop": step, "agreements": started, "signal": dlh.stop_signal()},
          open(f"{sys.argv[1]}/agree-{rank}.json", "w"))
dist.barrier(); dist.destroy_process_group()
PY
env -u DLH_RUN_DIR -u DLH_PROGRESS_FD timeout 300 mpirun -np 2 -x MASTER_ADDR=127.0.0.1 \
  -x MASTER_PORT="$(free_port)" bash -c \
  'RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE=2 exec "$0" "$@"' $py "$WORK/agree.py" "$WORK" \
  >"$WORK/agree.txt" 2>&1 || { cat "$WORK/agree.txt" >&2; fail "should_stop(agree=True) on 2 ranks"; }
$py - "$WORK" <<'PY' || fail "should_stop(agree=True)'s schedule"
import json, sys
r = [json.load(open(f"{sys.argv[1]}/agree-{i}.json")) for i in (0, 1)]
assert r[0]["agreements"] == r[1]["agreements"], "the ranks agreed at different calls"
assert r[0]["stop"] == r[1]["stop"] and r[0]["signal"] == r[1]["signal"] == "SIGUSR1", r
n, stop = len(r[0]["agreements"]), r[0]["stop"]
assert n <= 20, f"{n} agreements in {stop} steps of 10 ms: not about every 0.25 s"
assert 60 < stop <= 60 + 40, f"asked at step 60, stopped at {stop}"
print(f"  ok: {n} agreements in {stop} steps (at steps {r[0]['agreements']}), both stopped at {stop}")
PY
check "should_stop(agree=True): 2 ranks agree about every 0.25 s at the same calls; a stop asked on one rank stops both at the same step"

# The program: a linear classifier on a synthetic, separable data set of 160 samples.
cat >"$WORK/prog.py" <<'PY'
import dlh
dlh.catch_signals()  # first: SIGUSR1 may come while torch loads
import json, os, sys, time
import torch, torch.distributed as dist
out, mode = sys.argv[1], sys.argv[2]
rank = dlh.rank()
dist.init_process_group("gloo", init_method="env://")
torch.manual_seed(0)
x = torch.randn(160, 8)
y = (x[:, 0] + x[:, 1] > 0).long()
data = torch.utils.data.TensorDataset(x, y, torch.arange(160))
batch = dlh.batch(default=8)
sampler = dlh.ShareSampler(data, batch_size=batch, seed=1)
loader = torch.utils.data.DataLoader(data, batch_size=batch, sampler=sampler)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=dlh.lr(default=0.1))
step, epoch0, seen = 0, 1, []
resume_from = dlh.checkpoint_path()
if resume_from:
    state = torch.load(resume_from)
    model.module.load_state_dict(state["model"])
    step, epoch0 = state["step"], state["epoch"] + 1
    dlh.resumed(step, resume_from)
first_step = step
info = {"batch": batch, "rank_batches": dlh.rank_batches(), "share": dlh.share(),
        "global_batch": dlh.global_batch(), "steps": len(loader), "resume_from": resume_from,
        "checkpoint_dir": dlh.checkpoint_dir(), "plan_gb": dlh.plan().get("global_batch")}
def save(epoch):
    return dlh.save_checkpoint({"model": model.module.state_dict(), "step": step,
                                "epoch": epoch}, step) if rank == 0 else None
for epoch in range(epoch0, epoch0 + (2 if mode == "train" else 1000)):
    sampler.set_epoch(epoch)
    for xb, yb, ib in loader:
        t0 = time.perf_counter()
        if epoch == epoch0:
            seen += ib.tolist()  # the samples this rank trained in its first epoch
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad(); loss.backward(); opt.step()
        step += 1
        accuracy = (model(xb).argmax(1) == yb).float().mean().item()
        dlh.step(len(xb), loss=loss.item(), accuracy=accuracy, epoch=epoch,
                 compute=time.perf_counter() - t0, data=0.001)
        if mode == "wait" and step == first_step + 3:
            open(os.path.join(out, f"ready-{rank}"), "w").close()
        if mode == "wait":
            time.sleep(0.05)
        if dlh.should_stop(agree=True):
            info.update(stopped=dlh.stop_signal(), stop_step=step, saved=save(epoch))
            json.dump(info, open(os.path.join(out, f"rank-{rank}.json"), "w"))
            dist.barrier(); dist.destroy_process_group()  # no rank's gloo left talking to a gone peer
            sys.exit(dlh.exit_code())
    with torch.no_grad():
        test_loss = torch.nn.functional.cross_entropy(model(x), y).item()
        test_accuracy = (model(x).argmax(1) == y).float().mean().item()
    dlh.evaluation(epoch=epoch, test_loss=test_loss, test_accuracy=test_accuracy)
    info["indices"] = seen
    info["saved"] = save(epoch)
json.dump(info, open(os.path.join(out, f"rank-{rank}.json"), "w"))
dist.barrier(); dist.destroy_process_group()
PY
# Global batch 16 split [12, 4] by position (the parts in order, as a heterogeneous job's).
export DLH_PLAN='{"format_version": 1, "global_batch": 16, "lr": 0.2, "warmup_epochs": 0,
  "allocation": {"parts": [
    {"node_type": "node-a", "gpu": "alpha", "nodes": 1, "gpus_per_node": 1, "per_gpu_batch": 12},
    {"node_type": "node-b", "gpu": "beta", "nodes": 1, "gpus_per_node": 1, "per_gpu_batch": 4}],
  "nodes": 2, "gpus": 2, "tasks_per_node": 1}, "why": "test mix"}'
run=$WORK/run

# 3. Two epochs of 10 steps on the plan's shares: records, summary, report.
out=$WORK/out1 && mkdir -p "$out"
start=$SECONDS
timeout 120 mpirun -np 2 dlh-launch run --run-dir "$run" -- $py "$WORK/prog.py" "$out" train "$marker" \
  2>"$WORK/err1.txt" || { cat "$WORK/err1.txt" >&2; fail "the program's run failed"; }
! grep -i 'warning' "$WORK/err1.txt" >&2 || fail "a warning for the module's lines"
$py - "$out" "$run" <<'PY' || fail "the shares, metrics.jsonl or summary.json"
import json, sys
out, run = sys.argv[1:]
r = [json.load(open(f"{out}/rank-{i}.json")) for i in (0, 1)]
assert [x["batch"] for x in r] == [12, 4] and r[0]["rank_batches"] == [12, 4], r
assert [x["share"] for x in r] == [0.75, 0.25] and r[0]["plan_gb"] == 16, r
assert [x["steps"] for x in r] == [10, 10], "not the same steps on both ranks"
assert [len(x["indices"]) for x in r] == [120, 40], "not each rank's share of the epoch"
assert sorted(r[0]["indices"] + r[1]["indices"]) == list(range(160)), "not the whole epoch"
assert r[0]["checkpoint_dir"] == run + "/checkpoints" and r[0]["resume_from"] is None, r[0]
recs = [json.loads(l) for l in open(run + "/metrics.jsonl")]
ev = lambda name: [x for x in recs if x.get("event") == name]
steps = [x for x in recs if "event" not in x]
assert recs[0]["event"] == "start" and recs[0]["step"] == 0 and recs[0]["rank_batches"] == [12, 4]
assert recs[0]["spec_name"] == "prog" and recs[0]["world_size"] == 2, recs[0]
assert [x["step"] for x in steps] == list(range(1, 21)), [x["step"] for x in steps]
assert all(x["loss"] > 0 and 0 <= x["accuracy"] <= 1 and x["time"]["compute"] > 0 for x in steps)
assert steps[0]["epoch"] == 1 and steps[-1]["epoch"] == 2 and steps[0]["rank_batches"] == [12, 4]
assert all(x["samples_per_s"] > 0 and x["time"]["total"] > 0 for x in steps[1:]), steps[1]
e = ev("eval")
assert [(x["epoch"], x["step"]) for x in e] == [(1, 10), (2, 20)], e
assert 0.5 <= e[-1]["test_accuracy"] <= 1 and e[-1]["test_loss"] > 0, e
c = ev("checkpoint")
assert [x["step"] for x in c] == [10, 20] and c[-1]["path"] == run + "/checkpoints/ckpt-00000020.pt", c
assert c[-1]["bytes"] > 0, c
(end,) = ev("end")
assert end["finished"] is True and end["stop_signal"] is None and end["step"] == 20, end
s = json.load(open(run + "/summary.json"))
assert s["finished"] and s["steps"] == 20 and s["ranks"] == 2 and s["stop_signal"] == 0, s
assert s["rank_batches"] == [12, 4] and s["batch_split"] == "plan", s
assert s["rank_gpu_types"] == ["alpha", "beta"], s
assert s["test_accuracy"] == e[-1]["test_accuracy"] and s["lr"] == 0.2, s
assert s["last_checkpoint"] == c[-1]["path"] and s["checkpoints"]["written"] == 2, s
assert all(v > 0 for v in s["rank_step_seconds"]["compute"]), s["rank_step_seconds"]
assert [round(v, 9) for v in s["rank_step_seconds"]["data"]] == [0.001, 0.001], s["rank_step_seconds"]
assert all(v > 0 for v in s["rank_process"]["peak_rss_mib"]), s["rank_process"]
print(f"  ok: 20 steps, loss {steps[0]['loss']:.3f} -> {steps[-1]['loss']:.3f}, "
      f"test accuracy {e[-1]['test_accuracy']:.3f}; rank compute "
      f"{[round(v * 1e3, 2) for v in s['rank_step_seconds']['compute']]} ms/step")
PY
check "ranks' batches [12, 4] (DLH_RANK_BATCHES, share 0.75/0.25), 10 steps each, 120 and 40 samples of each epoch"
check "metrics.jsonl: start, 20 steps with loss/accuracy/epoch/time, 2 evals, 2 checkpoints, end; summary.json in train's schema"

dlh-report "$run" >"$WORK/report.txt" 2>&1 || { cat "$WORK/report.txt" >&2; fail "dlh-report failed on the program's run"; }
! grep -q 'note:' "$WORK/report.txt" || { cat "$WORK/report.txt" >&2; fail "dlh-report noted problems"; }
grep -q "Training loss" "$run/report.html" && grep -q "Accuracy" "$run/report.html" ||
  fail "the report has no loss or accuracy chart"
dlh-report "$run" --follow >"$WORK/follow.txt" 2>&1 || { cat "$WORK/follow.txt" >&2; fail "dlh-report --follow"; }
grep -Eq '^  state +finished$' "$WORK/follow.txt" && grep -Eq '^  training loss, accuracy +[0-9.]+, [0-9.]+% \(last step\)$' "$WORK/follow.txt" &&
  grep -Eq '^  test accuracy +[0-9.]+% \(epoch 2\)$' "$WORK/follow.txt" || { cat "$WORK/follow.txt" >&2; fail "the headline lacks the loss or accuracy"; }
check "dlh-report: $(head -1 "$WORK/report.txt"); $(grep 'test accuracy' "$WORK/follow.txt" | tr -s ' ')"

# 4. SIGUSR1 to both ranks: the flag is set, every rank stops at the same step, rank 0
# checkpoints, the programs exit 0; the run resumed from the launcher's DLH_CHECKPOINT.
out=$WORK/out2 && mkdir -p "$out"
# start_waiting RUN OUT: the program on 2 ranks in "wait" mode, in the background ($job),
# until both ranks have made their first steps.
start_waiting() {
  setsid mpirun -np 2 dlh-launch run --run-dir "$1" -- $py "$WORK/prog.py" "$2" wait "$marker" \
    >"$2/stdout" 2>"$2/stderr" &
  job=$!
  for ((i = 0; i < 3000; ++i)); do  # two ranks importing torch beside five other tests
    [[ -f $2/ready-0 && -f $2/ready-1 ]] && break
    kill -0 $job 2>/dev/null || { cat "$2/stderr" >&2; fail "the job ended before its steps"; }
    sleep 0.1
  done
  [[ -f $2/ready-0 && -f $2/ready-1 ]] || { cat "$2/stderr" >&2; kill -- -$job; fail "the programs made no step within 300 s"; }
}
start_waiting "$run" "$out"
ranks=$(pgrep -f -- "^dlh-launch run --run-dir $run -- $py $WORK/prog.py $out wait $marker" || true)
[[ $(wc -w <<<"$ranks") -eq 2 ]] || { pgrep -af -- "$marker" >&2; kill -- -$job; fail "not two rank processes: $ranks"; }
kill -USR1 $ranks
timeout 60 tail --pid=$job -f /dev/null || { kill -KILL -- -$job; fail "the job still runs 60 s after SIGUSR1"; }
rc=0 && wait $job || rc=$?
[[ $rc -eq 0 ]] || { cat "$out/stderr" >&2; fail "mpirun exited $rc after SIGUSR1"; }
grep -q "DLH_CHECKPOINT=$run/checkpoints/ckpt-00000020.pt" "$out/stderr" || { cat "$out/stderr" >&2; fail "no DLH_CHECKPOINT in the start line"; }
$py - "$out" "$run" <<'PY' || fail "the stop, the resume or their records"
import json, sys
out, run = sys.argv[1:]
r = [json.load(open(f"{out}/rank-{i}.json")) for i in (0, 1)]
first = run + "/checkpoints/ckpt-00000020.pt"
assert [x["resume_from"] for x in r] == [first, first], r
assert [x["stopped"] for x in r] == ["SIGUSR1"] * 2, r
assert r[0]["stop_step"] == r[1]["stop_step"] > 20, r
saved = r[0]["saved"]
assert saved == f"{run}/checkpoints/ckpt-{r[0]['stop_step']:08d}.pt", saved
recs = [json.loads(l) for l in open(run + "/metrics.jsonl")]
starts = [x for x in recs if x.get("event") == "start"]
assert len(starts) == 2 and starts[1]["step"] == 20 and starts[1]["resumed_from"] == first, starts
tail = recs[recs.index(starts[1]):]
steps = [x["step"] for x in tail if "event" not in x]
assert steps == list(range(21, r[0]["stop_step"] + 1)), steps
(sig,) = [x for x in tail if x.get("event") == "signal"]
assert sig["signal"] == "SIGUSR1" and sig["checkpoint"] == saved, sig
(end,) = [x for x in tail if x.get("event") == "end"]
assert end["finished"] is False and end["stop_signal"] == "SIGUSR1", end
s = json.load(open(run + "/summary.json"))
assert not s["finished"] and s["stop_signal"] == 10 and s["last_checkpoint"] == saved, s
print(f"  ok: both ranks stopped at step {r[0]['stop_step']} on SIGUSR1, checkpoint {saved.split('/')[-1]}")
PY
dlh-report "$run" --follow >"$WORK/follow2.txt" 2>&1 || fail "dlh-report after the stop"
grep -Eq '^  attempts +2 \(resumed 1 times\)$' "$WORK/follow2.txt" || { cat "$WORK/follow2.txt" >&2; fail "the report does not see the resume"; }

# 4b. SIGTERM to rank 1's launcher alone: the ranks agree on the stop, and rank 0's launcher,
# sent nothing, learns it from its program ("stop SIGTERM" on the channel). It took the
# program's exit 143 for a crash and ended every rank with an error (2026-12-07).
run2=$WORK/runs/term && out=$WORK/out3 && mkdir -p "$out"
start_waiting "$run2" "$out"
rank1=
for pid in $(pgrep -f -- "^dlh-launch run --run-dir $run2 -- $py $WORK/prog.py $out wait $marker" || true); do
  tr '\0' '\n' <"/proc/$pid/environ" | grep -qx 'OMPI_COMM_WORLD_RANK=1' && rank1=$pid
done
[[ -n $rank1 ]] || { kill -- -$job; fail "no launcher of rank 1"; }
kill -TERM "$rank1"
timeout 60 tail --pid=$job -f /dev/null || { kill -KILL -- -$job; fail "the job still runs 60 s after SIGTERM"; }
wait $job || true
! grep -q "ending every rank" "$out/stderr" || { cat "$out/stderr" >&2; fail "rank 0 took the agreed stop for a crash"; }
$py - "$out" "$run2" <<'PY' || { cat "$out/stderr" >&2; fail "the stop rank 1 alone was sent"; }
import json, sys
out, run = sys.argv[1:]
r = [json.load(open(f"{out}/rank-{i}.json")) for i in (0, 1)]
assert [x["stopped"] for x in r] == ["SIGTERM"] * 2 and r[0]["stop_step"] == r[1]["stop_step"], r
s = json.load(open(run + "/summary.json"))
assert not s["finished"] and s["stop_signal"] == 15, (s["finished"], s["stop_signal"])
PY
check "SIGTERM to rank 1's launcher alone: both ranks stop at one step, rank 0's launcher records the stop (summary stop_signal 15), no rank ended as failed"
check "SIGUSR1: should_stop on both ranks, checkpoint, exit 0; resumed from the launcher's DLH_CHECKPOINT (step 20); signal and end records; the report sees 2 attempts"
[[ -z $(pgrep -f -- "$marker" || true) ]] || fail "processes linger"
check "the new program runs took $((SECONDS - start)) s"

# A checkpoint's path is recorded as it is: accents, two spaces, over 256 characters (it was
# cut at 256 and its accents turned into spaces).
long="$WORK/données  $(printf 'x%.0s' $(seq 240))"
cat >"$WORK/ck.py" <<'PY'
import dlh
dlh.step(1)
print(dlh.save_checkpoint({"x": 1}, 7))
dlh.step(1)
PY
env -u DLH_PLAN PYTHONPATH="$ROOT/share/python" dlh-launch run --run-dir "$long" -- $py "$WORK/ck.py" >"$WORK/ck.txt" 2>&1 ||
  { cat "$WORK/ck.txt"; fail "a run in a folder of a long, accented name"; }
$py - "$long" <<'PY' || fail "the checkpoint's path in summary.json"
import json, os, sys
s = json.load(open(os.path.join(sys.argv[1], "summary.json")))
want = os.path.join(sys.argv[1], "checkpoints", "ckpt-00000007.pt")
assert s["last_checkpoint"] == want, (len(s["last_checkpoint"]), s["last_checkpoint"][-40:])
PY
check "a checkpoint path of $(($(printf '%s' "$long" | wc -c) + 29)) bytes with accents and two spaces recorded as it is"
