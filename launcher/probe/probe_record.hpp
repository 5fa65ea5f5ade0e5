// DLH — a device probe read back (host_probe.hpp's JSON): from a calibration file, a job's
// record or `probe`'s output. Strict, as every input file is: a damaged probe is one line
// naming the file and the field ("cal.json: probe.sgemm_gflops: must be a positive number,
// got \"fast\""), never a silently wrong comparison.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace dlh {

// A probe that does not follow the schema.
struct ProbeError : Error {
  using Error::Error;
};

struct ProbeRecord {
  std::string kind;  // "cpu" or "cuda"
  std::string taken, host;
  double seconds = 0;
  // cpu
  std::string blas_core;
  int threads = 0;
  double sgemm_gflops = 0, memory_gbs = 0;
  std::vector<double> sgemm_gflops_by_threads, memory_gbs_by_threads;  // [t - 1], t = 1..threads
  // The cache-resident triad (host_probe.hpp); 0 and empty in probes from before it.
  double cache_gbs = 0;
  std::vector<double> cache_gbs_by_threads;
  // cuda
  std::string name;
  int sm_count = 0;
  double gemm_tflops = 0, conv_tflops = 0;  // and memory_gbs

  // The CPU rates at `t` threads (the last measured count when t is more).
  double SgemmAt(int t) const;
  double MemoryAt(int t) const;
  double CacheAt(int t) const;  // 0: not measured
};

// Reads and checks `j`. `where` prefixes every message: "cal.json: probe" (a field then reads
// "cal.json: probe.sgemm_gflops: ..."), or "probe.json:" for a probe that is the whole file
// ("probe.json: sgemm_gflops: ..."). Throws ProbeError. Keys other than the schema's are
// allowed (later probes may add some).
ProbeRecord ReadProbe(const nlohmann::json& j, const std::string& where);

}  // namespace dlh
