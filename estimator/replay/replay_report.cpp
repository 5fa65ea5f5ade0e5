// DLH replay — the Markdown table and the JSON (see replay_report.hpp).
#include "estimator/replay/replay_report.hpp"

#include <cstdio>

#include "common/duration.hpp"

namespace dlh::replay {

std::string Format(const char* fmt, double v) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

namespace {

std::string Hours(double seconds) {
  if (seconds < 1) return "0 s";
  return HumanDuration(seconds);
}

const PolicyMetrics* Baseline(const std::vector<PolicyMetrics>& metrics) {
  for (const PolicyMetrics& m : metrics)
    if (m.policy == "user") return &m;
  return nullptr;
}

}  // namespace

std::vector<std::string> ReplayAssumptions() {
  return {
      "Each job is planned once, when it is submitted, as sbatch --dlh-auto plans it; its "
      "request then waits unchanged.",
      "A job's real time is the recommender's prediction for the allocation it got times "
      "exp(log_sigma x z), z one standard normal draw per job shared by every policy, "
      "log_sigma the uncertainty of its devices' speed; its energy is stretched alike.",
      "Energy counts the jobs' own predicted energy (their devices and their nodes' base "
      "power while they run); nodes left idle are not counted.",
      "Jobs run to their end even past their time limit (DLH's jobs checkpoint and requeue "
      "at the signal before it; the requeue's wait is not modelled): a limit is only what "
      "the scheduler's reservations assume.",
      "The scheduler is FIFO with EASY backfill; one-node jobs share nodes (best fit), "
      "jobs of several nodes take whole nodes.",
      "A deadline is met when the job ends within it of its submission; a job that never "
      "ran misses it.",
  };
}

std::string ReplayTable(const std::vector<PolicyMetrics>& metrics) {
  const PolicyMetrics* base = Baseline(metrics);
  std::string out =
      "| policy | jobs run | deadlines met | vs user | energy (MWh) | vs user | GPU-hours | "
      "devices/job | wait mean | median | p95 | utilisation | makespan | replay time |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const PolicyMetrics& m : metrics) {
    const bool is_base = base == &m;
    const std::string met_delta =
        !base || is_base || base->with_deadline == 0
            ? "-"
            : Format("%+.1f pts", 100 * (m.met_share() - base->met_share()));
    const std::string energy_delta =
        !base || is_base || base->energy_j <= 0
            ? "-"
            : Format("%+.1f%%", 100 * (m.energy_j / base->energy_j - 1));
    out += "| " + m.policy + " | " + std::to_string(m.ran) + " of " + std::to_string(m.jobs) +
           " | " + (m.with_deadline ? Format("%.1f%%", 100 * m.met_share()) : std::string("-")) +
           " | " + met_delta + " | " + Format("%.1f", m.energy_j / 3.6e9) + " | " + energy_delta +
           " | " + Format("%.0f", m.gpu_hours) + " | " + Format("%.2f", m.mean_units) + " | " +
           Hours(m.wait_mean_s) + " | " + Hours(m.wait_median_s) + " | " + Hours(m.wait_p95_s) +
           " | " + Format("%.1f%%", 100 * m.utilisation) + " | " + Hours(m.makespan_s) + " | " +
           Format("%.1f s", m.wall_s) + " |\n";
  }
  return out;
}

nlohmann::json ReplayJson(const ReplayInfo& info, const std::vector<PolicyMetrics>& metrics) {
  nlohmann::json j;
  j["cluster"] = {{"name", info.cluster},
                  {"node_types", info.node_types},
                  {"capacity_units", info.capacity_units},
                  {"gpus", info.gpus},
                  {"cpu_nodes", info.cpu_nodes}};
  j["trace"] = {
      {"source", info.trace}, {"jobs", info.jobs}, {"skipped", info.skipped}, {"seed", info.seed}};
  if (info.generated)
    j["trace"]["generator"] = {{"load", info.generator.load},
                               {"deadline_share", info.generator.deadline_share},
                               {"deadline_multiple",
                                {{"distribution", "log-uniform"},
                                 {"lo", info.generator.deadline_lo},
                                 {"hi", info.generator.deadline_hi}}},
                               {"type_share", info.generator.type_share}};
  j["scheduler"] = {{"kind", "FIFO + EASY backfill"}, {"backfill_depth", info.backfill_depth}};
  j["assumptions"] = info.assumptions;
  j["wall_s"] = {{"prepare", info.prepare_s}, {"total", info.total_s}};
  nlohmann::json policies = nlohmann::json::array();
  for (const PolicyMetrics& m : metrics) {
    policies.push_back(
        {{"policy", m.policy},
         {"jobs", m.jobs},
         {"ran", m.ran},
         {"unplanned", m.unplanned},
         {"with_deadline", m.with_deadline},
         {"deadlines_met", m.met},
         {"deadlines_met_share", m.met_share()},
         {"energy_j", m.energy_j},
         {"idle_energy_counted", false},
         {"gpu_hours", m.gpu_hours},
         {"mean_units_per_job", m.mean_units},
         {"wait_s",
          {{"mean", m.wait_mean_s},
           {"median", m.wait_median_s},
           {"p95", m.wait_p95_s},
           {"quantiles", m.wait_quantiles}}},
         {"utilisation", m.utilisation},
         {"utilisation_by_node_type", m.utilisation_by_type},
         {"makespan_s", m.makespan_s},
         {"wall_s", m.wall_s},
         {"recommend_calls", m.recommend_calls},
         {"utilisation_over_time", {{"hours", m.series_hours}, {"busy_fraction", m.series_busy}}},
         {"notes", m.notes}});
  }
  j["policies"] = policies;
  return j;
}

}  // namespace dlh::replay
