#!/bin/bash
# share/bench/report.py's reading of a peer that switches between speeds from one process to
# the next (the throughput tables' notes): the rounds that the goals' best-against-best
# verdicts lean on must be named when they stand apart, and noise must not be.
source "$(dirname "$0")/common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

python3 - "$ROOT/share/bench" <<'PY' || fail "report.py modes: see above"
import sys
sys.path.insert(0, sys.argv[1])
from report import modes, mode_note

# Measured on this machine (2026-11-27, PyTorch on the bench CNN): three speeds, the fastest
# three rounds 27% above the middle six.
cnn = [3564.0, 3417.8, 4530.0, 5068.6, 3142.7, 2000.8, 3400.1, 3489.9, 3381.5, 4864.7]
assert [len(g) for g in modes(cnn)] == [1, 6, 3], modes(cnn)
assert mode_note("PyTorch", cnn) == ("PyTorch switches between 3 speeds: 1 round near 2001, "
                                     "6 rounds near 3409 and 3 rounds near 4865 samples/s."), \
    mode_note("PyTorch", cnn)
# Two speeds; one value alone counts only when it stands more than 50% apart.
assert [len(g) for g in modes([1000, 1010, 1600, 1620])] == [2, 2]
assert modes([1000, 1000, 1000, 2000]) == [[1000, 1000, 1000], [2000]]
assert modes([1000, 1010, 1020, 1300]) is None  # 27% with one round alone: noise
# A 27% step with one value on one side is dropped, the 40% step beside it kept.
assert [len(g) for g in modes([1000, 1010, 1414, 1800, 1810])] == [2, 3], \
    modes([1000, 1010, 1414, 1800, 1810])
# Noise within 25%, and too few rounds to tell.
assert modes([1454.6, 1454.4, 1468.3, 1598.7, 1600.2, 1455.3]) is None
assert modes([1000, 2000, 3000]) is None
print("  ok: three speeds, two speeds, a lone outlier, noise")
PY
check "report.py names the speeds a peer switches between"
