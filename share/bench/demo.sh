#!/bin/bash
# make bench, "make demo as on a fresh machine" (issue 40): README's first command as a new
# user meets it, share/examples/demo.sh, in an empty folder: no observation store, no
# calibration of this host, so the plan comes from the shipped calibration check-calibration
# chooses for this host (a match, or carried here by the probes). Then the demo once more in
# the same folder, whose plan now comes from the first job's observation record.
#   demo.sh BINDIR WORK   (5-10 minutes on 2 cores; root, Slurm, munge)
# Writes WORK/demo/result.json (each demo's sbatch line, prediction, band, Slurm run time and
# launcher time) or WORK/demo/unavailable with the reason.
set -euo pipefail
bindir=$(cd "$1" && pwd) work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$work/demo
rm -rf "$out"
mkdir -p "$out"
unavailable() { echo "$*" >"$out/unavailable"; echo "unavailable: $*" >&2; exit 0; }
for b in munged slurmctld slurmd sbatch scontrol; do
  PATH="$PATH:/usr/sbin" command -v "$b" >/dev/null || unavailable "'$b' is not installed"
done
[[ $(id -u) -eq 0 ]] || unavailable "the local Slurm cluster needs root"
[[ -f $bindir/../lib/spank_dlh.so ]] || unavailable "no spank_dlh.so in this build"
# bench.sh's MPI settings are its own; the demo runs with what a user's shell has.
unset OMPI_MCA_rmaps_base_oversubscribe
for n in 1 2; do
  DLH_DEMO_WORK=$out/folder bash "$root/share/examples/demo.sh" "$bindir/.." >"$out/demo-$n.txt" 2>&1 ||
    unavailable "demo $n failed: $(grep -v '^epoch' "$out/demo-$n.txt" | tail -1)"
  cp "$out/folder/demo-result.json" "$out/result-$n.json"
done
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
runs = [json.load(open(os.path.join(out, f"result-{n}.json"))) for n in (1, 2)]
json.dump({"runs": runs}, open(os.path.join(out, "result.json"), "w"), indent=1)
PY
rm -rf "$out/folder"  # the data set and checkpoints: nothing the report reads
