#!/usr/bin/env python3
"""The "local SGD" section of make bench (issue 47), from share/bench/local_sgd.sh's
WORK/local_sgd/local_sgd.json: 1 rank, then 2 ranks on two hosts synchronously, with local SGD
(period 4 and 16) and stale-synchronously (staleness 1 and 2), on the hosts' own link and on a
shaped slow one (there also staleness 2 with the sums alone). Prints the section's table and the trade-off, and writes the goal records
(report.py's Goals).
    local_sgd_report.py WORK GOALS.jsonl"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import Goals, measured  # noqa: E402

# Set before the first measurement: on the slow link, period 16 must at least double the
# synchronous rate and lose at most one point of final test accuracy after the same epochs.
GOAL = ("Local SGD, period 16, on a 100 Mbit/s link: at least 2x the synchronous samples/s, "
        "final test accuracy within 1 point of synchronous after the same epochs")

# Set before the first measurement with stale-synchronous rows: a step on the slow link takes
# about its compute plus its allreduce synchronously and the longer of the two with staleness 2.
STALE_GOAL = ("Stale-synchronous, staleness 2, on a 100 Mbit/s link: at least 1.15x the "
              "synchronous samples/s, final test accuracy within 1 point of synchronous after the "
              "same epochs")

LABEL = {"sync": "synchronous", "local4": "local SGD, period 4", "local16": "local SGD, period 16",
         "stale1": "stale-synchronous, staleness 1", "stale2": "stale-synchronous, staleness 2",
         "stale2sums": "stale-synchronous, staleness 2, the sums alone (own_gradient_first false)"}


def main():
    work, goals = sys.argv[1], Goals(sys.argv[2])
    d = os.path.join(work, "local_sgd")
    if not measured(d, GOAL, goals):
        goals.add(STALE_GOAL, "not measured", False, "the local SGD part could not run (above)")
        return
    res = json.load(open(os.path.join(d, "local_sgd.json")))
    runs = res["runs"]
    print(f"Fashion-MNIST (60,000 training, 10,000 test samples), {res['spec']}, "
          f"{res['epochs']} epochs at global batch {res['global_batch']}, "
          f"{res['threads_per_rank']} OpenBLAS thread per rank; the slow link: host2's veth shaped "
          f"to {res['slow_link']} each way"
          + (f"; Open MPI's TCP eager limit {res['tcp_eager_limit']}, as dlh-launch sets it "
             f"(docs/reference/dlh-launch.md, \"Gradients between hosts over TCP\"), and the "
             f"stale-synchronous sums in messages of at most 60 KiB"
             if res.get("tcp_eager_limit") else
             "; Open MPI's TCP eager limit its default of 64 KiB (runs before 2026-12-01)") + ".")
    print()
    print("| link | ranks | training | samples/s | speed-up vs 1 rank | allreduce + average per step |"
          " test accuracy per epoch (s since srun) | final test accuracy | averages | whole job |"
          " load average before–after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in runs.items():
        link, mode = ("—", "sync") if name == "np1" else tuple(name.split("-"))
        ranks = 1 if name == "np1" else 2
        evals = ", ".join(f"{e['test_accuracy']:.2%} ({e.get('seconds', 0):.0f} s)" for e in r["evals"])
        load = "–".join(f"{x:.1f}" for x in r["load_average_before_after"])
        print(f"| {link} | {ranks} | {LABEL[mode]} | {r['samples_per_s']:.0f} | "
              f"x{r['speedup_vs_1_rank']:.2f} | {1000 * r['allreduce_s_per_step']:.1f} ms | {evals} | "
              f"{r['final_test_accuracy']:.2%} | {r['averages'] or '—'} | {r['job_seconds']:.0f} s | {load} |")
    print()
    print("Samples/s: the global batch over each step's wall time, steps after the 32nd (whole "
          "periods: an average lands on one step of 4 or 16); allreduce + average: the step's "
          "control allreduce, its gradient allreduce (synchronous), its share of the model "
          "averages (local SGD) or the time it spent starting its sums and waiting for those of "
          "the step its update applies (stale-synchronous). Times from `srun` to the line each "
          "epoch's evaluation prints.")
    print()
    slow = {m: runs[f"slow-{m}"] for m in LABEL if f"slow-{m}" in runs}
    fast = {m: runs[f"fast-{m}"] for m in LABEL if f"fast-{m}" in runs}
    gain = slow["local16"]["samples_per_s"] / slow["sync"]["samples_per_s"]
    loss = 100 * (slow["sync"]["final_test_accuracy"] - slow["local16"]["final_test_accuracy"])
    fast_gain = fast["local16"]["samples_per_s"] / fast["sync"]["samples_per_s"]
    diff4 = 100 * (slow["local4"]["final_test_accuracy"] - slow["sync"]["final_test_accuracy"])
    print(f"The trade-off: on the slow link period 16 trains x{gain:.2f} the synchronous rate "
          f"(period 4: x{slow['local4']['samples_per_s'] / slow['sync']['samples_per_s']:.2f}), and "
          f"its final test accuracy after the same {res['epochs']} epochs is {-loss:+.2f} points "
          f"against the synchronous run's (period 4: {diff4:+.2f}); "
          f"on the hosts' own link, where the allreduce costs little, period 16 gives x{fast_gain:.2f}. "
          f"The two hosts share this machine's 2 cores, so the speed-ups against 1 rank say more "
          f"about the machine than about the method; the ratios between the 2-rank rows do not.")
    goals.add(GOAL, f"x{gain:.2f} the synchronous rate, {-loss:+.2f} points of test accuracy",
              gain >= 2 and loss <= 1, f"x{gain:.2f}, {-loss:+.2f} points")
    if "stale2" not in slow:  # a results folder from before the stale-synchronous rows
        return
    s_gain = slow["stale2"]["samples_per_s"] / slow["sync"]["samples_per_s"]
    s_loss = 100 * (slow["sync"]["final_test_accuracy"] - slow["stale2"]["final_test_accuracy"])
    s1_gain = slow["stale1"]["samples_per_s"] / slow["sync"]["samples_per_s"]
    s1_loss = 100 * (slow["sync"]["final_test_accuracy"] - slow["stale1"]["final_test_accuracy"])
    print()
    print(f"Stale-synchronous on the slow link: staleness 2 trains x{s_gain:.2f} the synchronous "
          f"rate with {-s_loss:+.2f} points of final test accuracy, staleness 1 x{s1_gain:.2f} with "
          f"{-s1_loss:+.2f}; on the hosts' own link staleness 2 gives "
          f"x{fast['stale2']['samples_per_s'] / fast['sync']['samples_per_s']:.2f}. Unlike local "
          f"SGD it still moves every step's gradient: at best it hides the allreduce behind "
          f"compute, never makes it smaller"
          + (f"; here it did not hide it (its allreduce, {1000 * slow['stale2']['allreduce_s_per_step']:.0f} "
             f"ms a step, took longer than the synchronous one, "
             f"{1000 * slow['sync']['allreduce_s_per_step']:.0f} ms)." if s_gain < 1 else "."))
    if "stale2sums" in slow:  # results from 2026-12-01 on: each rank's own steps on or off
        p_loss = 100 * (slow["sync"]["final_test_accuracy"] - slow["stale2sums"]["final_test_accuracy"])
        print()
        print(f"Each rank's own steps (Delayed Gradient Averaging, the default: "
              f"docs/reference/training-spec.md, \"Stale-synchronous training\"): without them, "
              f"staleness 2 applies only the sums, each 2 steps late, and ends {-p_loss:+.2f} points "
              f"from the synchronous run (with them {-s_loss:+.2f}), at "
              f"x{slow['stale2sums']['samples_per_s'] / slow['sync']['samples_per_s']:.2f} the "
              f"synchronous rate (with them x{s_gain:.2f}).")
    goals.add(STALE_GOAL, f"x{s_gain:.2f} the synchronous rate, {-s_loss:+.2f} points of test accuracy",
              s_gain >= 1.15 and s_loss <= 1, f"x{s_gain:.2f}, {-s_loss:+.2f} points")


if __name__ == "__main__":
    main()
