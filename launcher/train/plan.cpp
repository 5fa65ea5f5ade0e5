// DLH — reading DLH_PLAN (see plan.hpp).
#include "launcher/train/plan.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/counted.hpp"
#include "common/error.hpp"
#include "common/file_text.hpp"
#include "common/hostlist.hpp"
#include "common/json_parse.hpp"

namespace dlh {
namespace {

// allocation.parts[]: checked whenever present, since a mix takes its per-rank batches
// from it; a one-part plan's fields are informational but must still make sense.
template <typename Fail>
void ParseParts(const nlohmann::json& allocation, const Fail& fail, std::vector<PlanPart>* out) {
  if (!allocation.contains("parts")) return;
  const auto& parts = allocation["parts"];
  if (!parts.is_array()) throw fail("allocation.parts", "must be an array");
  // Bounds keep sums of nodes x gpus_per_node (and of rank batches) far from int64 overflow.
  constexpr int64_t kMaxNodes = int64_t(1) << 20, kMaxGpus = 1024, kMaxBatch = int64_t(1) << 30;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string at = "allocation.parts[" + std::to_string(i) + "]";
    const auto& part = parts[i];
    if (!part.is_object()) throw fail(at, "must be an object");
    PlanPart pp;
    auto text = [&](const char* key, bool required) {
      if (!part.contains(key)) {
        if (required) throw fail(at + "." + key, "missing");
        return std::string();
      }
      const auto& v = part[key];
      if (!v.is_string() || v.get<std::string>().empty())
        throw fail(at + "." + key, "must be a non-empty string, got " + v.dump());
      return v.get<std::string>();
    };
    auto count = [&](const char* key, int64_t max) {
      const auto& v = part.value(key, nlohmann::json());
      if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > max)
        throw fail(at + "." + key, "must be a positive integer (at most " + std::to_string(max) +
                                       "), got " + v.dump());
      return v.get<int64_t>();
    };
    pp.gpu = text("gpu", true);
    pp.node_type = text("node_type", false);
    pp.compute_capability = text("compute_capability", false);
    pp.nodes = count("nodes", kMaxNodes);
    pp.gpus_per_node = count("gpus_per_node", kMaxGpus);
    pp.per_gpu_batch = count("per_gpu_batch", kMaxBatch);
    if (part.contains("device")) {
      const std::string device = text("device", false);
      if (device != "cpu")
        throw fail(at + ".device", "must be \"cpu\", got " + part["device"].dump());
      pp.cpu = true;
      pp.threads_per_rank = int(count("threads_per_rank", kMaxGpus));
    }
    if (part.contains("node_names")) {
      const std::string names_at = at + ".node_names";
      const auto& names = part["node_names"];
      if (!names.is_array()) throw fail(names_at, "must be an array of node names");
      for (size_t k = 0; k < names.size(); ++k) {
        const std::string name_at = names_at + "[" + std::to_string(k) + "]";
        if (!names[k].is_string() || names[k].get<std::string>().empty())
          throw fail(name_at, "must be a non-empty string, got " + ShownJsonValue(names[k]));
        // Each a Slurm hostlist ("alpha[0001-2500]"), as the estimator writes a part's nodes.
        std::vector<std::string> expanded;
        try {
          expanded = ExpandHostlist(names[k].get<std::string>(), "");
        } catch (const UsageError& e) {
          throw fail(name_at, e.what());
        }
        if (pp.node_names.size() + expanded.size() > kMaxHostlistNames)
          throw fail(names_at, "more than " + std::to_string(kMaxHostlistNames) + " names");
        pp.node_names.insert(pp.node_names.end(), expanded.begin(), expanded.end());
      }
    }
    out->push_back(pp);
  }
}

// "observations": where the job's record goes and what it ran; checked when present.
template <typename Fail>
void ParseObservations(const nlohmann::json& o, const Fail& fail, LaunchPlan* p) {
  if (!o.is_object()) throw fail("observations", "must be an object, got " + ShownJsonValue(o));
  auto text = [&](const char* key) {
    if (!o.contains(key)) return std::string();
    if (!o[key].is_string())
      throw fail(std::string("observations.") + key,
                 "must be a string, got " + ShownJsonValue(o[key]));
    return o[key].get<std::string>();
  };
  p->observations_store = text("store");
  p->observations_gpu = text("gpu");
  p->model_key = text("model_key");
  if (o.contains("limit")) {
    const auto& v = o["limit"];
    if (!v.is_number_integer() || v.get<int64_t>() < 1)
      throw fail("observations.limit", "must be a positive integer, got " + ShownJsonValue(v));
    p->observations_limit = v.get<int64_t>();
  }
  if (o.contains("features") && !o["features"].is_null()) {
    if (!o["features"].is_object())
      throw fail("observations.features",
                 "must be an object, got " + ShownJsonValue(o["features"]));
    p->model_features = o["features"].dump();
  }
}

