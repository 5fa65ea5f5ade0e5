// DLH estimator — the deadline-driven allocation recommender.
//
// For every candidate allocation (one GPU type: gpus per node x nodes; or, when allowed, a
// mix of two types with full nodes) it predicts
//   step   = compute(slowest GPU, its local batch) + allreduce(gradient bytes)
//   time   = startup + data + warm-up + steps * step + evaluations + checkpoints
//            (estimator/model/job_time.hpp), steps = epochs * floor(samples / global batch)
//   energy = steps * sum over GPUs (active W * compute + idle W * allreduce)
//            + time * nodes * node base W + (time - steps * step) * GPUs * idle W
//   band   = the 90% upper end of time (estimator/model/prediction_band.hpp), from the
//            speeds' log_sigma: the Slurm time limit comes from it
// drops candidates that do not fit in GPU memory or miss the deadline (time * (1 + margin)),
// and ranks the rest by the objective (ties: fewer GPUs, then faster).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/program_profile.hpp"
#include "common/spec.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/model/comm_model.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/job_time.hpp"
#include "estimator/model/prediction_band.hpp"
#include "estimator/model/time_model.hpp"

namespace dlh {

enum class Objective { Energy, Time, GpuHours };
Objective ParseObjective(const std::string& text);  // throws UsageError
const char* ObjectiveName(Objective o);

struct Job {
  TrainSpec spec;
  ModelFeatures features;
  // Set when the job is a user's program planned from its profile (profile_speeds.hpp,
  // JobFromProfile): spec and features are then made from it, the speeds come from its
  // timed steps and the optimizer slots are its own.
  std::optional<ProgramProfile> profile;
  // A profile set (dlh-estimate profile --slurm): every profile, one per measured GPU type;
  // `profile` is the first of them. Empty: `profile` alone (JobFromProfiles).
  std::vector<ProgramProfile> profiles;
  int64_t samples = 0;  // training samples per epoch
  int epochs = 0;
  double deadline_s = 0;  // 0: none
  Objective objective = Objective::Energy;
  int max_gpus = 0;                        // 0: no limit
  std::vector<std::string> allowed_types;  // empty: all
  bool allow_mixed = false;
  bool stage = false;  // the job stages its data set onto its nodes first (dlh-data stage)
  // > 0: each CPU rank computes with this many threads (OPENBLAS_NUM_THREADS in the job's
  // environment: estimator/plan/plan.cpp, EnvironmentThreads); 0: the node's cores over its
  // ranks.
  int threads_per_rank = 0;
  bool mixed_same_gpus_per_node = false;  // a mix uses the smaller gpus_per_node of its two
  // Every pair of node counts of a mix, however many nodes (the check of the grid below;
  // seconds at thousands of nodes a type).
  bool exhaustive_mix = false;
  // node types on every node: one Slurm job asks for
  // one GPU count per node (the SPANK plugin)
  int64_t per_gpu_batch = 0;  // 0: keep the spec's global batch; > 0: weak scaling, the
                              // global batch grows with the GPUs and lr scales linearly
  double margin = 0.10;       // safety margin on predicted time for the deadline (the time
                              // limit comes from the prediction band instead)
  double startup_s = -1;      // job start to first step (srun, MPI/NCCL, CUDA); < 0: the
                              // cluster's runtime.startup_s (estimator/model/job_time.hpp)
  int64_t eval_samples = -1;  // test samples evaluated after every epoch; < 0: samples / 6
                              // (MNIST's and Fashion-MNIST's ratio), 0: no evaluation
  // The job script asks Slurm for a signal before the time limit (sbatch --signal; the
  // example script's B:USR1@120 checkpoints and requeues on it): the limit then keeps room
  // for the signal after the band's upper end, and the plan says the lead to ask for
  // (estimator/model/prediction_band.hpp). The plugin sets it from the user's --signal.
  bool signal = false;
  int top = 10;      // Recommendation::ranked keeps the best `top` (0: all; slow
                     // on large clusters, every one gets a `why` string)
  int rejected = 0;  // Recommendation::rejected keeps this many (0: none); an
                     // allocation out of memory is then predicted too
};

// How one GPU type's step time depends on its local batch: t(b) = fixed + per_sample * b
// (the time model is affine in b), and where that came from.
// "alpha's calibration cpu.json: measured with engine ..., this build's engine is ...:
// recalibrate (dlh-estimate calibrate)" for each GPU type whose calibration is stale, and
// "beta's speed is scaled from alpha's calibration cpu.json: ..." for each scaled from one.
struct DeviceSpeed;
// A job's shape as the observation records give it: ranks, ranks per node, per-rank batch.
struct RunShape {
  int ranks = 0, ranks_per_node = 0;
  int64_t per_rank_batch = 0;
  bool operator<(const RunShape& o) const {
    if (ranks != o.ranks) return ranks < o.ranks;
    if (ranks_per_node != o.ranks_per_node) return ranks_per_node < o.ranks_per_node;
    return per_rank_batch < o.per_rank_batch;
  }
};
std::vector<std::string> StaleCalibrationWarnings(const std::map<std::string, DeviceSpeed>& speeds);

// The allreduce's regime, DeviceSpeed::comm_log_factor's index: 0 within one node, 1 across
// nodes; 2 and 3 the same with more busy threads than cores (CpuShare::wait_s > 0).
inline int CommRegime(int nodes, bool crowded) { return (nodes > 1 ? 1 : 0) + (crowded ? 2 : 0); }

struct DeviceSpeed {
  double fixed_s = 0;
  double per_sample_s = 0;
  // What each top-level layer of the spec costs by the type's time model, for timing a
  // pipeline's stages (pipeline_plan.cpp): seconds a pass whatever its batch (a micro-batch
  // pays them each), seconds of its optimizer update (once a step), seconds a sample. Empty
  // where the speed is no model's (a profile, the roofline): stages then go by their FLOPs.
  std::vector<double> layer_pass_s, layer_update_s, layer_per_sample_s;
  // "calibrated (cpu.json)",
  // "scaled from alpha's calibration (cpu.json): FLOP/s x0.40, bandwidth x0.50", or
  // "roofline (no calibration for beta or any other type)"
  std::string source;
  std::string reference;  // scaled: the GPU type whose calibration was scaled, else ""
  std::string stale;      // "" or "cpu.json: <why it may not fit this build>" (time_model.hpp);
                          // a scaled speed carries its reference's
  int cpu_threads = 0;    // > 0: timed as a CPU process with this many threads, so ranks that
                          // share a node's cores run slower (job_time.hpp, CpuRankShare); a
                          // scaled speed carries its reference's
  // With cpu_threads: how the per-sample time moves with the threads a rank gets (the
  // calibration's probe and this model's compute share; empty curves: the measured default).
  ThreadScaling cpu_scaling;
  // > 0: the board power the type's own calibration measured while training (its samples'
  // joules over their seconds, MeasuredWatts), which the energy model then uses in place of
  // the cluster file's active_watts (a datasheet figure).
  double measured_watts = 0;
  // "measured (cpu.json: 45.2 W over 17 samples)" or "datasheet (active_watts 400 W)"
  std::string energy_source;
  // Where the step time came from, for people (the sbatch line, recommend, --html):
  // "calibration alpha (cpu.json)", "from 3 earlier runs of this spec on alpha",
  // "calibration alpha, corrected by 12 jobs" (estimator/observe/).
  std::string provenance;
  int observed_runs = 0;  // observations that shaped this speed (0: none)
  // The step time's uncertainty as a standard deviation of ln(measured / predicted): the
  // calibration's cross-validated spread, a transfer's added error, the spread of the
  // observations used. 0: unknown. The prediction band comes from it.
  double log_sigma = 0;
  // The caller's own earlier runs of this model on the type at one shape (ranks, ranks per
  // node, per-rank batch): a job of that shape is predicted at those runs' measured step, so
  // its uncertainty is their spread (a robust deviation; 5% below 3 runs), in place of
  // log_sigma's calibration error, which the prediction no longer carries. Others' records
  // never narrow a band (estimator/observe/correction.hpp). Empty: no such runs.
  std::map<RunShape, double> repeat_log_sigma;
  // ln(measured / modelled) of the step's gradient allreduce by regime (CommRegime: within one
  // node or across nodes, each with every rank on a core of its own or with ranks crowding
  // the cores), learned from what jobs waited for (estimator/observe/correction.hpp): a
  // cluster file's links are a datasheet or one host's fit, and what a job's ranks wait for
  // also depends on the transport MPI picks and on peers the scheduler holds. 0: as modelled.
  double comm_log_factor[4] = {0, 0, 0, 0};
  // The same from this model's own runs at one shape (ranks, ranks per node), which a plan of
  // that shape takes in place of the span's.
  std::map<std::pair<int, int>, double> comm_log_at;
  double seconds(double batch) const { return fixed_s + per_sample_s * batch; }
};

// The mean power of a calibration's samples that carry measured joules (sum of joules per
// step over sum of seconds per step, so long steps weigh as they do in a job); 0 when none
// does. `count` (when given) gets how many did.
double MeasuredWatts(const Calibration& cal, int* count = nullptr);

// Per-type speeds for the job's model, for every GPU type of a node type the job may use
// (job.allowed_types). With job.profile, from the profile alone (profile_speeds.hpp): its
// measured line on the type it was timed on, that line's per-sample part scaled by the
// peak FLOP/s ratio on the others (UsageError naming the profile when its type is unknown).
// Otherwise from the first of:
//  1. the GPU type's calibration (fixed = the time model at batch 0, per_sample = its
//     slope; a missing or bad file is an EstimateError naming it);
//  2. another type's calibration, wave-scaled (wave_scaling.hpp): compute terms by the
//     ratio of peak_tflops, memory terms by memory_bandwidth_gbs, the overhead kept; the
//     reference is the calibrated type closest in log peak FLOP/s and bandwidth (ties: by
//     name), any type of the cluster, allowed or not;
//  3. RooflineSpeed, when no type of the cluster has a calibration.
std::map<std::string, DeviceSpeed> DeviceSpeeds(const Job& job, const Cluster& cluster);
// The same from the calibrations (or profile, or roofline) alone, before the observations
// correct them: what the observation store's records are judged against.
std::map<std::string, DeviceSpeed> CalibratedDeviceSpeeds(const Job& job, const Cluster& cluster);

// The bare roofline of a model with `layers` layers on `gpu` (source left empty):
//   per_sample = max(flops_train / (0.4 * peak), 12 * activation_elements / (0.6 * bandwidth))
//   fixed      = 2 * layers * 10 us (kernel launches, fwd + bwd) + 4 * param_bytes / bandwidth
// (assumed: 40% of fp32 peak, 60% of memory bandwidth; each activation element written and
// read back as 4-byte floats 3 times; the optimizer update makes 4 passes over the weights).
DeviceSpeed RooflineSpeed(const ModelFeatures& f, double layers, const GpuType& gpu);

struct Part {
  std::string node_type, gpu;
  int nodes = 0, gpus_per_node = 0;
  int64_t per_gpu_batch = 0;
  std::string compute_capability;  // the GPU type's (GpuType), empty when unknown
  // A CPU node type's part (GpuType::cpu): gpus_per_node counts ranks, each running the CPU
  // engine with threads_per_rank threads (the node's cores over its ranks).
  bool cpu = false;
  int threads_per_rank = 0;
};

struct Allocation {
  std::vector<Part> parts;  // one, or two for a mix
  int gpus = 0, nodes = 0;
  int64_t global_batch = 0;
  double lr = 0;  // learning rate for global_batch (linear scaling)
  double warmup_epochs = 0;
  double compute_s = 0, comm_s = 0, step_s = 0;  // per step
  int64_t steps = 0;
  double total_s = 0;  // predicted wall time: phases.total_s()
  JobPhases phases;    // what total_s is made of (estimator/model/job_time.hpp)
  double energy_j = 0;
  double gpu_hours = 0;
  double memory_bytes = 0;  // per GPU, the largest (a pipeline's: its largest stage's)
  // A pipeline (ParallelSpec): its stages, micro-batches and the layer each stage begins with
  // (stage_bounds: stages + 1 indices); 1: every GPU holds the whole network. per_gpu_batch
  // is then each replica's batch, which every stage of it takes.
  int pipeline_stages = 1, micro_batches = 1;
  std::vector<size_t> stage_bounds;
  // The part of the pipeline's compute time a stage waits, on average, by the stages' times:
  // GPipe's (P - 1) / (M + P - 1) where they are even, more where one is slower.
  double bubble = 0;
  std::vector<double> stage_busy_s;  // each stage's compute seconds a step, by the time model
  bool fits_memory = true;
  bool meets_deadline = true;
  std::string why;  // one line: why this one ranks where it does
  // The prediction band of total_s: the time the job stays under with 90% confidence (the
  // Slurm limit is set from it). 0: not computed.
  double total_upper_s = 0;
};

struct Recommendation {
  bool feasible = false;           // some allocation meets the deadline and fits
  std::vector<Allocation> ranked;  // feasible ones, best first
  Allocation fastest;              // fastest that fits memory (for impossible deadlines)
  double miss_s = 0;               // fastest.total_s * (1+margin) - deadline when infeasible
  int candidates = 0;              // allocations considered
  std::map<std::string, DeviceSpeed> speeds;
  // The best Job::rejected of the allocations left out, by the objective as `ranked` (best
  // first), each with `why` saying what rules it out: "out of memory: 41.2 GB per GPU at
  // batch 512, 36 GB usable on a100" (its time and energy are predicted all the same), or
  // "misses the 3h deadline: 2h50m predicted, 3h07m with the 10% margin". Shows what the
  // choice gave up (dlh-estimate recommend --html).
  std::vector<Allocation> rejected;
  // GPU types of the cluster that this build's GPU engine cannot run, never offered: "v100
  // (compute capability 7.0: DLH's GPU engine is built for sm_80, sm_90 and PTX compute_90)",
  // or, for a spec that engine cannot train, every type of known compute capability: "a100
  // (spec.json: layers[3]: residual is not supported by the CUDA engine yet)".
  std::vector<std::string> unrunnable_types;
  // Set when the network fits no GPU whole and the plan is a pipeline instead: why, in one
  // line ("the network fits no GPU whole (2.10 GB at batch 1): 2 pipeline stages of 8
  // micro-batches fit").
  std::string pipeline_why;
};

// Throws EstimateError when nothing fits at all (e.g. the model exceeds every GPU's memory).
// Equals Recommend(job, cluster, DeviceSpeeds(job, cluster)).
//
// Candidates: for each node type whose GPU type is allowed and that has available nodes
// (available, or nodes when -1), gpus_per_node in 1, 2, 4, ... below the node's count and
// the count itself, times 1..available nodes; with allow_mixed, every pair of different
// node types with full nodes (1..available of each; with mixed_same_gpus_per_node, the
// smaller gpus_per_node of the two on every node). Total GPUs <= max_gpus when set. A type
// with more than 32 nodes available takes part in mixes on a grid of counts (every count up
// to 32, then steps of 5%), and each pair's best and fastest mix is then refined one count at
// a time between the grid's neighbours (exhaustive_mix: every pair of counts).
// Global batch: the spec's batch_size (per_gpu_batch 0), split evenly over one type's GPUs
// (the remainder goes one sample each to the first GPUs; per_gpu_batch of the part is the
// largest) or by BalanceBatch over a mix; else per_gpu_batch * GPUs (balanced for a mix).
// Candidates that would leave a GPU without a sample, or whose global batch exceeds the
// epoch, are skipped. Memory: TrainingMemoryBytes(features, batch, slots) <= 90% of the
// GPU's memory_gb (slots: adam 2, sgd with momentum 1, else 0; memory is assumed to grow
// with the batch). Mixed allreduce: the smaller gpus_per_node, the slower intra-node link
// and all nodes of both parts. Energy: GPUs of the faster part are idle while the slowest
// finishes. lr scales linearly with global batch / spec batch_size (Goyal et al. 2017);
// warmup_epochs becomes at least 1 when that factor exceeds 2.
Recommendation Recommend(const Job& job, const Cluster& cluster);

// Each stage's memory when the job's network is cut into `stages` (balanced as recommend
// cuts it) and a replica's `replica_batch` samples into `micro_batches`, on `engine`'s ranks
// (pipeline_plan.cpp). The largest is what a pipeline plan fits into a device.
std::vector<double> PipelineStageMemoryBytes(const Job& job, int stages, int micro_batches,
                                             int64_t replica_batch, int optimizer_slots,
                                             MemoryEngine engine);

// The same with given per-GPU-type speeds (tests, or speeds measured elsewhere): every
// allowed GPU type in use needs an entry with fixed_s >= 0 and per_sample_s > 0.
Recommendation Recommend(const Job& job, const Cluster& cluster,
                         const std::map<std::string, DeviceSpeed>& speeds);

// Splits `global_batch` over GPU groups so that each GPU finishes its step at the same time:
// group g has count[g] GPUs of speed[g]; returns the per-GPU batch of each group.
//  1. Real batches with one finish time T: b_g = (T - fixed_g) / per_sample_g and
//     sum count_g * b_g = global_batch. A group that would get less than 1 is pinned at 1
//     and T is solved again for the others (when global_batch < the GPUs, the floor is 0).
//  2. Whole batches: no GPU may finish later than T plus the largest per_sample_s (one
//     sample of the GPU slowest per sample; every group can then take its real batch
//     rounded up). Within that bound, the batches use as many samples as possible (all of
//     global_batch whenever some combination does), then give the earliest slowest finish.
//     A group may get less than its real batch rounded down when that lets the sum be
//     exact (1 fast + 6 slow GPUs, 256 samples: 76 and 30 rather than 82 and 29).
//  3. When no combination within the bound uses every sample (counts 4 and 4, batch 103:
//     13 and 12, 100 samples) the batches sum to less than global_batch, by less than the
//     sum of the counts: the achievable global batch is sum count_g * b_g, which the
//     caller uses (the recommender reports it as the allocation's global_batch).
// At most 16 groups; speeds need fixed_s >= 0 and per_sample_s > 0 (EstimateError).
std::vector<int64_t> BalanceBatch(const std::vector<DeviceSpeed>& speed,
                                  const std::vector<int>& count, int64_t global_batch);

// The plan handed to the plugin and the launcher (DLH_PLAN): docs/reference/plan.md.
// "feasible" is the chosen allocation's (fits memory and meets the deadline); "profile" (the
// profile's path) only for a job planned from one.
nlohmann::json PlanJson(const Job& job, const Recommendation& rec, const Allocation& chosen);
// Where the cluster's nodes are all one host (runtime.shared_host_cores: a demo or test
// cluster), the plan's allocation says so ("shared_host_cores"): dlh-launch then knows that
// every rank of the job shares those cores (launcher/watch/core_yield.hpp).
void AddSharedHostToPlan(const Cluster& cluster, nlohmann::json* plan);
// {"startup_s", "data_s", "warmup_s", "steps_s", "eval_s", "evaluations", "checkpoint_s",
// "checkpoints"}: the plan's predicted.phases.
nlohmann::json PhasesJson(const JobPhases& phases);

// How people read a part: "1 node x 2 alpha GPUs" or "1 CPU node cpu-local x 2 ranks x 1
// thread" (PartText); "1 x 2 alpha" or "1 x 2 ranks x 1 thread cpu-local" (PartShortText);
// in a table's cell with its batch, "1x2 alpha (b64)" or "1x2 cpu-local x1t (b64)".
std::string PartText(const Part& p);
std::string PartShortText(const Part& p);
std::string PartCellText(const Part& p);

// How allocation `a` keeps its ranks' models together, in one line (sync_note.cpp): with a spec
// that asks for local SGD, its period and the communication it saves; for a synchronous job
// whose gradient allreduce is a quarter of the step or more, what local SGD would make of it;
// otherwise (one GPU, a profiled program, little communication) nothing.
std::string SyncNote(const Job& job, const Allocation& a);
// For a pipelined allocation, one line: its stages, micro-batches, bubble, memory a GPU and
// why (Recommendation::pipeline_why): "pipeline of 2 stages, 8 micro-batches (bubble 11% of a
// step), 254 kB a GPU: no GPU holds the whole network with its batch (...)"; else "".
std::string PipelineNote(const Recommendation& rec, const Allocation& a);

// "850 J", "14.7 kJ", "2.1 MJ", "1.25 GJ".
std::string FormatEnergy(double joules);
// Engineering notation, 3 digits: "1.23 G", "456 M", "12 " (append the unit: "B", "FLOP").
std::string Si(double v);

// The Slurm time limit of an allocation: from its band's upper end (total_upper_s, or
// total_s when not computed), with room for the job script's signal when job.signal
// (estimator/model/prediction_band.hpp, TimeLimitFor).
TimeLimit JobTimeLimit(const Job& job, const Allocation& a);
// The same as Slurm's text, "D-HH:MM:SS" or "HH:MM:SS".
std::string SlurmTimeLimit(const Job& job, const Allocation& a);

}  // namespace dlh
