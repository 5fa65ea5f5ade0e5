#!/usr/bin/env python3
"""The "suggested network to a deadline" section of make bench (issue 45), from
share/bench/suggested.sh's WORK/suggested/result.json: prints the section and writes the goal
record (report.py's Goals).
    suggested_report.py WORK GOALS.jsonl"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import Goals, measured  # noqa: E402

GOAL = ("A suggested network to a deadline: Fashion-MNIST, 10 minutes, ≥ 90% test accuracy "
        "inside its plan")


def main():
    work, goals = sys.argv[1], Goals(sys.argv[2])
    d = os.path.join(work, "suggested")
    if not measured(d, GOAL, goals):
        return
    r = json.load(open(os.path.join(d, "result.json")))
    print("`dlh-estimate suggest --data fashion-mnist.h5 --deadline 10m` printed:")
    print()
    for line in r["suggest"]:
        print(line if line.startswith("|") else f"\n{line}" if line.startswith("suggest: data") else line)
    print()
    if r["sbatch"]:
        print(f"The plugin's line: `{r['sbatch'][0]}`")
        print()
    plan = r.get("plan") or {}
    predicted = (plan.get("predicted") or {}).get("total_s")
    acc, secs, limit = r.get("test_accuracy"), r.get("job_seconds"), r.get("time_limit_s") or 0
    took = f"{secs:.0f} s" if secs is not None else "no time"
    guess = f"predicted {predicted:.0f} s" if predicted is not None else "no prediction"
    print(f"Job {r['job']}: {r['state']}, {took} ({guess}), time limit {r['time_limit']}, "
          + (f"final test accuracy {100 * acc:.2f}%." if acc is not None else "no test accuracy."))
    met = (r["state"] == "COMPLETED" and acc is not None and acc >= 0.90 and secs is not None
           and secs <= 600 and (not limit or secs <= limit))
    goals.add(GOAL, (f"{100 * acc:.2f}% in {secs:.0f} s (limit {r['time_limit']}, deadline 10m)"
                     if acc is not None and secs is not None else f"job {r['state']}"), met,
              f"accuracy {acc}, {secs} s, state {r['state']}")


if __name__ == "__main__":
    main()
