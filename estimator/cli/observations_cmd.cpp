// DLH — `dlh-estimate observations` (see observations_cmd.hpp).
#include "estimator/cli/observations_cmd.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <set>

#include "common/cli.hpp"
#include "common/counted.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/median.hpp"
#include "estimator/cli/command_line.hpp"
#include "estimator/cli/observations_store.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/observe/robust.hpp"
#include "estimator/observe/store_reader.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

using cli::Printf;
using cli::Str;

std::string OwnerName(uid_t uid) {
  if (const passwd* pw = getpwuid(uid)) return pw->pw_name;
  return std::to_string(uid);
}

std::string Base(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void List(const StoreContents& s) {
  std::printf("%-36s %-10s %-8s %-16s %-14s %5s %7s %10s %10s %9s\n", "record", "user", "gpu",
              "model", "key", "ranks", "batch", "step ms", "predicted", "job");
  for (const StoredObservation& so : s.records) {
    const Observation& r = so.record;
    const std::string predicted =
        r.has_prediction ? Printf("%.2f", r.predicted_step_s * 1e3) : std::string("-");
    std::printf("%-36s %-10s %-8s %-16s %-14s %5d %7lld %10.2f %10s %9s\n", Base(so.path).c_str(),
                OwnerName(so.owner).c_str(), r.gpu_type.empty() ? "?" : r.gpu_type.c_str(),
                r.model_name.substr(0, 16).c_str(), r.model_key.substr(0, 14).c_str(), r.ranks,
                static_cast<long long>(r.per_rank_batch), r.step_s * 1e3, predicted.c_str(),
                HumanDuration(r.total_s).c_str());
  }
  std::printf("%s\n", Counted(s.records.size(), "record").c_str());
}

void Summary(const StoreContents& s) {
  struct Type {
    int jobs = 0;
    std::set<std::string> models, users;
    std::vector<double> log_ratios;  // ln(measured / predicted step), jobs with a plan
  };
  std::map<std::string, Type> types;
  for (const StoredObservation& so : s.records) {
    const Observation& r = so.record;
    Type& t = types[r.gpu_type.empty() ? "(unknown)" : r.gpu_type];
    ++t.jobs;
    t.models.insert(r.model_key);
    t.users.insert(OwnerName(so.owner));
    if (r.has_prediction && r.predicted_step_s > 0)
      t.log_ratios.push_back(std::log(r.steady_step_s() / r.predicted_step_s));
  }
  std::printf("%-12s %6s %7s %6s %10s %22s\n", "gpu type", "jobs", "models", "users", "predicted",
              "measured / predicted");
  for (const auto& [name, t] : types) {
    std::string ratio = "-";
    if (t.log_ratios.size() == 1)  // one job has no spread to show
      ratio = Printf("%.3f (1 job)", std::exp(t.log_ratios.front()));
    else if (!t.log_ratios.empty())
      ratio = Printf("%.3f (spread %.1f%%)", std::exp(Median(t.log_ratios)),
                     100 * RobustSigma(t.log_ratios));
    std::printf("%-12s %6d %7zu %6zu %10zu %22s\n", name.c_str(), t.jobs, t.models.size(),
                t.users.size(), t.log_ratios.size(), ratio.c_str());
  }
}

// Removes records the caller may delete: its own, or any when it owns the store (or is root).
int Prune(const StoreContents& s, const std::string& dir, int64_t keep, double older_than_s) {
  struct stat st {};
  const bool owns_store = ::stat(dir.c_str(), &st) == 0 && (st.st_uid == getuid() || getuid() == 0);
  std::vector<const StoredObservation*> mine;
  for (const StoredObservation& so : s.records)
    if (owns_store || so.owner == getuid()) mine.push_back(&so);
  // Newest first: by the time written, then by name.
  std::sort(mine.begin(), mine.end(), [](const StoredObservation* a, const StoredObservation* b) {
    return a->mtime != b->mtime ? a->mtime > b->mtime : a->path > b->path;
  });
  const double now = double(std::time(nullptr));
  int removed = 0, failed = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    const bool beyond = keep >= 0 && int64_t(i) >= keep;
    const bool old = older_than_s > 0 && now - mine[i]->mtime > older_than_s;
    if (!beyond && !old) continue;
    if (::unlink(mine[i]->path.c_str()) == 0) {
      ++removed;
    } else {
      ++failed;
      std::fprintf(stderr, "dlh-estimate: warning: %s: cannot remove: %s\n", mine[i]->path.c_str(),
                   std::strerror(errno));
    }
  }
  std::printf("removed %s; %zu kept, %zu of other users not yours to remove\n",
              Counted(removed, "record").c_str(), s.records.size() - size_t(removed),
              s.records.size() - mine.size());
  return failed ? kExitFailure : kExitOk;
}

}  // namespace

int ObservationsCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate observations list|summary|check|prune: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("store", po::value<std::string>(), "the observation store (a folder)")
    ("cluster", po::value<std::string>(), "take the store from this cluster description's "
        "\"observations\" (default: $DLH_CLUSTER when --store is not given)")
    ("keep", po::value<int64_t>(), "prune: keep the newest N of your records")
    ("older-than", po::value<std::string>(), "prune: remove your records older than this (30d, 12h)");
  // clang-format on
  po::variables_map vm;
  if (!cli::Parse("observations", args, d, {"ACTION"}, vm)) return kExitOk;
  const std::string action = Str(vm, "ACTION");
  if (action != "list" && action != "summary" && action != "check" && action != "prune")
    throw UsageError("observations: expected list, summary, check or prune, got '" + action + "'");
  const std::string dir = StoreFromOptions(vm.count("store") ? Str(vm, "store") : "",
                                           vm.count("cluster") ? Str(vm, "cluster") : "");
  const bool pruning = action == "prune";
  if (!pruning && (vm.count("keep") || vm.count("older-than")))
    throw UsageError("observations: --keep and --older-than only with prune");
  int64_t keep = -1;
  double older = 0;
  if (vm.count("keep")) {
    keep = vm["keep"].as<int64_t>();
    if (keep < 0) throw UsageError("--keep: must not be negative");
  }
  if (vm.count("older-than")) older = ParseDuration(Str(vm, "older-than"), "--older-than");
  if (pruning && keep < 0 && older <= 0)
    throw UsageError("observations prune: give --keep N or --older-than T");

  const StoreContents s = ReadStore(dir);
  if (s.check.state != StoreState::kOk) throw UsageError(s.check.message);
  for (const std::string& p : s.problems)
    std::fprintf(stderr, "dlh-estimate: warning: %s: skipped\n", p.c_str());
  if (action == "list") List(s);
  if (action == "summary") Summary(s);
  if (pruning) return Prune(s, dir, keep, older);
  if (action == "check") {
    if (!s.problems.empty()) {
      std::printf("%s: %zu bad of %s\n", dir.c_str(), s.problems.size(),
                  Counted(s.problems.size() + s.records.size(), "record").c_str());
      return kExitFailure;
    }
    std::printf("%s: %s, all readable\n", dir.c_str(), Counted(s.records.size(), "record").c_str());
  }
  return kExitOk;
}

}  // namespace dlh
