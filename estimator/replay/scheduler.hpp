// DLH replay — the replay's own batch scheduler: FIFO with EASY backfilling over node pools.
//
// Not Slurm's scheduler, but the two rules that shape a GPU cluster's queue under Slurm's
// default backfill plugin, kept simple enough to check by hand:
//   FIFO    jobs start in submission order while the first waiting job (the head) fits;
//   EASY    when the head does not fit, it gets a reservation: the earliest time its nodes
//           are free if every running job ends at its time limit (Lifka, "The ANL/IBM SP
//           scheduling system", JSSPP 1995). A later job may start now (backfill) only if
//           it fits now and cannot delay that reservation: it stays off the reserved nodes,
//           or its own time limit ends before the reservation's time. At most
//           `backfill_depth` jobs behind the head are tried per pass (as Slurm's
//           bf_max_job_test bounds its backfill).
// Placement: a part of one node (nodes == 1) may share a node with other such parts (best
// fit: the node with the fewest free units that holds it); a part of several nodes takes
// whole nodes, all of their units held, however many per node it runs on.
//
// Units are a node type's devices as the recommender counts them (Part::gpus_per_node): GPUs
// on a GPU node type, ranks on a CPU node type. Nothing here knows which.
#pragma once

#include <cstdint>
#include <limits>
#include <list>
#include <string>
#include <utility>
#include <vector>

namespace dlh::replay {

// One node type of the cluster, as the scheduler sees it.
struct Pool {
  std::string node_type;
  int nodes = 0;
  int units_per_node = 0;
  bool gpu = true;  // its units are GPUs (false: CPU ranks); the scheduler does not ask
};

// One part of an allocation: `nodes` nodes of pool `pool`, `per_node` units on each.
struct PartShape {
  int pool = 0;
  int nodes = 0;
  int per_node = 0;
};

// One way to run a job, and what it costs there.
struct Shape {
  std::vector<PartShape> parts;  // one, or two for a mix of node types
  double run_s = 0;              // how long it really runs (the replay's noisy time)
  double limit_s = 0;            // its time limit: what the reservations assume
  double energy_j = 0;           // its energy when it runs run_s
  int units() const;             // units it runs on (not the ones it holds)
};

// A job's request: the shapes it may run as, in the order tried (a user who names no GPU
// type takes any node type that holds the count; a plan is one shape).
struct Request {
  std::vector<Shape> shapes;
};

struct SchedulerOptions {
  int backfill_depth = 100;  // jobs behind the head tried for backfill per pass
};

// A job that started: where, and when it is expected to end (start + limit).
struct Started {
  int job = 0;
  int shape = 0;
  double start_s = 0;
};

class Scheduler {
 public:
  Scheduler(std::vector<Pool> pools, SchedulerOptions options);

  // Queues `job` (any id >= 0, each once) behind the jobs already waiting. Throws
  // std::invalid_argument when no shape could ever fit the empty cluster.
  void Submit(int job, Request request);
  // Starts what the rules allow at time `now`; returns the jobs started, in start order.
  std::vector<Started> Pass(double now);
  // Frees the units of a running job.
  void Finish(int job);

  // Whole nodes with no unit in use, per pool (what Slurm's node state shows as free,
  // estimator/plan/live_state.hpp).
  std::vector<int> FreeNodes() const;
  int FreeUnits(int pool) const;
  int BusyUnits() const { return busy_units_; }  // units running jobs, all pools
  int BusyUnits(int pool) const { return busy_per_pool_[size_t(pool)]; }
  size_t waiting() const { return queue_.size(); }
  size_t running() const { return running_count_; }
  const std::vector<Pool>& pools() const { return pools_; }
  const Request& request(int job) const { return requests_[size_t(job)]; }
  // The last reservation made (the head's, when it could not start): for tests.
  double last_reservation_s() const { return last_reservation_s_; }
  int last_reservation_job() const { return last_reservation_job_; }

  static constexpr double kNever = std::numeric_limits<double>::infinity();

 private:
  struct Grant {
    int pool, node, held, used;  // units held (a multi-node part: the whole node) and used
  };
  struct Running {
    bool active = false;
    double expected_end_s = 0;
    std::vector<Grant> grants;
  };
  // Free units of every node of a pool, and the nodes grouped by free units (best fit and
  // whole-node counts without a scan).
  struct PoolState {
    std::vector<int> free;                   // per node
    std::vector<std::vector<int>> at_level;  // nodes with this many free units
    std::vector<int> pos;                    // a node's index in its level's list
    std::vector<std::vector<int>> jobs_on;   // running jobs on each node
    std::vector<char> reserved;              // marked for the head during a pass
  };

  bool TryStart(int job, double now, bool respect_reservation, std::vector<Started>* out);
  bool Place(const Shape& shape, bool respect_reservation, std::vector<Grant>* grants);
  void Take(const Grant& g, int job);
  void Release(const Grant& g, int job);
  void SetFree(int pool, int node, int free);
  // The time `need` units are free on a node if the jobs on it end at their limits.
  double FreeAt(int pool, int node, int need, double now) const;
  // The earliest time a shape fits, and the nodes it would use then.
  double Reserve(const Shape& shape, double now, std::vector<std::pair<int, int>>* nodes) const;
  bool Fits(const Shape& shape) const;  // on the empty cluster

  std::vector<Pool> pools_;
  SchedulerOptions options_;
  std::vector<PoolState> state_;
  std::vector<Request> requests_;  // by job id
  std::vector<Running> running_;   // by job id
  std::list<int> queue_;           // waiting jobs, in submission order
  size_t running_count_ = 0;
  int busy_units_ = 0;
  std::vector<int> busy_per_pool_;
  double last_reservation_s_ = kNever;
  int last_reservation_job_ = -1;
};

}  // namespace dlh::replay
