// DLH estimator — fitting the GPU layer model (see gpu_layer_model.hpp): to whole steps (a
// calibration's sweep), or to a per-layer profile's passes (dlh-estimate profile --device
// cuda) with only the step's synchronisation and form left to the whole steps.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "estimator/model/gpu_layer_model.hpp"
#include "estimator/model/nnls.hpp"

namespace dlh {
namespace {

// Parameters as the optimiser sees them: logarithms; efficiencies are capped at 1.
GpuLayerParams FromLog(const std::vector<double>& x, bool overlap) {
  std::vector<double> v(x.size());
  for (size_t i = 0; i < x.size(); ++i) v[i] = std::exp(x[i]);
  for (size_t i = 0; i < 4; ++i) v[i] = std::min(v[i], 1.0);
  GpuLayerParams p = GpuLayerParamsFrom(v);
  p.overlap = overlap;
  return p;
}

struct Problem {
  std::vector<std::vector<GpuKernel>> kernels;
  std::vector<double> seconds;
  GpuPeaks gpu;
  bool overlap = true;
  double loss(const std::vector<double>& x, const std::vector<size_t>& rows) const {
    const GpuLayerParams p = FromLog(x, overlap);
    double sum = 0;
    for (size_t r : rows) {
      const double e = std::log(PredictGpuStep(kernels[r], gpu, p).seconds / seconds[r]);
      sum += e * e;
    }
    return sum / double(rows.size());
  }
};

// Nelder-Mead (standard coefficients) from `start`, with a simplex of steps `step`.
using Loss = std::function<double(const std::vector<double>&)>;
std::vector<double> NelderMead(const Loss& loss, std::vector<double> start, double step,
                               int iterations) {
  const size_t n = start.size();
  std::vector<std::vector<double>> s(n + 1, start);
  for (size_t i = 0; i < n; ++i) s[i + 1][i] += step;
  std::vector<double> f(n + 1);
  for (size_t i = 0; i <= n; ++i) f[i] = loss(s[i]);
  for (int it = 0; it < iterations; ++it) {
    std::vector<size_t> order(n + 1);
    for (size_t i = 0; i <= n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return f[a] < f[b]; });
    std::vector<std::vector<double>> s2;
    std::vector<double> f2;
    for (size_t i : order) s2.push_back(s[i]), f2.push_back(f[i]);
    s = s2, f = f2;
    if (f[n] - f[0] < 1e-10 * (1 + f[0])) break;
    std::vector<double> c(n, 0.0);
    for (size_t i = 0; i < n; ++i)
      for (size_t d = 0; d < n; ++d) c[d] += s[i][d] / double(n);
    auto towards = [&](double t) {
      std::vector<double> p(n);
      for (size_t d = 0; d < n; ++d) p[d] = c[d] + t * (s[n][d] - c[d]);
      return p;
    };
    const std::vector<double> r = towards(-1);
    const double fr = loss(r);
    if (fr < f[0]) {
      const std::vector<double> e = towards(-2);
      const double fe = loss(e);
      if (fe < fr)
        s[n] = e, f[n] = fe;
      else
        s[n] = r, f[n] = fr;
    } else if (fr < f[n - 1]) {
      s[n] = r, f[n] = fr;
    } else {
      const std::vector<double> k = fr < f[n] ? towards(-0.5) : towards(0.5);
      const double fk = loss(k);
      if (fk < std::min(fr, f[n])) {
        s[n] = k, f[n] = fk;
      } else {  // shrink towards the best
        for (size_t i = 1; i <= n; ++i) {
          for (size_t d = 0; d < n; ++d) s[i][d] = s[0][d] + 0.5 * (s[i][d] - s[0][d]);
          f[i] = loss(s[i]);
        }
      }
    }
  }
  return s[size_t(std::min_element(f.begin(), f.end()) - f.begin())];
}

// Restarts from the default parameters and from the best point so far, with shrinking
// simplexes: Nelder-Mead alone stalls on the max() corners of this model.
GpuLayerParams FitRows(const Problem& problem, const std::vector<size_t>& rows) {
  std::vector<double> x;
  for (double v : GpuLayerParamValues(GpuLayerParams{})) x.push_back(std::log(v));
  double best = problem.loss(x, rows);
  const Loss loss = [&](const std::vector<double>& y) { return problem.loss(y, rows); };
  for (double step : {1.5, 0.7, 0.3, 0.1}) {
    const std::vector<double> y = NelderMead(loss, x, step, 1000);
    const double fy = problem.loss(y, rows);
    if (fy < best) best = fy, x = y;
  }
  return FromLog(x, problem.overlap);
}

double Mape(const Problem& problem, const GpuLayerParams& p, const std::vector<size_t>& rows) {
  double sum = 0;
  for (size_t r : rows) {
    const double t = PredictGpuStep(problem.kernels[r], problem.gpu, p).seconds;
    sum += std::fabs(t - problem.seconds[r]) / problem.seconds[r];
  }
  return 100 * sum / double(rows.size());
}

// ---- the fit to a profile's passes

// One profiled pass the model runs kernels in: its kernels (each with its GEMM's time at
// 1 FLOP/s, which no parameter changes) and what was measured.
struct PassRow {
  std::vector<std::pair<const GpuKernel*, double>> kernels;
  double device_s = 0;
};

double PassDeviceSeconds(const PassRow& r, const GpuPeaks& gpu, const GpuLayerParams& p) {
  double sum = 0;
  for (const auto& [k, unit] : r.kernels) sum += KernelDeviceSeconds(*k, gpu, p, unit);
  return sum;
}

// The device terms as the optimiser sees them: the logarithms of the four efficiencies (capped
// at 1), the narrow exponent and a kernel's floor.
constexpr int kDeviceTerms = 6;
GpuLayerParams WithDeviceTerms(GpuLayerParams p, const std::vector<double>& x) {
  p.tf32_efficiency = std::min(1.0, std::exp(x[0]));
  p.fp32_efficiency = std::min(1.0, std::exp(x[1]));
  p.memory_efficiency = std::min(1.0, std::exp(x[2]));
  p.conv_memory_efficiency = std::min(1.0, std::exp(x[3]));
  p.narrow_exponent = std::exp(x[4]);
  p.kernel_floor_s = std::exp(x[5]);
  return p;
}

// ln(step_s) minimising the squared log errors of the whole steps, by golden-section search
// between 0.1 us and 10 ms (the loss is unimodal in it: every prediction grows with it).
double FitStepSeconds(const std::vector<std::vector<GpuKernel>>& kernels,
                      const std::vector<double>& seconds, const GpuPeaks& gpu, GpuLayerParams p) {
  auto loss = [&](double log_step) {
    p.step_s = std::exp(log_step);
    double sum = 0;
    for (size_t i = 0; i < kernels.size(); ++i) {
      const double e = std::log(PredictGpuStep(kernels[i], gpu, p).seconds / seconds[i]);
      sum += e * e;
    }
    return sum;
  };
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double lo = std::log(1e-7), hi = std::log(1e-2);
  double a = hi - phi * (hi - lo), b = lo + phi * (hi - lo), fa = loss(a), fb = loss(b);
  for (int i = 0; i < 80; ++i) {
    if (fa < fb) {
      hi = b, b = a, fb = fa, a = hi - phi * (hi - lo), fa = loss(a);
    } else {
      lo = a, a = b, fa = fb, b = lo + phi * (hi - lo), fb = loss(b);
    }
  }
  return std::exp((lo + hi) / 2);
}

}  // namespace

