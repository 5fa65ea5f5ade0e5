#!/bin/bash
# make bench, "Data larger than memory": the loader reading each step's samples from the file
# (dlh-launch bench-loader --data-mode stream, launcher/data/file_source.hpp) with the page
# cache cold and the process confined to a memory cgroup smaller than the data set, against
# the in-memory loader on the same file (unconfined: it holds the set as floats) and dd of the
# same file (sequential, cold, confined alike).
#   loader.sh BINDIR WORK   (about 3 minutes; root, for the cgroup)
# Writes WORK/loader/loader.json, WORK/loader/loader.md (the section) and WORK/loader/goals.jsonl,
# or WORK/loader/unavailable. Knobs: BENCH_LOADER_SAMPLES (2000000 samples of 1x28x28 uint8:
# 1.6 GB), BENCH_LOADER_LIMIT_MB (512), BENCH_LOADER_STEP_MS (the step the loader feeds:
# bench.sh measures the bench CNN's DLH step at batch 64 in the same run and passes it, with
# BENCH_LOADER_STEP_SOURCE saying how; 15 when run alone), BENCH_LOADER_ROUNDS (3).
set -euo pipefail
bindir=$1 work=$2
out=$work/loader
mkdir -p "$out"
export PATH="$bindir:$PATH" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
py=/usr/bin/python3
samples=${BENCH_LOADER_SAMPLES:-2000000} limit_mb=${BENCH_LOADER_LIMIT_MB:-512}
step_ms=${BENCH_LOADER_STEP_MS:-15} rounds=${BENCH_LOADER_ROUNDS:-3}
step_source=${BENCH_LOADER_STEP_SOURCE:-a fixed 15 ms (BENCH_LOADER_STEP_MS unset), not measured}
unavailable() { echo "$*" >"$out/unavailable"; echo "loader.sh: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || unavailable "needs root (a memory cgroup)"
cg=/sys/fs/cgroup/memory/dlh-bench-loader
mkdir -p "$cg" 2>/dev/null && echo $((limit_mb << 20)) >"$cg/memory.limit_in_bytes" ||
  unavailable "no cgroup v1 memory controller at /sys/fs/cgroup/memory"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
confined() { (echo $BASHPID >"$cg/cgroup.procs" && exec "$@"); }
# The file's pages out of the page cache (not every cache: on this VM, memory freed in bulk
# is handed back to the host, and the next gigabytes a process touches fault slowly for a
# while, which would be measured as the reader's time).
cold() {
  sync
  "$py" -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$out/big.h5"
}

"$py" - "$out" "$samples" <<'PY'
import sys, numpy as np
out, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(1)
np.save(f"{out}/x.npy", rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8))
np.save(f"{out}/y.npy", rng.integers(0, 10, size=n))
PY
dlh-data import-numpy --train-images "$out/x.npy" --train-labels "$out/y.npy" --out "$out/big.h5" >/dev/null
rm -f "$out/x.npy" "$out/y.npy"
bytes=$(stat -c %s "$out/big.h5")

: >"$out/runs.jsonl"
for round in $(seq "$rounds"); do
  cold
  confined dlh-launch bench-loader --data "$out/big.h5" --steps 1000 --seed "$round" \
    --json "$out/r.json" >/dev/null
  "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); r["kind"]="stream"; r["round"]=int(sys.argv[2]); print(json.dumps(r))' "$out/r.json" "$round" >>"$out/runs.jsonl"
  cold
  confined dlh-launch bench-loader --data "$out/big.h5" --steps 400 --step-ms "$step_ms" \
    --seed "$round" --json "$out/r.json" >/dev/null
  "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); r["kind"]="stream_step"; r["round"]=int(sys.argv[2]); print(json.dumps(r))' "$out/r.json" "$round" >>"$out/runs.jsonl"
  dlh-launch bench-loader --data "$out/big.h5" --data-mode memory --steps 400 --step-ms "$step_ms" \
    --seed "$round" --json "$out/r.json" >/dev/null
  "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); r["kind"]="memory_step"; r["round"]=int(sys.argv[2]); print(json.dumps(r))' "$out/r.json" "$round" >>"$out/runs.jsonl"
  cold
  s=$(confined dd if="$out/big.h5" of=/dev/null bs=1M 2>&1 | sed -n 's/^\([0-9]*\) bytes .* copied, \([0-9.]*\) s.*/\2/p')
  echo "{\"kind\": \"dd\", \"round\": $round, \"seconds\": $s, \"bytes\": $bytes}" >>"$out/runs.jsonl"
done
rm -f "$out/big.h5"

"$py" - "$out" "$samples" "$limit_mb" "$step_ms" "$bytes" "$step_source" <<'PY'
import json, statistics, sys
out, samples, limit_mb, step_ms, nbytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
step_source = sys.argv[6]
runs = [json.loads(l) for l in open(f"{out}/runs.jsonl")]
by = lambda k: [r for r in runs if r["kind"] == k]
def mmm(vals, fmt):
    return " / ".join(fmt.format(v) for v in (min(vals), statistics.median(vals), max(vals)))
