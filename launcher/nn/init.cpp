// DLH — initial values of weights and biases (see init.hpp).
#include "launcher/nn/init.hpp"

#include <algorithm>
#include <cmath>

namespace dlh {

double Uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

double StandardNormal::operator()(std::mt19937_64& rng) {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // 1 - u is in (0, 1], so the logarithm is finite.
  const double radius = std::sqrt(-2.0 * std::log(1.0 - Uniform01(rng)));
  const double angle = 2.0 * M_PI * Uniform01(rng);
  spare_ = radius * std::sin(angle);
  has_spare_ = true;
  return radius * std::cos(angle);
}

namespace {

void FillUniform(float* values, size_t count, double bound, std::mt19937_64& rng) {
  for (size_t i = 0; i < count; ++i) values[i] = float((2.0 * Uniform01(rng) - 1.0) * bound);
}

void FillNormal(float* values, size_t count, double stddev, std::mt19937_64& rng) {
  StandardNormal normal;
  for (size_t i = 0; i < count; ++i) values[i] = float(normal(rng) * stddev);
}

}  // namespace

void InitWeights(float* weights, size_t count, double fan_in, double fan_out, WeightInit init,
                 std::mt19937_64& rng) {
  fan_in = std::max(1.0, fan_in);
  fan_out = std::max(1.0, fan_out);
  switch (init) {
    case WeightInit::HeNormal:
      return FillNormal(weights, count, std::sqrt(2.0 / fan_in), rng);
    case WeightInit::HeUniform:
      return FillUniform(weights, count, std::sqrt(6.0 / fan_in), rng);
    case WeightInit::GlorotNormal:
      return FillNormal(weights, count, std::sqrt(2.0 / (fan_in + fan_out)), rng);
    case WeightInit::GlorotUniform:
      return FillUniform(weights, count, std::sqrt(6.0 / (fan_in + fan_out)), rng);
    case WeightInit::TorchDefault:
      // Kaiming-uniform with a = sqrt 5: gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in).
      return FillUniform(weights, count, 1.0 / std::sqrt(fan_in), rng);
  }
}

void InitBias(float* bias, size_t count, double fan_in, BiasInit init, std::mt19937_64& rng) {
  switch (init) {
    case BiasInit::Zeros:
      std::fill(bias, bias + count, 0.0f);
      return;
    case BiasInit::TorchDefault:
      return FillUniform(bias, count, 1.0 / std::sqrt(std::max(1.0, fan_in)), rng);
  }
}

}  // namespace dlh