GpuPassFit FitGpuLayerModelToPasses(const std::vector<GpuPassSample>& samples,
                                    const GpuPeaks& gpu) {
  CheckGpuPeaks(gpu, "GPU layer model: " + gpu.name);
  if (samples.size() < 2)
    throw EstimateError(
        "GPU layer model: fitting to passes takes at least 2 profiled models, got " +
        std::to_string(samples.size()));
  constexpr double kMeasurableSeconds = 2e-6;
  std::vector<std::vector<GpuKernel>> kernels;  // per sample, as the engine issues them
  std::vector<double> seconds;
  for (const GpuPassSample& s : samples) {
    if (!(s.step_s > 0))
      throw EstimateError("GPU layer model: " + s.model + ": its whole step must be positive");
    kernels.push_back(GpuStepKernels(s.features, s.batch));
    seconds.push_back(s.step_s);
  }
  std::vector<PassRow> device_rows;
  std::vector<std::vector<double>> host_x;  // per pass: 1 (its marking), kernels, conv calls
  std::vector<double> host_y;
  for (size_t i = 0; i < samples.size(); ++i) {
    std::map<std::pair<int, std::string>, std::vector<const GpuKernel*>> by_pass;
    for (const GpuKernel& k : kernels[i]) {
      const std::string pass = GpuProfilePass(k, samples[i].features.layers);
      if (!pass.empty()) by_pass[{k.layer, pass}].push_back(&k);
    }
    for (const LayerPassTime& measured : samples[i].passes) {
      const auto it = by_pass.find({measured.layer, measured.pass});
      double calls = 0, conv_calls = 0;
      if (it != by_pass.end()) {
        PassRow row;
        for (const GpuKernel* k : it->second) {
          row.kernels.push_back(
              {k, k->gemm ? GemmComputeSeconds(k->m, k->n, k->k, gpu.sms, 1) : 0.0});
          calls += 1;
          conv_calls += k->conv_call ? 1 : 0;
        }
        row.device_s = measured.device_s;
        if (samples[i].held && measured.device_s >= kMeasurableSeconds)
          device_rows.push_back(std::move(row));
      }
      host_x.push_back({1.0, calls, conv_calls});
      host_y.push_back(measured.host_s);
    }
  }
  if (device_rows.size() < 20)
    throw EstimateError("GPU layer model: " + std::to_string(device_rows.size()) +
                        " passes with a measurable device time to fit to, need at least 20");

  GpuPassFit fit;
  // Device terms.
  const GpuLayerParams start;
  std::vector<double> x = {
      std::log(start.tf32_efficiency),   std::log(start.fp32_efficiency),
      std::log(start.memory_efficiency), std::log(start.conv_memory_efficiency),
      std::log(start.narrow_exponent),   std::log(start.kernel_floor_s)};
  const Loss device_loss = [&](const std::vector<double>& y) {
    const GpuLayerParams p = WithDeviceTerms(start, y);
    double sum = 0;
    for (const PassRow& r : device_rows) {
      const double e = std::log(PassDeviceSeconds(r, gpu, p) / r.device_s);
      sum += e * e;
    }
    return sum / double(device_rows.size());
  };
  double best = device_loss(x);
  for (double step : {1.5, 0.7, 0.3, 0.1}) {
    const std::vector<double> y = NelderMead(device_loss, x, step, 1000);
    const double fy = device_loss(y);
    if (fy < best) best = fy, x = y;
  }
  static_assert(kDeviceTerms == 6, "the device terms above");
  fit.params = WithDeviceTerms(start, x);
  fit.device_passes = int(device_rows.size());
  for (const PassRow& r : device_rows)
    fit.device_mape += std::fabs(PassDeviceSeconds(r, gpu, fit.params) - r.device_s) / r.device_s;
  fit.device_mape *= 100 / double(device_rows.size());

  // Host terms.
  const std::vector<double> h = NonNegativeLeastSquares(host_x, host_y);
  fit.marking_s = h[0];
  fit.params.host_kernel_s = h[1];
  fit.params.host_conv_call_s = h[2];
  for (size_t r = 0; r < host_y.size(); ++r) {
    if (!(host_y[r] > 0)) continue;
    const double predicted = h[0] + h[1] * host_x[r][1] + h[2] * host_x[r][2];
    fit.host_mape += std::fabs(predicted - host_y[r]) / host_y[r];
    ++fit.host_passes;
  }
  if (fit.host_passes > 0) fit.host_mape *= 100 / double(fit.host_passes);

  // The step's synchronisation and form, to the whole steps.
  auto step_mape = [&](const GpuLayerParams& p) {
    double sum = 0;
    for (size_t i = 0; i < kernels.size(); ++i)
      sum += std::fabs(PredictGpuStep(kernels[i], gpu, p).seconds - seconds[i]) / seconds[i];
    return 100 * sum / double(kernels.size());
  };
  GpuLayerParams overlapped = fit.params, serial = fit.params;
  overlapped.overlap = true;
  serial.overlap = false;
  overlapped.step_s = FitStepSeconds(kernels, seconds, gpu, overlapped);
  serial.step_s = FitStepSeconds(kernels, seconds, gpu, serial);
  const double m_overlapped = step_mape(overlapped), m_serial = step_mape(serial);
  fit.params = m_overlapped <= m_serial ? overlapped : serial;
  fit.step_mape = std::min(m_overlapped, m_serial);
  fit.other_step_mape = std::max(m_overlapped, m_serial);
  fit.steps = int(samples.size());
  return fit;
}

