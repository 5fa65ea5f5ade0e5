#!/usr/bin/env python3
"""The "pipeline" section of make bench (issue 47), from share/bench/pipeline.sh's
WORK/pipeline/pipeline.json: the example spec on 1 rank, 2 ranks data-parallel and 2 pipeline
stages with 2, 4 and 8 micro-batches (the bubble measured against GPipe's, the estimator's step
against the measured), and the widest MLP a capped device trains whole and as a pipeline.
Prints the section's tables and writes the goal records (report.py's Goals).
    pipeline_report.py WORK GOALS.jsonl"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import Goals, measured  # noqa: E402

# Set before the first measurement: GPipe's bubble is the model the estimator plans with.
BUBBLE_GOAL = ("Pipeline, 2 stages of 8 micro-batches: the bubble the stages measure within 0.10 "
               "of GPipe's (P - 1) / (M + P - 1)")
# Set when the stages came to be timed by the time model (2026-11-30), before this part ran.
STEP_GOAL = ("Pipeline, the estimator's step: the example spec's 2-stage steps with 2, 4 and 8 "
             "micro-batches each predicted within 15% of the measured step")
MEMORY_GOAL = ("Under a 0.5 GB device cap, the widest MLP planned as a pipeline has at least 2x "
               "the parameters of the widest planned whole, and trains as planned")

LABEL = {"np1": "1 rank", "dp2": "2 ranks, data-parallel", "pipe-m2": "2 stages, 2 micro-batches",
         "pipe-m4": "2 stages, 4 micro-batches", "pipe-m8": "2 stages, 8 micro-batches"}


def calibration_error(runs):
    """The calibration's own error in the same rounds: the 2-rank data-parallel run's predicted
    step over its measured one, less 1 (None where it was not predicted)."""
    dp2 = runs.get("dp2", {})
    return dp2["predicted_step_s"] / dp2["step_s"] - 1 if dp2.get("predicted_step_s") else None


def stage_busy(par, run):
    """Each stage's own work a step, measured (summary.json, runs from 2026-12-06 on) and
    planned by the time model: "57.0 / 12.7 ms, planned 58.4 / 12.6 ms"."""
    measured_s, planned_s = par.get("stage_busy_s_per_step"), run.get("planned_stage_busy_s")
    if not measured_s:
        return "—"
    text = " / ".join(f"{1000 * x:.1f}" for x in measured_s) + " ms"
    if planned_s:
        text += ", planned " + " / ".join(f"{1000 * x:.1f}" for x in planned_s) + " ms"
    return text


def main():
    work, goals = sys.argv[1], Goals(sys.argv[2])
    d = os.path.join(work, "pipeline")
    if not measured(d, BUBBLE_GOAL, goals):
        goals.add(STEP_GOAL, "not measured", False, "the pipeline part could not run (above)")
        goals.add(MEMORY_GOAL, "not measured", False, "the pipeline part could not run (above)")
        return
    res = json.load(open(os.path.join(d, "pipeline.json")))
    runs = res["runs"]
    rounds = res.get("rounds", 1)
    print(f"Fashion-MNIST, {res['spec']}, {res['steps']} steps at global batch "
          f"{res['global_batch']} on this machine (mpirun, 1 OpenBLAS thread a rank); each run's "
          f"median of the steps after the 20th, {rounds} round{'s' if rounds != 1 else ''} of the "
          f"five runs in rotated order: the step is the median of the rounds (min / median / max), "
          f"the bubble and memory that round's.")
    print()
    print("| run | samples/s | step | step predicted | bubble measured | bubble predicted (GPipe) |"
          " bubble planned (stage times) | stages busy, measured / planned | peak RSS per rank |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in runs.items():
        par = r.get("parallel") or {}
        pred = r.get("predicted_step_s")
        rss = ", ".join(f"{x:.0f} MiB" for x in (r.get("peak_rss_mib") or []))
        steps = r.get("round_steps_s") or [r["step_s"]]
        step = (f"{1000 * min(steps):.1f} / **{1000 * r['step_s']:.1f}** / {1000 * max(steps):.1f} ms"
                if len(steps) > 1 else f"{1000 * r['step_s']:.1f} ms")
        cells = [LABEL[name], f"{r['samples_per_s']:.0f}", step,
                 f"{1000 * pred:.1f} ms" if pred else "—",
                 f"{par['bubble_measured']:.2f}" if par else "—",
                 f"{par['bubble_predicted']:.2f}" if par else "—",
                 f"{r['planned_bubble']:.2f}" if r.get("planned_bubble") is not None else "—",
                 stage_busy(par, r), rss]
        print("| " + " | ".join(cells) + " |")
    print()
    print("Bubble measured: the stages' seconds in MPI_Send and MPI_Recv of activations and "
          "gradients (the pipeline's fill and drain, and a stage waiting for a slower neighbour) "
          "over their forward-backward seconds; step predicted and bubble planned: `dlh-estimate "
          f"recommend` on share/cluster/local.json's alpha, timed by "
          f"{res.get('planned_with') or 'share/calibration/cpu.json'}, 2 ranks (each stage timed "
          "by the time model layer by layer, GPipe's schedule with uneven stages; runs before "
          "2026-11-30T14Z timed the stages by their FLOPs). Stages busy: each stage's seconds a "
          "step less its waiting, against the time model's (`parallel.stage_busy_s`): where the "
          "stages are right and the step is not, the error is in the schedule or the "
          "calibration's speed.")
    dp2, own_error = runs.get("dp2", {}), calibration_error(runs)
    if own_error is not None:
        print()
        print(f"The calibration's own error in these rounds: the 2-rank data-parallel run "
              f"(`recommend --objective time`, 2 ranks of 1 thread, batch 64 each) predicted at "
              f"{1000 * dp2['predicted_step_s']:.1f} ms a step, measured "
              f"{1000 * dp2['step_s']:.1f} ms ({100 * own_error:+.1f}%).")
    layers = os.path.join(d, "layers.md")
    if os.path.exists(layers):
        text = open(layers).read().splitlines()
        example = [l for l in text if l.startswith("| val-fashion-cnn-b128 |")]
        summary = [l for l in text if l.startswith("the forward's share")]
        print()
        if example and summary:
            cells = [c.strip() for c in example[0].strip("|").split("|")]
            print(f"The forward a stage runs again in backward is priced at its FLOPs' share of the "
                  f"stage. Timed, on the validation models' layers one by one (`dlh-estimate "
                  f"validate --layers --set all --rounds 3`, the same calibration): {summary[0]}; "
                  f"the example spec's network (val-fashion-cnn-b128) {cells[5]}% measured, "
                  f"{cells[6]}% by the FLOPs.")
        else:
            print(f"The forward's share, timed: not measured ({text[-1] if text else 'no output'}).")
    print()
    print(f"The largest network under a {res['cap_gb']:g} GB device cap "
          f"(`dlh-estimate recommend --memory-cap`, up to 4 ranks of local.json's alpha; an MLP "
          f"of 3 hidden layers of the width, batch 128, SGD with momentum):")
    print()
    print("| width | parameters | planned | ranks | memory per rank (planned) |")
    print("|---|---|---|---|---|")
    for row in res["mlp"]:
        mem = row.get("memory_per_rank_bytes")
        how = {"whole": "whole on every rank", "refused": "refused: fits no pipeline either"}.get(
            row["mode"], f"pipeline of {row.get('stages')} stages")
        print(f"| {row['width']} | {row['params'] / 1e6:.1f} M | {how} | {row.get('gpus', '—')} | "
              f"{f'{mem / 1e6:.0f} MB' if mem else '—'} |")
    whole = [r for r in res["mlp"] if r["mode"] == "whole"]
    piped = [r for r in res["mlp"] if r["mode"] == "pipeline"]
    trained = res.get("trained")
    print()
    if trained:
        rss = ", ".join(f"{x:.0f}" for x in trained["peak_rss_mib"])
        print(f"The widest pipelined MLP ({trained['width']} wide) trained {trained['steps']} steps as "
              f"planned ({trained['parallel']['pipeline_stages']} stages); its ranks' peak RSS: "
              f"{rss} MiB (the process's own share included: MPI, the data set, the loader).")
    m8 = runs["pipe-m8"]["parallel"]
    gap = abs(m8["bubble_measured"] - m8["bubble_predicted"])
    goals.add(BUBBLE_GOAL, f"{m8['bubble_measured']:.2f} measured, {m8['bubble_predicted']:.2f} "
              f"predicted", gap <= 0.10, f"{gap:.2f} apart")
    errors = {m: runs[f"pipe-m{m}"]["predicted_step_s"] / runs[f"pipe-m{m}"]["step_s"] - 1
              for m in (2, 4, 8)}
    worst = max(abs(e) for e in errors.values())
    def spread(m):  # the error against each round's step: how far noise alone moves it
        r = runs[f"pipe-m{m}"]
        steps = r.get("round_steps_s") or [r["step_s"]]
        lo, hi = (r["predicted_step_s"] / max(steps) - 1, r["predicted_step_s"] / min(steps) - 1)
        return f" (rounds {100 * lo:+.0f}% to {100 * hi:+.0f}%)" if len(steps) > 1 else ""
    drift = (f"; the same calibration on 2 data-parallel ranks: {100 * own_error:+.1f}%"
             if own_error is not None else "")
    goals.add(STEP_GOAL, ", ".join(f"M = {m}: {100 * e:+.1f}%{spread(m)}"
                                   for m, e in errors.items()),
              worst <= 0.15, f"largest {100 * worst:.1f}% (the median of the rounds)" + drift)
    ratio = (max(r["params"] for r in piped) / max(r["params"] for r in whole)
             if piped and whole else 0)
    ok = ratio >= 2 and trained is not None and trained["steps"] == 20
    goals.add(MEMORY_GOAL, f"x{ratio:.2f} the parameters"
              + (", trained" if trained else ", not trained"), ok, f"x{ratio:.2f}")


if __name__ == "__main__":
    main()
