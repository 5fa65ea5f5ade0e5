// DLH estimator — this machine's two peaks, measured: OpenBLAS sgemm FLOP/s and memory-copy
// bandwidth at a given thread count. They are what a cluster description's peak_tflops and
// memory_bandwidth_gbs stand for, so their ratios between two settings (1 and 2 threads)
// test wave scaling (wave_scaling.hpp) on a machine without two kinds of GPU:
// `dlh-estimate rates` and `make bench`.
#pragma once

#include <string>
#include <vector>

namespace dlh {

struct MachineRates {
  int threads = 0;
  double sgemm_gflops = 0;  // 2 n^3 / s for n x n float matrices, median of the blocks
  double copy_gbs = 0;      // bytes read + written / s (1e9) of a streaming copy, median
};

// sgemm of 1024 x 1024 matrices on `threads` OpenBLAS threads; a 64 MiB float array scaled
// into another, split over `threads` std::threads (far larger than the caches). Each figure is
// the median of `blocks` blocks of about 0.2 s. Leaves OpenBLAS set to `threads`.
// Throws UsageError when threads or blocks < 1.
MachineRates MeasureRates(int threads, int blocks);

// `dlh-estimate rates [--threads N] [--blocks K] [--json]`.
int RatesCommand(const std::vector<std::string>& args);

}  // namespace dlh
