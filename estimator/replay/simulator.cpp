// DLH replay — the discrete-event loop (see simulator.hpp).
#include "estimator/replay/simulator.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <queue>
#include <stdexcept>

namespace dlh::replay {

std::vector<bool> CountedPools(const std::vector<Pool>& pools) {
  std::vector<bool> counted;
  bool any = false;
  for (const Pool& p : pools) {
    counted.push_back(p.gpu);
    any = any || p.gpu;
  }
  if (!any) counted.assign(pools.size(), true);
  return counted;
}

Simulation Simulate(const std::vector<Pool>& pools, const std::vector<double>& submit_s,
                    const Planner& plan, const SchedulerOptions& options) {
  const size_t n = submit_s.size();
  Simulation sim;
  sim.jobs.resize(n);
  sim.busy_unit_seconds.assign(pools.size(), 0.0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return submit_s[a] < submit_s[b]; });
  for (size_t i = 0; i < n; ++i) sim.jobs[i].submit_s = submit_s[i];
  if (n > 0) sim.first_submit_s = submit_s[order.front()];
  sim.last_end_s = sim.first_submit_s;

  Scheduler scheduler(pools, options);
  const std::vector<bool> counted = CountedPools(pools);
  auto counted_busy = [&] {
    int busy = 0;
    for (size_t p = 0; p < pools.size(); ++p)
      if (counted[p]) busy += scheduler.BusyUnits(int(p));
    return busy;
  };
  using End = std::pair<double, int>;
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  size_t next = 0;
  double last_t = sim.first_submit_s;
  int last_busy = 0;
  while (next < n || !ends.empty()) {
    const double t =
        std::min(next < n ? submit_s[order[next]] : kInf, ends.empty() ? kInf : ends.top().first);
    for (size_t p = 0; p < pools.size(); ++p)
      sim.busy_unit_seconds[p] += double(scheduler.BusyUnits(int(p))) * (t - last_t);
    last_t = t;
    while (!ends.empty() && ends.top().first <= t) {
      const int job = ends.top().second;
      ends.pop();
      scheduler.Finish(job);
      sim.last_end_s = std::max(sim.last_end_s, sim.jobs[size_t(job)].end_s);
    }
    for (; next < n && submit_s[order[next]] <= t; ++next) {
      const int job = int(order[next]);
      Request request;
      try {
        request = plan(job, t, scheduler.FreeNodes());
        if (!request.shapes.empty()) {
          scheduler.Submit(job, std::move(request));
          continue;
        }
      } catch (const std::exception& e) {
        if (sim.notes.size() < 5) sim.notes.push_back(e.what());
      }
      ++sim.unplanned;
    }
    for (const Started& s : scheduler.Pass(t)) {
      JobRun& run = sim.jobs[size_t(s.job)];
      run.shape = scheduler.request(s.job).shapes[size_t(s.shape)];
      run.start_s = t;
      run.end_s = t + run.shape.run_s;
      ends.emplace(run.end_s, s.job);
    }
    if (counted_busy() != last_busy) {
      last_busy = counted_busy();
      sim.busy_steps.emplace_back(t, last_busy);
    }
  }
  // Every request fits the empty cluster, and the head of the queue starts once nothing
  // runs: a job left waiting means the scheduler is broken.
  if (scheduler.waiting() > 0)
    throw std::logic_error("replay: " + std::to_string(scheduler.waiting()) +
                           " jobs never started");
  return sim;
}

}  // namespace dlh::replay
