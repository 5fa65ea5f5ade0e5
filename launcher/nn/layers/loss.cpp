// DLH — softmax cross-entropy over a batch of logits.

#include <cmath>
#include <string>

#include "common/error.hpp"
#include "launcher/nn/layer.hpp"

namespace dlh {

double SoftmaxCrossEntropy(const Tensor& logits, const int32_t* labels, float scale,
                           Tensor* grad_logits, int64_t* correct, double label_smoothing) {
  if (logits.rank() == 0) throw Error("softmax cross-entropy: logits have no batch dimension");
  const int n = logits.dim(0);
  const size_t classes = n > 0 ? logits.size() / size_t(n) : 0;
  // Check every label before writing anything, so a bad batch leaves no half-done output.
  for (int b = 0; b < n; ++b) {
    if (labels[b] < 0 || size_t(labels[b]) >= classes) {
      throw Error("softmax cross-entropy: label " + std::to_string(labels[b]) + " of sample " +
                  std::to_string(b) + " is outside [0, " + std::to_string(classes) + ")");
    }
  }
  if (grad_logits != nullptr) grad_logits->resize(logits.shape());
  double total = 0.0;
  int64_t hits = 0;
  for (int b = 0; b < n; ++b) {
    const float* z = logits.data() + size_t(b) * classes;
    // Subtracting the maximum keeps exp() in range for any logits; the argmax comes free.
    size_t best = 0;
    for (size_t k = 1; k < classes; ++k) {
      if (z[k] > z[best]) best = k;
    }
    const double zmax = z[best];
    double sum = 0.0;
    for (size_t k = 0; k < classes; ++k) sum += std::exp(double(z[k]) - zmax);
    const size_t label = size_t(labels[b]);
    // -log softmax[label] = log(sum exp(z - max)) - (z[label] - max)
    total += std::log(sum) - (double(z[label]) - zmax);
    if (best == label) ++hits;
    // Smoothed, the target q puts s/classes on every class and 1 - s more on the label:
    // loss = -sum_k q_k log p_k = (1 - s) * (the above) + s * mean_k -log p_k.
    const double smooth = label_smoothing / double(classes);
    if (label_smoothing > 0) {
      double mean_log_p = 0.0;
      for (size_t k = 0; k < classes; ++k) mean_log_p += double(z[k]) - zmax;
      mean_log_p = mean_log_p / double(classes) - std::log(sum);
      total = total - label_smoothing * (std::log(sum) - (double(z[label]) - zmax)) -
              label_smoothing * mean_log_p;
    }
    if (grad_logits != nullptr) {
      float* g = grad_logits->data() + size_t(b) * classes;
      const double inv = 1.0 / sum;
      const double on_label = 1.0 - label_smoothing + smooth;
      for (size_t k = 0; k < classes; ++k) {
        const double p = std::exp(double(z[k]) - zmax) * inv;
        // q_k: 1 on the label unsmoothed (so that the unsmoothed values stay bit-exact).
        const double q =
            label_smoothing > 0 ? (k == label ? on_label : smooth) : (k == label ? 1.0 : 0.0);
        g[k] = float((p - q) * scale);
      }
    }
  }
  if (correct != nullptr) *correct += hits;
  return total;
}

}  // namespace dlh
