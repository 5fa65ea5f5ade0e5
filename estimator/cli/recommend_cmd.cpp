// DLH — `dlh-estimate recommend` (see recommend_cmd.hpp).
#include "estimator/cli/recommend_cmd.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/spec.hpp"
#include "estimator/cli/command_line.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/job_time.hpp"
#include "estimator/observe/plan_block.hpp"
#include "estimator/recommend/profile_speeds.hpp"
#include "estimator/recommend/recommend_html.hpp"
#include "estimator/recommend/recommender.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

using cli::Str;
using cli::WriteJson;

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int RecommendCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate recommend SPEC | --profile FILE: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("profile", po::value<std::string>(), "plan a program from its profile (dlh-launch run --profile) instead of SPEC")
    ("samples", po::value<int64_t>(), "training samples per epoch (default with --profile: the profile's)")
    ("eval-samples", po::value<int64_t>()->default_value(-1),
        "test samples evaluated after every epoch (-1: samples / 6; 0: none)")
    ("startup", po::value<double>()->default_value(-1),
        "seconds from job start to first step (-1: the cluster's runtime.startup_s)")
    ("epochs", po::value<int>()->default_value(0), "epochs (0: the spec's or the profile's)")
    ("stage", "the job stages its data set onto its nodes first (dlh-data stage): count the copy "
        "(runtime.stage_gbs) and read the copy at runtime.local_read_gbs")
    ("deadline", po::value<std::string>(), "wall-time deadline: 3h, 90m, 2h30m, 1-00:00:00 (none: no deadline)")
    ("objective", po::value<std::string>()->default_value("energy"), "energy, time or gpu-hours")
    ("cluster", po::value<std::string>(), "cluster description (default: $DLH_CLUSTER)")
    ("max-gpus", po::value<int>()->default_value(0), "at most this many GPUs (0: no limit)")
    ("threads-per-rank", po::value<int>()->default_value(0),
        "each CPU rank computes with this many threads, as OPENBLAS_NUM_THREADS in the job's "
        "environment makes dlh-launch train do (the plugin plans with it; 0: the node's cores "
        "over its ranks)")
    ("memory-cap", po::value<double>()->default_value(0), "GB of memory a GPU (a CPU node) offers at most, below its type's (0: the types' own)")
    ("types", po::value<std::string>(), "allowed GPU types and CPU node types, comma-separated; cpu: every CPU node type, gpu: every GPU type (default: all)")
    ("mixed", "allow mixing two GPU types in one job (batches balanced by speed; one GPU count per node, as the plugin submits it)")
    ("per-gpu-batch", po::value<int64_t>()->default_value(0),
        "weak scaling: this batch per GPU, global batch and lr grow with the GPUs (0: keep the spec's global batch)")
    ("margin", po::value<double>()->default_value(0.10, HelpNumber(0.10)),
        "safety margin on predicted time")
    ("top", po::value<int>()->default_value(5), "rows in the table")
    ("json", "print the plan as JSON only")
    ("html", po::value<std::string>(), "also write the decision as one HTML page: the chosen allocation, the candidates' time and energy, each GPU type's step-time line");
  // clang-format on
  po::variables_map vm;
  SubcommandSyntax syntax;
  syntax.positional = {{"SPEC", ""}};  // or --profile: checked below
  syntax.prefix = "recommend: ";
  syntax.suffix = " (see dlh-estimate recommend --help)";
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  const bool profiled = vm.count("profile") > 0;
  if (profiled == (vm.count("SPEC") > 0))
    throw UsageError(std::string("recommend: give SPEC or --profile FILE") +
                     (profiled ? ", not both" : "") + syntax.suffix);
  const std::string html = vm.count("html") ? Str(vm, "html") : "";
  if (vm.count("html")) CheckOutputFolder(html, "--html");
  Job job;
  if (profiled) {
    job = JobFromProfiles(LoadProfiles(Str(vm, "profile")));
  } else {
    job.spec = LoadSpec(Str(vm, "SPEC"));
    job.features = ComputeFeatures(job.spec);
    job.epochs = job.spec.epochs;
  }
  // What the program did not tell its profile (progress lines, docs/reference/run.md,
  // "The progress channel") must come from the command line.
  const std::string unknown =
      profiled ? " (the profile " + Str(vm, "profile") + " does not say: the program writes '" : "";
  if (vm.count("samples")) {
    job.samples = vm["samples"].as<int64_t>();
    if (job.samples <= 0) throw UsageError("--samples: must be positive");
  } else if (!profiled || job.samples <= 0) {
    throw UsageError("--samples: required" +
                     (profiled ? unknown + "samples N' to DLH_PROGRESS_FD)" : std::string()));
  }
  if (vm["epochs"].as<int>() < 0) throw UsageError("--epochs: must be positive");
  if (vm["epochs"].as<int>() > 0) job.epochs = vm["epochs"].as<int>();
  if (job.epochs <= 0 && profiled)
    throw UsageError("--epochs: required" + unknown + "epochs N' to DLH_PROGRESS_FD)");
  // "none", as --help says (and as the plugin's plan line words it): no deadline.
  job.deadline_s = vm.count("deadline") && Str(vm, "deadline") != "none"
                       ? ParseDuration(Str(vm, "deadline"), "--deadline")
                       : 0;
  // Beyond a year no cluster's limits reach, and two of the lines below print durations
  // with different caps (99999999999999h came out as two different numbers of days).
  if (job.deadline_s > 366 * 86400.0)
    throw UsageError("--deadline: at most a year (366 days), got " + Str(vm, "deadline"));
  if (vm["top"].as<int>() < 1)
    throw UsageError("--top: must be at least 1 row, got " + std::to_string(vm["top"].as<int>()));
  job.eval_samples = vm["eval-samples"].as<int64_t>();
  job.stage = vm.count("stage") > 0;
  if (job.eval_samples < -1) throw UsageError("--eval-samples: must be -1, 0 or positive");
  job.startup_s = vm["startup"].as<double>();
  if (!(job.startup_s >= -1 && job.startup_s <= 86400))
    throw UsageError("--startup: must be seconds in [0, 86400] (or -1)");
  job.objective = ParseObjective(Str(vm, "objective"));
  const int threads_per_rank = vm["threads-per-rank"].as<int>();
  if (threads_per_rank < 0 || threads_per_rank > 4096)
    throw UsageError("--threads-per-rank: must be 0 to 4096");
  // A program that sets its own count keeps it unless the option says otherwise.
  if (threads_per_rank > 0 || !job.profile || !ProgramSetsItsThreads(*job.profile))
    job.threads_per_rank = threads_per_rank;
  job.max_gpus = vm["max-gpus"].as<int>();
  if (job.max_gpus < 0) throw UsageError("--max-gpus: must not be negative");
  if (vm.count("types")) job.allowed_types = SplitList(Str(vm, "types"));
  job.allow_mixed = vm.count("mixed") > 0;
  // As the plugin submits a mix: one job, one GPU count per node (docs/researcher-guide.md,
  // "Mixed GPU types in one job").
  job.mixed_same_gpus_per_node = true;
  job.per_gpu_batch = vm["per-gpu-batch"].as<int64_t>();
  if (job.per_gpu_batch < 0) throw UsageError("--per-gpu-batch: must not be negative");
  job.margin = vm["margin"].as<double>();
  if (!(job.margin >= 0 && job.margin < 10)) throw UsageError("--margin: must be in [0, 10)");
  const std::string cluster_path = cli::ClusterPath(vm, "recommend");
  Cluster cluster = LoadCluster(cluster_path);
  job.allowed_types = ResolveTypeNames(job.allowed_types, cluster, "--types");
  // A smaller device than the cluster's, for what-if plans: a network over the cap is planned
  // as a pipeline of stages that fit it.
  const double memory_cap = vm["memory-cap"].as<double>();
  if (!(memory_cap >= 0 && memory_cap < 1e6))
    throw UsageError("--memory-cap: must be GB in [0, 1e6)");
  if (memory_cap > 0)
    for (GpuType& g : cluster.gpu_types) g.memory_gb = std::min(g.memory_gb, memory_cap);

  if (!html.empty()) KeepCandidatesForPage(&job);

  auto t0 = std::chrono::steady_clock::now();
  Recommendation rec = dlh::Recommend(job, cluster);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Allocation& chosen = rec.feasible ? rec.ranked.front() : rec.fastest;
  nlohmann::json plan = PlanJson(job, rec, chosen);
  AddSharedHostToPlan(cluster, &plan);
  AddObservationsToPlan(job, cluster, rec, chosen, &plan);
  // A profile's speeds use no calibration file (profile_speeds.hpp).
  if (!html.empty())
    WriteFileAtomically(html, RecommendationHtml(job, cluster, rec,
                                                 profiled ? std::map<std::string, PageCalibration>()
                                                          : LoadSpeedCalibrations(cluster, rec)));
  std::vector<std::string> warnings = StaleCalibrationWarnings(rec.speeds);
  if (job.profile)
    for (const std::string& w : ProfileWarnings(*job.profile)) warnings.push_back(w);
  if (vm.count("json")) {
    for (const std::string& w : warnings)
      std::fprintf(stderr, "dlh-estimate: warning: %s\n", w.c_str());
    for (const std::string& t : rec.unrunnable_types)
      std::fprintf(stderr, "dlh-estimate: left out %s\n", t.c_str());
    WriteJson(plan);
    return rec.feasible ? kExitOk : kExitInfeasible;
  }
  const std::string title = job.profile && !job.profile->program.empty()
                                ? job.spec.origin + " (profile of " + job.profile->program + ")"
                                : job.spec.origin;
  std::printf("%s: %lld samples x %d epochs, global batch %d, deadline %s, objective %s\n",
              title.c_str(), (long long)job.samples, job.epochs, job.spec.batch_size,
              job.deadline_s > 0 ? HumanDuration(job.deadline_s).c_str() : "none",
              ObjectiveName(job.objective));
  for (const auto& [gpu, speed] : rec.speeds)
    std::printf("  %s: %s, %.3f ms + %.4f ms/sample per step%s\n", gpu.c_str(),
                speed.source.c_str(), speed.fixed_s * 1e3, speed.per_sample_s * 1e3,
                SpreadText(speed.log_sigma).c_str());
  if (job.profile)
    std::printf("  profiles: %s\n", ProfileSourcesText(ProfileSourcesOfSpeeds(rec.speeds)).c_str());
  for (const std::string& w : warnings) std::printf("  warning: %s\n", w.c_str());
  for (const std::string& t : rec.unrunnable_types) std::printf("  left out %s\n", t.c_str());
  std::printf("%d allocations considered in %.1f ms\n\n", rec.candidates, took * 1e3);
  auto row = [](int rank, const Allocation& a) {
    std::string what;
    for (const auto& p : a.parts) {
      if (!what.empty()) what += " + ";
      what += PartCellText(p);
    }
    if (a.pipeline_stages > 1) what += " " + std::to_string(a.pipeline_stages) + " stages";
    std::printf("%3d  %-34s %5d %9s %10.3f %9.1f %8.2f  %s\n", rank, what.c_str(), a.gpus,
                HumanDuration(a.total_s).c_str(), a.energy_j / 3.6e6, a.gpu_hours, a.step_s * 1e3,
                a.why.c_str());
  };
  std::printf("%3s  %-34s %5s %9s %10s %9s %8s  %s\n", "#", "allocation (nodes x gpus, batch)",
              "GPUs", "time", "energy kWh", "GPU-h", "step ms", "why");
  if (rec.feasible) {
    int n = std::min<int>(vm["top"].as<int>(), int(rec.ranked.size()));
    for (int i = 0; i < n; ++i) row(i + 1, rec.ranked[size_t(i)]);
    std::printf("\nchosen: %s; time limit %s\n", chosen.why.c_str(),
                plan["time_limit"].get<std::string>().c_str());
    std::printf("predicted %s: %s\n", BandText(chosen.total_s, chosen.total_upper_s).c_str(),
                PhasesText(chosen.phases, chosen.steps).c_str());
    if (const std::string from = ChosenProvenance(rec, chosen); !from.empty())
      std::printf("step time: %s\n", from.c_str());
    if (const std::string note = SyncNote(job, chosen); !note.empty())
      std::printf("training: %s\n", note.c_str());
    if (const std::string note = PipelineNote(rec, chosen); !note.empty())
      std::printf("layout: %s\n", note.c_str());
    if (!html.empty()) std::printf("wrote %s\n", html.c_str());
    return kExitOk;
  }
  row(0, rec.fastest);
  std::printf(
      "\nno allocation meets the deadline of %s: the fastest (above) needs %s with the "
      "%.0f%% margin, missing it by %s\n",
      HumanDuration(job.deadline_s).c_str(),
      HumanDuration(rec.fastest.total_s * (1 + job.margin)).c_str(), job.margin * 100,
      HumanDuration(rec.miss_s).c_str());
  if (!html.empty()) std::printf("wrote %s\n", html.c_str());
  return kExitInfeasible;
}

}  // namespace dlh