GpuLayerFit FitGpuLayerModel(const std::vector<TimingSample>& samples, const GpuPeaks& gpu,
                             int folds) {
  CheckGpuPeaks(gpu, "GPU layer model: " + gpu.name);
  if (samples.size() < size_t(2 * kGpuLayerParams))
    throw EstimateError("GPU layer model: too few samples to fit " +
                        std::to_string(kGpuLayerParams) + " parameters: got " +
                        std::to_string(samples.size()) + ", need at least " +
                        std::to_string(2 * kGpuLayerParams));
  Problem problem;
  problem.gpu = gpu;
  for (const TimingSample& s : samples) {
    if (!(s.seconds > 0))
      throw EstimateError("GPU layer model: " + s.model + ": measured time must be positive");
    problem.kernels.push_back(GpuStepKernels(s.features, s.batch));
    problem.seconds.push_back(s.seconds);
  }
  std::vector<size_t> all(samples.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<size_t> order = all;
  std::mt19937_64 rng(0x444c48);  // fixed: the same folds every run
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  // Both forms of the step, host and device overlapped or in series; the one that predicts
  // the samples better (cross-validated where there are folds) is kept.
  GpuLayerFit fit;
  bool first = true;
  for (bool overlap : {true, false}) {
    problem.overlap = overlap;
    GpuLayerFit f;
    f.samples = int(samples.size());
    f.params = FitRows(problem, all);
    f.mape = Mape(problem, f.params, all);
    if (folds >= 2) {
      f.folds = std::min<int>(folds, int(samples.size()));
      double sum = 0;
      for (int k = 0; k < f.folds; ++k) {
        std::vector<size_t> train, test;
        for (size_t i = 0; i < order.size(); ++i)
          (int(i % size_t(f.folds)) == k ? test : train).push_back(order[i]);
        sum += Mape(problem, FitRows(problem, train), test) * double(test.size());
      }
      f.cv_mape = sum / double(order.size());
    }
    const double score = folds >= 2 ? f.cv_mape : f.mape;
    if (first || score < (folds >= 2 ? fit.cv_mape : fit.mape)) {
      if (!first) f.other_mape = fit.mape, f.other_cv_mape = fit.cv_mape;
      fit = f;
    } else {
      fit.other_mape = f.mape, fit.other_cv_mape = f.cv_mape;
    }
    first = false;
  }
  return fit;
}

}  // namespace dlh
