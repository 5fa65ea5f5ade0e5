// DLH estimator — the deadline-driven allocation recommender.
//
// Candidates are evaluated in plain structs (no strings, no allocation per candidate); the
// best `Job::top` are kept in a bounded heap, and only those (and the fastest) become
// Allocations with names and a `why` line.
//
// The parts (recommend_detail.hpp): candidates.cpp enumerates and predicts, batch_balance.hpp
// balances the batches of a mix, device_speeds.cpp gives each GPU type's speed, explain.cpp
// writes the why lines, formats.cpp the text and the plan's JSON. Here: the checks and the
// steps of Recommend.
#include "estimator/recommend/recommender.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/count_limits.hpp"
#include "common/cuda_support.hpp"
#include "common/error.hpp"
#include "estimator/model/cuda_targets.hpp"
#include "estimator/recommend/recommend_detail.hpp"

namespace dlh {

namespace recommend_detail {

void CheckSpeed(const std::string& gpu, const DeviceSpeed& s) {
  if (!(s.per_sample_s > 0) || !std::isfinite(s.per_sample_s) || !(s.fixed_s >= 0) ||
      !std::isfinite(s.fixed_s))
    throw EstimateError("GPU type \"" + gpu + "\": speed must have fixed_s >= 0 and " +
                        "per_sample_s > 0, got " + Printf("%g", s.fixed_s) + " s + " +
                        Printf("%g", s.per_sample_s) + " s/sample (" + s.source + ")");
}

bool Allowed(const Job& job, const std::string& gpu) {
  return job.allowed_types.empty() || std::find(job.allowed_types.begin(), job.allowed_types.end(),
                                                gpu) != job.allowed_types.end();
}

namespace {

void CheckJob(const Job& job) {
  auto fail = [](const std::string& m) { throw EstimateError("recommend: " + m); };
  if (job.samples <= 0)
    fail("samples per epoch must be positive, got " + std::to_string(job.samples));
  if (job.samples > kMaxSamplesPerEpoch)
    fail("samples per epoch must be at most " + std::to_string(kMaxSamplesPerEpoch) + ", got " +
         std::to_string(job.samples));
  if (job.eval_samples > kMaxSamplesPerEpoch)
    fail("eval-samples must be at most " + std::to_string(kMaxSamplesPerEpoch) + ", got " +
         std::to_string(job.eval_samples));
  if (job.epochs <= 0) fail("epochs must be positive, got " + std::to_string(job.epochs));
  if (job.epochs > kMaxEpochs)
    fail("epochs must be at most " + std::to_string(kMaxEpochs) + ", got " +
         std::to_string(job.epochs));
  // Steps are counted in int64 and times in double seconds: beyond 1e15 samples in all (a
  // million years of training on any GPU) the counts would overflow into negative times.
  const double evaluated = double(std::max<int64_t>(0, job.eval_samples));
  if ((double(job.samples) + evaluated) * double(job.epochs) > kMaxTotalSamples)
    fail("samples x epochs = " +
         Printf("%.3g", (double(job.samples) + evaluated) * double(job.epochs)) +
         (evaluated > 0 ? " (eval-samples included)" : "") +
         " is more than DLH plans for (at most " + Printf("%.0e", kMaxTotalSamples) +
         " samples in all)");
  if (job.per_gpu_batch < 0)
    fail("per-GPU batch must not be negative, got " + std::to_string(job.per_gpu_batch));
  if (job.per_gpu_batch > std::numeric_limits<int>::max())
    fail("per-GPU batch must be at most " + std::to_string(std::numeric_limits<int>::max()) +
         ", got " + std::to_string(job.per_gpu_batch));
  if (job.per_gpu_batch == 0 && job.spec.batch_size <= 0)
    fail("the spec's batch_size must be positive, got " + std::to_string(job.spec.batch_size));
  if (!(job.deadline_s >= 0) || !(job.margin >= 0) || std::isnan(job.startup_s))
    fail("deadline and margin must not be negative");
  if (job.max_gpus < 0 || job.max_gpus > kMaxGpus)
    fail("max_gpus must be 0 to " + std::to_string(kMaxGpus) + ", got " +
         std::to_string(job.max_gpus));
  if (job.top < 0) fail("top must not be negative");
  if (job.rejected < 0) fail("rejected must not be negative");
}

std::string Names(const Cluster& c) {
  std::string s;
  for (const GpuType& g : c.gpu_types) s += (s.empty() ? "" : ", ") + g.name;
  return s;
}

// ---------------------------------------------------------------- the steps of Recommend

// The node types the job may use (allowed GPU type, available nodes), with their checked
// speeds and links: the enumerator's input. An allowed type the cluster lacks is an error
// rather than an empty answer, since it is almost always a typo. `all_gpus` gets the GPUs
// of all these types, the largest job any candidate can be.
std::vector<TypeInfo> UsableTypes(const Job& job, const Cluster& cluster,
                                  const std::map<std::string, DeviceSpeed>& speeds,
                                  int64_t* all_gpus, std::vector<std::string>* left_out) {
  for (const std::string& t : job.allowed_types)
    if (!cluster.gpu(t))
      throw EstimateError("recommend: allowed GPU type \"" + t + "\" is not in cluster \"" +
                          cluster.name + "\" (it has " + Names(cluster) + ")");
  *all_gpus = 0;
  // A spec the GPU engine cannot train yet (a layer kind it lacks: common/cuda_support.hpp)
  // is not planned on real GPUs either: dlh-launch would refuse it there, since such a plan
  // forbids the CPU (PlanGpuRequirement). Types of unknown compute capability (the CPU-rank
  // types of a local cluster) still run it on the CPU engine, unless it is one the CPU engine
  // refuses (bf16), which is left out of those types likewise. A profiled program is not
  // trained by DLH's engines at all.
  const std::string unsupported = job.profile ? std::string() : CudaEngineUnsupported(job.spec);
  const std::string cpu_unsupported = job.profile ? std::string() : CpuEngineUnsupported(job.spec);
  std::vector<TypeInfo> types;
  for (size_t i = 0; i < cluster.node_types.size(); ++i) {
    const NodeType& n = cluster.node_types[i];
    if (!Allowed(job, n.gpu)) continue;
    // A profiled program was timed on a GPU and runs as its own code: nothing says how it
    // would use a CPU node's cores.
    if (n.cpu && job.profile) continue;
    if (const GpuType* g = cluster.gpu(n.gpu)) {
      // Planned there, the job would find no GPU it can use (issue 42): never offered.
      std::string why = WhyEngineCannotRun(g->compute_capability);
      if (why.empty()) why = g->compute_capability.empty() ? cpu_unsupported : unsupported;
      if (!why.empty()) {
        const std::string line = n.gpu + " (" + why + ")";
        if (std::find(left_out->begin(), left_out->end(), line) == left_out->end())
          left_out->push_back(line);
        continue;
      }
    }
    const int available = n.available < 0 ? n.nodes : n.available;
    if (available <= 0 || n.gpus_per_node <= 0) continue;
    TypeInfo t;
    t.node = &n;
    t.gpu = cluster.gpu(n.gpu);
    if (!t.gpu)
      throw EstimateError("node type \"" + n.name + "\": unknown GPU type \"" + n.gpu + "\"");
    auto s = speeds.find(n.gpu);
    if (s == speeds.end())
      throw EstimateError("recommend: no speed for GPU type \"" + n.gpu + "\"");
    CheckSpeed(n.gpu, s->second);
    t.fixed = s->second.fixed_s;
    t.per = s->second.per_sample_s;
    t.layer_pass = s->second.layer_pass_s;
    t.layer_update = s->second.layer_update_s;
    t.layer_per = s->second.layer_per_sample_s;
    t.cpu_threads = s->second.cpu_threads;
    t.cpu_scaling = s->second.cpu_scaling;
    t.log_sigma = s->second.log_sigma;
    t.repeat_log_sigma = s->second.repeat_log_sigma;
    for (int regime = 0; regime < 4; ++regime)
      t.comm_log_factor[regime] = s->second.comm_log_factor[regime];
    t.comm_log_at = s->second.comm_log_at;
    // Never below idle: the model charges (active - idle) W for the busy time.
    t.active_watts = s->second.measured_watts > 0
                         ? std::max(s->second.measured_watts, t.gpu->idle_watts)
                         : t.gpu->active_watts;
    t.cores = n.cpu_cores > 0 ? n.cpu_cores : t.cpu_threads;
    t.cpu = n.cpu;
    // A CPU calibration's joules are the calibrating process's threads, not a node's: the
    // node's own figure (active_watts of cpu_node_types[]) stands.
    if (n.cpu) t.active_watts = t.gpu->active_watts;
    t.available = available;
    t.intra = AlphaBeta::from_link(n.intra_node);
    *all_gpus += int64_t(available) * n.gpus_per_node;
    types.push_back(t);
  }
  if (types.empty() && !left_out->empty()) {
    std::string all;
    for (const std::string& t : *left_out) all += (all.empty() ? "" : "; ") + t;
    throw EstimateError("recommend: no GPU type this job may use can run DLH's GPU engine: " + all);
  }
  if (types.empty())
    throw EstimateError("recommend: no node type to use" +
                        std::string(job.allowed_types.empty() ? "" : " of the allowed GPU types") +
                        " has available nodes");
  return types;
}

// Sets each type's max_batch, the largest per-GPU batch its GPU holds, once per GPU type:
// the enumerator then tests memory with one comparison per candidate. Memory grows with
// the batch, so a binary search up to the largest batch any candidate can ask for.
void SetMaxBatches(const Job& job, int slots, int64_t all_gpus, std::vector<TypeInfo>* types) {
  const int64_t cap = job.per_gpu_batch > 0 ? job.per_gpu_batch * all_gpus : job.spec.batch_size;
  std::map<std::string, int64_t> max_batch;
  for (TypeInfo& t : *types) {
    auto known = max_batch.find(t.gpu->name);
    if (known != max_batch.end()) {
      t.max_batch = known->second;
      continue;
    }
    const double capacity = kUsableMemory * t.gpu->memory_gb * 1e9;
    int64_t lo = 0, hi = cap;  // fits(lo) (0 trivially), answer in [lo, hi]
    while (lo < hi) {
      int64_t mid = lo + (hi - lo + 1) / 2;
      if (RankMemoryBytes(job, t, mid, slots) <= capacity)
        lo = mid;
      else
        hi = mid - 1;
    }
    t.max_batch = max_batch[t.gpu->name] = lo;
  }
}

// Throws when the enumeration left nothing to rank, saying what to change: either no
// candidate at all (the batch and sample counts rule every one out), or none that fits in
// memory, naming the GPU with the most memory and the smallest batch asked of it (the
// closest the cluster comes).
void CheckSomethingFits(const Job& job, const Enumeration& e, int slots,
                        const std::string& also = "") {
  const std::vector<TypeInfo>& ti = e.types;
  if (e.evaluated == 0)
    throw EstimateError(
        "recommend: no allocation to consider: every candidate would leave a GPU without a "
        "sample or use more samples per step than an epoch has (global batch vs samples, "
        "max_gpus)");
  if (e.fitting > 0) return;
  size_t big = 0;
  for (size_t i = 1; i < ti.size(); ++i)
    if (ti[i].gpu->memory_gb > ti[big].gpu->memory_gb) big = i;
  int64_t b = e.min_batch[big] == std::numeric_limits<int64_t>::max() ? 1 : e.min_batch[big];
  for (size_t i = 0; i < ti.size(); ++i)
    if (ti[i].gpu == ti[big].gpu) b = std::min(b, e.min_batch[i]);
  const double need = RankMemoryBytes(job, ti[big], b, slots);
  throw EstimateError("model needs " + Printf("%.1f", need / 1e9) + " GB per GPU at batch " +
                      std::to_string(b) + "; the largest GPU has " +
                      Printf("%g", ti[big].gpu->memory_gb) + " GB (" + ti[big].gpu->name + ", " +
                      Printf("%.0f", kUsableMemory * 100) + "% usable)" + also);
}

// A candidate as callers see it: named parts, memory per GPU, and the learning rate scaled
// with the global batch. Done only for the kept few (the enumeration stays allocation-free).
Allocation ToAllocation(const Job& job, const std::vector<TypeInfo>& ti, const Cand& c, int slots,
                        const PipelineShape& pipe) {
  Allocation a;
  double memory = 0, log_sigma = 0;
  for (int p = 0; p < c.parts; ++p) {
    const TypeInfo& t = ti[size_t(c.type[p])];
    // A mix runs at its slower part's pace, which may be either: the wider band of the two.
    // One type at a shape the caller ran this model at: the spread of those runs.
    double sigma = t.log_sigma;
    if (c.parts == 1) {
      const auto repeat = t.repeat_log_sigma.find(RunShape{c.gpus, c.gpn[0], c.batch[0]});
      if (repeat != t.repeat_log_sigma.end()) sigma = repeat->second;
    }
    log_sigma = std::max(log_sigma, sigma);
    Part part;
    part.node_type = t.node->name;
    part.gpu = t.gpu->name;
    part.nodes = c.nodes[p];
    part.gpus_per_node = c.gpn[p];
    part.per_gpu_batch = c.batch[p];
    part.compute_capability = t.gpu->compute_capability;
    if (t.cpu) {
      part.cpu = true;
      part.threads_per_rank = std::max(1, t.cores / std::max(1, c.gpn[p]));
      if (job.threads_per_rank > 0) part.threads_per_rank = job.threads_per_rank;
    }
    a.parts.push_back(part);
    memory = std::max(memory, pipe.pipelined()
                                  ? StageMemoryBytes(pipe, c.batch[p], slots, EngineOf(job, t))
                                  : RankMemoryBytes(job, t, c.batch[p], slots));
  }
  if (pipe.pipelined()) {
    a.pipeline_stages = pipe.stages;
    a.micro_batches = pipe.micro_batches;
    a.stage_bounds = pipe.bounds;
    a.bubble = c.bubble;
    a.stage_busy_s = c.stage_busy_s;
  }
  a.gpus = c.gpus;
  a.nodes = c.node_count;
  a.global_batch = c.global;
  const double ratio =
      job.spec.batch_size > 0 ? double(c.global) / double(job.spec.batch_size) : 1.0;
  a.lr = job.spec.optimizer.lr * ratio;
  // Linear scaling (Goyal et al. 2017) needs a warm-up when the rate grows a lot.
  a.warmup_epochs = job.spec.schedule.warmup_epochs;
  if (ratio > 2) a.warmup_epochs = std::max(a.warmup_epochs, 1.0);
  a.compute_s = c.compute_s;
  a.comm_s = c.comm_s;
  a.step_s = c.step_s;
  a.steps = c.steps;
  a.total_s = c.total_s;
  a.phases = c.phases;
  a.total_upper_s = UpperEnd(c.phases, log_sigma);
  a.energy_j = c.energy_j;
  a.gpu_hours = c.gpu_hours;
  a.memory_bytes = memory;
  a.fits_memory = c.fits;
  a.meets_deadline = c.meets;
  return a;
}

}  // namespace
}  // namespace recommend_detail

using recommend_detail::Better;
using recommend_detail::Cand;
using recommend_detail::CheckJob;
using recommend_detail::CheckSomethingFits;
using recommend_detail::Enumerate;
using recommend_detail::Enumeration;
using recommend_detail::ExplainFastest;
using recommend_detail::ExplainRanked;
using recommend_detail::OptimizerSlots;
using recommend_detail::PipelineOf;
using recommend_detail::PipelineShape;
using recommend_detail::SetMaxBatches;
using recommend_detail::ToAllocation;
using recommend_detail::TypeInfo;
using recommend_detail::UsableTypes;
using recommend_detail::WhyRejected;

// ---------------------------------------------------------------- public

Objective ParseObjective(const std::string& text) {
  if (text == "energy") return Objective::Energy;
  if (text == "time") return Objective::Time;
  if (text == "gpu-hours") return Objective::GpuHours;
  throw UsageError("--objective: must be one of energy, time, gpu-hours, got '" + text + "'");
}

const char* ObjectiveName(Objective o) {
  switch (o) {
    case Objective::Energy:
      return "energy";
    case Objective::Time:
      return "time";
    case Objective::GpuHours:
      return "gpu-hours";
  }
  return "unknown";
}

Recommendation Recommend(const Job& job, const Cluster& cluster) {
  return Recommend(job, cluster, DeviceSpeeds(job, cluster));
}

Recommendation Recommend(const Job& job, const Cluster& cluster,
                         const std::map<std::string, DeviceSpeed>& speeds) {
  CheckJob(job);
  const int slots = OptimizerSlots(job);
  int64_t all_gpus = 0;
  std::vector<std::string> left_out;
  std::vector<TypeInfo> types = UsableTypes(job, cluster, speeds, &all_gpus, &left_out);
  SetMaxBatches(job, slots, all_gpus, &types);

  // A spec that asks for a pipeline is planned as one; a network that fits no GPU whole is
  // planned as the shortest pipeline whose stages fit (the launcher trains the plan's
  // "parallel", pipeline_engine.cpp), with four micro-batches a stage (GPipe's bubble under a
  // fifth), instead of refused.
  PipelineShape pipe;
  const ParallelSpec& asked = job.spec.parallel;
  if (asked.pipelined()) pipe = PipelineOf(job, asked.pipeline_stages, asked.micro_batches);
  Enumeration e = Enumerate(job, cluster, types, pipe);
  std::string pipeline_why;
  int pipe_tried = 0;        // the longest pipeline tried, when none fit
  std::string pipe_untried;  // why no pipeline was tried, when the types it needs lack one
  if (e.fitting == 0 && !pipe.pipelined() && !job.profile &&
      job.spec.sync.mode == SyncSpec::Mode::Sync) {
    // A type whose engine cannot train a pipeline yet (the CUDA engine's is unverified:
    // common/cuda_support.cpp) is left out of the trials, as it is for a spec that asks for
    // one: dlh-launch would refuse such a plan on a GPU that must not fall back to the CPU.
    TrainSpec piped = job.spec;
    piped.parallel.pipeline_stages = 2;
    const std::string gpu_refuses = CudaEngineUnsupported(piped);
    std::vector<TypeInfo> pipe_types;
    for (const TypeInfo& t : types)
      if (t.gpu->compute_capability.empty() || gpu_refuses.empty()) pipe_types.push_back(t);
    if (pipe_types.empty() && !types.empty())
      pipe_untried = "; no pipeline was tried: " + gpu_refuses;
    const int most = pipe_types.empty() ? 0
                                        : std::min<int>(int(job.spec.layers.size()),
                                                        recommend_detail::kMaxPipelineStages);
    for (int p = 2; p <= most; ++p) {
      const int micro = int(std::min<int64_t>(4 * p, job.spec.batch_size));
      PipelineShape trial = PipelineOf(job, p, micro);
      Enumeration pe = Enumerate(job, cluster, pipe_types, trial);
      pipe_tried = p;
      if (pe.fitting == 0) continue;
      pipe_tried = 0;
      int64_t smallest = job.spec.batch_size;
      size_t at = 0;  // the type asked for the smallest batch: the closest to fitting
      for (size_t i = 0; i < e.min_batch.size() && i < e.types.size(); ++i)
        if (e.min_batch[i] < smallest) smallest = e.min_batch[i], at = i;
      const double whole = e.types.empty() ? TrainingMemoryBytes(job.features, smallest, slots,
                                                                 MemoryEngine::kDevice)
                                           : RankMemoryBytes(job, e.types[at], smallest, slots);
      pipeline_why = "no GPU holds the whole network with its batch (" + Si(whole) + "B at batch " +
                     std::to_string(smallest) + "): " + std::to_string(p) + " pipeline stages of " +
                     std::to_string(micro) + " micro-batches fit";
      pipe = std::move(trial);
      e = std::move(pe);
      break;
    }
  }
  CheckSomethingFits(job, e, slots,
                     pipe_tried > 0 ? "; no pipeline of up to " + std::to_string(pipe_tried) +
                                          " stages fits either"
                                    : pipe_untried);

  Recommendation rec;
  rec.unrunnable_types = left_out;
  rec.candidates = e.evaluated;
  rec.speeds = speeds;
  rec.feasible = e.feasible > 0;
  rec.fastest = ToAllocation(job, e.types, e.fastest, slots, pipe);
  if (rec.feasible) {
    std::sort(e.best.begin(), e.best.end(), Better);
    rec.ranked.reserve(e.best.size());
    for (const Cand& c : e.best) rec.ranked.push_back(ToAllocation(job, e.types, c, slots, pipe));
    ExplainRanked(job, e.feasible, &rec.ranked);
  }
  std::sort(e.rejected.begin(), e.rejected.end(), Better);
  rec.rejected.reserve(e.rejected.size());
  for (const Cand& c : e.rejected) {
    rec.rejected.push_back(ToAllocation(job, e.types, c, slots, pipe));
    rec.rejected.back().why = WhyRejected(job, e.types, c, slots);
  }
  rec.pipeline_why = pipeline_why;
  ExplainFastest(job, e.fitting, &rec);
  return rec;
}

}  // namespace dlh
