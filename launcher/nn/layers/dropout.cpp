// DLH — inverted dropout: kept elements are scaled by 1/(1-rate) in training, so that
// evaluation is the identity.
//
// The mask has no RNG state: whether element i is kept is a pure function of (seed, rank,
// step, layer index, i), computed with a counter-based hash. A run resumed from a
// checkpoint therefore draws bit-identical masks without saving any generator.

#include <cstdint>
#include <cstring>

#include "common/error.hpp"
#include "launcher/nn/layers/layers.hpp"
#include "launcher/nn/random.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {
namespace {

// Elements per block: the hash is a few nanoseconds an element, so a block is tens of
// microseconds, as relu's are.
constexpr size_t kGrain = 16384;

}  // namespace

// The mask and the product in one pass over the engine's threads, without a data-dependent
// branch (the keep test is random: a branch on it mispredicts as often as the rate). On the
// project's 2-core host one thread with a branch spent 3.8 ns an element, a third of a small
// CNN's step (`dlh-estimate profile`). Each element's mask is the same pure function of its
// index (DropoutKeeps), so the masks do not depend on the threads.
void Dropout::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  BatchSize(in, in_, "dropout");
  out.resize(in.shape());
  const size_t size = in.size();
  mask_.resize(size);
  const float* x = in.data();
  float* y = out.data();
  float* m = mask_.data();
  if (!ctx.training || rate_ <= 0.0) {
    ParallelRange(size, kGrain, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) m[i] = 1.0f;
      for (size_t i = lo; i < hi; ++i) y[i] = x[i];
    });
    return;
  }
  const uint64_t key = DropoutKey(ctx.seed, ctx.rank, ctx.step, ctx.layer_index);
  const uint64_t threshold = DropoutThreshold(rate_);
  const float scale = float(1.0 / (1.0 - rate_));
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  ParallelRange(size, kGrain, [&](size_t lo, size_t hi) {
    // DropoutKeeps(key, i, threshold), its counter stepped by an addition rather than a
    // multiplication per element. The kept value is the scale's bits under an all-ones or
    // all-zeros mask: written as a select or a product of the test, GCC 12 turned it back
    // into a branch (3.4 ns an element against 1.2 ns without).
    uint64_t counter = DropoutCounter(key, lo);
    for (size_t i = lo; i < hi; ++i, counter += kGoldenGamma) {
      const uint32_t all = uint32_t(0) - uint32_t(DropoutKeepsCounter(counter, threshold));
      const uint32_t bits = all & scale_bits;
      float keep;
      std::memcpy(&keep, &bits, sizeof keep);
      m[i] = keep;
      y[i] = x[i] * keep;
    }
  });
}

void Dropout::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                       Tensor* grad_in) {
  (void)out;
  if (grad_in == nullptr) return;
  const size_t size = in.size();
  if (mask_.size() != size) throw Error("dropout: backward without a matching forward");
  grad_in->resize(in.shape());
  const float* g = grad_out.data();
  const float* m = mask_.data();
  float* d = grad_in->data();
  ParallelRange(size, kGrain, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) d[i] = g[i] * m[i];
  });
}

}  // namespace dlh
