#!/usr/bin/env python3
"""fixture_calibration.py DLH_ESTIMATE OUT: writes the tests' fixed CPU calibration
(tests/fixtures/cpu-calibration.json: the one shipped until 2026-11-28, made on a 2-core AMD
EPYC host) to OUT, stamped with the engine fingerprint of DLH_ESTIMATE's build so that it
reads as current. Tests that expect planned figures (limits, deadlines met or missed) plan
with it rather than with share/calibration/cpu.json, which is remade on whichever host
calibrates last and moves every figure with it."""
import json
import os
import re
import subprocess
import sys

estimate, out = sys.argv[1:]
version = subprocess.run([estimate, "--version"], check=True, capture_output=True,
                         text=True).stdout
fingerprint = re.search(r"engine fingerprints: cpu ([0-9a-f]+)", version).group(1)
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
c = json.load(open(os.path.join(root, "tests", "fixtures", "cpu-calibration.json")))
c["engine"]["fingerprint"] = fingerprint
with open(out + ".tmp", "w") as f:
    json.dump(c, f, indent=2)
os.replace(out + ".tmp", out)
