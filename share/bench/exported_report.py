#!/usr/bin/env python3
"""The "example spec as an exported PyTorch program" section of make bench (issue 45), from
share/bench/exported.sh's WORK/exported/runs.jsonl: prints the section's table and writes the
goal record (report.py's Goals).
    exported_report.py WORK GOALS.jsonl"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import Goals, measured, read_jsonl  # noqa: E402

GOAL = ("The example spec as an exported PyTorch program: final test accuracy within 0.5 points "
        "of dlh-launch train's (5 epochs)")
SIDES = (("dlh", "`dlh-launch train`"), ("exported", "exported program under `dlh-launch run`"))


def main():
    work, goals = sys.argv[1], Goals(sys.argv[2])
    d = os.path.join(work, "exported")
    if not measured(d, GOAL, goals):
        return
    runs = read_jsonl(os.path.join(d, "runs.jsonl"))
    epochs = max(len(r["test_accuracy"]) for r in runs)
    print("| side | round (seed) | test accuracy after each epoch | final | seconds |")
    print("|---|---|---|---|---|")
    final = {}
    for side, name in SIDES:
        mine = sorted((r for r in runs if r["side"] == side), key=lambda r: r["round"])
        final[side] = [r["test_accuracy"][-1] for r in mine if len(r["test_accuracy"]) == epochs]
        for r in mine:
            curve = ", ".join(f"{100 * a:.2f}" for a in r["test_accuracy"])
            print(f"| {name} | {r['round']} | {curve} | {100 * r['test_accuracy'][-1]:.2f}% | "
                  f"{r['seconds']:.0f} |")
    print()
    rounds = {s: len(v) for s, v in final.items()}
    if not final["dlh"] or rounds["dlh"] != rounds["exported"]:
        goals.add(GOAL, "not measured", False, f"finished rounds: {rounds}")
        print(f"Not judged: the sides finished {rounds} rounds of {epochs} epochs.")
        return
    dlh, exported = statistics.mean(final["dlh"]), statistics.mean(final["exported"])
    gap = 100 * (exported - dlh)
    print(f"Final test accuracy, mean of {rounds['dlh']} round(s): `dlh-launch train` "
          f"**{100 * dlh:.2f}%**, the exported program **{100 * exported:.2f}%** ({gap:+.2f} "
          f"points; the goal: within 0.5).")
    goals.add(GOAL, f"{100 * exported:.2f}% against {100 * dlh:.2f}% ({gap:+.2f} points, "
              f"{rounds['dlh']} rounds of {epochs} epochs)", abs(gap) <= 0.5,
              f"{gap:+.2f} points from dlh-launch train's")


if __name__ == "__main__":
    main()