// allocation.shared_host_cores, leniently: anything but a sensible count is none, never an
// error (SharedHostCoresOfPlan reads it before MPI_Init, where a bad plan is not yet anyone's
// to report, and ParsePlan reads it the same way).
int SharedHostCoresOf(const nlohmann::json& allocation) {
  const nlohmann::json cores = allocation.value("shared_host_cores", nlohmann::json());
  return cores.is_number_integer() && cores.get<int64_t>() > 0 && cores.get<int64_t>() < (1 << 20)
             ? int(cores.get<int64_t>())
             : 0;
}

}  // namespace

void CheckPlannedSpec(const LaunchPlan& plan, const std::string& trained,
                      const std::string& origin) {
  if (plan.spec.empty()) return;
  std::error_code ec;
  if (std::filesystem::equivalent(plan.spec, trained, ec)) return;
  std::string planned_text, trained_text, why;
  if (!ReadFileText(plan.spec, size_t(1) << 20, &planned_text, &why) ||
      !ReadFileText(trained, size_t(1) << 20, &trained_text, &why))
    return;  // cannot tell (the planner's file is not on this node): the run's own checks stand
  const nlohmann::json a = nlohmann::json::parse(planned_text, nullptr, false);
  const nlohmann::json b = nlohmann::json::parse(trained_text, nullptr, false);
  if (a.is_discarded() || b.is_discarded() || a == b) return;
  throw UsageError(origin + ": spec: the plan was made for " + plan.spec +
                   ", but this run trains " + trained +
                   ", a different spec: train the planned one, plan this one "
                   "(--dlh-auto=spec=" +
                   trained + "), or --no-plan to train it without a plan");
}

