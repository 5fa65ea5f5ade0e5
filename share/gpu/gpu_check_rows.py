#!/usr/bin/env python3
"""DLH GPU check: the rows gpu-check.sh computes from a run's files.

  parity CPU_METRICS GPU_METRICS        CPU and GPU losses over the same steps
  hierarchical ONE_RANK TWO_RANKS       2 nodes x 1 GPU against one rank
  energy SUMMARY                        NVML's joules in summary.json
  rates METRICS BATCH                   "DLH_RATE/COMPUTE_ONLY_RATE" medians after warm-up
  throughput-row NAME BATCH DLH TORCH   the table row of the PyTorch comparison
  cluster SRC DST SLUG                  the example cluster with its GPU type calibrated
"""
import json
import statistics
import sys


def losses(path):
    return [json.loads(line)["loss"] for line in open(path) if '"loss"' in line]


def parity(cpu_path, gpu_path):
    c, g = losses(cpu_path), losses(gpu_path)
    first = abs(c[0] - g[0]) / abs(c[0])
    mean = sum(abs(a - b) / abs(a) for a, b in zip(c, g)) / len(c)
    ok = first < 1e-4 and mean < 0.02
    return (f"{'passed' if ok else '**FAILED**'}: step 1 loss {c[0]:.6f} vs {g[0]:.6f} "
            f"({first:.1e}), mean relative loss difference over {len(c)} steps {mean:.2%} "
            "(limit 2%)")


def hierarchical(one_path, two_path):
    one, two = losses(one_path), losses(two_path)
    mean = sum(abs(a - b) / abs(a) for a, b in zip(one, two)) / len(one)
    return (f"{'passed' if mean < 0.05 else '**FAILED**'}: ranks identical; mean relative loss "
            f"difference to 1 rank {mean:.2%} over {len(one)} steps (limit 5%: batchnorm "
            "statistics are per rank)")


def energy(summary_path):
    e = json.load(open(summary_path)).get("energy", {})
    if e.get("measured") and e.get("joules_total", 0) > 0:
        per_sample = e.get("joules_per_sample", 0) * 1e3
        return (f"passed: {e['joules_total']:.1f} J from {e.get('source')}, "
                f"{per_sample:.3f} mJ per sample")
    return f"**FAILED**: not measured ({e.get('why', 'no energy in summary.json')})"


def rates(metrics_path, batch):
    steps = [json.loads(line) for line in open(metrics_path) if "samples_per_s" in line][20:]
    total = statistics.median(s["samples_per_s"] for s in steps)
    # Compute-only: forward, backward and the gradient allreduce, without data loading.
    compute = statistics.median(
        int(batch) / (s["time"]["compute"] + s["time"]["allreduce"]) for s in steps)
    return f"{total:.0f}/{compute:.0f}"


def throughput_row(name, batch, dlh, torch):
    pairs = [x.split("/") for x in dlh.split()]
    total = [float(p[0]) for p in pairs]
    compute = [float(p[1]) for p in pairs]
    peer = [float(x) for x in torch.split()]
    dm, cm, tm = statistics.median(total), statistics.median(compute), statistics.median(peer)
    return (f"| {name} | {batch} | {dm:.0f} ({', '.join(f'{x:.0f}' for x in total)}) | {cm:.0f} "
            f"| {tm:.0f} ({', '.join(f'{x:.0f}' for x in peer)}) | **{dm / tm:.2f}** |")


def cluster(src, dst, slug):
    c = json.load(open(src))
    for t in c["gpu_types"]:
        if t["name"] in slug.replace("-", ""):  # "h100" in "h10080gbhbm3"
            t["calibration"] = f"../calibration/{slug}.json"
    with open(dst, "w") as f:
        json.dump(c, f, indent=2)
        f.write("\n")
    return ""


def main():
    commands = {"parity": parity, "hierarchical": hierarchical, "energy": energy, "rates": rates,
                "throughput-row": throughput_row, "cluster": cluster}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        raise SystemExit(__doc__)
    out = commands[sys.argv[1]](*sys.argv[2:])
    if out:
        print(out)


if __name__ == "__main__":
    main()
