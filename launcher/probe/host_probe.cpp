// DLH — the device probe (see host_probe.hpp): the CPU part, and the way to the GPU part.
//
// Stable on a noisy machine: every measurement is a block of 20 ms or more of back-to-back
// work (long enough that a CPU quota's throttling, period 1-100 ms, is averaged in as it is
// in a training step), the blocks of every thread count and of both kinds are interleaved
// round by round, and each value is the upper quartile of its blocks (UpperQuartile): another
// process's burst slows a few blocks of each, not one whole measurement.
#include "launcher/probe/host_probe.hpp"

#include <cblas.h>
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include "common/error.hpp"
#include "launcher/engine/cuda/probe_api.hpp"

namespace dlh {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// The products the CPU engine issues for the layers of the validation and calibration models
// (launcher/nn/layers/): row-major M x N x K, and whether A and B are transposed. Each thread
// runs them single-threaded on its own operands, as conv2d.cpp runs one sample per thread and
// ParallelSgemm one block per thread.
struct Shape {
  int m, n, k;
  bool trans_a, trans_b;
};
constexpr Shape kShapes[] = {
    // conv2d forward, 32 -> 64 channels, 3x3 on 26x26: W (F x CKK) * one tile's columns
    // (CKK x pixels; ConvTileRows gives 9 of 24 output rows, 216 pixels).
    {64, 216, 288, false, false},
    // its weight gradient: grad (F x pixels) * columns^T, and its input gradient W^T * grad.
    {64, 288, 216, false, true},
    {288, 216, 64, true, false},
    // dense forward, 2304 -> 128 units at batch 64: X (B x in) * W^T (in x units).
    {64, 128, 2304, false, true},
    // its weight gradient: grad^T (units x B) * X (B x in), one block of ParallelSgemm.
    {128, 1152, 64, true, false},
};

double ShapeFlops(const Shape& s) { return 2.0 * s.m * s.n * s.k; }

// One thread's operands, large enough for every shape.
struct Operands {
  std::vector<float> a, b, c;
  Operands() {
    size_t a_max = 0, b_max = 0, c_max = 0;
    for (const Shape& s : kShapes) {
      a_max = std::max(a_max, size_t(s.m) * s.k);
      b_max = std::max(b_max, size_t(s.k) * s.n);
      c_max = std::max(c_max, size_t(s.m) * s.n);
    }
    a.assign(a_max, 0.01f);
    b.assign(b_max, 0.02f);
    c.assign(c_max, 0.0f);
  }
};

// The shapes once each, beta 0 so that C stays bounded; returns the FLOPs done.
double RunShapes(Operands& o) {
  double flops = 0;
  for (const Shape& s : kShapes) {
    cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
                s.trans_b ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.0f, o.a.data(),
                s.trans_a ? s.m : s.k, o.b.data(), s.trans_b ? s.k : s.n, 0.0f, o.c.data(), s.n);
    flops += ShapeFlops(s);
  }
  return flops;
}

// `threads` threads each call work(thread) until `block_s` has passed since they all started;
// returns the work done per second of wall time until the last one finished.
template <class Work>
double TimedBlock(int threads, double block_s, Work&& work) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> done(static_cast<size_t>(threads), 0.0);
  std::vector<Clock::time_point> end(static_cast<size_t>(threads));
  Clock::time_point start;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(block_s));
      double sum = 0;
      do sum += work(t);
      while (Clock::now() < deadline);
      done[size_t(t)] = sum;
      end[size_t(t)] = Clock::now();
    });
  while (ready.load() < threads) std::this_thread::yield();
  start = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& p : pool) p.join();
  double total = 0;
  Clock::time_point last = start;
  for (int t = 0; t < threads; ++t) {
    total += done[size_t(t)];
    last = std::max(last, end[size_t(t)]);
  }
  return total / std::max(Seconds(start, last), 1e-9);
}

// The triad arrays: together well beyond the last-level cache (the one this process is
// told of; a VM may report its whole socket's), each between 32 and 160 MiB.
size_t TriadFloats() {
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const size_t bytes =
      std::clamp<size_t>(llc > 0 ? size_t(llc) / 2 : 0, size_t(32) << 20, size_t(160) << 20);
  return bytes / sizeof(float);
}

// The cache triad's arrays: together a quarter of the last-level cache, 1 to 16 MiB, the size of
// the activations and convolution columns the engine's passes work on at usual batches (a
// 32x28x28 activation at batch 64 is 6.4 MB), so that they stay in the cache between passes.
size_t CacheTriadFloats() {
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const size_t bytes =
      std::clamp<size_t>(llc > 0 ? size_t(llc) / 4 : 0, size_t(1) << 20, size_t(16) << 20);
  return bytes / 3 / sizeof(float);
}

// a[i] = b[i] + s * c[i] over one thread's slice: two arrays read, one written; the bytes.
double TriadSlice(float* a, const float* b, const float* c, size_t lo, size_t hi) {
  for (size_t k = lo; k < hi; ++k) a[k] = b[k] + 0.5f * c[k];
  return 3.0 * double(hi - lo) * sizeof(float);
}

