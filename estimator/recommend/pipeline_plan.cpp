// DLH estimator — a pipeline's stages: what each holds and how long a pipelined step takes
// (recommend_detail.hpp, PipelineShape).
#include <algorithm>
#include <cmath>

#include "common/pipeline_stages.hpp"
#include "estimator/recommend/recommend_detail.hpp"

namespace dlh::recommend_detail {
namespace {

// A layer's output elements per sample and, inside a residual block, its paths' layers' too
// (backward keeps them all).
double Activations(const LayerCost& c) {
  double n = c.out_elements;
  for (const auto* path : {&c.layers, &c.shortcut})
    for (const LayerCost& inner : *path) n += Activations(inner);
  return n;
}

int64_t MicroBatch(const PipelineShape& p, int64_t replica_batch) {
  return (replica_batch + p.micro_batches - 1) / p.micro_batches;
}

}  // namespace

PipelineShape PipelineOf(const Job& job, int stages, int micro_batches) {
  PipelineShape p;
  p.stages = stages;
  p.micro_batches = micro_batches;
  p.bounds = StageBounds(job.spec, stages);
  const std::vector<double> work = LayerWork(job.spec);
  double total_work = 0;
  for (double w : work) total_work += w;
  const std::vector<LayerCost>& layers = job.features.layers;
  for (int s = 0; s < stages; ++s) {
    PipelineShape::Stage st;
    const size_t a = p.bounds[size_t(s)], b = p.bounds[size_t(s) + 1];
    st.input_elements = double(layers[a].in.elements());
    st.output_elements = layers[b - 1].out_elements;
    st.activation_elements = st.input_elements;
    double forward = 0, train = 0;
    for (size_t i = a; i < b; ++i) {
      forward += layers[i].flops_fwd;
      train += layers[i].flops_fwd + layers[i].flops_bwd;
      st.params += layers[i].params;
      st.activation_elements += Activations(layers[i]);
      st.workspace_elements += layers[i].workspace_elements;
      st.cpu_held_elements += layers[i].cpu_held_elements;
      st.cpu_scratch_elements += layers[i].cpu_scratch_elements;
      st.conv_weight_elements += layers[i].conv_weight_elements;
      st.work_share += total_work > 0 ? work[i] / total_work : 0;
    }
    st.forward_share = train > 0 ? forward / train : 0;
    p.parts.push_back(st);
  }
  return p;
}

std::vector<double> StageMemories(const PipelineShape& p, int64_t replica_batch,
                                  int optimizer_slots, MemoryEngine engine) {
  const int64_t micro_batch = MicroBatch(p, replica_batch);
  const double micro = double(micro_batch), slots = optimizer_slots;
  double all_params = 0;
  for (const PipelineShape::Stage& s : p.parts) all_params += s.params;
  std::vector<double> bytes;
  for (size_t i = 0; i < p.parts.size(); ++i) {
    const PipelineShape::Stage& s = p.parts[i];
    // Every micro-batch's input, kept for the backward that runs its forward again.
    const double inputs = 4.0 * double(replica_batch) * s.input_elements;
    if (engine == MemoryEngine::kCpu) {
      // The CPU engine's count (TrainingMemoryBytes) for the stage's layers at one
      // micro-batch, with one copy of the weights more: the gradients summed over the
      // micro-batches (launcher/engine/pipeline_engine.cpp). The first stage's rank writes
      // the checkpoints, 4 Ps (4 + 2 s) of its own: it gathers the other stages' weights and
      // state, and its snapshot holds the whole model, twice 4 (P - Ps)(1 + s) more. The
      // other stages send theirs, an export and its packed copy at a time (weights, then
      // state: pipeline_parts.cpp), 4 Ps (3 + s + 2 max(1, s)). make bench's memory part
      // measures each stage's rank (BENCHMARKS.md, "A rank's memory").
      double state = i == 0 ? 4.0 * s.params * (4.0 + 2.0 * slots) +
                                  2.0 * 4.0 * (all_params - s.params) * (1.0 + slots)
                            : 4.0 * s.params * (3.0 + slots + 2.0 * std::max(1.0, slots));
      bytes.push_back(state +
                      CpuLayerBytes(s.conv_weight_elements, s.cpu_scratch_elements,
                                    s.cpu_held_elements, micro_batch) +
                      inputs);
      continue;
    }
    bytes.push_back(4.0 * s.params * (2.0 + slots) +
                    4.0 * micro * (2.0 * s.activation_elements + s.workspace_elements) + inputs);
  }
  return bytes;
}

double StageMemoryBytes(const PipelineShape& p, int64_t replica_batch, int optimizer_slots,
                        MemoryEngine engine) {
  double most = 0;
  for (double b : StageMemories(p, replica_batch, optimizer_slots, engine))
    most = std::max(most, b);
  return most;
}

double PipelineStepSeconds(const PipelineShape& p, const TypeInfo& t, double fixed, double per,
                           int64_t replica_batch, std::vector<double>* stage_busy) {
  // Each stage's part of the whole network's fixed and per-sample time.
  const size_t layers = p.bounds.empty() ? 0 : p.bounds.back();
  const bool by_model = t.layer_pass.size() == layers && t.layer_update.size() == layers &&
                        t.layer_per.size() == layers;
  double all_fixed = 0, all_per = 0;
  if (by_model)
    for (size_t i = 0; i < layers; ++i)
      all_fixed += t.layer_pass[i] + t.layer_update[i], all_per += t.layer_per[i];
  const double m = p.micro_batches, micro = double(MicroBatch(p, replica_batch));
  double sum_fwd = 0, max_fwd = 0, sum_bwd = 0, max_bwd = 0, max_update = 0;
  if (stage_busy) stage_busy->clear();
  for (size_t s = 0; s < p.parts.size(); ++s) {
    const PipelineShape::Stage& st = p.parts[s];
    // Without a model, the whole fixed time is a pass's: an upper bound.
    double pass = fixed * st.work_share, update = 0, per_sample = per * st.work_share;
    if (by_model && all_per > 0) {
      double a = 0, u = 0, q = 0;
      for (size_t i = p.bounds[s]; i < p.bounds[s + 1]; ++i)
        a += t.layer_pass[i], u += t.layer_update[i], q += t.layer_per[i];
      pass = all_fixed > 0 ? fixed * a / all_fixed : 0;
      update = all_fixed > 0 ? fixed * u / all_fixed : 0;
      per_sample = per * q / all_per;
    }
    // One micro-batch through this stage, forward and backward; backward runs the forward
    // again first for all but the last micro-batch (re-materialization).
    const double one = pass + per_sample * micro;
    const double fwd = one * st.forward_share, bwd = one - fwd;
    const double bwd_avg = bwd + fwd * (m - 1) / m;
    sum_fwd += fwd;
    sum_bwd += bwd_avg;
    max_fwd = std::max(max_fwd, fwd);
    max_bwd = std::max(max_bwd, bwd_avg);
    max_update = std::max(max_update, update);
    if (stage_busy) stage_busy->push_back(m * one + (m - 1) * fwd + update);
  }
  return sum_fwd + (m - 1) * max_fwd + sum_bwd + (m - 1) * max_bwd + max_update;
}

double BoundaryBytes(const PipelineShape& p, int64_t replica_batch) {
  double most = 0;
  for (size_t s = 0; s + 1 < p.parts.size(); ++s) most = std::max(most, p.parts[s].output_elements);
  return 4.0 * most * double(MicroBatch(p, replica_batch));
}

}  // namespace dlh::recommend_detail

namespace dlh {

std::vector<double> PipelineStageMemoryBytes(const Job& job, int stages, int micro_batches,
                                             int64_t replica_batch, int optimizer_slots,
                                             MemoryEngine engine) {
  return recommend_detail::StageMemories(recommend_detail::PipelineOf(job, stages, micro_batches),
                                         replica_batch, optimizer_slots, engine);
}

}  // namespace dlh
