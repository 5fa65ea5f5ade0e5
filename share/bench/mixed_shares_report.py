#!/usr/bin/env python3
"""The "program with shares on a mixed allocation" section of make bench (issue 44), from
share/bench/mixed_shares.sh's WORK/mixed_shares/: prints the section's tables and writes the
goal record (report.py's Goals).
    mixed_shares_report.py WORK GOALS.jsonl"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import Goals, group_by, measured, read_jsonl  # noqa: E402

GOAL = "A program with shares on a mixed allocation: ≥ 85% of the ideal summed rate"

# A round's ideal bounds every split of the same work: each rank's own rate at the whole
# global batch, summed. A configuration of that round running more than this above it says
# the round's side-by-side pair was slowed by something else, so the round measures no ratio
# (2026-12-04, a run on a host whose rates swung 2.5x within minutes: the even split at 118%
# of the ideal, the plan's shares at 92% and dlh.Balancer at 71%). Smaller batches are a
# little faster a sample (caches), hence the margin.
OUTRUN = 1.10
MIN_ROUNDS = 3
NAMES = {"even": "the even split", "planned": "the plan's shares",
         "balanced": "shares + dlh.Balancer"}


def valid_rounds(by, ideal, rounds):
    """The rounds whose ideal no configuration outran by more than OUTRUN, and a line per
    round left out ("round 2: the even split at 118% of its ideal")."""
    kept, dropped = [], []
    for i in range(rounds):
        over = [(key, by[key][i]["rate"] / ideal[i]) for key in ("even", "planned", "balanced")
                if by[key][i]["rate"] > OUTRUN * ideal[i]]
        if over:
            key, ratio = max(over, key=lambda o: o[1])
            dropped.append(f"round {i + 1}: {NAMES[key]} at {100 * ratio:.0f}% of its ideal")
        else:
            kept.append(i)
    return kept, dropped


def main():
    work, goals = sys.argv[1], Goals(sys.argv[2])
    d = os.path.join(work, "mixed_shares")
    if not measured(d, GOAL, goals):
        return
    setup = json.load(open(os.path.join(d, "setup.json")))
    by = group_by(read_jsonl(os.path.join(d, "runs.jsonl")), "config")
    rounds = min(len(v) for v in by.values())
    ideal = [by["pair-alpha"][i]["rate"] + by["pair-beta"][i]["rate"] for i in range(rounds)]
    rec = setup["recommended"]
    print(f"Throttle: `dlh-estimate recommend --profile` (the program's profile on alpha) --mixed "
          f"ranks `{rec['row']}`: beta/alpha {setup['ratio']:.3f} by the peaks, so beta's quota is "
          f"{setup['quota_us']} µs per {setup['period_us']} µs.")
    print()
    if "recommended_set" in setup:
        rec, glob = setup["recommended_set"], setup["global_batch"]
        if "plan_for" in setup:
            how = (f", for {setup['plan_for']} (local.json with one GPU a node), ranks "
                   f"`{rec['row']}`: the")
        else:  # runs before 2026-12-04T14Z: the 2 + 2 mix, scaled to the global batch
            how = (f" ranks `{rec['row']}`: beta/alpha {setup['planned_ratio']:.3f} measured, "
                   f"so the")
        # Runs before 2026-12-07 timed each point in one run.
        profile_rounds = setup.get("profile_rounds", 1)
        timed = (f", each point the median of {profile_rounds} runs taking turns by batch and "
                 "type" if profile_rounds > 1 else "")
        print(f"Plan: the same from the set of the program's profiles on alpha and on beta (beta's "
              f"on its core under that quota; each type at {glob // 4} and {glob} samples a "
              f"step{timed}){how} planned split of the global batch {glob} is "
              f"{setup['planned']}.")
    else:  # runs before 2026-12-01T16Z planned from alpha's profile alone
        print(f"Plan: from alpha's profile alone, the planned split of the global batch "
              f"{setup['global_batch']} is {setup['planned']}.")
    print()
    order = ("configurations rotated" if "order" not in setup else
             f"configurations in the order {setup['order']}, reversed every other round")
    print(f"{rounds} rounds, {order}; {setup['steps']} steps a run, the first "
          f"{setup['warm']} not timed. Load average {' / '.join(setup['load_before'])} before, "
          f"{' / '.join(setup['load_after'])} after.")
    print()
    print("| configuration | samples/s min / median / max | of the ideal (median of the rounds kept) | split at the end |")
    print("|---|---|---|---|")
    rows = [("alpha alone, side by side", "pair-alpha"), ("beta alone (throttled), side by side", "pair-beta")]
    for name, key in rows:
        r = [x["rate"] for x in by[key]]
        print(f"| {name} | {min(r):.0f} / {statistics.median(r):.0f} / {max(r):.0f} | | whole batch |")
    print(f"| **ideal** (sum of the two) | {min(ideal):.0f} / {statistics.median(ideal):.0f} / "
          f"{max(ideal):.0f} | 100% | |")
    kept, dropped = valid_rounds(by, ideal, rounds)
    share = {}
    for name, key in (("even split", "even"), ("the plan's shares (dlh.ShareSampler)", "planned"),
                      ("shares + dlh.Balancer (every 10 steps)", "balanced")):
        r = [x["rate"] for x in by[key][:rounds]]
        share[key] = statistics.median([r[i] / ideal[i] for i in kept] or [0])
        splits = sorted({tuple(x["split"]) for x in by[key]})
        ratio = f"{100 * share[key]:.1f}%" if len(kept) >= MIN_ROUNDS else "not measured"
        print(f"| {name} | {min(r):.0f} / {statistics.median(r):.0f} / {max(r):.0f} | "
              f"{ratio} | {', '.join(str(list(s)) for s in splits)} |")
    print()
    if dropped:
        print(f"Rounds left out of the ratios (a configuration outran the round's ideal by more than "
              f"{100 * (OUTRUN - 1):.0f}%: the ideal was not measured): {'; '.join(dropped)}.")
        print()
    if len(kept) < MIN_ROUNDS:
        goals.add(GOAL, "not measured", False,
                  f"{len(kept)} of {rounds} rounds measured the ideal ({'; '.join(dropped)})")
        return
    met = share["planned"] >= 0.85
    goals.add(GOAL, f"{100 * share['planned']:.1f}% with the plan's shares ({100 * share['balanced']:.1f}% "
              f"with dlh.Balancer, {100 * share['even']:.1f}% even)", met,
              f"the plan's shares reach {100 * share['planned']:.1f}% of the ideal")


if __name__ == "__main__":
    main()
