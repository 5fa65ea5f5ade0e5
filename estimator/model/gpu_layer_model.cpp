// DLH estimator — the GPU step time from its layers (see gpu_layer_model.hpp).
#include "estimator/model/gpu_layer_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace dlh {
namespace {

// A tile's rate relative to a 128 x 128 one: a smaller tile loads more operand bytes per
// multiply-add (its arithmetic intensity is tm tn / (tm + tn)), and reaches about the
// square root of its share of that intensity (64 x 64: 0.71, 32 x 32: 0.5).
double TileEfficiency(double tm, double tn) { return std::sqrt(tm * tn / (tm + tn) / 64); }

// Kernels of each layer kind, from launcher/engine/cuda/ (gpu_layers.cpp, kernels.cu). b is
// the batch; "first" layers get no input gradient.
struct Builder {
  double b;
  std::vector<GpuKernel>* out;
  void add(int layer, GpuPass pass, const char* what, double bytes) {
    GpuKernel k;
    k.layer = layer;
    k.pass = pass;
    k.what = what;
    k.bytes = bytes;
    out->push_back(k);
  }
  void gemm(int layer, GpuPass pass, const char* what, double m, double n, double k, double bytes,
            bool conv, double channels = 0) {
    GpuKernel g;
    g.layer = layer;
    g.pass = pass;
    g.what = what;
    g.gemm = true;
    g.tensor = conv;
    g.conv_call = conv;
    g.channels = channels;
    g.m = m;
    g.n = n;
    g.k = k;
    g.flops = 2 * m * n * k;
    g.bytes = bytes;
    out->push_back(g);
  }
};

// Kernels of the kinds the CUDA engine does not run yet (launcher/engine/cuda/ refuses
// avgpool2d, globalavgpool2d, gelu, silu and residual blocks: common/cuda_support.hpp): what a
// plain element-wise implementation would move, one kernel per pass, unmeasured. The planner does
// not put such specs on GPUs (estimator/recommend/recommender.cpp); this only keeps the model
// whole for `dlh-estimate gpu-layers` and for when the engine gains them. A residual block's
// kernels are its paths' (main, then shortcut) with the addition after them, under the
// block's index, so GpuKernel::layer still names a layer of the spec's top-level list.
void Forward(Builder& k, int i, const LayerCost& c) {
  const double b = k.b, ni = double(c.in.elements()), no = double(c.out.elements());
  switch (c.kind) {
    case LayerKind::Conv2d: {
      const double plane = double(c.out.height) * c.out.width;
      const double inner = (c.flops_fwd - no) / 2 / no;  // C x K x K
      k.gemm(i, GpuPass::Forward, "conv fwd", b * plane, c.out.channels, inner,
             4 * (b * ni + b * no + c.out.channels * inner), true, c.out.channels);
      k.add(i, GpuPass::Forward, "conv bias", 8 * b * no);  // cudnnAddTensor
      break;
    }
    case LayerKind::Dense:
      k.gemm(i, GpuPass::Forward, "dense fwd", b, no, ni, 4 * (b * ni + ni * no + b * no), false);
      break;
    case LayerKind::Relu:
      k.add(i, GpuPass::Forward, "relu fwd", 8 * b * ni);
      break;
    case LayerKind::Gelu:
      k.add(i, GpuPass::Forward, "gelu fwd", 8 * b * ni);
      break;
    case LayerKind::Silu:
      k.add(i, GpuPass::Forward, "silu fwd", 8 * b * ni);
      break;
    case LayerKind::MaxPool2d:
      k.add(i, GpuPass::Forward, "maxpool fwd", 4 * b * (ni + no));
      break;
    case LayerKind::AvgPool2d:
      k.add(i, GpuPass::Forward, "avgpool fwd", 4 * b * (ni + no));
      break;
    case LayerKind::GlobalAvgPool2d:
      k.add(i, GpuPass::Forward, "globalavgpool fwd", 4 * b * (ni + no));
      break;
    case LayerKind::BatchNorm:  // sums, squares, statistics, normalise (writes y and xhat)
      k.add(i, GpuPass::Forward, "batchnorm sums", 4 * b * ni);
      k.add(i, GpuPass::Forward, "batchnorm squares", 4 * b * ni);
      k.add(i, GpuPass::Forward, "batchnorm stats", 0);
      k.add(i, GpuPass::Forward, "batchnorm normalise", 12 * b * ni);
      break;
    case LayerKind::Dropout:  // x in, y and the mask out (features do not keep the rate: > 0)
      k.add(i, GpuPass::Forward, "dropout fwd", 12 * b * ni);
      break;
    case LayerKind::Flatten:
      break;
    case LayerKind::Residual:  // both paths, then y = main + shortcut (two reads, one write)
      for (const LayerCost& n : c.layers) Forward(k, i, n);
      for (const LayerCost& n : c.shortcut) Forward(k, i, n);
      k.add(i, GpuPass::Forward, "residual add", 12 * b * no);
      break;
  }
}

// `first`: the layer starts the network (for a nested layer: the first of a path of the
// first block), and gets no input gradient.
void Backward(Builder& k, int i, const LayerCost& c, bool first) {
  const double b = k.b, ni = double(c.in.elements()), no = double(c.out.elements());
  switch (c.kind) {
    case LayerKind::Conv2d: {
      const double plane = double(c.out.height) * c.out.width;
      const double inner = (c.flops_fwd - no) / 2 / no;
      const double macs = inner * no;  // per sample
      const double bytes = 4 * (b * ni + b * no + c.out.channels * inner);
      k.add(i, GpuPass::BackwardWeights, "conv bias grad", 4 * b * no);
      k.gemm(i, GpuPass::BackwardWeights, "conv bwd-filter", c.out.channels, inner, b * plane,
             bytes, true, c.out.channels);
      if (!first)
        k.gemm(i, GpuPass::BackwardData, "conv bwd-data", b * c.in.height * c.in.width,
               c.in.channels, macs / ni, bytes, true, c.out.channels);
      break;
    }
    case LayerKind::Dense: {
      const double bytes = 4 * (b * ni + ni * no + b * no);
      k.gemm(i, GpuPass::BackwardWeights, "dense bwd-weights", ni, no, b, bytes, false);
      if (!first) k.gemm(i, GpuPass::BackwardData, "dense bwd-data", b, ni, no, bytes, false);
      break;
    }
    case LayerKind::Relu:
      if (!first) k.add(i, GpuPass::BackwardData, "relu bwd", 12 * b * ni);
      break;
    case LayerKind::Gelu:
      if (!first) k.add(i, GpuPass::BackwardData, "gelu bwd", 12 * b * ni);
      break;
    case LayerKind::Silu:
      if (!first) k.add(i, GpuPass::BackwardData, "silu bwd", 12 * b * ni);
      break;
    case LayerKind::MaxPool2d:
      if (!first) k.add(i, GpuPass::BackwardData, "maxpool bwd", 4 * b * (2 * ni + 2 * no));
      break;
    case LayerKind::AvgPool2d:  // zero the input gradient, add each window's share
      if (!first) k.add(i, GpuPass::BackwardData, "avgpool bwd", 4 * b * (2 * ni + no));
      break;
    case LayerKind::GlobalAvgPool2d:
      if (!first) k.add(i, GpuPass::BackwardData, "globalavgpool bwd", 4 * b * (ni + no));
      break;
    case LayerKind::BatchNorm:
      k.add(i, GpuPass::BackwardWeights, "batchnorm grad parts", 8 * b * ni);
      k.add(i, GpuPass::BackwardWeights, "batchnorm grad params", 0);
      if (!first) k.add(i, GpuPass::BackwardData, "batchnorm grad input", 12 * b * ni);
      break;
    case LayerKind::Dropout:
      if (!first) k.add(i, GpuPass::BackwardData, "dropout bwd", 12 * b * ni);
      break;
    case LayerKind::Flatten:
      break;
    case LayerKind::Residual: {
      // Each path backward from the output gradient, last layer first; then the input
      // gradient is the sum of the two paths' (the identity's: the output gradient).
      for (const std::vector<LayerCost>* path : {&c.shortcut, &c.layers})
        for (size_t j = path->size(); j-- > 0;) Backward(k, i, (*path)[j], first && j == 0);
      if (!first) k.add(i, GpuPass::BackwardData, "residual grad sum", 12 * b * ni);
      break;
    }
  }
}

// Batchnorm layers, nested ones included: each commits its batch statistics after the update.
void AddCommits(Builder& k, int i, const LayerCost& c) {
  if (c.kind == LayerKind::BatchNorm) k.add(i, GpuPass::Update, "batchnorm commit", 0);
  for (const std::vector<LayerCost>* path : {&c.layers, &c.shortcut})
    for (const LayerCost& n : *path) AddCommits(k, i, n);
}

void CheckRate(int sms, double flops_per_s) {
  if (sms < 1) throw EstimateError("GPU layer model: the SM count must be at least 1");
  if (!(flops_per_s > 0)) throw EstimateError("GPU layer model: a compute rate must be positive");
}

}  // namespace

