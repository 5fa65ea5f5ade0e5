#!/usr/bin/python3
"""DLH make bench: the machine's OpenBLAS sgemm rate, the yardstick for model FLOP/s.

Times float32 (M x K) @ (K x N) products through numpy, which calls the system BLAS (Debian's
libblas.so.3 alternative). Prints one JSON line: {"gflops", "shape", "n", "threads", "blas",
"runs"} with the median of several blocks of about 0.2 s; set OPENBLAS_NUM_THREADS for the
thread count. Exits 1
when the BLAS numpy loaded is not OpenBLAS (the figure would not be the yardstick then)."""
import argparse
import json
import os
import statistics
import time

import numpy as np


def loaded_blas():
    with open("/proc/self/maps") as maps:
        libs = {line.split()[-1] for line in maps if "blas" in line.lower() and "/" in line}
    return sorted(libs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="2048x2048x2048", help="MxKxN")
    p.add_argument("--blocks", type=int, default=7)
    a = p.parse_args()
    m, k, n = (int(v) for v in a.shape.split("x"))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((m, k), dtype=np.float32)
    y = rng.standard_normal((k, n), dtype=np.float32)
    out = np.empty((m, n), dtype=np.float32)
    np.matmul(x, y, out=out)  # warm-up: thread pool start, page faults
    t = time.perf_counter()
    np.matmul(x, y, out=out)
    calls = max(3, int(0.2 / (time.perf_counter() - t)))
    runs = []
    for _ in range(a.blocks):
        t = time.perf_counter()
        for _ in range(calls):
            np.matmul(x, y, out=out)
        runs.append(2.0 * m * k * n * calls / (time.perf_counter() - t) / 1e9)
    blas = loaded_blas()
    if not any("openblas" in lib for lib in blas):
        raise SystemExit(f"sgemm.py: numpy's BLAS is not OpenBLAS: {blas}")
    print(json.dumps({"gflops": statistics.median(runs), "shape": a.shape, "n": m,
                      "threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
                      "blas": blas, "runs": [round(r, 1) for r in runs]}))


if __name__ == "__main__":
    main()
