#!/usr/bin/env python3
"""replay_jobs.py SAVED [BINDIR]: the whole jobs of one make bench run planned again by this
build, each from the observation records of the jobs that ran before it, against the times
those jobs took.

SAVED is a run's share/bench/results/RUN/jobs/saved-jobs.json (share/bench/whole_jobs.sh
writes it: the cluster file, the calibration, the specs, and per job its options, epochs,
measured time, the plan's prediction then and its observation record). Planning goes through
`dlh-estimate slurm-plan`, the plugin's own planning code, with the user's options of each
job, so a change to the estimator is judged on the same measurements as the build that ran
them: a host that ran one job 20% faster than the next is the same host for both builds.
BINDIR defaults to build/bin. Prints one line per job and the MAPE of both builds.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def plan_again(bindir, folder, job):
    """The plan dlh-estimate slurm-plan makes now for `job` (its --dlh-auto as whole_jobs.sh
    submitted it, its sbatch options as slurm.json_cli_options gives them)."""
    options = {}
    for option in job["options"].split():
        key, value = option[2:].split("=", 1)
        options[key] = "gres:" + value if key == "gres" else value
    auto = (f"spec={folder}/{job['spec']},samples=60000,eval-samples=10000,"
            f"epochs={job['epochs']},deadline=30m")
    env = dict(os.environ, DLH_SITE=f"cluster={folder}/cluster.json")
    out = subprocess.run([os.path.join(bindir, "dlh-estimate"), "slurm-plan", "--dlh-auto", auto,
                          "--options", json.dumps(options)],
                         env=env, capture_output=True, text=True, cwd=folder, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("plan "):
            return json.loads(line[len("plan "):])
    sys.exit(f"replay_jobs.py: {job['name']}: dlh-estimate slurm-plan gave no plan: "
             f"{(out.stdout + out.stderr).strip().splitlines()[-1:]}")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[0])
    saved = json.load(open(sys.argv[1]))
    bindir = os.path.abspath(sys.argv[2] if len(sys.argv) == 3 else "build/bin")
    folder = tempfile.mkdtemp(prefix="dlh-replay-jobs-")
    try:
        json.dump(saved["calibration"], open(os.path.join(folder, "calibration.json"), "w"))
        json.dump(saved["cluster"], open(os.path.join(folder, "cluster.json"), "w"))
        for name, spec in saved["specs"].items():
            json.dump(spec, open(os.path.join(folder, name), "w"))
        store = os.path.join(folder, "observations")
        os.mkdir(store, 0o700)
        now, then = [], []
        for i, job in enumerate(saved["jobs"]):
            plan = plan_again(bindir, folder, job)
            predicted, took = plan["predicted"]["total_s"], job["job_seconds"]
            error = 100 * (predicted - took) / took
            now.append(abs(error))
            was = ""
            if job.get("predicted_s"):
                then.append(abs(100 * (job["predicted_s"] - took) / took))
                was = f" (then {job['predicted_s']:.1f} s, {100 * (job['predicted_s'] - took) / took:+.1f}%)"
            source = "; ".join(plan.get("provenance", {}).values())
            print(f"{job['name']}: {predicted:.1f} s, took {took:.1f} s, {error:+.1f}%{was}; {source}")
            if job.get("record"):
                with open(os.path.join(store, f"{i:02d}-{job['name']}.json"), "w") as f:
                    json.dump(job["record"], f)
        print(f"MAPE {statistics.mean(now):.1f}% over {len(now)} jobs with this build"
              + (f", {statistics.mean(then):.1f}% as run" if then else ""))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
