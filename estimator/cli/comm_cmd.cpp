// DLH — `dlh-estimate comm` (see comm_cmd.hpp).
#include "estimator/cli/comm_cmd.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "estimator/cli/command_line.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/model/comm_fit.hpp"
#include "estimator/model/comm_model.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

using cli::Parse;
using cli::Str;

// The link as a cluster description writes it ("regimes" or the single pair), its keys in
// the order of docs/reference/cluster-description.md.
nlohmann::ordered_json LinkJson(const Link& link) {
  if (link.regimes.empty())
    return {{"bandwidth_gbs", link.bandwidth_gbs}, {"latency_us", link.latency_us}};
  nlohmann::ordered_json regimes = nlohmann::ordered_json::array();
  for (const LinkRegime& r : link.regimes) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    if (r.up_to_bytes > 0) j["up_to_bytes"] = uint64_t(r.up_to_bytes);  // whole bytes
    j["latency_us"] = r.latency_us;
    j["bandwidth_gbs"] = r.bandwidth_gbs;
    regimes.push_back(j);
  }
  return {{"regimes", regimes}};
}

// The (bytes, seconds) points of one method in a `dlh-launch bench-allreduce --json` file.
std::vector<AllreducePoint> ReadAllreduceBench(const std::string& path, const std::string& method,
                                               int* ranks) {
  std::ifstream in(path);
  if (!in) throw EstimateError(path + ": cannot read: " + std::strerror(errno));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw EstimateError(path + ": not valid JSON: " + e.what());
  }
  // Each problem named by its field, in the words of the other input checks.
  const std::string what = " (a dlh-launch bench-allreduce --json result)";
  auto number = [&](const nlohmann::json& o, const std::string& key, const std::string& at) {
    const auto it = o.is_object() ? o.find(key) : o.end();
    if (!o.is_object() || it == o.end())
      throw EstimateError(path + ": " + at + key + ": required" + what);
    if (!it->is_number() || !std::isfinite(it->get<double>()))
      throw EstimateError(path + ": " + at + key + ": must be a number, got " + it->dump());
    return it->get<double>();
  };
  const double ranks_value = number(j, "ranks", "");
  if (!(ranks_value >= 1 && ranks_value == std::floor(ranks_value)))
    throw EstimateError(path + ": ranks: must be a whole number of ranks, got " +
                        j["ranks"].dump());
  *ranks = int(ranks_value);
  if (!j.contains("sizes") || !j["sizes"].is_array())
    throw EstimateError(path + ": sizes: required, an array" + what);
  std::vector<AllreducePoint> points;
  for (size_t i = 0; i < j["sizes"].size(); ++i) {
    const std::string at = "sizes[" + std::to_string(i) + "].";
    const double bytes = number(j["sizes"][i], "bytes", at);
    const double seconds = number(j["sizes"][i], method + "_s", at);
    if (!(bytes >= 0)) throw EstimateError(path + ": " + at + "bytes: must not be negative");
    if (!(seconds > 0))
      throw EstimateError(path + ": " + at + method + "_s: must be a positive time, got " +
                          j["sizes"][i][method + "_s"].dump());
    points.push_back({bytes, seconds});
  }
  return points;
}

// Both fits of one measurement, as `comm` reports them.
struct CommReport {
  std::string path, method;
  int ranks = 0;
  std::vector<AllreducePoint> points;
  PiecewiseOptions options;
  AlphaBeta single;
  PiecewiseFit fit;
  Link link;            // the piecewise model as printed to paste (rounded)
  AlphaBeta piecewise;  // that link as the estimator reads it: what the errors score
};

void PrintCommJson(const CommReport& r) {
  nlohmann::ordered_json sizes = nlohmann::ordered_json::array(),
                         tried = nlohmann::ordered_json::array();
  for (const auto& p : r.points)
    sizes.push_back({{"bytes", p.bytes},
                     {"measured_s", p.seconds},
                     {"single_s", RingAllreduceSeconds(p.bytes, r.ranks, r.single)},
                     {"piecewise_s", RingAllreduceSeconds(p.bytes, r.ranks, r.piecewise)}});
  for (size_t k = 0; k < r.fit.best_mape.size(); ++k)
    if (r.fit.best_mape[k] >= 0)
      tried.push_back({{"regimes", k + 1}, {"mape", r.fit.best_mape[k]}});
  const nlohmann::ordered_json out = {
      {"file", r.path},
      {"method", r.method},
      {"ranks", r.ranks},
      {"single", LinkJson(LinkFromModel(r.single))},
      {"link", LinkJson(r.link)},
      {"mape_single", AllreduceMapePct(r.points, r.ranks, r.single)},
      {"mape_piecewise", AllreduceMapePct(r.points, r.ranks, r.piecewise)},
      {"penalty_pct", r.options.penalty_pct},
      {"tried", tried},
      {"sizes", sizes}};
  std::cout << out.dump(2) << "\n";
}

