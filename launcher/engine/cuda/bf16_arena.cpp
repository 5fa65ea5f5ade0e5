// DLH — the transient arena of bf16 operands (see bf16.hpp).
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "launcher/engine/cuda/bf16.hpp"
#include "launcher/engine/cuda/gpu_layers.hpp"

namespace dlh {
namespace cuda {

size_t TransientBytes(std::initializer_list<size_t> counts) {
  size_t bytes = 0;
  for (size_t n : counts) bytes += (n * sizeof(bf16) + 255) / 256 * 256;
  return bytes;
}

void GrowTransient(GpuContext* c, size_t bytes) {
  if (c->transient == nullptr)
    throw Error("bf16: the GPU context has no transient arena (internal)");
  if (c->transient->size() >= bytes) return;
  DeviceArray<char> grown(bytes);
  if (c->transient->size() > 0) c->retired_transients.push_back(std::move(*c->transient));
  *c->transient = std::move(grown);
}

std::vector<bf16*> CarveTransient(GpuContext* c, std::initializer_list<size_t> counts) {
  GrowTransient(c, TransientBytes(counts));  // a batch larger than planned (none, normally)
  std::vector<bf16*> out;
  char* at = c->transient->get();
  for (size_t n : counts) {
    out.push_back(reinterpret_cast<bf16*>(at));
    at += (n * sizeof(bf16) + 255) / 256 * 256;
  }
  return out;
}

}  // namespace cuda
}  // namespace dlh
