// DLH — the residual block (see layers.hpp): out = main(x) + shortcut(x), shortcut(x) = x
// when it has no layers. Backward: both paths take the block's output gradient, and the
// input gradient is the sum of theirs (the identity's is the output gradient itself).

#include <algorithm>
#include <cstdio>

#include "common/error.hpp"
#include "launcher/nn/layers/layers.hpp"
#include "launcher/nn/random.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {
namespace {

constexpr size_t kGrain = 32768;  // elements per block of the sums

// "main.03.conv2d/": the prefix of path layer j's parameters and buffers (branch 0: the
// main path, 1: the shortcut).
std::string PathPrefix(int branch, size_t j, LayerKind kind) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s.%02zu.%s/", branch == 0 ? "main" : "shortcut", j,
                LayerKindName(kind));
  return buf;
}

// sum[i] = a[i] + b[i], split over the engine's threads (each element alone: the same values
// whatever the thread count). `sum` may be `a`.
void Add(const Tensor& a, const Tensor& b, Tensor& sum) {
  const float* x = a.data();
  const float* y = b.data();
  float* s = sum.data();
  ParallelRange(sum.size(), kGrain, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) s[i] = x[i] + y[i];
  });
}

}  // namespace

// Calls f(branch, j, layer) for every layer of both paths, the main path's first, in order.
template <typename F>
void Residual::for_each_layer(F f) {
  for (int branch = 0; branch < 2; ++branch) {
    LayerStack* path = branch == 0 ? &main_ : shortcut_.get();
    if (path == nullptr) continue;
    for (size_t j = 0; j < path->size(); ++j) f(branch, j, path->layer(j));
  }
}

Residual::Residual(const LayerSpec& spec, const Shape3& in)
    : main_(spec.layers, PathShapes(spec.layers, in, "residual", "layers")) {
  out_ = main_.layer(main_.size() - 1).output_shape();
  Shape3 short_out = in;
  if (!spec.shortcut.empty()) {
    const std::vector<Shape3> shapes = PathShapes(spec.shortcut, in, "residual", "shortcut");
    shortcut_ = std::make_unique<LayerStack>(spec.shortcut, shapes);
    short_out = shapes.back();
  }
  if (!(short_out == out_))
    throw SpecError("residual: the main path and the shortcut give different shapes");
  size_t stats = 0;
  for_each_layer([&](int, size_t, Layer& layer) {
    if (Tensor* s = layer.batch_stats()) {
      stat_layers_.push_back(&layer);
      stats += s->size();
    }
  });
  stats_.resize({int(stats)});
}

void Residual::init(std::mt19937_64& rng) {
  // One generator per path layer, from one draw of the block's: adding a layer to one path
  // does not shift the initial values of the others.
  const uint64_t base = rng();
  for_each_layer([&](int branch, size_t j, Layer& layer) {
    std::seed_seq seq{uint32_t(base), uint32_t(base >> 32), uint32_t(branch), uint32_t(j)};
    std::mt19937_64 layer_rng(seq);
    layer.init(layer_rng);
  });
}

void Residual::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  const int parent = ctx.layer_index;
  const Tensor& main =
      main_.forward(in, ctx, [parent](size_t j) { return NestedLayerIndex(parent, 0, j); });
  const Tensor& shortcut =
      shortcut_ ? shortcut_->forward(in, ctx,
                                     [parent](size_t j) { return NestedLayerIndex(parent, 1, j); })
                : in;
  out.resize(main.shape());
  Add(main, shortcut, out);
  if (ctx.training && stats_.size() > 0) {
    size_t at = 0;
    for (Layer* l : stat_layers_) {
      const Tensor* s = l->batch_stats();
      std::copy(s->begin(), s->end(), stats_.begin() + at);
      at += s->size();
    }
  }
}

void Residual::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                        Tensor* grad_in) {
  // The paths kept their input (`in`) and activations from forward.
  (void)in;
  (void)out;
  main_.backward(grad_out, grad_in, nullptr);
  if (shortcut_) {
    shortcut_->backward(grad_out, grad_in != nullptr ? &grad_shortcut_ : nullptr, nullptr);
    if (grad_in != nullptr) Add(*grad_in, grad_shortcut_, *grad_in);
  } else if (grad_in != nullptr) {
    Add(*grad_in, grad_out, *grad_in);
  }
}

std::vector<ParamRef> Residual::params() {
  std::vector<ParamRef> out;
  for_each_layer([&](int branch, size_t j, Layer& layer) {
    for (ParamRef p : layer.params()) {
      p.name = PathPrefix(branch, j, layer.kind()) + p.name;
      out.push_back(p);
    }
  });
  return out;
}

std::vector<BufferRef> Residual::buffers() {
  std::vector<BufferRef> out;
  for_each_layer([&](int branch, size_t j, Layer& layer) {
    for (BufferRef b : layer.buffers()) {
      b.name = PathPrefix(branch, j, layer.kind()) + b.name;
      out.push_back(b);
    }
  });
  return out;
}

void Residual::commit_batch_stats() {
  // stats_ may now hold the cross-rank average: each layer takes its part back, then commits.
  size_t at = 0;
  for (Layer* l : stat_layers_) {
    Tensor* s = l->batch_stats();
    std::copy(stats_.begin() + at, stats_.begin() + at + s->size(), s->begin());
    at += s->size();
    l->commit_batch_stats();
  }
}

}  // namespace dlh