const std::vector<std::string>& GpuLayerParamNames() {
  static const std::vector<std::string> names = {
      "tf32_efficiency",        "fp32_efficiency", "memory_efficiency",
      "conv_memory_efficiency", "narrow_exponent", "host_kernel_s",
      "host_conv_call_s",       "kernel_floor_s",  "step_s"};
  return names;
}

std::vector<double> GpuLayerParamValues(const GpuLayerParams& p) {
  return {p.tf32_efficiency,        p.fp32_efficiency, p.memory_efficiency,
          p.conv_memory_efficiency, p.narrow_exponent, p.host_kernel_s,
          p.host_conv_call_s,       p.kernel_floor_s,  p.step_s};
}

GpuLayerParams GpuLayerParamsFrom(const std::vector<double>& v) {
  if (v.size() != size_t(kGpuLayerParams))
    throw EstimateError("GPU layer model: expected " + std::to_string(kGpuLayerParams) +
                        " parameters, got " + std::to_string(v.size()));
  GpuLayerParams p;
  p.tf32_efficiency = v[0];
  p.fp32_efficiency = v[1];
  p.memory_efficiency = v[2];
  p.conv_memory_efficiency = v[3];
  p.narrow_exponent = v[4];
  p.host_kernel_s = v[5];
  p.host_conv_call_s = v[6];
  p.kernel_floor_s = v[7];
  p.step_s = v[8];
  return p;
}

