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
    for (size_t i = a; i < b; ++i) {
      st.params += layers[i].params;
      st.activation_elements += Activations(layers[i]);
      st.workspace_elements += layers[i].workspace_elements;
      st.work_share += total_work > 0 ? work[i] / total_work : 0;
    }
    p.parts.push_back(st);
  }
  const double train = job.features.flops_train();
  p.forward_share = train > 0 ? job.features.flops_fwd() / train : 0;
  return p;
}

double StageMemoryBytes(const PipelineShape& p, int64_t replica_batch, int optimizer_slots) {
  const double micro = double(MicroBatch(p, replica_batch));
  double most = 0;
  for (const PipelineShape::Stage& s : p.parts)
    most = std::max(most, 4.0 * s.params * (2.0 + optimizer_slots) +
                              4.0 * micro * (2.0 * s.activation_elements + s.workspace_elements) +
                              4.0 * double(replica_batch) * s.input_elements);
  return most;
}

double PipelineStepSeconds(const PipelineShape& p, double fixed, double per, int64_t replica_batch,
                           double* busy) {
  double share = 0;
  for (const PipelineShape::Stage& s : p.parts) share = std::max(share, s.work_share);
  const double stage = (fixed + per * double(MicroBatch(p, replica_batch))) * share;
  const double m = p.micro_batches, recompute = (m - 1) * p.forward_share * stage;
  if (busy) *busy = m * stage + recompute;
  return (m + p.stages - 1) * stage + recompute;
}

double BoundaryBytes(const PipelineShape& p, int64_t replica_batch) {
  double most = 0;
  for (size_t s = 0; s + 1 < p.parts.size(); ++s) most = std::max(most, p.parts[s].output_elements);
  return 4.0 * most * double(MicroBatch(p, replica_batch));
}

}  // namespace dlh::recommend_detail
