// DLH — the residual block on the GPU (see gpu_residual.hpp).
#include "launcher/engine/cuda/gpu_residual.hpp"

#include <cstdio>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "launcher/engine/cuda/gpu_stack.hpp"
#include "launcher/nn/random.hpp"

namespace dlh {
namespace cuda {
namespace {

class GpuResidual : public GpuLayer {
 public:
  GpuResidual(const LayerSpec& spec, const Shape3& in, int max_batch, GpuContext* context,
              const std::string& name)
      : c_(context) {
    if (spec.layers.empty()) throw SpecError(name + ": the main path has no layers");
    main_ = MakePath(spec.layers, in, max_batch, name, 0, &out_);
    Shape3 short_out = in;
    if (!spec.shortcut.empty())
      shortcut_ = MakePath(spec.shortcut, in, max_batch, name, 1, &short_out);
    if (!(short_out == out_))
      throw SpecError(name + ": the main path and the shortcut give different shapes");
    grad_shortcut_.resize(size_t(std::max(max_batch, 1)) * size_t(in.elements()));
    size_t stats = 0;
    for (GpuStack* path : {main_.get(), shortcut_.get()}) {
      if (path == nullptr) continue;
      for (size_t j = 0; j < path->size(); ++j)
        if (path->layer(j).batch_stats() != nullptr) {
          stat_layers_.push_back(&path->layer(j));
          stats += size_t(path->layer(j).batch_stats_len());
        }
    }
    stats_.resize(stats);
  }

  void forward(const float* x, float* y, int n, const ForwardContext& ctx) override {
    const int parent = ctx.layer_index;
    main_->forward(x, n, ctx, [parent](size_t j) { return NestedLayerIndex(parent, 0, j); });
    const float* shortcut = x;
    if (shortcut_) {
      shortcut_->forward(x, n, ctx, [parent](size_t j) { return NestedLayerIndex(parent, 1, j); });
      shortcut = shortcut_->output();
    }
    const size_t count = size_t(n) * size_t(out_.elements());
    CUDA_CHECK(cudaMemcpyAsync(y, main_->output(), count * sizeof(float), cudaMemcpyDeviceToDevice,
                               c_->stream));
    AddInto(y, shortcut, count);
    if (ctx.training && !stat_layers_.empty()) {
      // The block's statistics in one array for the engine's cross-rank average.
      size_t at = 0;
      for (GpuLayer* l : stat_layers_) {
        const size_t len = size_t(l->batch_stats_len());
        CUDA_CHECK(cudaMemcpyAsync(stats_.get() + at, l->batch_stats(), len * sizeof(float),
                                   cudaMemcpyDeviceToDevice, c_->stream));
        at += len;
      }
    }
  }

  void backward(const float* x, const float* y, const float* dy, float* dx, int n) override {
    // The paths kept their input (x) and activations from forward.
    (void)x, (void)y;
    // A profiled step times the block as one layer: its paths' layers mark no passes.
    struct Unmarked {
      GpuContext* c;
      GpuStepTimer* timer;
      ~Unmarked() { c->timer = timer; }
    } unmarked{c_, std::exchange(c_->timer, nullptr)};
    main_->backward(dy, dx, n, nullptr);
    const size_t count = size_t(n) * size_t(in_values_);
    if (shortcut_) {
      shortcut_->backward(dy, dx != nullptr ? grad_shortcut_.get() : nullptr, n, nullptr);
      if (dx != nullptr) AddInto(dx, grad_shortcut_.get(), count);
    } else if (dx != nullptr) {
      AddInto(dx, dy, count);  // the identity's input gradient is the output gradient
    }
  }