stream = [r["samples_per_s"] for r in by("stream")]
memory_open = [r["open_s"] for r in by("memory_step")]
dd_mbs = [r["bytes"] / r["seconds"] / 1e6 for r in by("dd")]
dd_samples = [r["bytes"] / r["seconds"] / 784 for r in by("dd")]
wait_s = [r["wait_ms_per_step"] for r in by("stream_step")]
wait_m = [r["wait_ms_per_step"] for r in by("memory_step")]
steady_s = [r["steady_wait_ms_per_step"] for r in by("stream_step")]
steady_m = [r["steady_wait_ms_per_step"] for r in by("memory_step")]
rate_s = [r["samples_per_s"] for r in by("stream_step")]
rate_m = [r["samples_per_s"] for r in by("memory_step")]
json.dump({"runs": runs, "samples": samples, "limit_mb": limit_mb, "step_ms": step_ms, "bytes": nbytes},
          open(f"{out}/loader.json", "w"), indent=1)
L = ["## Data larger than memory: the loader reading from the file", "",
     f"A synthetic set of {samples:,} uint8 samples of 1x28x28 ({nbytes / 1e9:.2f} GB, written by "
     "`dlh-data import-numpy`), read by `dlh-launch bench-loader` (the training loader alone: "
     "batches of 64 in the training order, prefetch as `train` does: 8 batches streaming, 2 in memory). Stream mode and dd run in a memory cgroup "
     f"of {limit_mb} MB (smaller than the file, so the page cache cannot hold it) with the page "
     "cache emptied of the file before each (`posix_fadvise` DONTNEED); the in-memory loader cannot run there (it holds the set as "
     f"floats, {4 * samples * 784 / 1e9:.1f} GB) and runs unconfined. "
     f"{len(by('stream'))} rounds, interleaved; min / median / max.", "",
     "| reader | samples/s | MB/s of samples | notes |", "|---|---|---|---|",
     f"| stream, as fast as it can (cold cache, confined) | {mmm(stream, '{:,.0f}')} | "
     f"{mmm([v * 784 / 1e6 for v in stream], '{:.1f}')} | random 784-byte samples, one `posix_fadvise(WILLNEED)` per sample of a batch, then sorted `pread`s |",
     f"| dd of the same file (bs=1M, cold, confined) | {mmm(dd_samples, '{:,.0f}')} | {mmm(dd_mbs, '{:,.0f}')} | sequential: the disk's best case, no training order |",
     f"| memory, after loading the whole set | {mmm([r['samples_per_s'] for r in by('memory_step')], '{:,.0f}')} (paced) | | loading took {mmm(memory_open, '{:.1f}')} s and {4 * samples * 784 / 1e9:.1f} GB per rank |",
     "", f"With a {step_ms:.1f} ms step after each batch (the bench CNN's DLH step at batch 64: "
     f"{step_source}; bench-loader sleeps it, so the loader has the cores to itself), the "
     "time the step still waited in `next()`: over every step but the first (whose batch nothing "
     "could have prefetched), and in the steady state after 20 steps (the first reads of a cold "
     "file warm the disk queue up; a run of thousands of steps sees the steady state):", "",
     "| loader | wait per step, ms | steady state, ms | samples/s delivered |", "|---|---|---|---|",
     f"| stream (cold, confined) | {mmm(wait_s, '{:.3f}')} | {mmm(steady_s, '{:.3f}')} | {mmm(rate_s, '{:,.0f}')} |",
     f"| memory | {mmm(wait_m, '{:.3f}')} | {mmm(steady_m, '{:.3f}')} | {mmm(rate_m, '{:,.0f}')} |", ""]
open(f"{out}/loader.md", "w").write("\n".join(L))
with open(f"{out}/goals.jsonl", "w") as g:
    g.write(json.dumps({
        "goal": f"Data larger than memory: at the measured step of the model it feeds (the bench CNN, {step_ms:.1f} ms steps of 64: {step_source}) the step does not wait on the file (stream's steady-state wait ≤ the in-memory loader's + 1% of that step; median of rounds)",
        "measured": f"steady state: stream waits {mmm(steady_s, '{:.3f}')} ms per step, memory {mmm(steady_m, '{:.3f}')} ms (every step but the first: {statistics.median(wait_s):.3f} and {statistics.median(wait_m):.3f}); stream alone delivers {statistics.median(stream):,.0f} samples/s (median), {statistics.median(stream) * step_ms / 64 / 1000:.1f}x the step's need, from a {nbytes / 1e9:.2f} GB file in a {limit_mb} MB cgroup",
        "met": statistics.median(steady_s) <= statistics.median(steady_m) + 0.01 * step_ms,
        "limit": "reads from the file that now and then take longer than the prefetched batches last"}) + "\n")
print("\n".join(L))
PY
