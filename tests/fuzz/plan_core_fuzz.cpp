// DLH fuzz target — the planning core as cli_filter.lua drives it (dlh-estimate slurm-plan):
// the --dlh-auto value, the user's options as Slurm's json_cli_options gives them (the
// `--options` JSON) and sinfo's live node state, into a plan (dlh::plan::MakePlan) on the
// local cluster (share/cluster/local.json, its shipped calibration). Input: the first line
// is the --dlh-auto value, the second the options JSON, the rest sinfo's output. Specs named
// by spec= are looked up in share/examples/. Refusals are dlh::Error (UsageError,
// SpecError, EstimateError: what the plugin turns into one line); anything else is a
// finding. A plan that says it is feasible must have a positive time and its settings.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/plan/live_state.hpp"
#include "estimator/plan/options.hpp"
#include "estimator/plan/plan.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {

std::string Line(const std::string& text, size_t* at) {
  const size_t end = text.find('\n', *at);
  const std::string line =
      text.substr(*at, end == std::string::npos ? std::string::npos : end - *at);
  *at = end == std::string::npos ? text.size() : end + 1;
  return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Run from the repository's root (run.sh, replay.sh do).
  static const dlh::Cluster cluster = dlh::LoadCluster("share/cluster/local.json");
  const std::string text(reinterpret_cast<const char*>(data), size);
  size_t at = 0;
  const std::string auto_value = Line(text, &at), options = Line(text, &at);
  const std::string sinfo = text.substr(at);
  dlh::fuzz::RefusesOnlyWith<dlh::Error>("MakePlan", [&] {
    dlh::plan::PlanInputs in;
    in.options = dlh::plan::ParseAutoValue(auto_value.c_str());
    in.user = dlh::plan::UserRequestFromJson(options);
    in.config.cluster = "share/cluster/local.json";
    in.cwd = "share/examples";
    const std::vector<dlh::plan::LiveNode> live = dlh::plan::LiveNodesFromSinfo(sinfo);
    const dlh::plan::PlanOutcome p =
        dlh::plan::MakePlan(in, cluster, live, live.empty() ? "sinfo listed no nodes" : "");
    if (p.feasible && (!(p.chosen.total_s > 0) || p.settings.empty() || p.tasks < 1)) {
      std::fprintf(stderr, "MakePlan: a feasible plan with time %g s, %zu settings, %d tasks\n",
                   p.chosen.total_s, p.settings.size(), p.tasks);
      std::abort();
    }
    dlh::plan::SummaryLine(p);
    dlh::plan::DryRunReport(p, 5);
  });
  return 0;
}