void PrintCommText(const CommReport& r) {
  std::printf("ring allreduce model fitted to %s (%s, %d ranks, %zu sizes)\n", r.path.c_str(),
              r.method.c_str(), r.ranks, r.points.size());
  std::printf("single pair: alpha %.2f us, beta %.3f ns/B (%.2f GB/s)\n", r.single.alpha_s * 1e6,
              r.single.beta_s_per_byte * 1e9, 1e-9 / r.single.beta_s_per_byte);
  std::printf("piecewise: best MAPE by number of regimes:");
  for (size_t k = 0; k < r.fit.best_mape.size(); ++k)
    if (r.fit.best_mape[k] >= 0) std::printf(" %zu: %.1f%%", k + 1, r.fit.best_mape[k]);
  std::printf("; chose %zu (an extra regime must gain > %g points)\n",
              std::max<size_t>(1, r.link.regimes.size()), r.options.penalty_pct);
  for (const LinkRegime& g : r.link.regimes) {
    if (g.up_to_bytes > 0)
      std::printf("  messages <= %-12.0f", g.up_to_bytes);
    else
      std::printf("  larger messages         ");
    std::printf(" alpha %.3g us, %.4g GB/s\n", g.latency_us, g.bandwidth_gbs);
  }
  std::printf("%12s %12s %12s %8s %12s %8s\n", "bytes", "measured us", "single us", "error",
              "piecewise us", "error");
  for (const auto& p : r.points) {
    const double s = RingAllreduceSeconds(p.bytes, r.ranks, r.single);
    const double m = RingAllreduceSeconds(p.bytes, r.ranks, r.piecewise);
    std::printf("%12.0f %12.1f %12.1f %+7.1f%% %12.1f %+7.1f%%\n", p.bytes, p.seconds * 1e6,
                s * 1e6, 100 * (s - p.seconds) / p.seconds, m * 1e6,
                100 * (m - p.seconds) / p.seconds);
  }
  std::printf("MAPE single %.1f%%, piecewise %.1f%%\n",
              AllreduceMapePct(r.points, r.ranks, r.single),
              AllreduceMapePct(r.points, r.ranks, r.piecewise));
  std::printf(
      "link for the cluster description (intra_node or inter_node; up_to_bytes counts the bytes "
      "of one ring message, allreduce bytes / ranks):\n%s\n",
      LinkJson(r.link).dump().c_str());
}

}  // namespace

int CommCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate comm BENCH.json: options");
  d.add_options()("help,h", "show this help")(
      "method", po::value<std::string>()->default_value("mpi"),
      "which measurement to fit: mpi (MPI_Allreduce) or dlh (DLH's fused path)")(
      "json", "print JSON (both fits, the errors by size and the link)");
  po::variables_map vm;
  if (!Parse("comm", args, d, {"BENCH.json"}, vm)) return kExitOk;
  CommReport r;
  r.path = Str(vm, "BENCH.json");
  r.method = Str(vm, "method");
  if (r.method != "mpi" && r.method != "dlh")
    throw UsageError("--method: must be mpi or dlh, got '" + r.method + "'");
  r.points = ReadAllreduceBench(r.path, r.method, &r.ranks);
  r.single = FitAlphaBeta(r.points, r.ranks);
  r.fit = FitPiecewiseAlphaBeta(r.points, r.ranks, r.options);
  r.link = LinkFromModel(r.fit.model);
  r.piecewise = AlphaBeta::from_link(r.link);
  if (vm.count("json"))
    PrintCommJson(r);
  else
    PrintCommText(r);
  return kExitOk;
}

}  // namespace dlh
