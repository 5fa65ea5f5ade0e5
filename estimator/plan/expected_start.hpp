// DLH planning core — when nothing free now meets the deadline, which allocation of the whole
// cluster to wait for: the one that can start soonest enough, not simply the best one.
//
// The plain fallback ("planned on all nodes, may wait") takes the best allocation of the whole
// cluster, ignoring how long its nodes stay busy: on a loaded cluster every such job then waits
// for the one most efficient type while the others idle, and misses its deadline (issue 46,
// found by `dlh-estimate replay`: with tight deadlines 3.8% met against the users' own 32.8%).
// With the time each node is expected to be free (its running jobs' time limits; Slurm knows
// them), each allocation of the whole cluster gets an expected start: the time its part's
// `nodes` nodes of its type are free, the soonest first. The choice is the best (by the
// objective) whose expected start + predicted time with the margin meets the deadline; when
// none does, the one expected to end first. Jobs waiting ahead in the queue are not counted:
// the start is the earliest the running jobs allow.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "estimator/cluster/cluster.hpp"
#include "estimator/plan/live_state.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh::plan {

// Allocations of the whole cluster weighed by their expected start when nothing free now meets
// the deadline: the best few by the objective (the rest are unlikely to be the answer, and
// each costs a why line).
constexpr int kWaitCandidates = 50;

// Per node type (the cluster's order): seconds until each of its nodes is free, ascending
// (0: free now; infinity: down, drained or reserved).
using FreeTimes = std::vector<std::vector<double>>;

// From the live nodes (LiveNode::free_in_s); std::nullopt when a busy node's time is unknown.
std::optional<FreeTimes> FreeTimesOf(const Cluster& cluster, const std::vector<LiveNode>& live);

// When `a` can start: the latest over its parts of the part's nodes-th soonest free node of
// its type (infinity when the type has too few nodes).
double ExpectedStart(const Cluster& cluster, const FreeTimes& free, const Allocation& a);

struct WaitChoice {
  size_t index = 0;    // into the allocations given
  double start_s = 0;  // its expected start
  bool meets = false;  // start + predicted time with the margin meets the deadline
};

// Among `ranked` (best first, as Recommend ranks them), the first that meets the deadline
// when it starts as expected, else the one expected to end first. `ranked` must not be empty.
WaitChoice ChooseByExpectedStart(const Job& job, const Cluster& cluster, const FreeTimes& free,
                                 const std::vector<Allocation>& ranked);

// The plan when nothing free now meets the deadline, given the best allocations of the whole
// cluster (`all`, Recommend with Job::top >= kWaitCandidates; feasible) and, when some node is
// free, the fastest allocation on the free nodes (`fastest_free`, nullptr: none): the first of
// `all` expected to start soon enough (ChooseByExpectedStart); when none is, whichever is
// expected to end first, that one or the fastest free now (it starts at once). `note` says
// which and when, for the summary line.
struct BusyPlan {
  Allocation chosen;
  double start_s = 0;
  bool meets = false;     // expected to end within the deadline
  bool free_now = false;  // the fastest on the free nodes, started at once
  size_t index = 0;       // into all.ranked when not free_now
  std::string note;
};
BusyPlan PlanWhileBusy(const Job& job, const Cluster& cluster, const FreeTimes& free,
                       const Recommendation& all, const Allocation* fastest_free);

// "expected to start in 12m (the running jobs' time limits) and end within the deadline", or
// "... and end 5m after the deadline: the soonest to end".
std::string WaitNote(const Job& job, const Allocation& a, const WaitChoice& c);

}  // namespace dlh::plan
