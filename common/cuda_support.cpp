// DLH — what the CUDA engine can train (see cuda_support.hpp).
#include "common/cuda_support.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace dlh {
namespace {

// How far the CUDA engine (launcher/engine/cuda/, MakeGpuLayer) has come with a kind.
enum class Support {
  Checked,     // built and checked against the CPU engine on a GPU (share/gpu/gpu-check.sh)
  Unverified,  // built, never run on a GPU: refused unless DLH_TEST_CUDA_UNVERIFIED=1
};

Support CudaSupport(LayerKind kind) {
  switch (kind) {
    case LayerKind::Conv2d:
    case LayerKind::MaxPool2d:
    case LayerKind::Dense:
    case LayerKind::Relu:
    case LayerKind::Flatten:
    case LayerKind::Dropout:
    case LayerKind::BatchNorm:
      return Support::Checked;
    // Written without a GPU (issue 43): tests/gpu/gpu_layers_test.cpp compares them with the
    // CPU layers, and gpu-check.sh trains a residual spec on both engines, once a GPU is lent.
    case LayerKind::AvgPool2d:
    case LayerKind::GlobalAvgPool2d:
    case LayerKind::Gelu:
    case LayerKind::Silu:
    case LayerKind::Residual:
      return Support::Unverified;
  }
  return Support::Unverified;
}

// The GPU check's switch: what is built but unverified is what it must run.
bool UnverifiedAllowed() {
  const char* v = std::getenv("DLH_TEST_CUDA_UNVERIFIED");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// The first layer of `layers` (at `path`), nested paths included, the engine may not run.
std::string Unsupported(const std::vector<LayerSpec>& layers, const std::string& path) {
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    if (CudaSupport(layers[i].kind) != Support::Checked && !UnverifiedAllowed())
      return at + ": " + LayerKindName(layers[i].kind) + " is not supported by the CUDA engine yet";
    if (layers[i].kind == LayerKind::Residual) {
      std::string why = Unsupported(layers[i].layers, at + ".layers");
      if (why.empty()) why = Unsupported(layers[i].shortcut, at + ".shortcut");
      if (!why.empty()) return why;
    }
  }
  return "";
}

}  // namespace

std::string CudaEngineUnsupported(const TrainSpec& spec) {
  const std::string origin = spec.origin.empty() ? std::string("spec") : spec.origin;
  if (const std::string why = Unsupported(spec.layers, "layers"); !why.empty())
    return origin + ": " + why;
  if (UnverifiedAllowed()) return "";
  if (spec.label_smoothing != 0) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", spec.label_smoothing);
    return origin + ": label_smoothing: " + value +
           " is not supported by the CUDA engine yet (its loss's smoothing has not run on a GPU)";
  }
  // Written without a GPU (issue 43): the bf16 casts around cuDNN and cuBLAS, and the
  // switches of TF32 off the default.
  if (spec.precision != Precision::Fp32)
    return origin + ": precision: \"" + PrecisionName(spec.precision) +
           "\" is not supported by the CUDA engine yet (its bf16 path has not run on a GPU)";
  if (spec.tf32 != Tf32Use::Convolutions)
    return origin + ": tf32: \"" + Tf32UseName(spec.tf32) +
           "\" is not supported by the CUDA engine yet (it has not run on a GPU)";
  // Written without a GPU (issue 47): a pipeline's stages on GPUs, activations passed by NCCL
  // send and receive (launcher/engine/cuda/cuda_pipeline.cpp).
  if (spec.parallel.pipelined())
    return origin +
           ": parallel.pipeline_stages: a pipeline is not supported by the CUDA engine yet (its "
           "stages on GPUs have not run on one)";
  // Written without a GPU (issue 47): the gradients staged through the host
  // (CudaEngine::gradient_values).
  if (spec.sync.stale_sync())
    return origin +
           ": sync.mode: \"stale_sync\" is not supported by the CUDA engine yet (its gradients "
           "staged through the host have not run on a GPU)";
  return "";
}

std::string CpuEngineUnsupported(const TrainSpec& spec) {
  const std::string origin = spec.origin.empty() ? std::string("spec") : spec.origin;
  // OpenBLAS's sbgemm would compute bf16 GEMMs on the CPU, but only CPUs with AVX512-BF16 or
  // AMX run it faster than fp32, and the CPU engine's convolutions are its own im2col
  // GEMMs; mixed precision there would change results and rarely speed. TF32 is a GPU
  // format: "tf32" only allows it, so the CPU's plain fp32 honours every setting.
  if (spec.precision == Precision::Bf16)
    return origin +
           ": precision: \"bf16\" needs the CUDA engine; the CPU engine trains in fp32 only "
           "(set \"precision\": \"fp32\" to train this spec on the CPU)";
  return "";
}

}  // namespace dlh
