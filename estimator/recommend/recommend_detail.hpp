// DLH estimator — the recommender's inner parts, shared by its source files; callers use
// recommender.hpp. The enumeration works on plain structs (no strings, no allocation per
// candidate); only the kept few become Allocations.
//   candidates.cpp     every allocation of one node type or a mix of two, predicted and kept
//   batch_balance.hpp  the per-GPU batches of a mix, balanced by speed (.cpp: BalanceBatch)
//   device_speeds.cpp  each GPU type's speed: calibrated, scaled, profiled or roofline
//   layer_model_speed.cpp  a GPU type's speed from a calibration's stored GPU layer model
//   explain.cpp        the `why` lines
//   formats.cpp        times and energies as text, the plan as JSON
//   pipeline_plan.cpp  a pipeline's stages: their memory and the step's time
//   recommender.cpp    the checks and the steps of Recommend
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "estimator/cluster/cluster.hpp"
#include "estimator/model/comm_model.hpp"
#include "estimator/model/gpu_layer_params.hpp"
#include "estimator/model/job_time.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh::recommend_detail {

constexpr double kUsableMemory = 0.9;   // of a GPU's memory_gb, the rest for the runtime
constexpr int kMaxGroups = 16;          // GPU groups BalanceCore balances at most
constexpr int kMaxPipelineStages = 16;  // the longest pipeline a plan offers

// ---------------------------------------------------------------- formats.cpp

std::string Printf(const char* fmt, double a);
// 45s, 5m30s, 12m, 1h12m, 3h, 2d3h (minutes from an hour on, hours from a day on)
std::string Duration(double s);
std::string GpuHours(double h);
// "+12%", "+0.4%", "-3%"
std::string Percent(double ratio);

// ---------------------------------------------------------------- recommender.cpp

// Throws EstimateError naming `gpu` unless fixed_s >= 0 and per_sample_s > 0, both finite.
void CheckSpeed(const std::string& gpu, const DeviceSpeed& s);
// Whether the job may use GPU type `gpu` (Job::allowed_types; empty: any).
bool Allowed(const Job& job, const std::string& gpu);

// ---------------------------------------------------------------- candidates.cpp

// One node type the job may use, with everything the inner loop needs.
struct TypeInfo {
  const NodeType* node = nullptr;
  const GpuType* gpu = nullptr;
  double fixed = 0, per = 0;  // speed
  // DeviceSpeed::layer_pass_s, layer_update_s, layer_per_sample_s (empty: unknown)
  std::vector<double> layer_pass, layer_update, layer_per;
  double active_watts = 0;    // measured where the calibration has joules, else the datasheet's
  int cpu_threads = 0;        // DeviceSpeed::cpu_threads
  ThreadScaling cpu_scaling;  // DeviceSpeed::cpu_scaling
  double log_sigma = 0;       // DeviceSpeed::log_sigma
  std::map<RunShape, double> repeat_log_sigma;  // DeviceSpeed::repeat_log_sigma
  // DeviceSpeed::comm_log_factor and comm_log_at: what the modelled allreduce of `gpus` ranks,
  // `gpn` a node, is multiplied by (crowded: more busy threads than cores, CpuShare::wait_s).
  double comm_log_factor[4] = {0, 0, 0, 0};
  std::map<std::pair<int, int>, double> comm_log_at;
  double CommFactor(int64_t gpus, int gpn, int nodes, bool crowded) const {
    const auto at = comm_log_at.find({int(gpus), gpn});
    return std::exp(at != comm_log_at.end() ? at->second
                                            : comm_log_factor[CommRegime(nodes, crowded)]);
  }
  int cores = 0;  // the node's CPU cores (NodeType::cpu_cores, else cpu_threads)
  int available = 0;
  AlphaBeta intra;
  int64_t max_batch = 0;  // largest per-GPU batch that fits in memory
  bool cpu = false;       // a CPU node type (GpuType::cpu): ranks share the node's cores,
                          // memory and power
};

struct Cand {
  double key = 0;  // the objective's value
  double total_s = 0, energy_j = 0, gpu_hours = 0, compute_s = 0, comm_s = 0, step_s = 0;
  double eval_per = 0, eval_fixed = 0;  // the slowest rank's speed, for the evaluations
  double bubble = 0;  // a pipeline's: the part of its compute time a stage waits, on average
  std::vector<double> stage_busy_s;  // a pipeline's: each stage's compute seconds a step
  double crowding = 1;               // CpuShare::oversubscribed of its ranks (1 part)
  JobPhases phases;
  int64_t steps = 0, global = 0;
  int64_t batch[2] = {0, 0};  // largest per-GPU batch of each part
  int type[2] = {-1, -1};     // index into the TypeInfo list
  int nodes[2] = {0, 0}, gpn[2] = {0, 0};
  int parts = 0, gpus = 0, node_count = 0;
  uint32_t index = 0;  // enumeration order, the last tie-break
  bool fits = false, meets = false;
};

// The candidates' orders, inline: the enumeration compares with them for every candidate.
// a ranks before b: objective, then fewer GPUs, then faster, then enumeration order.
inline bool Better(const Cand& a, const Cand& b) {
  if (a.key != b.key) return a.key < b.key;
  if (a.gpus != b.gpus) return a.gpus < b.gpus;
  if (a.total_s != b.total_s) return a.total_s < b.total_s;
  return a.index < b.index;
}

// a before b by time, then fewer GPUs, then enumeration order.
inline bool Faster(const Cand& a, const Cand& b) {
  if (a.total_s != b.total_s) return a.total_s < b.total_s;
  if (a.gpus != b.gpus) return a.gpus < b.gpus;
  return a.index < b.index;
}

