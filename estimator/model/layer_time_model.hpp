// DLH estimator — the layer model: a layer's forward and backward seconds, fitted to the
// calibration sweep's layers timed one by one (dlh-estimate calibrate: the layer loop of
// `dlh-estimate profile` on every sweep model).
//
// Why a second model. The step-time model (time_model.hpp) is fitted to whole steps, so it
// is right about their sums and free to be wrong about how a step divides among its layers:
// terms that no whole step tells apart (a convolution's fixed cost against the element-wise
// passes around it) can trade places and still fit. A pipeline's stages are parts of a step,
// and their balance sets its time: with the whole-step model, the example spec's first stage
// (two convolutions and what lies between them) came out at 88% of the step where the
// profile measured 79-81%. The layer model has the same terms (TimeTerms), less the step's
// overhead and the optimizer's update, which the profile times apart, fitted to one row per
// layer; the recommender takes from it only how a step divides (DeviceSpeed::layer_*), and
// the whole step's time still from the step-time model.
//
// Two terms of its own. The step-time model prices an element-wise layer (pool, ReLU, batch
// norm, dropout, flatten) by its FLOPs alone, and in the sweep's whole steps a ReLU and a
// pool mostly run inside the convolution before them. Timed one by one, such a layer costs a
// fixed time per pass (a parallel region, a buffer) and time per value it reads and writes,
// whatever its FLOPs: on the example spec at a batch of 16, the layer model without these
// priced its pools and ReLUs at a quarter of their measured time and put its first pipeline
// stage at 85% of the step where the profile measured 80%. So the layer model adds, for
// each such layer that runs on its own, one fixed cost and the values in and out per sample.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "estimator/model/features.hpp"

namespace dlh {

// One top-level layer of a sweep model, timed: its forward and backward seconds (the median
// of a few steps) at `batch` samples. A layer that runs inside the one before it (the CPU
// engine's fused ReLU and pool) takes no time of its own and is not a sample.
struct LayerTimingSample {
  std::string model;  // the sweep model's name
  int layer = 0;      // its index among the model's top-level layers
  int64_t batch = 0;
  double seconds = 0;
  // Of those, its forward alone (0: not timed apart): a pipeline's backward runs each stage's
  // forward again, priced at the forward's share of the FLOPs, which `validate --layers`
  // measures against these.
  double forward_seconds = 0;
  ModelFeatures features;  // TopLevelLayerFeatures(spec)[layer]
};

// The layer model's terms: TimeTerms' (time_model.hpp, kTimeTerms of them), then its own two.
constexpr int kLayerTerms = 13;
const std::vector<std::string>& LayerTermNames();
// TimeTerms of one layer, then: the element-wise layers that run on their own (not fused
// into the convolution before them on the CPU engine), and the values they read and write
// (input and output elements, x batch); a residual block counts its paths' layers and its sum.
std::vector<double> LayerTerms(const ModelFeatures& layer, int64_t batch, bool cpu_engine);

struct LayerTimeModel {
  // kLayerTerms (files made before the per-sample convolution terms hold 11 and those before
  // the element-wise terms 9: they load with the terms they lack 0);
  // overhead_s and update_s_per_param are 0.
  std::vector<double> coef;
  int samples = 0;
  // On the samples it was fitted to: the mean absolute error of a layer as a share of its
  // model's step (the sum of the model's layers), in %.
  double step_error = 0;
  bool empty() const { return coef.empty(); }
};

// Terms of LayerTerms that a layer's own time has (all but the step's overhead and the update).
bool IsLayerTerm(int term);

// Non-negative least squares (nnls.hpp), each layer's error weighted as a share of its
// model's step (the sum of that model's samples at that batch), on the layer terms that some sample
// exercises; the others come out 0. Throws EstimateError naming the sample for a bad one
// ("layer_samples[3].seconds: must be a positive number"), and when there are fewer than 2
// samples per exercised term or the terms cannot be told apart.
LayerTimeModel FitLayerTimeModel(const std::vector<LayerTimingSample>& samples, bool cpu_engine);

// The largest error over a model's cuts: after each of its layers but the last, the share of
// the step the layers so far take, `predicted` against `measured` (one entry per layer, in
// order), in points of the step. 0 where either sums to nothing.
double LargestCutError(const std::vector<double>& predicted, const std::vector<double>& measured);

// The layer's forward and backward seconds at `batch` by the model (0 for an empty model).
double LayerSeconds(const LayerTimeModel& model, const ModelFeatures& layer, int64_t batch,
                    bool cpu_engine);

}  // namespace dlh
