// DLH — optimizers: SGD (momentum, Nesterov, L2 weight decay) and Adam (decoupled
// weight decay, AdamW). Their state is exported by name for checkpoints.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/spec.hpp"
#include "launcher/nn/layer.hpp"
#include "launcher/nn/named_array.hpp"

namespace dlh {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update with learning rate `lr`; `step` is the 0-based global step (Adam's bias
  // correction uses step + 1). Gradients must already be the global mean.
  virtual void update(const std::vector<NamedParam>& params, double lr, int64_t step) = 0;
  // State arrays named "<param name>/<slot>", in parameter order, copied into `out`'s
  // arrays: a checkpoint snapshot reuses the previous one's memory instead of faulting in
  // fresh pages (Adam's moments of a large layer are each above malloc's mmap threshold).
  virtual void export_state(const std::vector<NamedParam>& params,
                            std::vector<NamedArray>* out) const = 0;
  // Restores export_state() output. Throws CheckpointError on a missing or misshapen slot.
  virtual void import_state(const std::vector<NamedParam>& params,
                            const std::vector<NamedArray>& state) = 0;
  virtual const char* name() const = 0;
};

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerSpec& spec);

}  // namespace dlh
