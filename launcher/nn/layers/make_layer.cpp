// DLH — MakeLayer(): validates one layer spec against its input shape and builds it.
// The checks repeat what a correct spec parser already enforces, because layers are
// also built directly (tests, tools) and a bad shape would otherwise corrupt memory.

#include <string>

#include "common/error.hpp"
#include "launcher/nn/layers/layers.hpp"

namespace dlh {
namespace {

std::string ShapeText(const Shape3& s) {
  return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width);
}

[[noreturn]] void Fail(const char* layer, const std::string& what) {
  throw SpecError(std::string(layer) + ": " + what);
}

void RequirePositive(const char* layer, const char* field, int value) {
  if (value <= 0)
    Fail(layer, std::string(field) + " must be positive, got " + std::to_string(value));
}

// Shared by conv2d and maxpool2d: window parameters and the fit into the padded input.
void CheckWindow(const char* layer, const LayerSpec& spec, const Shape3& in) {
  RequirePositive(layer, "kernel", spec.kernel);
  RequirePositive(layer, "stride", spec.stride);
  if (spec.padding < 0) {
    Fail(layer, "padding must be >= 0, got " + std::to_string(spec.padding));
  }
  const int ph = in.height + 2 * spec.padding, pw = in.width + 2 * spec.padding;
  if (spec.kernel > ph || spec.kernel > pw) {
    std::string what = "kernel " + std::to_string(spec.kernel) +
                       " is larger than the padded input " + std::to_string(ph) + "x" +
                       std::to_string(pw) + " (input " + ShapeText(in) + ", padding " +
                       std::to_string(spec.padding) + ")";
    if (in.height == 1 && in.width == 1) what += "; the input is flat (after flatten or dense?)";
    Fail(layer, what);
  }
}

}  // namespace

int BatchSize(const Tensor& in, const Shape3& shape, const char* layer) {
  const size_t per_sample = size_t(shape.elements());
  if (in.rank() == 0 || in.dim(0) < 0 || in.size() != size_t(in.dim(0)) * per_sample) {
    std::string dims;
    for (int d : in.shape()) dims += (dims.empty() ? "" : "x") + std::to_string(d);
    throw Error(std::string(layer) + ": input tensor [" + dims + "] is not a batch of " +
                ShapeText(shape) + " samples");
  }
  return in.dim(0);
}

std::unique_ptr<Layer> MakeLayer(const LayerSpec& spec, const Shape3& in) {
  if (in.channels <= 0 || in.height <= 0 || in.width <= 0) {
    throw SpecError("layer input shape " + ShapeText(in) + " has an empty dimension");
  }
  switch (spec.kind) {
    case LayerKind::Conv2d:
      RequirePositive("conv2d", "filters", spec.filters);
      CheckWindow("conv2d", spec, in);
      return std::make_unique<Conv2d>(in, spec.filters, spec.kernel, spec.stride, spec.padding,
                                      ParamInit{spec.init, spec.bias_init});
    case LayerKind::MaxPool2d:
      CheckWindow("maxpool2d", spec, in);
      // A window made only of padding would have no winner.
      if (spec.padding >= spec.kernel) {
        Fail("maxpool2d", "padding " + std::to_string(spec.padding) +
                              " must be smaller than the kernel " + std::to_string(spec.kernel));
      }
      return std::make_unique<MaxPool2d>(in, spec.kernel, spec.stride, spec.padding);
    case LayerKind::Dense:
      RequirePositive("dense", "units", spec.units);
      return std::make_unique<Dense>(in, spec.units, ParamInit{spec.init, spec.bias_init});
    case LayerKind::Relu:
      return std::make_unique<Relu>(in);
    case LayerKind::Flatten:
      return std::make_unique<Flatten>(in);
    case LayerKind::Dropout:
      if (!(spec.rate >= 0.0 && spec.rate < 1.0)) {
        Fail("dropout", "rate must be in [0, 1), got " + std::to_string(spec.rate));
      }
      return std::make_unique<Dropout>(in, spec.rate);
    case LayerKind::BatchNorm:
      if (!(spec.momentum >= 0.0 && spec.momentum <= 1.0)) {
        Fail("batchnorm", "momentum must be in [0, 1], got " + std::to_string(spec.momentum));
      }
      if (!(spec.epsilon > 0.0)) {
        Fail("batchnorm", "epsilon must be positive, got " + std::to_string(spec.epsilon));
      }
      return std::make_unique<BatchNorm>(in, spec.momentum, spec.epsilon);
    case LayerKind::AvgPool2d:
      CheckWindow("avgpool2d", spec, in);
      if (spec.padding > spec.kernel / 2) {
        Fail("avgpool2d", "padding " + std::to_string(spec.padding) +
                              " must be at most half the kernel " + std::to_string(spec.kernel));
      }
      return std::make_unique<AvgPool2d>(in, spec.kernel, spec.stride, spec.padding);
    case LayerKind::GlobalAvgPool2d:
      return std::make_unique<GlobalAvgPool2d>(in);
    case LayerKind::Gelu:
      return std::make_unique<Gelu>(in);
    case LayerKind::Silu:
      return std::make_unique<Silu>(in);
    case LayerKind::Residual:
      if (spec.layers.empty()) Fail("residual", "the main path has no layers");
      return std::make_unique<Residual>(spec, in);
  }
  throw SpecError("unknown layer kind " + std::to_string(int(spec.kind)));
}

}  // namespace dlh
