// DLH — `dlh-estimate replay` (see replay_cmd.hpp).
#include "estimator/cli/replay_cmd.hpp"

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "estimator/cli/command_line.hpp"
#include "estimator/replay/policies.hpp"
#include "estimator/replay/replay.hpp"
#include "estimator/replay/replay_report.hpp"
#include "estimator/replay/trace.hpp"

namespace dlh {
namespace {

namespace po = boost::program_options;

// "1.25,10" -> lo, hi.
void ParseRange(const std::string& text, double* lo, double* hi) {
  const size_t comma = text.find(',');
  char* end = nullptr;
  bool ok = comma != std::string::npos;
  if (ok) {
    const std::string a = text.substr(0, comma), b = text.substr(comma + 1);
    *lo = std::strtod(a.c_str(), &end);
    ok = !a.empty() && *end == '\0';
    *hi = std::strtod(b.c_str(), &end);
    ok = ok && !b.empty() && *end == '\0';
  }
  if (!ok || !(*lo >= 1) || !(*hi >= *lo) || *hi > 1e6)
    throw UsageError(
        "replay: --deadlines: expected LO,HI with 1 <= LO <= HI (multiples of a "
        "job's best-case time), got '" +
        text + "'");
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int ReplayCommand(const std::vector<std::string>& args) {
  std::string trace_path, policies = "all", json_out, html_out, trace_out, deadlines = "1.25,10";
  int generate = 0, depth = 100;
  uint64_t seed = 1;
  replay::GeneratorOptions gen;
  po::options_description d(
      "dlh-estimate replay --cluster FILE (--trace FILE.csv | --generate N): options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("cluster", po::value<std::string>(), "cluster description (default: $DLH_CLUSTER)")
    ("trace", po::value(&trace_path), "a job trace: sacct's columns and optional DLH columns "
        "(docs/reference/replay.md)")
    ("generate", po::value(&generate), "generate N jobs instead (Philly, Helios and PAI's "
        "published sizes, durations and arrivals)")
    ("seed", po::value(&seed)->default_value(seed), "the seed of every random draw: the "
        "generated trace and each job's noise")
    ("policies", po::value(&policies)->default_value(policies), "comma-separated: user, "
        "dlh-energy, dlh-time, max-gpus, one-gpu, or all")
    ("load", po::value(&gen.load)->default_value(gen.load, HelpNumber(gen.load)),
        "--generate: offered load, the users' GPU-seconds over the cluster's across the arrivals")
    ("deadlines", po::value(&deadlines)->default_value(deadlines), "--generate: LO,HI, a "
        "deadline's multiple of the job's best-case time, log-uniform")
    ("deadline-share",
        po::value(&gen.deadline_share)->default_value(gen.deadline_share,
                                                      HelpNumber(gen.deadline_share)),
        "--generate: share of jobs with a deadline")
    ("type-share",
        po::value(&gen.type_share)->default_value(gen.type_share, HelpNumber(gen.type_share)),
        "--generate: share of users who name a GPU type")
    ("backfill-depth", po::value(&depth)->default_value(depth), "jobs behind the head tried "
        "for backfill per scheduling pass")
    ("json", po::value(&json_out), "write every figure as JSON")
    ("html", po::value(&html_out), "write one self-contained HTML page of charts")
    ("write-trace", po::value(&trace_out), "write the trace replayed (generated or read) in "
        "the trace format");
  // clang-format on
  SubcommandSyntax syntax;
  syntax.prefix = "replay: ";
  syntax.suffix = " (see dlh-estimate replay --help)";
  po::variables_map vm;
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  if (trace_path.empty() == (vm.count("generate") == 0))
    throw UsageError("replay: give one of --trace FILE or --generate N" + syntax.suffix);
  if (vm.count("generate") && (generate < 1 || generate > 10000000))
    throw UsageError("replay: --generate: 1 to 10000000 jobs");
  if (!(gen.load > 0 && gen.load <= 10)) throw UsageError("replay: --load: must be in (0, 10]");
  if (!(gen.deadline_share >= 0 && gen.deadline_share <= 1))
    throw UsageError("replay: --deadline-share: must be in [0, 1]");
  if (!(gen.type_share >= 0 && gen.type_share <= 1))
    throw UsageError("replay: --type-share: must be in [0, 1]");
  if (depth < 1) throw UsageError("replay: --backfill-depth: at least 1");
  ParseRange(deadlines, &gen.deadline_lo, &gen.deadline_hi);
  replay::ReplayOptions options;
  options.policies = replay::ParsePolicies(policies);
  options.scheduler.backfill_depth = depth;
  if (!json_out.empty()) CheckOutputFolder(json_out, "replay: --json");
  if (!html_out.empty()) CheckOutputFolder(html_out, "replay: --html");
  if (!trace_out.empty()) CheckOutputFolder(trace_out, "replay: --write-trace");
  const std::string cluster_path = cli::ClusterPath(vm, "replay");

  const auto t0 = std::chrono::steady_clock::now();
  replay::Workload workload(LoadCluster(cluster_path));
  replay::Trace trace;
  if (generate > 0) {
    gen.jobs = generate;
    gen.seed = seed;
    trace = replay::GenerateTrace(gen, workload);
  } else {
    trace = replay::ReadTraceCsv(trace_path);
    if (trace.jobs.empty())
      throw UsageError("replay: " + trace_path + ": no job to replay" +
                       (trace.notes.empty() ? "" : " (" + trace.notes.front() + ")"));
  }
  if (!trace_out.empty()) WriteFileAtomically(trace_out, replay::TraceCsv(trace));
  const std::vector<replay::ReplayJob> jobs = replay::PrepareJobs(trace, workload, seed);

  replay::ReplayInfo info;
  const Cluster& cluster = workload.cluster();
  info.cluster = cluster.name + " (" + cluster_path + ")";
  for (const NodeType& nt : cluster.node_types) {
    info.node_types.push_back(nt.name + ": " + std::to_string(nt.nodes) + " x " +
                              (nt.cpu ? std::to_string(nt.cpu_cores) + " cores (CPU nodes)"
                                      : std::to_string(nt.gpus_per_node) + " " + nt.gpu));
    info.capacity_units += nt.nodes * nt.gpus_per_node;
    (nt.cpu ? info.cpu_nodes : info.gpus) += nt.nodes * (nt.cpu ? 1 : nt.gpus_per_node);
  }
  info.trace = generate > 0 ? "generated" : trace_path;
  info.jobs = int(jobs.size());
  info.skipped = trace.skipped;
  info.seed = seed;
  info.generated = generate > 0;
  info.generator = gen;
  info.backfill_depth = depth;
  info.assumptions = replay::ReplayAssumptions();
  info.prepare_s = Seconds(t0);
  std::printf(
      "replay: %s, %d GPUs%s; %s, %d jobs, seed %llu (trace and networks ready in "
      "%.1f s)\n",
      info.cluster.c_str(), info.gpus,
      info.cpu_nodes ? (" and " + std::to_string(info.cpu_nodes) + " CPU nodes").c_str() : "",
      info.trace.c_str(), info.jobs, (unsigned long long)seed, info.prepare_s);
  for (const std::string& n : trace.notes)
    std::fprintf(stderr, "replay: left out of %s: %s\n", trace_path.c_str(), n.c_str());
  std::fflush(stdout);

  const std::vector<replay::PolicyMetrics> metrics = replay::RunReplay(jobs, workload, options);
  info.total_s = Seconds(t0);
  std::fputs(replay::ReplayTable(metrics).c_str(), stdout);
  for (const replay::PolicyMetrics& m : metrics) {
    if (m.unplanned > 0)
      std::printf("replay: %s: %d job%s could not run (%s)\n", m.policy.c_str(), m.unplanned,
                  m.unplanned > 1 ? "s" : "",
                  m.notes.empty() ? "no shape fits the devices' memory" : m.notes.front().c_str());
  }
  std::printf(
      "replay: energy counts the jobs' own, not idle nodes; every job's real time is "
      "its prediction times its noise (docs/reference/replay.md); %.1f s in all\n",
      info.total_s);
  if (!json_out.empty()) {
    WriteFileAtomically(json_out, replay::ReplayJson(info, metrics).dump(1) + "\n");
    std::printf("replay: wrote %s\n", json_out.c_str());
  }
  if (!html_out.empty()) {
    WriteFileAtomically(html_out, replay::ReplayHtml(info, metrics));
    std::printf("replay: wrote %s\n", html_out.c_str());
  }
  if (!trace_out.empty()) std::printf("replay: wrote %s\n", trace_out.c_str());
  return kExitOk;
}

}  // namespace dlh
