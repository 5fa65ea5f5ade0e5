// DLH — a short probe of the device a step runs on: what a calibration records about the
// machine it describes, and what check-calibration measures on the host to compare (issue
// 40: a calibration said "matches" on a host 15-43% slower, because it compared a host string
// and never measured the host).
//
// CPU probe, one JSON object (other parts read these keys; the schema is fixed):
//   {"kind": "cpu", "taken": "2026-11-28T10:00:00Z", "host": "AMD EPYC 7B13, 2 cores",
//    "blas_core": "Haswell",          openblas_get_corename(): the kernels OpenBLAS chose
//    "threads": 2,                    the engine threads measured at (N)
//    "sgemm_gflops": 190.5,           at N threads: the GEMM shapes the CPU engine issues
//    "sgemm_gflops_by_threads": [98.1, 190.5],   at 1, 2, ... N threads
//    "memory_gbs": 14.2,              triad bandwidth at N threads, arrays beyond the LLC
//    "memory_gbs_by_threads": [11.0, 14.2],
//    "cache_gbs": 180.3,              triad bandwidth at N threads, arrays a quarter of the
//    "cache_gbs_by_threads": [95.0, 180.3],   LLC (optional: probes before 2026-11-30)
//    "seconds": 3.1}                  how long the probe took
// GPU probe ("cuda" or "cuda:N", through the CUDA backend, launcher/engine/cuda/probe.cpp):
//   {"kind": "cuda", "taken", "name", "sm_count", "sm_clock_mhz", "memory_clock_mhz",
//    "gemm_tflops", "conv_tflops", "memory_gbs", "seconds"}
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dlh {

struct ProbeOptions {
  int threads = 0;      // 0: the cores of the affinity mask
  double budget_s = 3;  // about how long the whole probe takes
};

// Measures this host's CPU as the CPU engine uses it: every thread runs single-threaded
// OpenBLAS on its own operands (launcher/nn/thread_pool.hpp). Throws UsageError for bad
// options, Error when the probe cannot run.
nlohmann::json ProbeCpu(const ProbeOptions& options);

// "cpu" or "cuda[:N]". The GPU probe throws Error with one line ("no usable GPU: ...") on a
// machine without one.
nlohmann::json ProbeDevice(const std::string& device, const ProbeOptions& options);

// The faster reading of two probes of one host (or device), rate by rate: sgemm and memory
// at every thread count, a GPU's GEMM, convolution and memory rates. A probe can only read a
// host slower than it is (another process, a neighbour of the VM, a frequency dip), never
// faster: on the 2-core test VM one probe of three in a row read sgemm 31% low on an idle
// machine, which alone made a calibration of that very host "transfer" by x0.69. The other
// fields are `a`'s.
nlohmann::json FasterOfProbes(nlohmann::json a, const nlohmann::json& b);

// "Intel(R) Xeon(R) Processor, 2 cores": /proc/cpuinfo's model and the cores of this
// process's affinity mask (the "host" of calibrations and probes).
std::string HostCpuDescription();

// Cores in this process's affinity mask (at least 1).
int AffinityCores();

}  // namespace dlh
