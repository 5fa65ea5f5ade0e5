// DLH — initial values of a layer's weights and biases (the spec's "init" and "bias_init";
// the conventions are listed in common/spec.hpp). The draws are built from std::mt19937_64's
// raw output, which the standard fixes, rather than from std::normal_distribution or
// std::uniform_real_distribution, whose algorithms each library chooses: a seed gives the
// same network whichever library built DLH.
#pragma once

#include <cstddef>
#include <random>

#include "common/spec.hpp"

namespace dlh {

struct ParamInit {
  WeightInit weights = WeightInit::TorchDefault;
  BiasInit bias = BiasInit::TorchDefault;
};

// Uniform in [0, 1) from the top 53 bits of one draw.
double Uniform01(std::mt19937_64& rng);

// Standard normal draws by the Box-Muller transform, two per pair of uniforms.
class StandardNormal {
 public:
  double operator()(std::mt19937_64& rng);

 private:
  bool has_spare_ = false;
  double spare_ = 0;
};

// Fills `weights` (count values) by `init` for a layer with the given fans.
void InitWeights(float* weights, size_t count, double fan_in, double fan_out, WeightInit init,
                 std::mt19937_64& rng);

// Fills `bias` (count values) by `init`; fan_in as for the layer's weights.
void InitBias(float* bias, size_t count, double fan_in, BiasInit init, std::mt19937_64& rng);

}  // namespace dlh
