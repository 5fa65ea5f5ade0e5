// DLH — which layers fuse (see fuse.hpp).
#include "launcher/nn/layers/fuse.hpp"

#include "launcher/nn/layers/layers.hpp"

namespace dlh {

size_t FuseFollowers(const std::vector<std::unique_ptr<Layer>>& layers, size_t i) {
  auto* conv = dynamic_cast<Conv2d*>(layers[i].get());
  if (conv == nullptr) return 0;
  size_t fused = 0;
  auto next = [&]() {
    return i + fused + 1 < layers.size() ? layers[i + fused + 1].get() : nullptr;
  };
  if (auto* relu = dynamic_cast<Relu*>(next())) {
    conv->fuse_relu();
    relu->mark_fused();
    ++fused;
  }
  if (auto* pool = dynamic_cast<MaxPool2d*>(next()); pool != nullptr && pool->plain_2x2()) {
    conv->fuse_pool2x2();
    pool->mark_fused();
    ++fused;
  }
  return fused;
}

bool FusedIntoPrevious(const Layer& layer) {
  if (const auto* relu = dynamic_cast<const Relu*>(&layer)) return relu->fused();
  if (const auto* pool = dynamic_cast<const MaxPool2d*>(&layer)) return pool->fused();
  return false;
}

}  // namespace dlh
