// DLH — `dlh-estimate slurm-plan` (see slurm_plan_cmd.hpp).
#include "estimator/cli/slurm_plan_cmd.hpp"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "common/atomic_file.hpp"
#include "common/capture_output.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/file_text.hpp"
#include "common/json_parse.hpp"
#include "common/one_line.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/plan/live_state.hpp"
#include "estimator/plan/options.hpp"
#include "estimator/plan/plan.hpp"
#include "estimator/recommend/suggest.hpp"

namespace dlh {
namespace {

namespace po = boost::program_options;

constexpr size_t kMaxInputBytes = 1 << 20;

// "a b c" (plugstack arguments never hold blanks: Slurm splits the line at them).
std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::stringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string ReadLiveNodes(const std::string& path) {
  if (path == "-") {
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0 && text.size() < kMaxInputBytes)
      text.append(buf, n);
    return text;
  }
  std::string text, why;
  if (!ReadFileText(path, kMaxInputBytes, &text, &why))
    throw UsageError("slurm-plan: --live-nodes: " + path + ": cannot read: " + why);
  return text;
}

void Say(const char* kind, const std::string& text) {
  std::printf("%s %s\n", kind, OneLine(text).c_str());
}

int Plan(const std::vector<std::string>& args);

}  // namespace

// Errors as the plugin prints them ("dlh: ..."), one line: cli_filter.lua shows them.
int SlurmPlanCommand(const std::vector<std::string>& args) {
  try {
    return Plan(args);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "dlh: %s\n", OneLine(e.what()).c_str());
    return kExitBadInput;
  } catch (const SpecError& e) {
    std::fprintf(stderr, "dlh: %s\n", OneLine(e.what()).c_str());
    return kExitBadInput;
  } catch (const EstimateError& e) {
    std::fprintf(stderr, "dlh: %s\n", OneLine(e.what()).c_str());
    return kExitBadInput;
  }
}

namespace {

int Plan(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate slurm-plan: options (for share/slurm/cli_filter.lua)");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("dlh-auto", po::value<std::string>()->default_value(""), "the value of --dlh-auto (\"\": none)")
    ("options", po::value<std::string>()->default_value("{}"),
        "the options the user set, as slurm.json_cli_options(options) gives them")
    ("live-nodes", po::value<std::string>(),
        "sinfo -h -N -O 'NodeList:|,StateLong:|,Gres:|,GresUsed:|,Features:|' output (a file, or - for stdin)");
  // clang-format on
  po::variables_map vm;
  SubcommandSyntax syntax;
  syntax.prefix = "slurm-plan: ";
  syntax.suffix = " (see dlh-estimate slurm-plan --help)";
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n"
              << "Environment: DLH_SITE (the plugin's plugstack.conf arguments, set by "
                 "spank_dlh.so register-only), DLH_SPEC, DLH_SAMPLES.\n";
    return kExitOk;
  }

  const char* site = std::getenv("DLH_SITE");
  if (!site)
    throw UsageError(
        "DLH_SITE is not set: spank_dlh.so must be loaded with register-only in plugstack.conf");
  plan::PlanInputs in;
  in.config = plan::ParsePluginArgs(Words(site));
  if (in.config.cluster.empty())
    throw UsageError("plugstack.conf: cluster=FILE is required for cli_filter.lua");
  in.options = plan::ParseAutoValue(vm["dlh-auto"].as<std::string>().c_str());
  in.user = plan::UserRequestFromJson(vm["options"].as<std::string>());
  if (const char* v = std::getenv("DLH_SPEC")) in.env_spec = v;
  if (const char* v = std::getenv("DLH_DATA")) in.env_data = v;
  if (const char* v = std::getenv("DLH_SAMPLES")) in.env_samples = v;
  if (const char* v = std::getenv("OPENBLAS_NUM_THREADS")) in.env_openblas_threads = v;
  in.inspect_data = [](const std::string& path) {
    return InspectDataSet(ProgramBeside("dlh-data"), path, "--dlh-auto: data: ");
  };
  if (char* cwd = getcwd(nullptr, 0)) {
    in.cwd = cwd;
    std::free(cwd);
  }
  std::vector<plan::LiveNode> live;
  std::string live_error = "not read by cli_filter.lua";
  if (vm.count("live-nodes")) {
    live = plan::LiveNodesFromSinfo(ReadLiveNodes(vm["live-nodes"].as<std::string>()));
    live_error = live.empty() ? "sinfo listed no nodes" : "";
  }

  const Cluster cluster = LoadCluster(in.config.cluster);
  const plan::PlanOutcome outcome = plan::MakePlan(in, cluster, live, live_error);
  if (in.options.dry_run.value_or(false)) {
    std::stringstream report(plan::DryRunReport(outcome, 5));
    for (std::string line; std::getline(report, line);) Say("report", line);
    if (!outcome.feasible) {
      std::fprintf(stderr, "%s\n", OneLine(plan::InfeasibleMessage(outcome)).c_str());
      return kExitInfeasible;
    }
    std::puts("done");
    return kExitOk;
  }
  if (!outcome.feasible) {
    std::fprintf(stderr, "%s\n",
                 OneLine(plan::InfeasibleMessage(outcome) + "; nothing submitted").c_str());
    return kExitInfeasible;
  }
  // spec=suggest: the spec the job is to train, in the submit folder (this runs as the user,
  // in sbatch); spank_dlh.so hands the job DLH_SPEC from the plan's "suggested".
  if (outcome.suggested) WriteFileAtomically(outcome.suggested->path, outcome.suggested->text);
  for (const plan::SlurmSetting& s : outcome.settings)
    if (s.apply) std::printf("set %s %s\n", s.name.c_str(), OneLine(s.value).c_str());
  Say("plan", outcome.plan.dump());
  Say("say", plan::SummaryLine(outcome));
  std::puts("done");
  return kExitOk;
}

}  // namespace
}  // namespace dlh
