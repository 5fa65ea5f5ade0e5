// DLH replay — every policy on the same jobs, and their figures (see replay.hpp).
#include "estimator/replay/replay.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace dlh::replay {
namespace {

constexpr int kSeriesBins = 200;

}  // namespace

std::vector<Pool> PoolsOf(const Cluster& cluster) {
  std::vector<Pool> pools;
  for (const NodeType& nt : cluster.node_types)
    pools.push_back({nt.name, nt.nodes, nt.gpus_per_node, !nt.cpu});
  return pools;
}

PolicyMetrics Measure(const std::string& policy, const std::vector<ReplayJob>& jobs,
                      const Simulation& sim, const std::vector<Pool>& pools) {
  PolicyMetrics m;
  m.policy = policy;
  m.jobs = int(jobs.size());
  m.unplanned = sim.unplanned;
  m.notes = sim.notes;
  const std::vector<bool> counted = CountedPools(pools);
  std::vector<double> waits;
  double units = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobRun& run = sim.jobs[i];
    if (run.start_s < 0) continue;
    ++m.ran;
    waits.push_back(run.start_s - run.submit_s);
    m.energy_j += run.shape.energy_j;
    const double duration = run.end_s - run.start_s;
    for (const PartShape& part : run.shape.parts)
      if (counted[size_t(part.pool)]) m.gpu_hours += part.nodes * part.per_node * duration / 3600;
    units += run.shape.units();
    if (jobs[i].deadline_s > 0) {
      ++m.with_deadline;
      if (run.end_s - run.submit_s <= jobs[i].deadline_s) ++m.met;
    }
  }
  // A job that never ran misses its deadline.
  for (size_t i = 0; i < jobs.size(); ++i)
    if (sim.jobs[i].start_s < 0 && jobs[i].deadline_s > 0) ++m.with_deadline;
  if (m.ran > 0) m.mean_units = units / m.ran;
  std::sort(waits.begin(), waits.end());
  auto quantile = [&](double q) {
    if (waits.empty()) return 0.0;
    return waits[size_t(std::lround(q * double(waits.size() - 1)))];
  };
  for (int k = 0; k <= 100; ++k) m.wait_quantiles.push_back(quantile(k / 100.0));
  if (!waits.empty()) {
    double sum = 0;
    for (double w : waits) sum += w;
    m.wait_mean_s = sum / double(waits.size());
  }
  m.wait_median_s = quantile(0.5);
  m.wait_p95_s = quantile(0.95);
  m.makespan_s = sim.last_end_s - sim.first_submit_s;
  double capacity = 0, busy = 0;  // of the counted pools
  for (size_t p = 0; p < pools.size(); ++p) {
    const double cap = double(pools[p].nodes) * pools[p].units_per_node;
    if (counted[p]) {
      capacity += cap;
      busy += sim.busy_unit_seconds[p];
    }
    m.utilisation_by_type.push_back(
        cap > 0 && m.makespan_s > 0 ? sim.busy_unit_seconds[p] / (cap * m.makespan_s) : 0);
  }
  if (capacity > 0 && m.makespan_s > 0) m.utilisation = busy / (capacity * m.makespan_s);

  // Utilisation over time: the busy steps integrated into equal bins.
  if (m.makespan_s > 0 && capacity > 0) {
    const double width = m.makespan_s / kSeriesBins;
    std::vector<double> area(kSeriesBins, 0.0);
    for (size_t k = 0; k < sim.busy_steps.size(); ++k) {
      const double from = sim.busy_steps[k].first - sim.first_submit_s;
      const double to = k + 1 < sim.busy_steps.size()
                            ? sim.busy_steps[k + 1].first - sim.first_submit_s
                            : m.makespan_s;
      const double level = sim.busy_steps[k].second;
      for (double t = from; t < to;) {
        int bin = std::min(kSeriesBins - 1, int(t / width));
        auto end_of = [&](int b) {
          return b == kSeriesBins - 1 ? to : std::min(to, (b + 1) * width);
        };
        // t on a bin's edge may round into the bin before: step on, never lump the rest of
        // the interval into one bin (which once drew 800% busy).
        while (end_of(bin) <= t && bin < kSeriesBins - 1) ++bin;
        const double bin_end = end_of(bin);
        if (bin_end <= t) break;
        area[size_t(bin)] += level * (bin_end - t);
        t = bin_end;
      }
    }
    for (int b = 0; b < kSeriesBins; ++b) {
      m.series_hours.push_back((b + 0.5) * width / 3600);
      m.series_busy.push_back(area[size_t(b)] / (width * capacity));
    }
  }
  return m;
}

std::vector<PolicyMetrics> RunReplay(const std::vector<ReplayJob>& jobs, Workload& workload,
                                     const ReplayOptions& options) {
  const std::vector<Pool> pools = PoolsOf(workload.cluster());
  std::vector<double> submit;
  for (const ReplayJob& j : jobs) submit.push_back(j.submit_s);
  std::vector<PolicyMetrics> out;
  for (Policy policy : options.policies) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t calls0 = workload.recommend_calls;
    const Planner plan = [&](int job, double, const std::vector<int>& free_nodes) {
      return PlanRequest(policy, jobs[size_t(job)], workload, free_nodes);
    };
    const Simulation sim = Simulate(pools, submit, plan, options.scheduler);
    PolicyMetrics m = Measure(PolicyName(policy), jobs, sim, pools);
    m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m.recommend_calls = workload.recommend_calls - calls0;
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace dlh::replay
