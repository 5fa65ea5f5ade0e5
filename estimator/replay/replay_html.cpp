// DLH replay — the HTML page (see replay_report.hpp): what was replayed, the table, and per
// policy the deadlines met, energy, GPU-hours, the queueing delays' distribution and the
// utilisation over time, as inline SVG charts (common/svg_chart.hpp).
#include <cstdio>

#include "common/duration.hpp"
#include "common/html_page.hpp"
#include "common/svg_chart.hpp"
#include "estimator/replay/replay_report.hpp"

namespace dlh::replay {
namespace {

// One bar per policy.
std::string Bars(const std::vector<PolicyMetrics>& metrics, const std::string& title,
                 const std::string& y_label, double (*value)(const PolicyMetrics&),
                 const char* fmt) {
  svg::Chart chart(title, "policy", y_label);
  svg::Series s("", svg::Style::Bars);
  for (size_t i = 0; i < metrics.size(); ++i) {
    chart.x_categories.push_back(metrics[i].policy);
    s.x.push_back(double(i));
    s.y.push_back(value(metrics[i]));
    s.labels.push_back(metrics[i].policy + ": " + Format(fmt, value(metrics[i])));
  }
  chart.series.push_back(std::move(s));
  chart.height = 260;
  return svg::Render(chart);
}

}  // namespace

std::string ReplayHtml(const ReplayInfo& info, const std::vector<PolicyMetrics>& metrics) {
  HtmlPage page("DLH replay: " + info.trace + " on " + info.cluster);
  page.heading("What was replayed");
  std::vector<std::pair<std::string, std::string>> facts = {
      {"cluster", info.cluster},
      {"capacity", std::to_string(info.gpus) + " GPUs" +
                       (info.cpu_nodes ? " and " + std::to_string(info.cpu_nodes) + " CPU nodes"
                                       : std::string())},
  };
  for (const std::string& nt : info.node_types) facts.emplace_back("node type", nt);
  facts.emplace_back(
      "trace", info.trace + ": " + std::to_string(info.jobs) + " jobs" +
                   (info.skipped ? ", " + std::to_string(info.skipped) + " rows left out" : ""));
  facts.emplace_back("seed", std::to_string(info.seed));
  if (info.generated) {
    facts.emplace_back("offered load", Format("%.2f", info.generator.load));
    facts.emplace_back("deadlines",
                       Format("%.0f%% of jobs, ", 100 * info.generator.deadline_share) +
                           Format("a log-uniform multiple of their best-case time from %g",
                                  info.generator.deadline_lo) +
                           Format(" to %g", info.generator.deadline_hi));
  }
  facts.emplace_back("scheduler", "FIFO + EASY backfill, " + std::to_string(info.backfill_depth) +
                                      " jobs tried behind the head per pass");
  facts.emplace_back("replay time", Format("%.1f s", info.total_s) +
                                        Format(" (trace and networks %.1f s)", info.prepare_s));
  page.facts(facts);

  page.heading("Per policy");
  std::vector<std::vector<std::string>> rows = {
      {"policy", "jobs run", "deadlines met", "energy (MWh)", "GPU-hours", "devices/job",
       "wait mean", "wait median", "wait p95", "utilisation", "makespan", "replay time"}};
  for (const PolicyMetrics& m : metrics)
    rows.push_back({m.policy, std::to_string(m.ran) + " of " + std::to_string(m.jobs),
                    m.with_deadline ? Format("%.1f%%", 100 * m.met_share()) : "-",
                    Format("%.1f", m.energy_j / 3.6e9), Format("%.0f", m.gpu_hours),
                    Format("%.2f", m.mean_units), HumanDuration(std::max(1.0, m.wait_mean_s)),
                    HumanDuration(std::max(1.0, m.wait_median_s)),
                    HumanDuration(std::max(1.0, m.wait_p95_s)),
                    Format("%.1f%%", 100 * m.utilisation), HumanDuration(m.makespan_s),
                    Format("%.1f s", m.wall_s)});
  page.table(rows);
  page.raw(Bars(
      metrics, "Deadlines met", "% of jobs with a deadline",
      [](const PolicyMetrics& m) { return 100 * m.met_share(); }, "%.1f%%"));
  page.raw(Bars(
      metrics, "Energy of the jobs (idle nodes not counted)", "MWh",
      [](const PolicyMetrics& m) { return m.energy_j / 3.6e9; }, "%.1f MWh"));
  page.raw(Bars(
      metrics, "GPU-hours", "device-hours", [](const PolicyMetrics& m) { return m.gpu_hours; },
      "%.0f GPU-hours"));

  svg::Chart waits("Queueing delay: its distribution over the jobs", "share of jobs (%)",
                   "wait (hours)");
  svg::Chart busy("Utilisation over time", "hours from the first submission", "devices busy (%)");
  for (const PolicyMetrics& m : metrics) {
    svg::Series w(m.policy);
    for (size_t k = 0; k < m.wait_quantiles.size(); ++k) {
      w.x.push_back(double(k));
      w.y.push_back(m.wait_quantiles[k] / 3600);
    }
    waits.series.push_back(std::move(w));
    svg::Series b(m.policy);
    b.x = m.series_hours;
    for (double f : m.series_busy) b.y.push_back(100 * f);
    busy.series.push_back(std::move(b));
  }
  page.raw(svg::Render(waits));
  page.raw(svg::Render(busy));

  page.heading("Assumptions");
  for (const std::string& a : info.assumptions) page.paragraph(a);
  page.paragraph(
      "docs/reference/replay.md describes the simulation, the generator and its sources, and "
      "the trace file's format.");
  return page.render();
}

}  // namespace dlh::replay
