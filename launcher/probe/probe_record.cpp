// DLH — reading a device probe back (see probe_record.hpp).
#include "launcher/probe/probe_record.hpp"

#include <algorithm>
#include <cmath>

#include "common/json_parse.hpp"

namespace dlh {
namespace {

class Fields {
 public:
  Fields(const nlohmann::json& j, const std::string& where) : j_(j), where_(where) {}
  [[noreturn]] void Fail(const std::string& key, const std::string& problem) const {
    std::string at = where_;
    if (!key.empty()) at += (!at.empty() && at.back() == ':' ? " " : ".") + key;
    if (!at.empty() && at.back() == ':') at.pop_back();
    throw ProbeError(at + ": " + problem);
  }
  const nlohmann::json& Required(const char* key) const {
    if (!j_.contains(key)) Fail(key, "required");
    return j_.at(key);
  }
  std::string String(const char* key) const {
    const nlohmann::json& v = Required(key);
    if (!v.is_string() || v.get<std::string>().empty())
      Fail(key, "must be a non-empty string, got " + ShownJsonValue(v));
    return v.get<std::string>();
  }
  double Positive(const nlohmann::json& v, const std::string& key) const {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0))
      Fail(key, "must be a positive number, got " + ShownJsonValue(v));
    return v.get<double>();
  }
  double Positive(const char* key) const { return Positive(Required(key), key); }
  double NonNegative(const char* key) const {
    const nlohmann::json& v = Required(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      Fail(key, "must be a non-negative number, got " + ShownJsonValue(v));
    return v.get<double>();
  }
  int Count(const char* key, int max) const {
    const nlohmann::json& v = Required(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > max)
      Fail(key,
           "must be an integer from 1 to " + std::to_string(max) + ", got " + ShownJsonValue(v));
    return int(v.get<int64_t>());
  }
  std::vector<double> Rates(const char* key, int count) const {
    const nlohmann::json& v = Required(key);
    if (!v.is_array() || v.size() != size_t(count))
      Fail(key, "must be an array of " + std::to_string(count) +
                    (count == 1 ? " positive number" : " positive numbers") +
                    " (one per thread count), got " + ShownJsonValue(v));
    std::vector<double> out;
    for (size_t i = 0; i < v.size(); ++i)
      out.push_back(Positive(v[i], std::string(key) + "[" + std::to_string(i) + "]"));
    return out;
  }

 private:
  const nlohmann::json& j_;
  std::string where_;
};

}  // namespace

namespace {

// A rate at t threads: its curve's (the last measured count when t is more), or the one
// figure where no curve was measured.
double RateAt(const std::vector<double>& by_threads, double at_all, int t) {
  if (by_threads.empty()) return at_all;
  return by_threads[size_t(std::clamp(t, 1, int(by_threads.size())) - 1)];
}

}  // namespace

double ProbeRecord::SgemmAt(int t) const {
  return RateAt(sgemm_gflops_by_threads, sgemm_gflops, t);
}
double ProbeRecord::MemoryAt(int t) const { return RateAt(memory_gbs_by_threads, memory_gbs, t); }
double ProbeRecord::CacheAt(int t) const { return RateAt(cache_gbs_by_threads, cache_gbs, t); }

ProbeRecord ReadProbe(const nlohmann::json& j, const std::string& where) {
  const Fields f(j, where);
  if (!j.is_object()) f.Fail("", "must be a JSON object, got " + ShownJsonValue(j));
  ProbeRecord p;
  p.kind = f.String("kind");
  p.taken = f.String("taken");
  p.seconds = f.NonNegative("seconds");
  if (p.kind == "cpu") {
    p.host = f.String("host");
    p.blas_core = f.String("blas_core");
    p.threads = f.Count("threads", 4096);
    p.sgemm_gflops = f.Positive("sgemm_gflops");
    p.memory_gbs = f.Positive("memory_gbs");
    p.sgemm_gflops_by_threads = f.Rates("sgemm_gflops_by_threads", p.threads);
    p.memory_gbs_by_threads = f.Rates("memory_gbs_by_threads", p.threads);
    if (j.contains("cache_gbs") || j.contains("cache_gbs_by_threads")) {
      p.cache_gbs = f.Positive("cache_gbs");
      p.cache_gbs_by_threads = f.Rates("cache_gbs_by_threads", p.threads);
    }
  } else if (p.kind == "cuda") {
    p.name = f.String("name");
    p.host = p.name;
    p.sm_count = f.Count("sm_count", 100000);
    p.gemm_tflops = f.Positive("gemm_tflops");
    p.conv_tflops = f.Positive("conv_tflops");
    p.memory_gbs = f.Positive("memory_gbs");
  } else {
    f.Fail("kind", "must be \"cpu\" or \"cuda\", got " + ShownJsonValue(j.at("kind")));
  }
  return p;
}

}  // namespace dlh
