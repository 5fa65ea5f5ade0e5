"""DLH make bench: the committed results files, and BENCHMARKS.md rendered from them.

share/bench/results/RUN/ holds one run of share/bench/bench.sh (or of some of its parts):
  run.json          run id, UTC date, host facts (CPU, cores, memory, kernel, sgemm GFLOP/s,
                    git commit), how it was made ("transcribed" for figures copied from an
                    earlier BENCHMARKS.md whose raw data was not kept), notes
  PART/*.md         the part's sections, as report.py wrote them (none: goal records only)
  PART/goals.jsonl  one record per goal: {"id", "goal", "measured", "met", "limit"}

Each section of BENCHMARKS.md comes from the newest run that has it, and says which run that
was; a part run again alone replaces only its own sections. The goals table puts every host's
newest record of a goal beside the goal's statement (share/bench/goals.py): a goal is met only
when at least two hosts measured it and all of them met it."""
import json
import os
import shutil

from goals import BY_ID, GOALS, RETIRED, goal_id

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(HERE, "results")


def store(run_json, part, goals_path, sections, results=RESULTS):
    """Writes RESULTS/RUN/PART/ from one part of a bench.sh run: its section files and goal
    records; an earlier store of the same part in the same run is replaced."""
    run = json.load(open(run_json))
    folder = os.path.join(results, run["run"])
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "run.json"), "w") as f:
        json.dump(run, f, indent=1, sort_keys=True)
        f.write("\n")
    dest = os.path.join(folder, part)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    for s in sections:
        shutil.copy(s, os.path.join(dest, os.path.basename(s)))
    records = []
    if goals_path and os.path.exists(goals_path):
        records = [json.loads(l) for l in open(goals_path) if l.strip()]
    with open(os.path.join(dest, "goals.jsonl"), "w") as f:
        for r in records:
            r.setdefault("id", goal_id(r["goal"]))
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")


def host_key():
    """This host's key in the results: BENCH_HOST, else host name, machine id and a short hash
    of the kernel release and the CPU's model and flags. The VMs this project runs on share one
    host name and machine id across machines of other CPUs and kernels (2026-12-01: an AMD EPYC
    without AVX-512 at half the sgemm of the one before, both "vm-3d1219c7"): one key per kind
    of machine. bench.sh asks this function, so both name a host alike."""
    import hashlib
    import platform
    if os.environ.get("BENCH_HOST"):
        return os.environ["BENCH_HOST"]
    machine_id = open("/etc/machine-id").read()[:8] if os.path.exists("/etc/machine-id") else "unknown"
    cpu = [l for l in open("/proc/cpuinfo") if l.startswith(("model name", "flags"))]
    model = next((l for l in cpu if l.startswith("model name")), "")
    flags = next((l for l in cpu if l.startswith("flags")), "")
    kind = hashlib.sha256(f"{platform.release()}\n{model}{flags}".encode()).hexdigest()[:6]
    return f"{platform.node().split('.')[0]}-{machine_id}-{kind}"


def new_run(out, how):
    """Writes OUT, a run record of this host now (the fields bench.sh's run.json has), for a
    script that measures and stores outside bench.sh (resnet_cpu.sh --store)."""
    import platform
    import subprocess
    import time

    def sh(*cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""
    key = host_key()
    now = time.gmtime()
    commit = sh("git", "-C", ROOT, "rev-parse", "--short=12", "HEAD") or "not a git checkout"
    if sh("git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", ".",
          ":!share/bench/results", ":!BENCHMARKS.md"):
        commit += " (with uncommitted changes)"
    sgemm = None
    try:
        sgemm = round(json.loads(sh("dlh-estimate", "rates", "--threads", "2", "--blocks", "3",
                                    "--json"))["sgemm_gflops"], 1)
    except (ValueError, KeyError):
        pass
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "")
    mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
    with open(out, "w") as f:
        json.dump({"run": time.strftime("%Y-%m-%dT%H%MZ", now) + "-" + key,
                   "date": time.strftime("%Y-%m-%d %H:%M UTC", now), "transcribed": False,
                   "how": how,
                   "host": {"key": key, "cpu": cpu, "cores": os.cpu_count(),
                            "memory_gib": round(mem / 2**20),
                            "kernel": f"{platform.system()} {platform.release()}",
                            "sgemm_gflops": sgemm, "commit": commit,
                            "load_average": open("/proc/loadavg").read().split()[0]}},
                  f, indent=1, sort_keys=True)


