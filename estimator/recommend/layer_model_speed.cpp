// DLH estimator — a GPU type's speed from a calibration's stored GPU layer model (see
// recommend_detail.hpp, LayerModelSpeed).
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "estimator/model/gpu_layer_model.hpp"
#include "estimator/model/nnls.hpp"
#include "estimator/recommend/recommend_detail.hpp"

namespace dlh::recommend_detail {
namespace {

// Least squares of t = a + b x over the points, both 0 or more.
void AffineFit(const std::vector<double>& x, const std::vector<double>& t, double* a, double* b) {
  std::vector<std::vector<double>> rows;
  for (double v : x) rows.push_back({1.0, v});
  const std::vector<double> ab = NonNegativeLeastSquares(rows, t);
  *a = ab[0];
  *b = ab[1];
}

}  // namespace

bool LayerModelSpeed(const Job& job, const GpuPeaks& peaks, const GpuLayerParams& params,
                     DeviceSpeed* s) {
  const ModelFeatures& f = job.features;
  if (job.profile || f.layers.empty() || f.layers.size() != job.spec.layers.size()) return false;
  const int64_t batch =
      std::max<int64_t>(1, job.per_gpu_batch > 0 ? job.per_gpu_batch : job.spec.batch_size);
  std::set<int64_t> batches = {2 * batch};
  for (int k = 0; k <= 4; ++k) batches.insert(std::max<int64_t>(1, batch >> k));
  const bool momentum = OptimizerSlots(job) > 0;
  const size_t layers = f.layers.size();
  std::vector<double> x, step;
  std::vector<std::vector<double>> layer_s(layers);  // per layer, at each batch
  double update_s = 0;  // the optimizer's one kernel over every parameter: no batch in it
  for (int64_t b : batches) {
    const std::vector<GpuKernel> kernels = GpuStepKernels(f, b, momentum);
    x.push_back(double(b));
    step.push_back(PredictGpuStep(kernels, peaks, params).seconds);
    std::vector<double> per_layer(layers, 0.0);
    for (const GpuKernel& k : kernels) {
      const double t = KernelDeviceSeconds(k, peaks, params) + KernelHostSeconds(k, params);
      if (k.layer >= 0 && k.pass != GpuPass::Update)
        per_layer[size_t(k.layer)] += t;
      else if (k.layer < 0 && k.pass == GpuPass::Update)
        update_s = t;
    }
    for (size_t i = 0; i < layers; ++i) layer_s[i].push_back(per_layer[i]);
  }
  AffineFit(x, step, &s->fixed_s, &s->per_sample_s);
  s->layer_pass_s.assign(layers, 0.0);
  s->layer_per_sample_s.assign(layers, 0.0);
  s->layer_update_s.assign(layers, 0.0);
  const double params_total = std::max(1.0, f.params);
  for (size_t i = 0; i < layers; ++i) {
    AffineFit(x, layer_s[i], &s->layer_pass_s[i], &s->layer_per_sample_s[i]);
    s->layer_update_s[i] = update_s * f.layers[i].params / params_total;
  }
  return true;
}

}  // namespace dlh::recommend_detail
