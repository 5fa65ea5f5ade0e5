#!/bin/bash
# End-to-end checks of `dlh-launch bench-checkpoint` (make bench's checkpoint figures): it
# writes real checkpoints, prints a table and JSON, and refuses bad options with one line.
# shellcheck source=tests/scripts/common.bash
source "$(dirname "$0")/common.bash"

echo "bench-checkpoint"
dlh-launch bench-checkpoint --dir "$WORK/ck" --mb 1 2 --repeats 2 --json "$WORK/ck.json" >"$WORK/out.txt"
grep -q "whole CheckpointDir::save call" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "no table"; }
python3 - "$WORK/ck.json" <<'PY' || fail "JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert [s["param_bytes"] for s in r["sizes"]] == [1 << 20, 2 << 20], r
for s in r["sizes"]:
    assert len(s["seconds"]) == 2 and s["median_s"] > 0, s
    assert 2 * s["param_bytes"] <= s["file_bytes"] < 2 * s["param_bytes"] + (1 << 20), s
PY
# Four saves with the default --keep 1: only the newest stays, and it is not a temp file.
[[ $(ls "$WORK/ck") == ckpt-000000004.h5 ]] || fail "folder holds: $(ls "$WORK/ck")"
check "2 sizes x 2 saves, JSON complete, one checkpoint kept"

expect_fail 2 "bench-checkpoint: --dir is required" dlh-launch bench-checkpoint --mb 1
expect_fail 2 "--mb: must be 1 to" dlh-launch bench-checkpoint --dir "$WORK/x" --mb 0
expect_fail 2 "--repeats: must be at least 1" dlh-launch bench-checkpoint --dir "$WORK/x" --repeats 0
expect_fail 2 "unrecognised option\|unrecognized option" dlh-launch bench-checkpoint --dir "$WORK/x" --colour

echo "bench-checkpoint --raw"
dlh-launch bench-checkpoint --dir "$WORK/raw" --mb 1 --repeats 1 --raw --json "$WORK/raw.json" >/dev/null
[[ $(json_field "$WORK/raw.json" method) == raw ]] || fail "method is not raw"
[[ $(stat -c %s "$WORK/raw/raw-write.bin") -eq $((2 << 20)) ]] || fail "raw file is not 2 MiB"
check "plain write + fsync of the same 2 MiB"