LaunchPlan ParsePlan(const std::string& text, const std::string& origin) {
  nlohmann::json j;
  JsonProblem problem;
  if (!ParseJsonStrict(text, &j, &problem))
    throw UsageError(origin + ": " + (problem.path.empty() ? "" : problem.path + ": ") +
                     problem.message);
  auto fail = [&](const std::string& field, const std::string& why) -> UsageError {
    return UsageError(origin + ": " + field + ": " + why);
  };
  if (!j.is_object()) throw fail("plan", "must be a JSON object");
  if (!j.contains("format_version") || j["format_version"] != 1)
    throw fail("format_version", "must be 1");
  LaunchPlan p;
  p.present = true;
  const auto& gb = j.value("global_batch", nlohmann::json());
  if (!gb.is_number_integer() || gb.get<int64_t>() <= 0)
    throw fail("global_batch", "must be a positive integer, got " + gb.dump());
  p.global_batch = gb.get<int64_t>();
  const auto& lr = j.value("lr", nlohmann::json());
  // A plan made from a program's profile may have no rate: the program never said its own
  // (docs/reference/run.md, "Planning from a profile"); `run` then gives it no DLH_LR.
  const bool rate_may_be_unknown = j.contains("profile");
  if (!lr.is_number() || !(lr.get<double>() > 0 || (rate_may_be_unknown && lr.get<double>() == 0)))
    throw fail("lr", "must be a positive number, got " + lr.dump());
  p.lr = lr.get<double>();
  const auto& source = j.value("lr_source", nlohmann::json("linear"));
  if (source != "find" && source != "linear")
    throw fail("lr_source", "must be \"find\" or \"linear\", got " + source.dump());
  p.lr_source = source.get<std::string>();
  const auto& wu = j.value("warmup_epochs", nlohmann::json(0.0));
  if (!wu.is_number() || wu.get<double>() < 0)
    throw fail("warmup_epochs", "must be a non-negative number, got " + wu.dump());
  p.warmup_epochs = wu.get<double>();
  // The spec the plan was made for (the planner's absolute path; absent in hand-made plans),
  // unless it planned a program from its profile.
  if (j.contains("spec") && !j.contains("profile")) {
    if (!j["spec"].is_string())
      throw fail("spec", "must be a string, got " + ShownJsonValue(j["spec"]));
    p.spec = j["spec"].get<std::string>();
  }
  // Checked like the fields above: value("gpus", 0) converted 3.1e+301 to int (undefined
  // behaviour) and value() throws nlohmann's type_error, not a UsageError, for a value of
  // another type (tests/fuzz/plan_fuzz).
  if (j.contains("allocation") && j["allocation"].is_object()) {
    const auto& gpus = j["allocation"].value("gpus", nlohmann::json(0));
    if (!gpus.is_number_integer() || gpus.get<int64_t>() < 0 || gpus.get<int64_t>() > INT_MAX)
      throw fail("allocation.gpus", "must be a non-negative integer, got " + gpus.dump());
    p.gpus = int(gpus.get<int64_t>());
    ParseParts(j["allocation"], fail, &p.parts);
    p.shared_host_cores = SharedHostCoresOf(j["allocation"]);
  }
  // Optional: a site may ask every planned job to balance its batches.
  if (j.contains("balance")) {
    const auto& b = j["balance"];
    if (!b.is_string() || (b != "off" && b != "adaptive"))
      throw fail("balance", "must be \"off\" or \"adaptive\", got " + ShownJsonValue(b));
    p.balance = b.get<std::string>();
  }
  // Optional: a pipeline (estimator/recommend: the network fits no GPU whole).
  if (j.contains("parallel")) {
    const auto& par = j["parallel"];
    auto count = [&](const char* key) {
      const auto& v = par.is_object() ? par.value(key, nlohmann::json()) : nlohmann::json();
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > INT_MAX)
        throw fail(std::string("parallel.") + key, "must be a positive integer, got " + v.dump());
      return int(v.get<int64_t>());
    };
    p.pipeline_stages = count("pipeline_stages");
    p.micro_batches = count("micro_batches");
  }
  const auto& why = j.value("why", nlohmann::json(""));
  if (!why.is_string()) throw fail("why", "must be a string, got " + why.dump());
  p.summary = why.get<std::string>();
  // Optional, checked when present: non-negative finite numbers.
  auto seconds = [&](const nlohmann::json& parent, const char* key, const std::string& field) {
    if (!parent.contains(key)) return 0.0;
    const auto& v = parent[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      throw fail(field, "must be a non-negative number, got " + v.dump());
    return v.get<double>();
  };
  if (j.contains("predicted") && j["predicted"].is_object()) {
    const auto& pr = j["predicted"];
    p.predicted_total_s = seconds(pr, "total_s", "predicted.total_s");
    p.predicted_step_s = seconds(pr, "step_s", "predicted.step_s");
    p.predicted_upper_s = seconds(pr, "upper_s", "predicted.upper_s");
    const double steps = seconds(pr, "steps", "predicted.steps");
    if (steps > double(INT64_MAX / 2)) throw fail("predicted.steps", "too large");
    p.predicted_steps = int64_t(steps);
    p.predicted_compute_s = seconds(pr, "compute_s", "predicted.compute_s");
    p.predicted_comm_s = seconds(pr, "comm_s", "predicted.comm_s");
    if (pr.contains("phases") && pr["phases"].is_object()) {
      const auto& ph = pr["phases"];
      // The launcher measures start-up as everything before its first step.
      p.predicted_startup_s = seconds(ph, "startup_s", "predicted.phases.startup_s") +
                              seconds(ph, "data_s", "predicted.phases.data_s");
      // Staging runs before the training step, in a job step of its own: the run compares
      // the rest with what it measured.
      const double stage_s = seconds(ph, "stage_s", "predicted.phases.stage_s");
      p.predicted_total_s = std::max(0.0, p.predicted_total_s - stage_s);
      if (p.predicted_upper_s > 0)
        p.predicted_upper_s = std::max(0.0, p.predicted_upper_s - stage_s);
      p.predicted_steps_s = seconds(ph, "steps_s", "predicted.phases.steps_s") +
                            seconds(ph, "warmup_s", "predicted.phases.warmup_s");
      p.predicted_eval_s = seconds(ph, "eval_s", "predicted.phases.eval_s");
      p.predicted_checkpoint_s = seconds(ph, "checkpoint_s", "predicted.phases.checkpoint_s");
    }
  }
  p.time_limit_s = seconds(j, "time_limit_s", "time_limit_s");
  if (j.contains("observations")) ParseObservations(j["observations"], fail, &p);
  return p;
}

bool PlanHasGpus(const LaunchPlan& plan) {
  for (const PlanPart& part : plan.parts)
    if (part.cpu) return false;  // allocation.gpus counts a CPU plan's ranks
  if (plan.gpus > 0) return true;
  for (const PlanPart& part : plan.parts)
    if (part.gpus() > 0) return true;
  return false;
}