  void bind(const PointerMap& values, const PointerMap& grads, const PointerMap& buffers) override {
    // "main.03.conv2d/weight" goes to main path layer 3 as "weight".
    for (int branch = 0; branch < 2; ++branch) {
      GpuStack* path = branch == 0 ? main_.get() : shortcut_.get();
      if (path == nullptr) continue;
      for (size_t j = 0; j < path->size(); ++j) {
        const std::string prefix = Prefix(branch, j, path_kinds_[size_t(branch)][j]);
        path->layer(j).bind(Part(values, prefix), Part(grads, prefix), Part(buffers, prefix));
      }
    }
  }

  float* batch_stats() override { return stat_layers_.empty() ? nullptr : stats_.get(); }
  int batch_stats_len() const override { return int(stats_.size()); }
  void commit_batch_stats() override {
    // stats_ holds the cross-rank average by now: each layer takes its part back.
    size_t at = 0;
    for (GpuLayer* l : stat_layers_) {
      const size_t len = size_t(l->batch_stats_len());
      CUDA_CHECK(cudaMemcpyAsync(l->batch_stats(), stats_.get() + at, len * sizeof(float),
                                 cudaMemcpyDeviceToDevice, c_->stream));
      at += len;
      l->commit_batch_stats();
    }
  }

  void plan(int n) override {
    main_->plan(n);
    if (shortcut_) shortcut_->plan(n);
  }

 private:
  // A path's layers ("03.residual/main.00.conv2d" in warnings) and the shape it outputs.
  std::unique_ptr<GpuStack> MakePath(const std::vector<LayerSpec>& specs, const Shape3& in,
                                     int max_batch, const std::string& name, int branch,
                                     Shape3* out) {
    const char* path = branch == 0 ? "layers" : "shortcut";
    const std::vector<Shape3> shapes = PathShapes(specs, in, name, path);
    in_values_ = in.elements();
    std::vector<std::unique_ptr<GpuLayer>> layers;
    for (size_t j = 0; j < specs.size(); ++j) {
      const std::string prefix = Prefix(branch, j, specs[j].kind);
      layers.push_back(MakeGpuLayer(specs[j], shapes[j], shapes[j + 1], max_batch, c_,
                                    name + "/" + prefix.substr(0, prefix.size() - 1)));
      path_kinds_[size_t(branch)].push_back(specs[j].kind);
    }
    *out = shapes.back();
    return std::make_unique<GpuStack>(std::move(layers), shapes, max_batch, c_->stream);
  }

  static std::string Prefix(int branch, size_t j, LayerKind kind) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s.%02zu.%s/", branch == 0 ? "main" : "shortcut", j,
                  LayerKindName(kind));
    return buf;
  }

  // The entries of `all` under `prefix`, named by what follows it.
  static PointerMap Part(const PointerMap& all, const std::string& prefix) {
    PointerMap out;
    for (const auto& [name, p] : all)
      if (name.compare(0, prefix.size(), prefix) == 0) out[name.substr(prefix.size())] = p;
    return out;
  }

  // sum[i] += add[i] for `count` values: cuBLAS's saxpy with alpha 1, element by element.
  void AddInto(float* sum, const float* add, size_t count) {
    const float one = 1.0f;
    CUBLAS_CHECK(cublasSaxpy_64(c_->cublas, int64_t(count), &one, add, 1, sum, 1));
  }

  GpuContext* c_;
  Shape3 out_;
  int64_t in_values_ = 0;                 // per sample, of the block's input
  std::vector<LayerKind> path_kinds_[2];  // main path, shortcut
  std::unique_ptr<GpuStack> main_, shortcut_;
  std::vector<GpuLayer*> stat_layers_;
  DeviceArray<float> stats_;
  DeviceArray<float> grad_shortcut_;
};

}  // namespace

std::unique_ptr<GpuLayer> MakeGpuResidual(const LayerSpec& spec, const Shape3& in, int max_batch,
                                          GpuContext* context, const std::string& name) {
  return std::make_unique<GpuResidual>(spec, in, max_batch, context, name);
}

}  // namespace cuda
}  // namespace dlh
