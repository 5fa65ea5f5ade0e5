#!/bin/bash
# share/bench/mixed_shares_report.py's verdict on the goal "a program with shares on a mixed
# allocation": the ratio of the plan's shares to the round's ideal, from the rounds whose
# ideal bounds every split; a run whose ideal was outrun in most rounds measured nothing,
# and its goal fails as not measured rather than passing on a broken ideal.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

# run ALPHA BETA EVEN PLANNED BALANCED (one value a round each, comma-separated): a
# mixed_shares/ folder of those rates, the report on it; prints the goal record.
run() {
  rm -rf "$WORK/mixed_shares" "$WORK/goals.jsonl"
  mkdir -p "$WORK/mixed_shares"
  python3 - "$WORK/mixed_shares" "$@" <<'PY'
import json, sys
out = sys.argv[1]
alpha, beta, even, planned, balanced = ([float(v) for v in a.split(",")] for a in sys.argv[2:7])
json.dump({"recommended": {"alpha": 46, "beta": 18, "row": "r"}, "ratio": 0.39,
           "recommended_set": {"alpha": 46, "beta": 18, "row": "r"}, "planned_ratio": 0.39,
           "planned": [92, 36], "global_batch": 128, "quota_us": 3900, "period_us": 10000,
           "steps": 160, "warm": 40, "rounds": len(alpha), "every": 10, "order": "o",
           "load_before": ["0", "0", "0"], "load_after": ["0", "0", "0"]},
          open(f"{out}/setup.json", "w"))
with open(f"{out}/runs.jsonl", "w") as f:
    for i in range(len(alpha)):
        f.write(json.dumps({"config": "pair-alpha", "rate": alpha[i]}) + "\n")
        f.write(json.dumps({"config": "pair-beta", "rate": beta[i]}) + "\n")
        for config, rates in (("planned", planned), ("balanced", balanced), ("even", even)):
            f.write(json.dumps({"config": config, "rate": rates[i], "split": [92, 36]}) + "\n")
PY
  python3 "$ROOT/share/bench/mixed_shares_report.py" "$WORK" "$WORK/goals.jsonl" >"$WORK/section.md" ||
    { cat "$WORK/section.md"; fail "mixed_shares_report.py failed"; }
  cat "$WORK/goals.jsonl"
}

# Five sound rounds: the plan's shares at 90% of each round's ideal (4000 + 1000).
goal=$(run 4000,4000,4000,4000,4000 1000,1000,1000,1000,1000 2800,2800,2800,2800,2800 \
  4500,4500,4500,4500,4500 4400,4400,4400,4400,4400)
grep -q '"measured": "90.0% with the plan' <<<"$goal" && grep -q '"met": true' <<<"$goal" ||
  fail "five sound rounds: $goal"
# Two rounds whose side-by-side pair ran slow (the even split at 1.2x their ideal): left out,
# named, and the ratio taken over the other three (the plan's shares at 80% there).
goal=$(run 4000,2000,4000,2000,4000 1000,500,1000,500,1000 2800,3000,2800,3000,2800 \
  4000,2900,4000,2900,4000 4400,2900,4400,2900,4400)
grep -q '"measured": "80.0% with the plan' <<<"$goal" && grep -q '"met": false' <<<"$goal" ||
  fail "two broken rounds left out: $goal"
grep -q "round 2: the even split at 120% of its ideal; round 4: the even split at 120%" "$WORK/section.md" ||
  fail "the rounds left out are not named: $(grep -i 'left out' "$WORK/section.md")"
# Three of five broken: the run measured no ratio, and the goal fails as not measured.
goal=$(run 2000,2000,4000,2000,4000 500,500,1000,500,1000 3000,3000,2800,3000,2800 \
  4500,4500,4500,4500,4500 4400,4400,4400,4400,4400)
grep -q '"measured": "not measured"' <<<"$goal" && grep -q '"met": false' <<<"$goal" &&
  grep -q '2 of 5 rounds measured the ideal' <<<"$goal" || fail "three broken rounds: $goal"
grep -q "^| the plan's shares (dlh.ShareSampler) | .* | not measured |" "$WORK/section.md" ||
  fail "three broken rounds: the table still shows a ratio: $(grep 'plan' "$WORK/section.md")"
check "mixed_shares_report.py: rounds whose ideal was outrun are left out, and a run of too few fails"
