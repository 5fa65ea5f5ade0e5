// DLH estimator — the recommender's numbers as text (times, energies, the Slurm time limit
// from the prediction band) and the chosen allocation as the plan's JSON
// (docs/reference/plan.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "estimator/recommend/profile_speeds.hpp"
#include "estimator/recommend/recommend_detail.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh {

namespace recommend_detail {

std::string Printf(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

// 45s, 5m30s, 12m, 1h12m, 3h, 2d3h (minutes from an hour on, hours from a day on)
std::string Duration(double s) {
  if (!std::isfinite(s)) return "inf";
  long v = std::lround(std::min(std::max(0.0, s), 1e15));
  char buf[64];
  if (v < 100) {
    std::snprintf(buf, sizeof buf, "%lds", v);
  } else if (v < 3600) {
    if (v % 60 == 0)
      std::snprintf(buf, sizeof buf, "%ldm", v / 60);
    else
      std::snprintf(buf, sizeof buf, "%ldm%02lds", v / 60, v % 60);
  } else if (v < 86400) {
    long m = (v + 30) / 60;
    if (m % 60 == 0)
      std::snprintf(buf, sizeof buf, "%ldh", m / 60);
    else
      std::snprintf(buf, sizeof buf, "%ldh%02ldm", m / 60, m % 60);
  } else {
    long h = (v + 1800) / 3600;
    if (h % 24 == 0)
      std::snprintf(buf, sizeof buf, "%ldd", h / 24);
    else
      std::snprintf(buf, sizeof buf, "%ldd%ldh", h / 24, h % 24);
  }
  return buf;
}

std::string GpuHours(double h) { return Printf(h < 10 ? "%.2f GPU-h" : "%.1f GPU-h", h); }

// "+12%", "+0.4%", "-3%"
std::string Percent(double ratio) {
  double p = (ratio - 1) * 100;
  return Printf(std::fabs(p) < 1 ? "%+.1f%%" : "%+.0f%%", p);
}

}  // namespace recommend_detail

using recommend_detail::Printf;

nlohmann::json PhasesJson(const JobPhases& p) {
  return {{"startup_s", p.startup_s},     {"stage_s", p.stage_s},
          {"data_s", p.data_s},           {"warmup_s", p.warmup_s},
          {"steps_s", p.steps_s},         {"eval_s", p.eval_s},
          {"evaluations", p.evaluations}, {"checkpoint_s", p.checkpoint_s},
          {"checkpoints", p.checkpoints}};
}

nlohmann::json PlanJson(const Job& job, const Recommendation& rec, const Allocation& chosen) {
  using nlohmann::json;
  json parts = json::array();
  json sources = json::object(), energy_sources = json::object();
  int tasks_per_node = 0;
  for (const Part& p : chosen.parts) {
    parts.push_back({{"node_type", p.node_type},
                     {"gpu", p.gpu},
                     {"nodes", p.nodes},
                     {"gpus_per_node", p.gpus_per_node},
                     {"per_gpu_batch", p.per_gpu_batch}});
    // A real GPU's: the launcher then never trains such a part on the CPU (issue 42).
    if (!p.compute_capability.empty()) parts.back()["compute_capability"] = p.compute_capability;
    // A CPU node's part: its ranks are CPU engine processes with this many threads each
    // (dlh-launch sets them; the plugin asks Slurm for them with --cpus-per-task).
    if (p.cpu) {
      parts.back()["device"] = "cpu";
      parts.back()["threads_per_rank"] = p.threads_per_rank;
    }
    tasks_per_node = std::max(tasks_per_node, p.gpus_per_node);
    auto s = rec.speeds.find(p.gpu);
    if (s != rec.speeds.end()) sources[p.gpu] = s->second.source;
    if (s != rec.speeds.end() && !s->second.energy_source.empty())
      energy_sources[p.gpu] = s->second.energy_source;
  }
  const TimeLimit limit = JobTimeLimit(job, chosen);

  json j;
  j["format_version"] = 1;
  j["spec"] = job.spec.origin;
  if (job.profile) {
    j["profile"] = job.profile->origin;
    // Which types were timed, and which were scaled from which (profile_speeds.hpp).
    const ProfileSources from = ProfileSourcesOfSpeeds(rec.speeds);
    json measured = json::array();
    for (const auto& [gpu, p] : from.measured) measured.push_back(gpu);
    j["profiled"] = {{"measured", measured}, {"transferred", from.transferred}};
  }
  j["objective"] = ObjectiveName(job.objective);
  j["deadline_s"] = job.deadline_s;
  j["feasible"] = chosen.fits_memory && chosen.meets_deadline;
  j["allocation"] = {{"parts", parts},
                     {"nodes", chosen.nodes},
                     {"gpus", chosen.gpus},
                     {"tasks_per_node", tasks_per_node}};
  if (chosen.parts.size() == 1 && chosen.parts[0].cpu)
    j["allocation"]["threads_per_rank"] = chosen.parts[0].threads_per_rank;
  j["global_batch"] = chosen.global_batch;
  j["lr"] = chosen.lr;
  j["warmup_epochs"] = chosen.warmup_epochs;
  j["epochs"] = job.epochs;
  j["samples"] = job.samples;
  j["predicted"] = {{"step_s", chosen.step_s},
                    {"compute_s", chosen.compute_s},
                    {"comm_s", chosen.comm_s},
                    {"steps", chosen.steps},
                    {"total_s", chosen.total_s},
                    {"upper_s", std::max(chosen.total_s, chosen.total_upper_s)},
                    {"energy_j", chosen.energy_j},
                    {"energy_kwh", chosen.energy_j / 3.6e6},
                    {"gpu_hours", chosen.gpu_hours},
                    {"memory_gb_per_gpu", chosen.memory_bytes / 1e9},
                    {"phases", PhasesJson(chosen.phases)}};
  j["margin"] = job.margin;
  j["time_limit"] = SlurmMinutes(limit.minutes);
  j["time_limit_s"] = long(limit.seconds());
  if (limit.signal_lead_s > 0) j["signal_lead_s"] = limit.signal_lead_s;
  j["speed_source"] = sources;
  j["energy_source"] = energy_sources;
  j["why"] = chosen.why;
  // The training mode the plan was timed for (the spec's); its note, when it has one.
  const SyncSpec& sync = job.spec.sync;
  j["sync"] = {{"mode", sync.local_sgd()    ? "local_sgd"
                        : sync.stale_sync() ? "stale_sync"
                                            : "sync"}};
  if (sync.local_sgd()) j["sync"]["period"] = sync.period;
  if (sync.stale_sync()) j["sync"]["staleness"] = sync.staleness;
  if (const std::string note = SyncNote(job, chosen); !note.empty()) j["sync"]["note"] = note;
  // A pipeline: the launcher trains it whatever the spec says (its own "parallel" aside).
  if (chosen.pipeline_stages > 1) {
    const int p = chosen.pipeline_stages, m = chosen.micro_batches;
    j["parallel"] = {{"pipeline_stages", p},
                     {"micro_batches", m},
                     {"stage_first_layers", std::vector<size_t>(chosen.stage_bounds.begin(),
                                                                chosen.stage_bounds.end() - 1)},
                     {"memory_per_gpu_bytes", chosen.memory_bytes},
                     {"bubble", chosen.bubble},
                     {"stage_busy_s", chosen.stage_busy_s}};
    if (!rec.pipeline_why.empty()) j["parallel"]["why"] = rec.pipeline_why;
  }
  return j;
}

void AddSharedHostToPlan(const Cluster& cluster, nlohmann::json* plan) {
  if (cluster.runtime.shared_host_cores > 0)
    (*plan)["allocation"]["shared_host_cores"] = cluster.runtime.shared_host_cores;
}

namespace {

std::string Plural(long n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string PartText(const Part& p) {
  if (!p.cpu)
    return Plural(p.nodes, "node", "nodes") + " x " + std::to_string(p.gpus_per_node) + " " +
           p.gpu + " GPU" + (p.gpus_per_node == 1 ? "" : "s");
  return Plural(p.nodes, "CPU node", "CPU nodes") + " " + p.gpu + " x " +
         Plural(p.gpus_per_node, "rank", "ranks") + " x " +
         Plural(p.threads_per_rank, "thread", "threads");
}

std::string PartShortText(const Part& p) {
  if (!p.cpu)
    return std::to_string(p.nodes) + " x " + std::to_string(p.gpus_per_node) + " " + p.gpu;
  return std::to_string(p.nodes) + " x " + Plural(p.gpus_per_node, "rank", "ranks") + " x " +
         Plural(p.threads_per_rank, "thread", "threads") + " " + p.gpu;
}

std::string PartCellText(const Part& p) {
  return std::to_string(p.nodes) + "x" + std::to_string(p.gpus_per_node) + " " + p.gpu +
         (p.cpu ? " x" + std::to_string(p.threads_per_rank) + "t" : std::string()) + " (b" +
         std::to_string(p.per_gpu_batch) + ")";
}

std::string Si(double v) {
  const char* units[] = {"", "k", "M", "G", "T", "P"};
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 5) v /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s", v, units[u]);
  return buf;
}

std::string FormatEnergy(double j) {
  if (j < 1e3) return Printf("%.0f J", j);
  if (j < 1e6) return Printf("%.1f kJ", j / 1e3);
  if (j < 1e9) return Printf("%.1f MJ", j / 1e6);
  return Printf("%.2f GJ", j / 1e9);
}

TimeLimit JobTimeLimit(const Job& job, const Allocation& a) {
  return TimeLimitFor(a.phases, std::max(a.total_s, a.total_upper_s), job.signal);
}

std::string SlurmTimeLimit(const Job& job, const Allocation& a) {
  return SlurmMinutes(JobTimeLimit(job, a).minutes);
}

}  // namespace dlh
