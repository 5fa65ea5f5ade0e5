#!/usr/bin/env python3
"""The "make demo as on a fresh machine" section of make bench (issue 40), from
share/bench/demo.sh's WORK/demo/result.json: prints the section and writes the goal records
(report.py's Goals).
    demo_report.py WORK GOALS.jsonl"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import Goals, measured  # noqa: E402

FRESH = ("`make demo` as on a fresh machine: the job within 15% of its whole-job prediction "
         "and inside its 90% band")
AGAIN = "`make demo` again: predicted within 5% from the first demo's observation"


def error_pct(run):
    return 100 * (run["predicted_s"] - run["job_seconds"]) / run["job_seconds"]


def main():
    work, goals = sys.argv[1], Goals(sys.argv[2])
    d = os.path.join(work, "demo")
    if not measured(d, FRESH, goals):
        goals.add(AGAIN, "not measured", False, "see the first demo")
        return
    runs = json.load(open(os.path.join(d, "result.json")))["runs"]
    print("| demo | the plan's step time from | predicted | 90% band's upper end | Slurm job (RunTime) "
          "| error | dlh-launch's own wall time | time limit | requeued |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in zip(("first (empty folder)", "second (same folder)"), runs):
        predicted, upper = r.get("predicted_s"), r.get("upper_s")
        err = f"{error_pct(r):+.1f}%" if predicted else "—"
        print(f"| {name} | {r.get('origin') or 'not named'} | "
              + (f"{predicted:.1f} s" if predicted else "no prediction") + " | "
              + (f"{upper:.1f} s" if upper else "no band") + f" | {r['job_seconds']} s | {err} | "
              + f"{r['launcher_seconds']:.1f} s | {r['time_limit']} | "
              + ("yes" if r["restarts"] else "no") + " |")
    print()
    print(f"The first demo's plan: `{runs[0]['sbatch']}`")
    first, second = runs
    ok = first.get("predicted_s") and first.get("upper_s") and not first["restarts"]
    if ok:
        err, inside = error_pct(first), first["job_seconds"] <= first["upper_s"]
        goals.add(FRESH, f"{err:+.1f}% ({first['job_seconds']} s against {first['predicted_s']:.0f} s "
                  f"predicted), {'inside' if inside else 'outside'} the band (<= {first['upper_s']:.0f} s)",
                  abs(err) <= 15 and inside, f"step time {first.get('origin')}")
    else:
        goals.add(FRESH, "no prediction, no band or requeued", False, first.get("sbatch", ""))
    from_history = "earlier run" in (second.get("origin") or "")
    if second.get("predicted_s") and not second["restarts"]:
        err = error_pct(second)
        goals.add(AGAIN, f"{err:+.1f}% ({second.get('origin') or 'origin not named'})",
                  abs(err) <= 5 and from_history, "its plan did not come from the first demo"
                  if not from_history else f"{second['job_seconds']} s measured")
    else:
        goals.add(AGAIN, "no prediction or requeued", False, second.get("sbatch", ""))


if __name__ == "__main__":
    main()
