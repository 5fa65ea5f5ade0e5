// DLH planning core — the expected start of an allocation (see expected_start.hpp).
#include "estimator/plan/expected_start.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/duration.hpp"
#include "estimator/plan/plan.hpp"

namespace dlh::plan {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

int TypeIndex(const Cluster& cluster, const std::string& node_type) {
  for (size_t i = 0; i < cluster.node_types.size(); ++i)
    if (cluster.node_types[i].name == node_type) return int(i);
  return -1;
}

}  // namespace

std::optional<FreeTimes> FreeTimesOf(const Cluster& cluster, const std::vector<LiveNode>& live) {
  FreeTimes out(cluster.node_types.size());
  for (size_t t = 0; t < cluster.node_types.size(); ++t) {
    const NodeType& nt = cluster.node_types[t];
    for (const LiveNode& n : live) {
      if (!IsNodeOfType(cluster, nt, n)) continue;
      double at = kNever;
      if (n.state == "down" || n.state == "drain" || n.state == "reserved") {
        at = kNever;
      } else if (IsFreeForType(cluster, nt, n)) {
        at = 0;
      } else if (n.free_in_s >= 0) {
        at = n.free_in_s;
      } else {
        return std::nullopt;  // busy, and nobody said until when
      }
      out[t].push_back(at);
    }
    std::sort(out[t].begin(), out[t].end());
  }
  return out;
}

double ExpectedStart(const Cluster& cluster, const FreeTimes& free, const Allocation& a) {
  double start = 0;
  for (const Part& p : a.parts) {
    const int t = TypeIndex(cluster, p.node_type);
    if (t < 0 || size_t(t) >= free.size() || p.nodes < 1 ||
        size_t(p.nodes) > free[size_t(t)].size())
      return kNever;
    start = std::max(start, free[size_t(t)][size_t(p.nodes) - 1]);
  }
  return start;
}

WaitChoice ChooseByExpectedStart(const Job& job, const Cluster& cluster, const FreeTimes& free,
                                 const std::vector<Allocation>& ranked) {
  WaitChoice soonest;
  double soonest_end = kNever;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const Allocation& a = ranked[i];
    const double start = ExpectedStart(cluster, free, a);
    const double end = start + a.total_s * (1 + job.margin);
    if (job.deadline_s <= 0 || end <= job.deadline_s) return {i, start, true};
    if (i == 0 || end < soonest_end) {
      soonest_end = end;
      soonest = {i, start, false};
    }
  }
  return soonest;
}

BusyPlan PlanWhileBusy(const Job& job, const Cluster& cluster, const FreeTimes& free,
                       const Recommendation& all, const Allocation* fastest_free) {
  const WaitChoice c = ChooseByExpectedStart(job, cluster, free, all.ranked);
  BusyPlan out;
  out.chosen = all.ranked[c.index];
  out.start_s = c.start_s;
  out.meets = c.meets;
  out.index = c.index;
  out.note = WaitNote(job, out.chosen, c);
  // Waiting makes no deadline either: then what is free now, if it ends sooner.
  if (!c.meets && fastest_free && fastest_free->fits_memory) {
    const double wait_end = c.start_s + out.chosen.total_s * (1 + job.margin);
    const double now_end = fastest_free->total_s * (1 + job.margin);
    if (now_end < wait_end) {
      out.chosen = *fastest_free;
      out.start_s = 0;
      out.free_now = true;
      out.note = "none meets it, waiting or not: the fastest free now, " +
                 AllocationText(*fastest_free) + ", ends soonest (" +
                 HumanDuration(now_end - job.deadline_s) + " after the deadline)";
    }
  }
  return out;
}

std::string WaitNote(const Job& job, const Allocation& a, const WaitChoice& c) {
  if (!std::isfinite(c.start_s))
    return "no start expected (its nodes run jobs without a time limit, or are down; may wait)";
  std::string s = "expected to start " +
                  (c.start_s <= 0 ? std::string("now") : "in " + HumanDuration(c.start_s)) +
                  " (the running jobs' time limits)";
  if (c.meets) return s + " and to end within the deadline";
  const double late = c.start_s + a.total_s * (1 + job.margin) - job.deadline_s;
  return s + " and to end " + HumanDuration(late) + " after the deadline: the soonest to end";
}

}  // namespace dlh::plan
