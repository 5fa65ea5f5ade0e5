#!/bin/bash
# transfer.sh BINDIR WORK: the shipped CPU calibrations (share/calibration: one per OpenBLAS
# kernel family) used on a host they were not made on, as a new user would (issue 40). Two hosts: this one as it is, and
# this one made slower by a CFS CPU quota (BENCH_TRANSFER_QUOTA of its cores, 0.75 by
# default: hosts of this kind differ by 25% and more). On each:
#   1. `dlh-estimate check-calibration share/calibration --transfer-out T` (run on that host:
#      it probes it) chooses the shipped calibration that fits it best and says whether it
#      matches, transfers (and writes T) or is refused;
#   2. `dlh-estimate validate --set judged --save M` times the judged validation models there;
#   3. `dlh-estimate calibrate` calibrates that host;
#   4. offline (`validate --measured M`): the carried calibration as it is, the transferred
#      one and the host's own, each against the same measurements M.
# Where this host refuses every shipped calibration (another OpenBLAS core type: kernels whose
# speeds no ratio relates, so no transfer is trustworthy), the slower host is given instead the
# calibration step 3 made on this host as it is: a calibration made on a host of the same kind
# at another speed, which is what the transfer is for. results.jsonl says which was carried.
# The quota's period is 1 ms, so the throttling spreads evenly over steps of 1-50 ms instead
# of stalling some of them whole. Writes WORK/results.json for share/bench/report.py; prints
# "unavailable: ..." and exits 0 when the quota cannot be set. About 6 minutes on 2 cores.
# Each model is timed in 5 rounds of 9 blocks, each calibration from 9: with 3 rounds of 3
# (and calibrations of 3), two runs minutes apart on one host scored the same transfer at
# 23.4% and 14.8% MAPE (2026-11-30).
set -euo pipefail
bindir=$(cd "$1" && pwd) work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$bindir:$PATH" LC_ALL=C
shipped=$root/share/calibration
quota=${BENCH_TRANSFER_QUOTA:-0.75}
unavailable() { echo "unavailable: $*"; exit 0; }
mkdir -p "$work"
cd "$work"
cores=$(nproc)
group=/sys/fs/cgroup/cpu/dlh-bench-transfer-$$
[[ -w /sys/fs/cgroup/cpu ]] || unavailable "no writable cgroup v1 cpu controller (/sys/fs/cgroup/cpu)"
mkdir "$group" || unavailable "cannot make $group"
trap 'rmdir "$group" 2>/dev/null || true' EXIT
echo 1000 >"$group/cpu.cfs_period_us"
awk -v q="$quota" -v c="$cores" 'BEGIN { printf "%d\n", q * c * 1000 }' >"$group/cpu.cfs_quota_us"
# as HOST CMD...: CMD on that host (slow: inside the quota's group).
as() {
  if [[ $1 == slow ]]; then
    bash -c 'echo $$ >"$0/cgroup.procs" && exec "${@}"' "$group" "${@:2}"
  else
    "${@:2}"
  fi
}
: >results.jsonl
checked=$shipped carried_name=shipped
for host in as-is slow; do
  echo "== $host: probe and check-calibration" >&2
  as $host dlh-estimate probe >"$host-probe.json" 2>"$host-probe.err" ||
    unavailable "dlh-estimate probe failed: $(tail -1 "$host-probe.err")"
  rc=0
  as $host dlh-estimate check-calibration "$checked" --transfer-out "$host-transferred.json" \
    >"$host-check.txt" 2>&1 || rc=$?
  # The calibration it chose (its line's first word), the one carried to this host.
  carried=$(sed -n '1s/: .*//p' "$host-check.txt")
  [[ -f $carried ]] || unavailable "check-calibration named no calibration: $(head -1 "$host-check.txt")"
  [[ $checked == "$shipped" ]] && carried_name="shipped ($(basename "$carried"))"
  echo "== $host: timing the judged models" >&2
  as $host dlh-estimate validate --calibration "$carried" --set judged --rounds 5 --repeats 9 \
    --save "$host-measured.json" >"$host-carried.txt" 2>"$host-validate.err"
  echo "== $host: calibrating" >&2
  as $host dlh-estimate calibrate --out "$host-own.json" >"$host-calibrate.txt" 2>&1
  mape() {  # CALIBRATION: its MAPE over this host's measured judged models
    dlh-estimate validate --calibration "$1" --measured "$host-measured.json" --set judged |
      sed -n 's/^MAPE over [0-9]* models: \([0-9.]*\)%.*/\1/p'
  }
  transferred=null
  [[ -s $host-transferred.json ]] && transferred=$(mape "$host-transferred.json")
  python3 - "$host" "$rc" "$(mape "$carried")" "$transferred" "$(mape "$host-own.json")" \
    "$host-check.txt" "$host-probe.json" "$quota" "$carried_name" "$root" >>results.jsonl <<'PY'
import json, sys
host, rc, as_is, transferred, own, check, probe, quota, carried, root = sys.argv[1:]
print(json.dumps({"host": host, "quota": float(quota) if host == "slow" else None,
                  "carried": carried,
                  "check_exit": int(rc),
                  # the checkout's own paths as the repository names them
                  "check": open(check).read().strip().replace(root + "/", ""),
                  "probe": json.load(open(probe)),
                  # the carried calibration as it is (the field's name from when it was always
                  # the shipped one; report.py reads stored results of both)
                  "mape_shipped": float(as_is),
                  "mape_transferred": None if transferred == "null" else float(transferred),
                  "mape_own": float(own)}))
PY
  if [[ $host == as-is && $rc -eq 1 ]]; then
    checked=$PWD/as-is-own.json carried_name="this host's own (the shipped ones refused here)"
  fi
done
echo ok