def load_runs(results=RESULTS):
    runs = []
    for name in sorted(os.listdir(results)):
        path = os.path.join(results, name, "run.json")
        if not os.path.exists(path):
            continue
        run = json.load(open(path))
        run["folder"] = os.path.join(results, name)
        run["parts"] = {}
        for part in sorted(os.listdir(run["folder"])):
            pdir = os.path.join(run["folder"], part)
            if not os.path.isdir(pdir):
                continue
            mds = sorted(f for f in os.listdir(pdir) if f.endswith(".md"))
            gpath = os.path.join(pdir, "goals.jsonl")
            goals = ([json.loads(l) for l in open(gpath) if l.strip()]
                     if os.path.exists(gpath) else [])
            run["parts"][part] = {"sections": [os.path.join(pdir, m) for m in mds],
                                  "goals": goals}
        runs.append(run)
    # Oldest first; the newest run that has a part gives its sections.
    runs.sort(key=lambda r: (r["date"], r["run"]))
    return runs


def host_line(h):
    """A host's facts in one line; facts a transcribed run did not record say so."""
    def fact(key, fmt):
        return fmt.format(h[key]) if h.get(key) not in (None, "") else None
    facts = [fact("cpu", "{}"), fact("cores", "{} cores"), fact("memory_gib", "{} GiB"),
             fact("kernel", "{}"), fact("sgemm_gflops", "sgemm {} GFLOP/s (2 threads)"),
             fact("load_average", "load average {} at the start")]
    text = ", ".join(f for f in facts if f)
    missing = [k for k in ("memory_gib", "kernel", "sgemm_gflops") if h.get(k) in (None, "")]
    names = {"memory_gib": "memory", "kernel": "kernel", "sgemm_gflops": "sgemm"}
    if missing:
        text += "; not recorded: " + ", ".join(names[k] for k in missing)
    return text


def run_label(run):
    return f"`{run['run']}`"


def provenance(run, part):
    how = ("transcribed from BENCHMARKS.md, not measured again" if run.get("transcribed")
           else "computed, not measured, by " + run["how"] if run.get("computed")
           else "measured by " + run.get("how", "share/bench/bench.sh"))
    note = run.get("part_notes", {}).get(part)
    text = (f"*Source: run {run_label(run)}, {run['date']}, host \"{run['host']['key']}\" "
            f"({host_line(run['host'])}); {how}.*")
    if note:
        text += f" *{note}*"
    return text


def records(runs, gid):
    """Every host's newest record of a goal: [(run, record)], oldest host first."""
    newest = {}
    for run in runs:  # oldest first, so a later run of a host replaces its earlier one
        for part in run["parts"].values():
            for r in part["goals"]:
                if r.get("id") == gid:
                    newest[run["host"]["key"]] = (run, r)
    return sorted(newest.values(), key=lambda x: (x[0]["date"], x[0]["run"]))


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def verdict(fails_if, recs):
    if fails_if is None:
        return "— (no target)"
    if not recs:
        return "not yet measured under this rule"
    met = [r.get("met") is True for _, r in recs]
    hosts = len(recs)
    if all(met):
        return (f"**met** on {hosts} hosts" if hosts >= 2
                else "met on 1 host (needs a second)")
    failed = [(run, r) for (run, r), m in zip(recs, met) if not m]
    # What holds it back as the newest failing host measured it: an older host's remark
    # describes an older engine and an older peer (2026-12-04: the goal rows still quoted
    # 2026-11-27's "floor ... 1.52x PyTorch" after PyTorch's malloc-keep runs had moved it).
    limit = next((r.get("limit") for _, r in reversed(failed) if r.get("limit")), "")
    where = ("" if len(failed) == hosts else
             f" on {len(failed)} of {hosts} hosts (hosts disagree)")
    return f"**not met**{where}" + (f": {limit}" if limit else "")


def host_cell(recs):
    parts = []
    for run, r in recs:
        tag = " (transcribed)" if run.get("transcribed") else ""
        ok = "—" if r.get("met") is None else ("met" if r.get("met") else "not met")
        parts.append(f"{run['host']['key']}, {run['date']}{tag}: {r.get('measured', '')} → {ok}")
    return "<br>".join(cell(p) for p in parts) if parts else "—"


def goals_table(runs, catalogue, out):
    out.append("| goal | fails if | each host: date, measured → verdict there | verdict |")
    out.append("|---|---|---|---|")
    for gid, _part, goal, fails_if in catalogue:
        recs = records(runs, gid)
        out.append(f"| {cell(goal)} | {cell(fails_if or '— (no target)')} | {host_cell(recs)} "
                   f"| {cell(verdict(fails_if, recs))} |")


