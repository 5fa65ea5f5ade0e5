"""What a make bench part reads of one finished job on the local Slurm cluster (whole_jobs.sh,
suggested.sh): the job script's "job-seconds S rc N" line, the run's summary.json, the plan
the job got, and its time limit in seconds (limit_seconds, which share/examples/demo.sh also
uses for the job's run time)."""
import glob
import json
import re


def limit_seconds(text):
    """Slurm's [D-]HH:MM:SS as seconds; 0 for anything else (UNLIMITED)."""
    if ":" not in text:
        return 0
    d, _, hms = text.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return (int(d) if d else 0) * 86400 + h * 3600 + m * 60 + s


def job_record(job, out_path, limit):
    """time_limit, time_limit_s, job_seconds, rc, summary and plan of job `job`, whose batch
    script wrote `out_path` and plan-JOB.json and trained into run-JOB/."""
    m = re.search(r"job-seconds ([0-9.]+) rc (\d+)", open(out_path).read())
    runs = glob.glob(f"run-{job}/summary.json")
    try:
        plan = json.load(open(f"plan-{job}.json"))
    except (OSError, ValueError):
        plan = None
    return {"time_limit": limit, "time_limit_s": limit_seconds(limit),
            "job_seconds": float(m.group(1)) if m else None,
            "rc": int(m.group(2)) if m else None,
            "summary": json.load(open(runs[0])) if runs else {}, "plan": plan}