// Restores OpenBLAS's thread count: the engine adopts it (thread_pool.hpp), so a probe taken
// before a calibration must leave it as it found it.
class OpenBlasThreads {
 public:
  OpenBlasThreads() : saved_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~OpenBlasThreads() { openblas_set_num_threads(saved_); }
  OpenBlasThreads(const OpenBlasThreads&) = delete;
  OpenBlasThreads& operator=(const OpenBlasThreads&) = delete;

 private:
  int saved_;
};

// Where dlh-launch finds the CUDA backend (launcher/engine/device.cpp's CudaBackendPath, which
// lives in the MPI library that dlh-estimate does not link): $DLH_CUDA_BACKEND, else
// lib/dlh/libdlh_cuda.so beside the binary's bin/.
std::string BackendPath() {
  if (const char* env = std::getenv("DLH_CUDA_BACKEND"); env && *env) return env;
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "libdlh_cuda.so";
  return (exe.parent_path().parent_path() / "lib" / "dlh" / "libdlh_cuda.so").string();
}

nlohmann::json ProbeCuda(int index, const ProbeOptions& options) {
  const std::string path = BackendPath();
  auto fail = [&](const std::string& why) -> nlohmann::json {
    throw Error("no usable GPU: " + why);
  };
  if (!std::filesystem::exists(path))
    return fail("this build of DLH has no CUDA backend (" + path + " not found)");
  // Loaded for the life of the process, as dlh-launch does.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return fail("cannot load the CUDA backend: " + std::string(why ? why : path));
  }
  auto version = reinterpret_cast<const char* (*)()>(dlsym(handle, "dlh_cuda_version"));
  auto count = reinterpret_cast<int (*)(char*, size_t)>(dlsym(handle, "dlh_cuda_probe"));
  auto probe = reinterpret_cast<DlhCudaProbeDeviceFn>(dlsym(handle, "dlh_cuda_probe_device"));
  if (!version || !count || !probe)
    return fail(path + ": not a DLH CUDA backend of this build (entry points missing)");
  if (std::string(version()) != DLH_VERSION)
    return fail(path + ": backend of DLH " + version() + ", this is DLH " DLH_VERSION);
  char reason[512] = "";
  const int gpus = count(reason, sizeof reason);
  if (gpus <= 0) return fail(reason);
  if (index >= gpus)
    return fail("GPU " + std::to_string(index) + " requested, " + std::to_string(gpus) +
                " visible");
  std::string text(16384, '\0');
  const int n = probe(index, options.budget_s, text.data(), int(text.size()));
  if (n < 0) return fail(text.c_str());
  text.resize(size_t(n));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return fail("the CUDA backend's probe is not a JSON object");
  j["taken"] = NowIso();
  return j;
}

// The upper quartile of a measurement's blocks. Another process's burst slows the blocks it
// lands in, so on a shared host the median drifts with the load, while the upper quartile is
// the rate the machine gives when the others leave it be, and yet no single lucky block
// (2026-11-28, 2 cores at load 5.4, four probes each: sgemm medians 6.5-19.1 GFLOP/s, upper
// quartiles 18.2-20.2, maxima 13.9-29.3). A CPU quota throttles every block alike (its
// period, 1-100 ms, is shorter than a block) and so still shows.
double UpperQuartile(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() * 3) / 4];
}

}  // namespace

int AffinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cores = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = int(std::thread::hardware_concurrency());
  return std::max(1, cores);
}

std::string HostCpuDescription() {
  std::string model;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  // x86 has "model name"; some ARM kernels give only "Hardware" or "Processor".
  std::string fallback;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Trim(line.substr(0, colon));
    const std::string value = Trim(line.substr(colon + 1));
    if (value.empty()) continue;
    if (key == "model name") {
      model = value;
      break;
    }
    if (fallback.empty() && (key == "Hardware" || key == "Processor" || key == "cpu model"))
      fallback = value;
  }
  if (model.empty()) model = fallback.empty() ? "unknown CPU" : fallback;
  const int cores = AffinityCores();
  return model + ", " + std::to_string(cores) + (cores == 1 ? " core" : " cores");
}