// Optimizer state per parameter (Adam 2, momentum 1, plain SGD 0). A profiled program says
// its own count, which may be one no spec optimizer has.
int OptimizerSlots(const OptimizerSpec& o);
int OptimizerSlots(const Job& job);
// Whose memory a rank of type `t` uses: the CPU engine's on a CPU type (its own count,
// features.cpp), unless the job is a program sized by its profile.
inline MemoryEngine EngineOf(const Job& job, const TypeInfo& t) {
  return t.cpu && !job.profile ? MemoryEngine::kCpu : MemoryEngine::kDevice;
}
// TrainingMemoryBytes of the job's model on a rank of type `t`.
inline double RankMemoryBytes(const Job& job, const TypeInfo& t, int64_t batch, int slots) {
  return TrainingMemoryBytes(job.features, batch, slots, EngineOf(job, t));
}
// Local SGD's model average against a gradient allreduce: the parameters and the optimizer's
// state arrays, 1 + OptimizerSlots(job) times the bytes.
inline double ModelAverageToGradientBytes(const Job& job) { return 1.0 + OptimizerSlots(job); }

// ---------------------------------------------------------------- layer_model_speed.cpp

// The GPU layer model's step (gpu_layer_model.hpp) on a GPU of `peaks` as the recommender's
// affine speed: evaluated at the job's local batches, from its per-GPU batch (or the global
// batch) down to a sixteenth of it and at twice it, and a line fitted through them by least
// squares (the model is nearly affine in the batch; wave quantisation makes steps in it);
// each top-level layer's terms likewise, its share of the optimizer's update by its
// parameters. Only fixed_s, per_sample_s and the layer vectors are set. False (s untouched)
// where the job's layers are unknown (a profile, features alone).
bool LayerModelSpeed(const Job& job, const GpuPeaks& peaks, const GpuLayerParams& params,
                     DeviceSpeed* s);

// ---------------------------------------------------------------- pipeline_plan.cpp

// A pipeline of the spec's layers (ParallelSpec; the launcher's PipelineEngine): the cut
// (common/pipeline_stages.hpp, the one the launcher makes) and what each stage holds.
struct PipelineShape {
  int stages = 1, micro_batches = 1;
  std::vector<size_t> bounds;  // stages + 1 layer indices
  struct Stage {
    double params = 0;               // trained values
    double activation_elements = 0;  // per sample: its input and every layer's output
    double input_elements = 0;       // per sample: what it receives (or reads)
    double output_elements = 0;      // per sample: what it passes on
    double workspace_elements = 0;   // per sample: conv2d im2col columns
    // The CPU engine's count of its layers (LayerCost): per sample, per thread, partial sums.
    double cpu_held_elements = 0, cpu_scratch_elements = 0, conv_weight_elements = 0;
    double work_share = 0;     // of the network's work per sample (LayerWork)
    double forward_share = 0;  // its forward FLOPs over its training FLOPs
  };
  std::vector<Stage> parts;
  bool pipelined() const { return stages > 1; }
};
PipelineShape PipelineOf(const Job& job, int stages, int micro_batches);
// The largest stage's memory with `replica_batch` samples a step per replica: weights,
// gradients and optimizer state of its layers; one micro-batch's activations and their
// gradients and workspace (re-materialization keeps no more); every micro-batch's input.
double StageMemoryBytes(const PipelineShape& p, int64_t replica_batch, int optimizer_slots,
                        MemoryEngine engine);
// Every stage's, in order (the largest is StageMemoryBytes).
std::vector<double> StageMemories(const PipelineShape& p, int64_t replica_batch,
                                  int optimizer_slots, MemoryEngine engine);
// Compute seconds of a pipelined step on type `t`, from one rank's step time `t.fixed +
// t.per * batch` for the whole network. Each stage takes its layers' part of it: by the
// type's time model where it has one (TypeInfo::layer_pass, layer_update, layer_per), else
// by the layers' work (LayerWork). GPipe's schedule, every forward and then every backward:
// each phase lasts the stages' times of one micro-batch end to end (the fill and drain) plus
// M - 1 times the slowest stage's (the steady state); the backward phase runs the forward
// again for M - 1 micro-batches; every micro-batch pays a pass's fixed time, the optimizer
// update is once a step (the slowest stage's ends it). `stage_busy` gets the seconds each
// stage computes a step (the rest of the step it waits).
double PipelineStepSeconds(const PipelineShape& p, const TypeInfo& t, double fixed, double per,
                           int64_t replica_batch, std::vector<double>* stage_busy);
// Bytes a stage boundary passes per micro-batch, each way, at most.
double BoundaryBytes(const PipelineShape& p, int64_t replica_batch);

// What the enumeration of `types` found (candidates.cpp): one type, and with
// Job::allow_mixed every pair, each candidate predicted; the best Job::top that fit and meet
// the deadline, the fastest that fits, and up to Job::rejected of the others.
struct Enumeration {
  std::vector<TypeInfo> types;
  int evaluated = 0, fitting = 0, feasible = 0;
  bool have_fastest = false;
  Cand fastest;
  std::vector<Cand> best;          // in heap order (worst first): sort with Better
  std::vector<Cand> rejected;      // the same, of the ones left out (Job::rejected)
  std::vector<int64_t> min_batch;  // smallest per-GPU batch asked of each type
};
// With `pipe` pipelined, every candidate is a pipeline of its stages: GPU counts a multiple of
// the stages, each P of them a replica (homogeneous allocations only).
Enumeration Enumerate(const Job& job, const Cluster& cluster, std::vector<TypeInfo> types,
                      const PipelineShape& pipe = {});

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