def render(results=RESULTS, root=ROOT):
    runs = load_runs(results)
    # Sections: the newest run of each part that has any.
    newest = {}
    for run in runs:
        for part, p in run["parts"].items():
            if p["sections"]:
                newest[part] = run
        for part, folder in run.get("external_sections", {}).items():
            newest[part] = dict(run, external=os.path.join(root, folder))
    sections = []
    for part, run in newest.items():
        if "external" in run:
            files = sorted(os.path.join(run["external"], f) for f in os.listdir(run["external"])
                           if f.endswith(".md"))
            sections += [("z-" + part + os.path.basename(f), part, run, f) for f in files]
        else:
            sections += [(os.path.basename(f), part, run, f)
                         for f in run["parts"][part]["sections"]]
    sections.sort(key=lambda s: s[0])
    used = {}
    for _, part, run, _ in sections:
        used.setdefault(run["run"], (run, []))
        if part not in used[run["run"]][1]:
            used[run["run"]][1].append(part)
    hosts = {r["host"]["key"] for r, _ in used.values()}

    out = ["# DLH benchmarks", ""]
    out.append("Rendered by `python3 share/bench/report.py` from the results files in "
               "share/bench/results/, one folder per run of `make bench` "
               "(share/bench/bench.sh; `BENCH_ONLY=part,part` runs some parts alone and replaces "
               "only their sections). Each section below names the run, date and host it came "
               "from.")
    out.append("")
    if len(used) == 1:
        run = next(iter(used.values()))[0]
        out.append(f"Every section comes from one run, {run_label(run)} on {run['date']}, host "
                   f"\"{run['host']['key']}\" ({host_line(run['host'])}).")
    else:
        out.append(f"The sections come from {len(used)} runs on {len(hosts)} hosts, not from one "
                   "run:")
        out.append("")
        out.append("| run | date (UTC) | host | how | sections |")
        out.append("|---|---|---|---|---|")
        for run, parts in sorted(used.values(), key=lambda x: (x[0]["date"], x[0]["run"])):
            how = ("transcribed (raw data not kept)" if run.get("transcribed")
                   else "computed (on paper)" if run.get("computed") else "measured")
            out.append(f"| {run_label(run)} | {run['date']} | {cell(run['host']['key'])}: "
                       f"{cell(host_line(run['host']))}; commit {run['host'].get('commit') or 'not recorded'} "
                       f"| {how} | {', '.join(parts)} |")
        notes = sorted({r.get("note") for r, _ in used.values() if r.get("note")})
        if notes:
            out.append("")
            out += [f"- {n}" for n in notes]
    goal_only = [r for r in runs if r["run"] not in used]
    if goal_only:
        out.append("")
        out.append("Runs that add goal records only (no sections):")
        out.append("")
        for run in goal_only:
            out.append(f"- {run_label(run)}, {run['date']}, host \"{run['host']['key']}\" "
                       f"({host_line(run['host'])}): {run.get('note', '')}")
    out.append("")
    out.append("Machines here are noisy (about ±30% between runs), and a peer may switch between "
               "two or more speeds from one process to the next. So every comparison runs both "
               "sides in one invocation, alternating round by round, gives min / median / max of "
               "each side, compares best with best and median with median, and names the speeds "
               "of a side that switches; goals are judged on best against best unless a row says "
               "otherwise. Hosts of one kind differ in speed too: a verdict from one host is a "
               "claim about that host.")
    out.append("")
    out.append("## Goals")
    out.append("")
    out.append("Each goal states beforehand how it fails (the measured quantity and a threshold "
               "that does not depend on the result; share/bench/goals.py). A goal is **met** only "
               "where it holds on every host that measured it, and at least two did; one host "
               "alone gives \"met on 1 host (needs a second)\".")
    out.append("")
    goals_table(runs, GOALS, out)
    retired = [g for g in RETIRED if records(runs, g[0])]
    if retired:
        out.append("")
        out.append("Goals retired because they could not fail (their records kept; the rows "
                   "above replace them):")
        out.append("")
        out.append("| goal | why it could not fail | each host: date, measured → verdict there |")
        out.append("|---|---|---|")
        for gid, _part, goal, why in retired:
            out.append(f"| {cell(goal)} | {cell(why)} | {host_cell(records(runs, gid))} |")
    out.append("")
    for _, part, run, path in sections:
        text = open(path).read().rstrip("\n").split("\n")
        head, rest = text[0], text[1:]
        out.append(head)
        out.append("")
        out.append(provenance(run, part))
        out += rest
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def check_ids(runs):
    """Goal records whose id no statement knows (a typo would drop them from the table)."""
    return sorted({r.get("id") for run in runs for p in run["parts"].values()
                   for r in p["goals"] if r.get("id") not in BY_ID})