nlohmann::json ProbeCpu(const ProbeOptions& options) {
  if (options.threads < 0 || options.threads > 4096)
    throw UsageError("probe: --threads: must be in [0, 4096], got " +
                     std::to_string(options.threads));
  if (!(options.budget_s >= 0.1 && options.budget_s <= 600))
    throw UsageError("probe: the budget must be 0.1 to 600 seconds");
  const auto t0 = Clock::now();
  const int threads = options.threads > 0 ? options.threads : AffinityCores();
  OpenBlasThreads single;

  std::vector<std::unique_ptr<Operands>> operands;
  for (int t = 0; t < threads; ++t) operands.push_back(std::make_unique<Operands>());
  // The memory triad's arrays (beyond the last-level cache) and the cache triad's.
  const size_t n = TriadFloats(), m = CacheTriadFloats();
  std::vector<float> a(n), b(n), c(n), ca(m), cb(m), cc(m);
  // Slice t of `of` of an array of `size` values.
  auto slice = [](size_t size, int t, int of, size_t* begin, size_t* end) {
    *begin = size * size_t(t) / size_t(of);
    *end = size * size_t(t + 1) / size_t(of);
  };
  {
    // First touch from the threads that will use each slice, so that pages lie where they run.
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        size_t lo, hi;
        for (auto [x, y, z, size] : {std::tuple{&a, &b, &c, n}, std::tuple{&ca, &cb, &cc, m}}) {
          slice(size, t, threads, &lo, &hi);
          std::fill(x->data() + lo, x->data() + hi, 0.0f);
          std::fill(y->data() + lo, y->data() + hi, 1.0f);
          std::fill(z->data() + lo, z->data() + hi, 2.0f);
        }
        RunShapes(*operands[size_t(t)]);  // warms OpenBLAS's buffers of this thread
      });
    for (std::thread& p : pool) p.join();
  }

  // Rounds of 3 * threads blocks; at least 20 ms a block, whatever the budget.
  constexpr int kRounds = 7;
  const double spent = Seconds(t0, Clock::now());
  const double block_s = std::max(0.02, (options.budget_s - spent) / double(kRounds * 3 * threads));
  std::vector<std::vector<double>> gemm(static_cast<size_t>(threads));
  std::vector<std::vector<double>> triad(static_cast<size_t>(threads));
  std::vector<std::vector<double>> cache(static_cast<size_t>(threads));
  for (int round = 0; round < kRounds; ++round) {
    for (int t = 1; t <= threads; ++t) {
      gemm[size_t(t - 1)].push_back(
          TimedBlock(t, block_s, [&](int i) { return RunShapes(*operands[size_t(i)]); }));
      triad[size_t(t - 1)].push_back(TimedBlock(t, block_s, [&](int i) {
        size_t lo, hi;
        slice(n, i, t, &lo, &hi);
        return TriadSlice(a.data(), b.data(), c.data(), lo, hi);
      }));
      cache[size_t(t - 1)].push_back(TimedBlock(t, block_s, [&](int i) {
        size_t lo, hi;
        slice(m, i, t, &lo, &hi);
        return TriadSlice(ca.data(), cb.data(), cc.data(), lo, hi);
      }));
    }
  }
  std::vector<double> gemm_by, triad_by, cache_by;
  for (int t = 0; t < threads; ++t) {
    gemm_by.push_back(UpperQuartile(gemm[size_t(t)]) / 1e9);
    triad_by.push_back(UpperQuartile(triad[size_t(t)]) / 1e9);
    cache_by.push_back(UpperQuartile(cache[size_t(t)]) / 1e9);
  }
  const char* core = openblas_get_corename();
  return nlohmann::json{{"kind", "cpu"},
                        {"taken", NowIso()},
                        {"host", HostCpuDescription()},
                        {"blas_core", core ? Trim(core) : std::string("unknown")},
                        {"threads", threads},
                        {"sgemm_gflops", gemm_by.back()},
                        {"sgemm_gflops_by_threads", gemm_by},
                        {"memory_gbs", triad_by.back()},
                        {"memory_gbs_by_threads", triad_by},
                        {"cache_gbs", cache_by.back()},
                        {"cache_gbs_by_threads", cache_by},
                        {"seconds", Seconds(t0, Clock::now())}};
}

nlohmann::json ProbeDevice(const std::string& device, const ProbeOptions& options) {
  if (device == "cpu") return ProbeCpu(options);
  const std::string cuda = "cuda";
  if (device == cuda) return ProbeCuda(0, options);
  if (device.rfind(cuda + ":", 0) == 0 && device.size() > cuda.size() + 1 &&
      device.size() <= cuda.size() + 4 &&
      device.find_first_not_of("0123456789", cuda.size() + 1) == std::string::npos)
    return ProbeCuda(std::stoi(device.substr(cuda.size() + 1)), options);
  throw UsageError("probe: --device: must be cpu, cuda or cuda:N, got '" + device + "'");
}

nlohmann::json FasterOfProbes(nlohmann::json a, const nlohmann::json& b) {
  for (const char* rate : {"sgemm_gflops", "memory_gbs", "cache_gbs", "gemm_tflops", "conv_tflops"})
    if (a.contains(rate) && b.contains(rate) && a[rate].is_number() && b[rate].is_number())
      a[rate] = std::max(a[rate].get<double>(), b[rate].get<double>());
  for (const char* curve :
       {"sgemm_gflops_by_threads", "memory_gbs_by_threads", "cache_gbs_by_threads"}) {
    if (!a.contains(curve) || !b.contains(curve) || !a[curve].is_array() ||
        a[curve].size() != b[curve].size())
      continue;
    for (size_t t = 0; t < a[curve].size(); ++t)
      if (a[curve][t].is_number() && b[curve][t].is_number())
        a[curve][t] = std::max(a[curve][t].get<double>(), b[curve][t].get<double>());
  }
  return a;
}

}  // namespace dlh
