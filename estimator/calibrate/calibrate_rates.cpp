// DLH estimator — sgemm and memory-copy rates of this machine (see calibrate_rates.hpp).
#include "estimator/calibrate/calibrate_rates.hpp"

#include <cblas.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/median.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

constexpr int kGemmN = 1024;
constexpr size_t kCopyBytes = size_t(64) << 20;  // each of source and destination
constexpr double kBlockSeconds = 0.2;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median over `blocks` of (work done / seconds), each block repeating `once` (which returns
// the work it did) for about kBlockSeconds; one untimed call first warms caches, pages and
// thread pools.
double MedianRate(int blocks, const std::function<double()>& once) {
  double t = Now();
  once();
  const double one = std::max(Now() - t, 1e-6);
  const int calls = std::max(1, int(kBlockSeconds / one));
  std::vector<double> rates;
  for (int b = 0; b < blocks; ++b) {
    double work = 0;
    t = Now();
    for (int i = 0; i < calls; ++i) work += once();
    rates.push_back(work / (Now() - t));
  }
  return Median(rates);
}

double SgemmGflops(int threads, int blocks) {
  openblas_set_num_threads(threads);
  const size_t n = kGemmN;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  return MedianRate(blocks,
                    [&] {
                      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kGemmN, kGemmN, kGemmN,
                                  1.0f, a.data(), kGemmN, b.data(), kGemmN, 0.0f, c.data(), kGemmN);
                      return 2.0 * double(n) * double(n) * double(n);
                    }) /
         1e9;
}

// `threads` threads each scale their own contiguous slice into another buffer (STREAM's
// "scale", McCalpin 1995), as an element-wise kernel split over cores would: each float is
// read once and written once. Not memcpy: glibc switches to non-temporal stores above a
// size threshold, so the rate would change with the slice size rather than the threads.
double CopyGbs(int threads, int blocks) {
  const size_t n = kCopyBytes / sizeof(float);
  std::vector<float> src(n, 1.0f), dst(n, 0.0f);
  const size_t slice = n / size_t(threads);
  return MedianRate(blocks,
                    [&] {
                      std::vector<std::thread> pool;
                      for (int i = 0; i < threads; ++i) {
                        const size_t begin = size_t(i) * slice;
                        const size_t end = i + 1 == threads ? n : begin + slice;
                        pool.emplace_back([&, begin, end] {
                          const float* in = src.data();
                          float* out = dst.data();
                          for (size_t k = begin; k < end; ++k) out[k] = 0.5f * in[k];
                        });
                      }
                      for (std::thread& t : pool) t.join();
                      return 2.0 * double(n * sizeof(float));
                    }) /
         1e9;
}

}  // namespace

MachineRates MeasureRates(int threads, int blocks) {
  if (threads < 1) throw UsageError("rates: --threads: must be at least 1");
  if (blocks < 1) throw UsageError("rates: --blocks: must be at least 1");
  MachineRates r;
  r.threads = threads;
  r.sgemm_gflops = SgemmGflops(threads, blocks);
  r.copy_gbs = CopyGbs(threads, blocks);
  return r;
}

int RatesCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate rates: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("threads", po::value<int>()->default_value(1), "OpenBLAS threads and copy threads")
    ("blocks", po::value<int>()->default_value(5), "timed blocks of about 0.2 s each; median")
    ("json", "print one JSON object");
  // clang-format on
  po::variables_map vm;
  SubcommandSyntax syntax;
  syntax.prefix = "rates: ";
  syntax.suffix = " (see dlh-estimate rates --help)";
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  const MachineRates r = MeasureRates(vm["threads"].as<int>(), vm["blocks"].as<int>());
  if (vm.count("json")) {
    std::cout << nlohmann::json{{"threads", r.threads},
                                {"sgemm_gflops", r.sgemm_gflops},
                                {"copy_gbs", r.copy_gbs}}
                     .dump()
              << "\n";
    return kExitOk;
  }
  std::printf("%d thread%s: sgemm %dx%d %.1f GFLOP/s, memory copy %.2f GB/s (read + write)\n",
              r.threads, r.threads == 1 ? "" : "s", kGemmN, kGemmN, r.sgemm_gflops, r.copy_gbs);
  return kExitOk;
}

}  // namespace dlh
