// DLH — the GPU layers: the same layer kinds, shapes and arithmetic as launcher/nn/layers/,
// on device memory. cuDNN runs convolution, max pooling and ReLU; cuBLASLt the dense layers
// (their bias fused into the GEMMs); kernels.cu the rest. Every call enqueues on the engine's
// compute stream and returns.
//
// Parameters, their gradients and buffers live in the engine's flat device arrays (one
// contiguous gradient array is what lets a fused allreduce bucket be a plain range); a
// layer gets pointers into them by the names the CPU layer uses ("weight", "bias",
// "gamma", "beta", "running_mean", "running_var"), so checkpoints are shared.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/spec.hpp"
#include "launcher/engine/cuda/bf16.hpp"
#include "launcher/engine/cuda/resources.hpp"
#include "launcher/engine/cuda/step_timer.hpp"
#include "launcher/nn/layer.hpp"

namespace dlh {
namespace cuda {

// What every layer of one engine shares.
struct GpuContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublaslt = nullptr;  // dense layers (null: their unfused path)
  cudnnHandle_t cudnn = nullptr;
  DeviceArray<char>* workspace = nullptr;  // cuDNN and cuBLASLt scratch (GrowWorkspace)
  // Scratch that a growth replaced: kept until the context goes (after the engine's streams
  // are synchronised), since work already queued may still use it. Freeing it at once would
  // need a synchronisation in the middle of a step (issue 42).
  std::vector<DeviceArray<char>> retired_workspaces;
  const float* ones = nullptr;  // max_batch ones (unfused dense bias gradient)
  size_t workspace_limit = size_t(1) << 30;
  // Dense layers add the bias in the forward GEMM's epilogue and take the bias gradient
  // from the weight-gradient GEMM's (cuBLASLt). false: plain cuBLAS GEMMs plus AddBias and
  // a GEMV, the path a layer also takes for a shape cuBLASLt has no epilogue algorithm for.
  bool fuse_dense_bias = true;
  // The spec's arithmetic (common/spec.hpp: Precision, Tf32Use). bf16: convolutions and
  // dense layers compute on bf16 copies of their operands (bf16.hpp), which live in
  // `transient`; tf32_*: fp32 convolutions / GEMMs may use TF32 tensor cores.
  bool bf16 = false;
  bool tf32_convolutions = true;
  bool tf32_gemms = false;
  DeviceArray<char>* transient = nullptr;
  std::vector<DeviceArray<char>> retired_transients;  // as retired_workspaces
  // Dense bias steps (forward add, backward gradient) that ran fused and unfused: the
  // tests check that the fused path really runs, which the values alone cannot tell.
  int64_t dense_bias_fused = 0, dense_bias_unfused = 0;
  // Set while the engine times its layers (launcher/engine/layer_timing.hpp): a layer that
  // computes its input gradient apart from its weights' marks that pass (MarkPass).
  GpuStepTimer* timer = nullptr;
};

// Marks the start of `pass` of the layer being timed, when the context's step is.
inline void MarkPass(GpuContext* c, const char* pass) {
  if (c->timer != nullptr) c->timer->mark_pass(pass);
}

using PointerMap = std::map<std::string, float*>;

// Makes c's workspace at least `bytes`, without a synchronisation: a larger array replaces
// it and the old one is retired (see GpuContext::retired_workspaces).
void GrowWorkspace(GpuContext* c, size_t bytes);
// The workspace the dense layers' cuBLASLt GEMMs may ask for, within the context's limit:
// reserved when the engine is built, so that their plans, made on first use, never grow it.
size_t DenseWorkspaceBytes(const GpuContext& c);

class GpuLayer {
 public:
  virtual ~GpuLayer() = default;
  // x holds n samples of the input shape, y gets n samples of the output shape.
  virtual void forward(const float* x, float* y, int n, const ForwardContext& ctx) = 0;
  // Writes parameter gradients and, when dx is not null, dLoss/dx. x and y are those of
  // the last training forward.
  virtual void backward(const float* x, const float* y, const float* dy, float* dx, int n) = 0;
  // True for a layer whose output is its input, reshaped or unchanged (flatten; dropout at
  // rate 0): it must be given y == x and dx == dy (or null), and then enqueues nothing.
  // GpuStack gives it no memory of its own, so it costs no kernel and no copy.
  virtual bool output_is_input() const { return false; }
  virtual void bind(const PointerMap& values, const PointerMap& grads, const PointerMap& buffers) {
    (void)values, (void)grads, (void)buffers;
  }
  // Batchnorm: {mean[C], unbiased var[C]} of the last training forward, on the device.
  virtual float* batch_stats() { return nullptr; }
  virtual int batch_stats_len() const { return 0; }
  // Folds batch_stats() (by then the cross-rank average) into the running statistics.
  virtual void commit_batch_stats() {}
  // Chooses what the layer needs for batch n (convolution algorithms and their workspace),
  // so that it is made when the engine is built rather than in a step.
  virtual void plan(int n) { (void)n; }
  // What runs each of its passes at batch n where a library chooses (planned before), for
  // the layer's profile rows (launcher/engine/layer_timing.hpp); none for the engine's own
  // kernels.
  struct PassChoice {
    std::string pass;  // as LayerPassTime::pass
    std::string algorithm, math;
    size_t workspace_bytes = 0;
  };
  virtual std::vector<PassChoice> choices(int n) const {
    (void)n;
    return {};
  }
};

// `in` and `out` are per-sample shapes (from LayerShapes); `max_batch` bounds n. `name`
// ("03.conv2d", as in the parameter names) is what warnings call the layer.
std::unique_ptr<GpuLayer> MakeGpuLayer(const LayerSpec& spec, const Shape3& in, const Shape3& out,
                                       int max_batch, GpuContext* context,
                                       const std::string& name = "");

// Picks from cuDNN's heuristic results (`perf`, in cuDNN's order of preference) the first
// deterministic algorithm that fits `limit` bytes of workspace, so that the same inputs
// give the same bits on every step and a resumed run repeats an uninterrupted one. When
// none is deterministic it takes the first that fits and sets *deterministic = false (the
// caller warns); when none fits it throws. A result whose math type lets cuDNN convert
// fp32 tensors down to fp16 never qualifies: the caller runs each algorithm in the math
// type of its result. Perf: cudnnConvolution*AlgoPerf_t.
//
// tensor_ops false (fp32 with "tf32": "none"): a result rated with tensor-op math (TF32 for
// fp32) does not qualify either; the caller then runs the chosen one in FMA math.
template <typename Perf>
Perf PickAlgo(const Perf* perf, int count, size_t limit, const char* what, bool* deterministic,
              bool tensor_ops = true) {
  auto usable = [&](const Perf& p) {
    return p.status == CUDNN_STATUS_SUCCESS && p.memory <= limit &&
           p.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
           (tensor_ops || p.mathType != CUDNN_TENSOR_OP_MATH);
  };
  *deterministic = true;
  for (int i = 0; i < count; ++i)
    if (usable(perf[i]) && perf[i].determinism == CUDNN_DETERMINISTIC) return perf[i];
  *deterministic = false;
  for (int i = 0; i < count; ++i)
    if (usable(perf[i])) return perf[i];
  throw CudaError(std::string("conv2d: cuDNN offers no ") + what + " algorithm");
}

}  // namespace cuda
}  // namespace dlh