const char* GpuPassName(GpuPass pass) {
  switch (pass) {
    case GpuPass::Forward:
      return "fwd";
    case GpuPass::BackwardData:
      return "bwd-data";
    case GpuPass::BackwardWeights:
      return "bwd-weights";
    case GpuPass::Update:
      return "update";
  }
  return "?";
}

std::vector<GpuKernel> GpuStepKernels(const ModelFeatures& f, int64_t batch, bool momentum) {
  if (f.layers.empty()) throw EstimateError("GPU layer model: the model's layers are unknown");
  std::vector<GpuKernel> out;
  Builder k{double(batch), &out};
  const int n = int(f.layers.size());
  for (int i = 0; i < n; ++i) Forward(k, i, f.layers[size_t(i)]);
  // Softmax cross-entropy and its gradient: one block (kernels.cu).
  k.add(-1, GpuPass::Forward, "loss", 12 * k.b * double(f.layers.back().out.elements()));
  for (int i = n - 1; i >= 0; --i) Backward(k, i, f.layers[size_t(i)], i == 0);
  k.add(-1, GpuPass::Update, "sgd update", 4 * f.params * (momentum ? 5 : 3));
  for (int i = 0; i < n; ++i) AddCommits(k, i, f.layers[size_t(i)]);
  return out;
}

GemmTiling TileGemm(double m, double n, double k, int sms) {
  if (sms < 1) throw EstimateError("GPU layer model: the SM count must be at least 1");
  // The tiling a library's heuristic would take: the least padded work per SM (waves x one
  // tile's multiply-adds, over the tile's efficiency) over tile sides 32-128 and splits of k into
  // parts of at least 128; ties go to the larger tiles and the smaller split.
  GemmTiling best;
  double best_work = 0;
  for (double tm : {128.0, 64.0, 32.0})
    for (double tn : {128.0, 64.0, 32.0})
      for (int64_t split = 1; split == 1 || double(split) * 128 <= k; split *= 2) {
        GemmTiling t;
        t.tile_m = tm;
        t.tile_n = tn;
        t.tiles = int64_t(std::ceil(m / tm) * std::ceil(n / tn));
        t.split = split;
        t.waves = (t.tiles * split + sms - 1) / sms;
        const double work =
            double(t.waves) * tm * tn * std::ceil(k / double(split)) / TileEfficiency(tm, tn);
        if (best.waves == 0 || work < best_work * (1 - 1e-9)) best = t, best_work = work;
        if (t.tiles * split >= sms) break;  // more splits only add waves
      }
  return best;
}

