// DLH — GPU layers on DLH's own kernels (see gpu_kernel_layers.hpp).
#include "launcher/engine/cuda/gpu_kernel_layers.hpp"

#include "common/error.hpp"
#include "launcher/engine/cuda/kernels.hpp"

namespace dlh {
namespace cuda {
namespace {

// Average pooling (count_include_pad, as the CPU layer) on DLH's own kernels rather than
// cuDNN's: a gather backward, so the bits never depend on scheduling.
class GpuAvgPool : public GpuLayer {
 public:
  GpuAvgPool(const LayerSpec& s, const Shape3& in, const Shape3& out, GpuContext* c) : c_(c) {
    g_.planes = 0;
    g_.height = in.height, g_.width = in.width;
    g_.out_height = out.height, g_.out_width = out.width;
    g_.kernel = s.kernel, g_.stride = s.stride, g_.padding = s.padding;
    channels_ = in.channels;
  }
  void forward(const float* x, float* y, int n, const ForwardContext&) override {
    AvgPool2dForward(x, y, geometry(n), c_->stream);
  }
  void backward(const float*, const float*, const float* dy, float* dx, int n) override {
    if (dx != nullptr) AvgPool2dBackward(dy, dx, geometry(n), c_->stream);
  }

 private:
  PoolGeometry geometry(int n) const {
    PoolGeometry g = g_;
    g.planes = size_t(n) * size_t(channels_);
    return g;
  }
  GpuContext* c_;
  PoolGeometry g_;
  int channels_ = 0;
};

// C x H x W to C x 1 x 1, the mean of each plane.
class GpuGlobalAvgPool : public GpuLayer {
 public:
  GpuGlobalAvgPool(const Shape3& in, GpuContext* c)
      : channels_(in.channels), area_(size_t(in.height) * size_t(in.width)), c_(c) {}
  void forward(const float* x, float* y, int n, const ForwardContext&) override {
    GlobalAvgPool2dForward(x, y, size_t(n) * size_t(channels_), area_, c_->stream);
  }
  void backward(const float*, const float*, const float* dy, float* dx, int n) override {
    if (dx != nullptr)
      GlobalAvgPool2dBackward(dy, dx, size_t(n) * size_t(channels_), area_, c_->stream);
  }

 private:
  int channels_;
  size_t area_;
  GpuContext* c_;
};

// GELU or SiLU: element-wise kernels; the backward reads the input, not the output.
class GpuSmoothActivation : public GpuLayer {
 public:
  GpuSmoothActivation(LayerKind kind, const Shape3& in, GpuContext* c)
      : gelu_(kind == LayerKind::Gelu), elements_(size_t(in.elements())), c_(c) {}
  void forward(const float* x, float* y, int n, const ForwardContext&) override {
    const size_t count = size_t(n) * elements_;
    if (gelu_)
      GeluForward(x, y, count, c_->stream);
    else
      SiluForward(x, y, count, c_->stream);
  }
  void backward(const float* x, const float*, const float* dy, float* dx, int n) override {
    if (dx == nullptr) return;
    const size_t count = size_t(n) * elements_;
    if (gelu_)
      GeluBackward(x, dy, dx, count, c_->stream);
    else
      SiluBackward(x, dy, dx, count, c_->stream);
  }

 private:
  bool gelu_;
  size_t elements_;
  GpuContext* c_;
};

}  // namespace

std::unique_ptr<GpuLayer> MakeGpuKernelLayer(const LayerSpec& spec, const Shape3& in,
                                             const Shape3& out, GpuContext* context) {
  switch (spec.kind) {
    case LayerKind::AvgPool2d:
      return std::make_unique<GpuAvgPool>(spec, in, out, context);
    case LayerKind::GlobalAvgPool2d:
      return std::make_unique<GpuGlobalAvgPool>(in, context);
    case LayerKind::Gelu:
    case LayerKind::Silu:
      return std::make_unique<GpuSmoothActivation>(spec.kind, in, context);
    default:
      throw Error(std::string("MakeGpuKernelLayer: not one of its kinds: ") +
                  LayerKindName(spec.kind));
  }
}

}  // namespace cuda
}  // namespace dlh