int SharedHostCoresOfPlan(const std::string& plan_json) {
  const nlohmann::json plan = nlohmann::json::parse(plan_json, nullptr, false);
  if (!plan.is_object() || !plan.contains("allocation") || !plan["allocation"].is_object())
    return 0;
  return SharedHostCoresOf(plan["allocation"]);
}

int ThreadsOnSharedHost(int cores, int job_ranks) {
  return std::max(1, cores / std::max(1, job_ranks));
}

std::string ApplyPlannedThreads(const std::string& plan_json, const std::string& origin,
                                int job_ranks, int* threads) {
  if (*threads > 0) return "";
  if (const char* env = std::getenv("OPENBLAS_NUM_THREADS"); env && std::atoi(env) > 0) return "";
  if (plan_json.empty()) return "";
  LaunchPlan plan;
  try {
    plan = ParsePlan(plan_json, origin);
  } catch (const UsageError&) {
    return "";
  }
  for (const PlanPart& part : plan.parts)
    if (part.cpu && part.threads_per_rank > 0) *threads = part.threads_per_rank;
  if (*threads > 0) return "as the plan (" + origin + ") asked on CPU nodes";
  // Fake nodes of one machine (a demo or test cluster): each node's slurmd offers the whole
  // machine's cores, so one rank a node would take them all, and two such ranks ran 2 threads
  // each on 2 cores: 22% (an MLP) and 13% (a strided CNN) slower a step than 1 thread each
  // (2026-12-03, srun -N2 -n2, 400 steps, twice), which is what the plan predicted them at.
  if (const int cores = plan.shared_host_cores; cores > 0 && job_ranks > 0) {
    *threads = ThreadsOnSharedHost(cores, job_ranks);
    return "the plan (" + origin + ") shares one machine's " + std::to_string(cores) +
           " cores among the job's " + Counted(job_ranks, "rank");
  }
  return "";
}

std::string PlanGpuRequirement(const LaunchPlan& plan, const std::string& origin) {
  if (!plan.present || plan.parts.empty()) return "";
  std::string types;
  for (const PlanPart& part : plan.parts) {
    if (part.compute_capability.empty()) return "";
    types += (types.empty() ? "" : " and ") + part.gpu + " (compute capability " +
             part.compute_capability + ")";
  }
  return "the plan (" + (origin.empty() ? std::string("DLH_PLAN") : origin) + ") put this job on " +
         types + " GPUs";
}

void ApplyPlan(const LaunchPlan& plan, TrainSpec* spec) {
  if (!plan.present) return;
  if (plan.global_batch > int64_t(1) << 30) throw UsageError("DLH_PLAN: global_batch: too large");
  spec->batch_size = int(plan.global_batch);
  spec->optimizer.lr = plan.lr;
  spec->schedule.warmup_epochs = std::min(plan.warmup_epochs, double(spec->epochs));
  // The plan's pipeline, unless the spec lays out its own.
  if (plan.pipeline_stages > 1 && !spec->parallel.pipelined()) {
    if (plan.pipeline_stages > int(spec->layers.size()) || plan.micro_batches > spec->batch_size)
      throw UsageError("DLH_PLAN: parallel: " + std::to_string(plan.pipeline_stages) +
                       " stages of " + std::to_string(plan.micro_batches) +
                       " micro-batches do not fit the spec's " +
                       std::to_string(spec->layers.size()) + " layers and batch " +
                       std::to_string(spec->batch_size));
    spec->parallel.pipeline_stages = plan.pipeline_stages;
    spec->parallel.micro_batches = plan.micro_batches;
  }
}

void ResolvePlanSource(bool no_plan, bool plan_given, std::string* json, std::string* origin) {
  if (no_plan) {
    json->clear();
  } else if (plan_given) {
    const std::string path = *json;
    std::string why;
    if (!ReadFileText(path, 1 << 20, json, &why))
      throw UsageError("--plan: " + path + ": cannot read: " + why);
    *origin = path;
  } else if (const char* env = std::getenv("DLH_PLAN")) {
    *json = env;
  } else if (const char* spank_env = std::getenv("SLURM_SPANK_DLH_PLAN")) {
    *json = spank_env;
    *origin = "SLURM_SPANK_DLH_PLAN";
  }
}

void ResolveGpuType(bool option_given, std::string* type, std::string* origin, bool* given) {
  if (option_given) {
    *given = true;
  } else if (const char* env = std::getenv("DLH_GPU_TYPE"); env && *env) {
    *type = env;
    *origin = "DLH_GPU_TYPE";
  }
}

}  // namespace dlh