double GemmComputeSeconds(double m, double n, double k, int sms, double flops_per_s) {
  CheckRate(sms, flops_per_s);
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  const GemmTiling t = TileGemm(m, n, k, sms);
  const double tile_flops = 2 * t.tile_m * t.tile_n * std::ceil(k / double(t.split));
  return double(t.waves) * tile_flops / (flops_per_s / sms) / TileEfficiency(t.tile_m, t.tile_n);
}

double KernelDeviceSeconds(const GpuKernel& k, const GpuPeaks& gpu, const GpuLayerParams& p) {
  return KernelDeviceSeconds(k, gpu, p, k.gemm ? GemmComputeSeconds(k.m, k.n, k.k, gpu.sms, 1) : 0);
}

double KernelDeviceSeconds(const GpuKernel& k, const GpuPeaks& gpu, const GpuLayerParams& p,
                           double gemm_seconds_at_unit_rate) {
  double compute = 0;
  if (k.gemm) {
    const double peak =
        k.tensor ? gpu.tf32_tflops * p.tf32_efficiency : gpu.fp32_tflops * p.fp32_efficiency;
    CheckRate(gpu.sms, peak);
    compute = gemm_seconds_at_unit_rate / (peak * 1e12);
  }
  const double efficiency =
      k.conv_call
          ? p.conv_memory_efficiency * std::pow(std::min(1.0, k.channels / 128), p.narrow_exponent)
          : p.memory_efficiency;
  const double memory = k.bytes / (gpu.bandwidth_gbs * 1e9 * efficiency);
  return std::max({compute, memory, p.kernel_floor_s});
}

double KernelHostSeconds(const GpuKernel& k, const GpuLayerParams& p) {
  return p.host_kernel_s + (k.conv_call ? p.host_conv_call_s : 0);
}

GpuStepTime PredictGpuStep(const std::vector<GpuKernel>& kernels, const GpuPeaks& gpu,
                           const GpuLayerParams& p) {
  GpuStepTime t;
  double host = 0, device = 0;  // when the host has issued the kernel; when the device is free
  bool waited = false;
  for (const GpuKernel& k : kernels) {
    if (k.pass == GpuPass::Update && !waited) {  // the host waits for backward first
      host = std::max(host, device);
      waited = true;
    }
    const double h = KernelHostSeconds(k, p), d = KernelDeviceSeconds(k, gpu, p);
    host += h;
    device = std::max(device, host) + d;
    t.host_s += h;
    t.device_s += d;
    ++t.kernels;
  }
  t.seconds = (p.overlap ? std::max(host, device) : t.host_s + t.device_s) + p.step_s;
  return t;
}

double GpuStepMape(const std::vector<TimingSample>& samples, const GpuPeaks& gpu,
                   const GpuLayerParams& p) {
  double sum = 0;
  for (const TimingSample& s : samples)
    sum += std::fabs(PredictGpuStep(s.features, s.batch, gpu, p).seconds - s.seconds) / s.seconds;
  return samples.empty() ? 0 : 100 * sum / double(samples.size());
}

std::string GpuProfilePass(const GpuKernel& k, const std::vector<LayerCost>& layers) {
  if (k.layer < 0) return k.pass == GpuPass::Update ? "update" : "loss";
  if (k.pass == GpuPass::Update) return "";  // a batchnorm's commit, after the update
  if (k.pass == GpuPass::Forward) return "forward";
  const LayerKind kind = layers.at(size_t(k.layer)).kind;
  if (kind != LayerKind::Conv2d && kind != LayerKind::Dense) return "backward";
  return k.pass == GpuPass::BackwardData ? "backward-data" : "backward-weights";
}

GpuStepTime PredictGpuStep(const ModelFeatures& f, int64_t batch, const GpuPeaks& gpu,
                           const GpuLayerParams& p) {
  return PredictGpuStep(GpuStepKernels(f, batch), gpu, p);
}

void CheckGpuPeaks(const GpuPeaks& g, const std::string& origin) {
  auto positive = [&](double v, const char* field) {
    if (!(v > 0) || !std::isfinite(v))
      throw EstimateError(origin + ": " + field + ": must be a positive number");
  };
  positive(g.fp32_tflops, "fp32_tflops");
  positive(g.tf32_tflops, "tf32_tflops");
  positive(g.bandwidth_gbs, "bandwidth_gbs");
  if (g.sms < 1) throw EstimateError(origin + ": sms: must be at least 1");
}

}  // namespace dlh
