// DLH — `dlh-estimate suggest` (see suggest_cmd.hpp).
#include "estimator/cli/suggest_cmd.hpp"

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "common/atomic_file.hpp"
#include "common/capture_output.hpp"
#include "common/cli.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "estimator/cli/command_line.hpp"
#include "estimator/recommend/recommender.hpp"
#include "estimator/recommend/suggest.hpp"

namespace dlh {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

}  // namespace

int SuggestCommand(const std::vector<std::string>& args) {
  std::string data, deadline, objective = "accuracy", out, name;
  int epochs = 10;
  po::options_description d("dlh-estimate suggest --data FILE --deadline T: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("data", po::value(&data), "the data set (HDF5, as dlh-data writes it)")
    ("deadline", po::value(&deadline), "the time the training must fit in: 10m, 2h, 1-00:00:00")
    ("objective", po::value(&objective)->default_value(objective),
        "accuracy: the largest network that meets the deadline; energy: the family's base "
        "size (or the largest below it that meets the deadline)")
    ("epochs", po::value(&epochs)->default_value(epochs), "epochs the spec trains for")
    ("name", po::value(&name), "the spec's name (default: the data set file's name)")
    ("cluster", po::value<std::string>(), "cluster description (default: $DLH_CLUSTER)")
    ("out", po::value(&out), "write the spec here (default: stdout)");
  // clang-format on
  SubcommandSyntax syntax;
  syntax.prefix = "suggest: ";
  syntax.suffix = " (see dlh-estimate suggest --help)";
  po::variables_map vm;
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  if (data.empty()) throw UsageError("suggest: --data is required" + syntax.suffix);
  if (deadline.empty()) throw UsageError("suggest: --deadline is required" + syntax.suffix);
  if (!out.empty()) CheckOutputFolder(out, "suggest: --out");
  SuggestOptions options;
  options.deadline_s = ParseDuration(deadline, "--deadline");
  if (!(options.deadline_s > 0)) throw UsageError("suggest: --deadline: must be positive");
  if (objective == "energy")
    options.objective = SuggestObjective::Energy;
  else if (objective != "accuracy")
    throw UsageError("suggest: --objective: accuracy or energy, got '" + objective + "'");
  if (epochs < 1 || epochs > 10000) throw UsageError("suggest: --epochs: must be 1 to 10000");
  options.epochs = epochs;
  const fs::path data_path = fs::absolute(data).lexically_normal();
  options.name = name.empty() ? data_path.stem().string() : name;
  const Cluster cluster = LoadCluster(cli::ClusterPath(vm, "suggest"));

  DataFacts facts = InspectDataSet(ProgramBeside("dlh-data"), data, "suggest: --data ");
  facts.path = data_path.string();
  const Suggestion s = Suggest(facts, options, cluster);

  std::fprintf(stderr, "| member | parameters | predicted | energy | on | meets %s |\n",
               HumanDuration(options.deadline_s).c_str());
  std::fprintf(stderr, "|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < s.members.size(); ++i) {
    const SuggestedMember& m = s.members[i];
    std::fprintf(stderr, "| %s%s%s | %lld | %s | %s | %s | %s |\n", int(i) == s.chosen ? "**" : "",
                 m.label.c_str(), int(i) == s.chosen ? "**" : "", (long long)m.params,
                 m.total_s > 0 ? HumanDuration(m.total_s).c_str() : "-",
                 m.energy_j > 0 ? FormatEnergy(m.energy_j).c_str() : "-", m.allocation.c_str(),
                 m.feasible ? "yes" : "no");
  }
  for (const std::string& line : s.why) std::fprintf(stderr, "suggest: %s\n", line.c_str());
  if (s.chosen < 0) return kExitInfeasible;
  const std::string text = s.members[size_t(s.chosen)].spec.dump(2) + "\n";
  if (out.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    WriteFileAtomically(out, text);
    std::fprintf(stderr,
                 "suggest: wrote %s (dlh-launch train %s, or sbatch --dlh-auto ... "
                 "train.sbatch %s)\n",
                 out.c_str(), out.c_str(), out.c_str());
  }
  return kExitOk;
}

}  // namespace dlh
