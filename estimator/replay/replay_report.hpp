// DLH replay — the figures as people and programs read them: a Markdown table, JSON and one
// self-contained HTML page (inline SVG, nothing fetched).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "estimator/replay/replay.hpp"
#include "estimator/replay/trace.hpp"

namespace dlh::replay {

// printf of one number, for the report's and the page's cells ("%.1f%%").
std::string Format(const char* fmt, double v);

// What was replayed, for the report's heading.
struct ReplayInfo {
  std::string cluster;                  // its name and file
  std::vector<std::string> node_types;  // "gpu-a100: 125 x 8 a100", in the cluster's order
  int capacity_units = 0;               // devices: GPUs, and a CPU node's cores
  int gpus = 0, cpu_nodes = 0;          // of which GPUs; CPU nodes (cpu_node_types)
  std::string trace;                    // "generated" or the file
  int jobs = 0, skipped = 0;
  uint64_t seed = 0;
  bool generated = false;
  GeneratorOptions generator;  // when generated
  int backfill_depth = 0;
  double prepare_s = 0;  // generating or reading the trace and resolving its networks
  double total_s = 0;    // the whole replay, every policy
  std::vector<std::string> assumptions;  // one sentence each
};

// The assumptions every replay makes, one sentence each (the report repeats them).
std::vector<std::string> ReplayAssumptions();

// | policy | jobs run | deadlines met | energy | GPU-hours | wait mean/median/p95 |
// utilisation | makespan | replay time |, with energy and deadlines met against the user
// policy's when it was replayed.
std::string ReplayTable(const std::vector<PolicyMetrics>& metrics);
nlohmann::json ReplayJson(const ReplayInfo& info, const std::vector<PolicyMetrics>& metrics);
std::string ReplayHtml(const ReplayInfo& info, const std::vector<PolicyMetrics>& metrics);

}  // namespace dlh::replay
