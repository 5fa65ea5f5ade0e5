// DLH estimator — the recommender's inner parts, shared by its source files; callers use
// recommender.hpp. The enumeration works on plain structs (no strings, no allocation per
// candidate); only the kept few become Allocations.
//   candidates.cpp     every allocation of one node type or a mix of two, predicted and kept
//   batch_balance.cpp  the per-GPU batches of a mix, balanced by speed (and BalanceBatch)
//   device_speeds.cpp  each GPU type's speed: calibrated, scaled, profiled or roofline
//   explain.cpp        the `why` lines
//   formats.cpp        times and energies as text, the plan as JSON
//   recommender.cpp    the checks and the steps of Recommend
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "estimator/cluster/cluster.hpp"
#include "estimator/model/comm_model.hpp"
#include "estimator/model/job_time.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh::recommend_detail {

constexpr double kUsableMemory = 0.9;  // of a GPU's memory_gb, the rest for the runtime
constexpr int kMaxGroups = 16;         // GPU groups BalanceCore balances at most

// ---------------------------------------------------------------- formats.cpp

std::string Printf(const char* fmt, double a);
// 45s, 5m30s, 12m, 1h12m, 3h, 2d3h (minutes from an hour on, hours from a day on)
std::string Duration(double s);
std::string GpuHours(double h);
// "+12%", "+0.4%", "-3%"
std::string Percent(double ratio);
// Whole minutes of (1 + margin) * seconds + grace, rounded up, at least 1 (and at most 100
// years).
long LimitMinutes(double seconds, double margin, double grace_s);

// ---------------------------------------------------------------- recommender.cpp

// Throws EstimateError naming `gpu` unless fixed_s >= 0 and per_sample_s > 0, both finite.
void CheckSpeed(const std::string& gpu, const DeviceSpeed& s);
// Whether the job may use GPU type `gpu` (Job::allowed_types; empty: any).
bool Allowed(const Job& job, const std::string& gpu);

// ---------------------------------------------------------------- batch_balance.cpp

// The balancing of BalanceBatch on plain arrays (n <= kMaxGroups, per[g] > 0), so that the
// recommender's inner loop allocates nothing. Writes out[g]; sum count*out <= total.
void BalanceCore(const double* fixed, const double* per, const int* count, int n, int64_t total,
                 int64_t* out);

// ---------------------------------------------------------------- candidates.cpp

// One node type the job may use, with everything the inner loop needs.
struct TypeInfo {
  const NodeType* node = nullptr;
  const GpuType* gpu = nullptr;
  double fixed = 0, per = 0;  // speed
  double active_watts = 0;    // measured where the calibration has joules, else the datasheet's
  int cpu_threads = 0;        // DeviceSpeed::cpu_threads
  int cores = 0;              // the node's CPU cores (NodeType::cpu_cores, else cpu_threads)
  int available = 0;
  AlphaBeta intra;
  int64_t max_batch = 0;  // largest per-GPU batch that fits in memory
};

struct Cand {
  double key = 0;  // the objective's value
  double total_s = 0, energy_j = 0, gpu_hours = 0, compute_s = 0, comm_s = 0, step_s = 0;
  double eval_per = 0, eval_fixed = 0;  // the slowest rank's speed, for the evaluations
  JobPhases phases;
  int64_t steps = 0, global = 0;
  int64_t batch[2] = {0, 0};  // largest per-GPU batch of each part
  int type[2] = {-1, -1};     // index into the TypeInfo list
  int nodes[2] = {0, 0}, gpn[2] = {0, 0};
  int parts = 0, gpus = 0, node_count = 0;
  uint32_t index = 0;  // enumeration order, the last tie-break
  bool fits = false, meets = false;
};

// a ranks before b: objective, then fewer GPUs, then faster, then enumeration order.
bool Better(const Cand& a, const Cand& b);
// a before b by time, then fewer GPUs, then enumeration order.
bool Faster(const Cand& a, const Cand& b);

// Optimizer state per parameter (Adam 2, momentum 1, plain SGD 0). A profiled program says
// its own count, which may be one no spec optimizer has.
int OptimizerSlots(const Job& job);

// Enumerates the candidates of `types` (one type, and with Job::allow_mixed every pair),
// predicts each and keeps the best Job::top that fit and meet the deadline, the fastest that
// fits, and up to Job::rejected of the others.
class Enumerator {
 public:
  Enumerator(const Job& job, const Cluster& cluster, std::vector<TypeInfo> types);
  void Run();

  const std::vector<TypeInfo>& types() const { return types_; }
  int evaluated = 0, fitting = 0, feasible = 0;
  bool have_fastest = false;
  Cand fastest;
  std::vector<Cand> best;           // a heap (worst on top) while running
  std::vector<Cand> rejected;       // the same, of the ones left out (Job::rejected)
  std::vector<int64_t> min_batch_;  // smallest per-GPU batch asked of each type

 private:
  void Homogeneous(int t);
  void Mixed(int a, int b);
  // Completes a candidate whose parts, batches, compute_s and comm_s are set.
  void Finish(Cand& c, double busy_energy, double idle_watts, double base_watts, bool fits);
  // Steps, phases, time, energy, GPU-hours, whether it meets the deadline and the
  // objective's key. Energy per step = sum over GPUs of idle W * step + (active - idle) W *
  // own compute time: `busy_energy` is the second sum, `idle_watts` the GPUs' idle power,
  // `base_watts` the nodes' base power.
  void Predict(Cand& c, int64_t per_epoch, double busy_energy, double idle_watts,
               double base_watts) const;
  // Adds c to `heap` (worst on top), which holds at most `bound` (0: no bound).
  static void Keep(const Cand& c, size_t bound, std::vector<Cand>* heap);
  // The CPU share of one rank of type `t` with `gpn` ranks per node and `gpus` in the job:
  // on a test cluster whose nodes are one machine, every rank of the job shares its cores.
  CpuShare Share(const TypeInfo& t, int gpn, int64_t gpus) const;

  const Job& job_;
  std::vector<TypeInfo> types_;
  Runtime runtime_;
  double startup_s_ = 0;
  JobWork work_;
  AlphaBeta inter_;
  double bytes_ = 0;
  bool weak_ = false;
  size_t keep_ = 0;
  size_t keep_rejected_ = 0;
  uint32_t index_ = 0;
};

// ---------------------------------------------------------------- explain.cpp

// "the 3h deadline", or "" without a deadline.
std::string DeadlineText(const Job& job);
// Why lines of the ranked allocations (best first), in the objective's terms so that the
// table reads as a comparison: the winner against the field (`feasible` allocations), the
// others against the winner.
void ExplainRanked(const Job& job, int feasible, std::vector<Allocation>* ranked);
// The fastest allocation's why line (and miss_s): when nothing meets the deadline it is the
// answer, so it says by how much it misses; otherwise it is the reference for "how fast
// could this go", among the `fitting` allocations that fit in memory.
void ExplainFastest(const Job& job, int fitting, Recommendation* rec);
// Why a candidate is left out: memory first (its time would not matter), else the deadline.
std::string WhyRejected(const Job& job, const std::vector<TypeInfo>& ti, const Cand& c, int slots);

}  // namespace dlh::recommend_detail
