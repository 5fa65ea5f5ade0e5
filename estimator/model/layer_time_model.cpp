// DLH estimator — the layer model (layer_time_model.hpp).
#include "estimator/model/layer_time_model.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/error.hpp"
#include "estimator/model/nnls.hpp"
#include "estimator/model/time_model.hpp"

namespace dlh {
namespace {

constexpr int kOverheadTerm = 0;  // TimeTermNames(): "overhead_s"
constexpr int kUpdateTerm = 4;    // "update_s_per_param"

static_assert(kLayerTerms == kTimeTerms + 2, "the layer model's own two terms follow TimeTerms'");

std::string Num(double d) { return nlohmann::json(d).dump(); }

// An element-wise layer that runs on its own: one more such layer, and its values in and out
// per sample. Convolutions and dense layers are priced by the step-time model's terms; a
// layer the CPU engine runs inside the convolution before it costs nothing of its own.
void AddElementWise(const LayerCost& c, bool cpu_engine, double* layers, double* values) {
  if (c.kind == LayerKind::Residual) {
    for (const std::vector<LayerCost>* path : {&c.layers, &c.shortcut})
      for (const LayerCost& inner : *path) AddElementWise(inner, cpu_engine, layers, values);
    *layers += 1;  // the sum of the two paths
    *values += double(c.in.elements()) + 2 * c.out_elements;
    return;
  }
  if (c.kind == LayerKind::Conv2d || c.kind == LayerKind::Dense) return;
  if (cpu_engine && c.cpu_fused) return;
  *layers += 1;
  *values += double(c.in.elements()) + c.out_elements;
}

}  // namespace

const std::vector<std::string>& LayerTermNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = TimeTermNames();
    n.push_back("elementwise_layer_s");
    n.push_back("elementwise_s_per_value");
    return n;
  }();
  return names;
}

std::vector<double> LayerTerms(const ModelFeatures& layer, int64_t batch, bool cpu_engine) {
  std::vector<double> terms = TimeTerms(layer, batch, cpu_engine);
  double layers = 0, values = 0;
  for (const LayerCost& c : layer.layers) AddElementWise(c, cpu_engine, &layers, &values);
  terms.push_back(layers);
  terms.push_back(double(batch) * values);
  return terms;
}

bool IsLayerTerm(int term) {
  return term >= 0 && term < kLayerTerms && term != kOverheadTerm && term != kUpdateTerm;
}

LayerTimeModel FitLayerTimeModel(const std::vector<LayerTimingSample>& samples, bool cpu_engine) {
  const auto& names = LayerTermNames();
  const int n = int(samples.size());
  std::vector<std::vector<double>> rows(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const LayerTimingSample& s = samples[size_t(i)];
    const std::string at = "layer_samples[" + std::to_string(i) + "]";
    if (!(s.seconds > 0) || !std::isfinite(s.seconds))
      throw EstimateError(at + ".seconds: must be a positive number, got " + Num(s.seconds));
    if (s.batch <= 0)
      throw EstimateError(at + ".batch: must be a positive integer, got " +
                          std::to_string(s.batch));
    rows[size_t(i)] = LayerTerms(s.features, s.batch, cpu_engine);
    for (int j = 0; j < kLayerTerms; ++j)
      if (!(rows[size_t(i)][size_t(j)] >= 0) || !std::isfinite(rows[size_t(i)][size_t(j)]))
        throw EstimateError(at + ": term " + names[size_t(j)] +
                            " must be a non-negative number, got " +
                            Num(rows[size_t(i)][size_t(j)]));
  }
  // Each row's error counts as a share of its model's step (the sum of that model's rows at
  // that batch), not of the layer's own time: what a stage is made of matters in proportion
  // to the step, and a ReLU of a few microseconds off by half moves no stage. (Weighted by
  // the layer's own time, the fit spent itself on such layers: MAPE 37% over the layers,
  // 1.9% of the step per layer, against 1.4% of the step this way.)
  std::map<std::pair<std::string, int64_t>, double> step_of;
  for (const LayerTimingSample& s : samples) step_of[{s.model, s.batch}] += s.seconds;
  std::vector<double> weight(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    weight[size_t(i)] = 1 / step_of.at({samples[size_t(i)].model, samples[size_t(i)].batch});
  // The columns some sample exercises: weighted as above, unit norm.
  std::vector<int> cols;
  for (int j = 0; j < kLayerTerms; ++j) {
    if (!IsLayerTerm(j)) continue;
    bool used = false;
    for (const auto& r : rows) used = used || r[size_t(j)] > 0;
    if (used) cols.push_back(j);
  }
  if (cols.empty() || n < 2 * int(cols.size()))
    throw EstimateError("too few layer samples to fit " + std::to_string(cols.size()) +
                        " terms: got " + std::to_string(n) + ", need at least " +
                        std::to_string(2 * std::max<size_t>(1, cols.size())));
  Eigen::MatrixXd A(n, Eigen::Index(cols.size()));
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < cols.size(); ++k)
      A(i, Eigen::Index(k)) = rows[size_t(i)][size_t(cols[k])] * weight[size_t(i)];
  Eigen::VectorXd scale(Eigen::Index(cols.size()));
  for (Eigen::Index k = 0; k < A.cols(); ++k) {
    scale(k) = 1 / A.col(k).norm();
    A.col(k) *= scale(k);
  }
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(A);
  qr.setThreshold(1e-10);
  if (qr.rank() < A.cols())
    throw EstimateError("cannot fit the layer model: its terms cannot be told apart (rank " +
                        std::to_string(qr.rank()) + " of " + std::to_string(A.cols()) +
                        "); the sweep's layers must vary them independently");
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) y(i) = samples[size_t(i)].seconds * weight[size_t(i)];
  Eigen::VectorXd x = qr.solve(y);
  if (x.minCoeff() < 0) x = NonNegativeLeastSquares(A, y);

  LayerTimeModel m;
  m.coef.assign(size_t(kLayerTerms), 0.0);
  for (size_t k = 0; k < cols.size(); ++k)
    m.coef[size_t(cols[k])] = std::max(0.0, x(Eigen::Index(k))) * scale(Eigen::Index(k));
  m.samples = n;
  double error = 0;
  for (int i = 0; i < n; ++i) {
    const LayerTimingSample& s = samples[size_t(i)];
    error +=
        std::fabs(LayerSeconds(m, s.features, s.batch, cpu_engine) - s.seconds) * weight[size_t(i)];
  }
  m.step_error = 100 * error / n;
  return m;
}

double LargestCutError(const std::vector<double>& predicted, const std::vector<double>& measured) {
  double p_all = 0, m_all = 0;
  for (size_t i = 0; i < measured.size() && i < predicted.size(); ++i)
    p_all += predicted[i], m_all += measured[i];
  if (!(p_all > 0) || !(m_all > 0)) return 0;
  double p = 0, m = 0, worst = 0;
  for (size_t i = 0; i + 1 < measured.size() && i + 1 < predicted.size(); ++i) {
    p += predicted[i], m += measured[i];
    worst = std::max(worst, std::fabs(p / p_all - m / m_all));
  }
  return 100 * worst;
}

double LayerSeconds(const LayerTimeModel& model, const ModelFeatures& layer, int64_t batch,
                    bool cpu_engine) {
  if (model.empty()) return 0;
  const std::vector<double> terms = LayerTerms(layer, batch, cpu_engine);
  double s = 0;
  for (int j = 0; j < kLayerTerms && size_t(j) < model.coef.size(); ++j)
    if (IsLayerTerm(j)) s += model.coef[size_t(j)] * terms[size_t(j)];
  return s;
}

}  // namespace dlh
