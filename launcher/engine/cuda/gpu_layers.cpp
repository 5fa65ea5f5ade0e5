// DLH — GPU layers (see gpu_layers.hpp).
#include "launcher/engine/cuda/gpu_layers.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "launcher/engine/cuda/gpu_dense.hpp"
#include "launcher/engine/cuda/gpu_kernel_layers.hpp"
#include "launcher/engine/cuda/gpu_residual.hpp"
#include "launcher/engine/cuda/kernels.hpp"
#include "launcher/nn/random.hpp"

namespace dlh {
namespace cuda {
namespace {

float* Lookup(const PointerMap& map, const std::string& name, const char* layer) {
  auto it = map.find(name);
  if (it == map.end()) throw Error(std::string(layer) + ": no device array '" + name + "'");
  return it->second;
}

void CopyOnStream(float* dst, const float* src, size_t count, cudaStream_t stream) {
  if (count > 0)
    CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

// Layers whose output has the input's shape and no parameters share the descriptors.
class ShapedLayer : public GpuLayer {
 protected:
  ShapedLayer(const Shape3& in, GpuContext* c) : in_(in), c_(c), desc_(MakeTensorDesc()) {}
  void describe(int n) { SetTensor4d(desc_, n, in_.channels, in_.height, in_.width); }
  size_t count(int n) const { return size_t(n) * size_t(in_.elements()); }
  Shape3 in_;
  GpuContext* c_;
  TensorDesc desc_;
};

class GpuRelu : public ShapedLayer {
 public:
  GpuRelu(const Shape3& in, GpuContext* c) : ShapedLayer(in, c) {
    cudnnActivationDescriptor_t d = nullptr;
    CUDNN_CHECK(cudnnCreateActivationDescriptor(&d));
    act_ = ActDesc(d);
    CUDNN_CHECK(
        cudnnSetActivationDescriptor(d, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  }
  void forward(const float* x, float* y, int n, const ForwardContext&) override {
    if (n == 0) return;
    describe(n);
    const float one = 1, zero = 0;
    CUDNN_CHECK(
        cudnnActivationForward(c_->cudnn, act_.get(), &one, desc_.get(), x, &zero, desc_.get(), y));
  }
  void backward(const float* x, const float* y, const float* dy, float* dx, int n) override {
    if (dx == nullptr || n == 0) return;
    describe(n);
    const float one = 1, zero = 0;
    CUDNN_CHECK(cudnnActivationBackward(c_->cudnn, act_.get(), &one, desc_.get(), y, desc_.get(),
                                        dy, desc_.get(), x, &zero, desc_.get(), dx));
  }

 private:
  ActDesc act_;
};

// An output_is_input() layer must be given its input as its output (forward) and its
// output gradient as its input gradient (backward); anything else is a caller's bug, which
// a copy would hide.
void CheckIsInput(const float* out, const float* in, const char* layer) {
  if (out != in)
    throw Error(std::string(layer) + ": not given its input's memory as its output (internal)");
}

// NCHW and N x (C*H*W) are the same bytes: the output is the input, and nothing runs.
class GpuFlatten : public GpuLayer {
 public:
  bool output_is_input() const override { return true; }
  void forward(const float* x, float* y, int, const ForwardContext&) override {
    CheckIsInput(y, x, "flatten");
  }
  void backward(const float*, const float*, const float* dy, float* dx, int) override {
    if (dx != nullptr) CheckIsInput(dx, dy, "flatten");
  }
};

// At rate 0 dropout is the identity, in training too: the output is the input, as for
// flatten. At a positive rate inference copies, since training needs the layer's own output
// memory and the engine lays memory out once (GpuStack).
class GpuDropout : public ShapedLayer {
 public:
  GpuDropout(const Shape3& in, double rate, int max_batch, GpuContext* c)
      : ShapedLayer(in, c), rate_(rate), mask_(rate > 0.0 ? count(max_batch) : 0) {}
  bool output_is_input() const override { return rate_ <= 0.0; }
  void forward(const float* x, float* y, int n, const ForwardContext& ctx) override {
    if (output_is_input()) {
      CheckIsInput(y, x, "dropout");
      return;
    }
    if (!ctx.training) {
      CopyOnStream(y, x, count(n), c_->stream);
      masked_ = false;
      return;
    }
    DropoutForward(x, y, mask_.get(), count(n),
                   DropoutKey(ctx.seed, ctx.rank, ctx.step, ctx.layer_index),
                   DropoutThreshold(rate_), float(1.0 / (1.0 - rate_)), c_->stream);
    masked_ = true;
  }
  void backward(const float*, const float*, const float* dy, float* dx, int n) override {
    if (output_is_input()) {
      if (dx != nullptr) CheckIsInput(dx, dy, "dropout");
      return;
    }
    if (dx == nullptr) return;
    if (masked_)
      Multiply(dy, mask_.get(), dx, count(n), c_->stream);
    else
      CopyOnStream(dx, dy, count(n), c_->stream);
  }

 private:
  double rate_;
  DeviceArray<float> mask_;
  bool masked_ = false;
};

class GpuMaxPool : public GpuLayer {
 public:
  GpuMaxPool(const LayerSpec& s, const Shape3& in, const Shape3& out, GpuContext* c)
      : in_(in), out_(out), c_(c), x_(MakeTensorDesc()), y_(MakeTensorDesc()) {
    cudnnPoolingDescriptor_t d = nullptr;
    CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d));
    pool_ = PoolDesc(d);
    // The deterministic variant: backward routes each gradient to one fixed winner, as the
    // CPU does, instead of racing atomics on ties.
    CUDNN_CHECK(cudnnSetPooling2dDescriptor(d, CUDNN_POOLING_MAX_DETERMINISTIC,
                                            CUDNN_NOT_PROPAGATE_NAN, s.kernel, s.kernel, s.padding,
                                            s.padding, s.stride, s.stride));
  }
  void forward(const float* x, float* y, int n, const ForwardContext&) override {
    if (n == 0) return;
    describe(n);
    const float one = 1, zero = 0;
    CUDNN_CHECK(cudnnPoolingForward(c_->cudnn, pool_.get(), &one, x_.get(), x, &zero, y_.get(), y));
  }
  void backward(const float* x, const float* y, const float* dy, float* dx, int n) override {
    if (dx == nullptr || n == 0) return;
    describe(n);
    const float one = 1, zero = 0;
    CUDNN_CHECK(cudnnPoolingBackward(c_->cudnn, pool_.get(), &one, y_.get(), y, y_.get(), dy,
                                     x_.get(), x, &zero, x_.get(), dx));
  }

 private:
  void describe(int n) {
    SetTensor4d(x_, n, in_.channels, in_.height, in_.width);
    SetTensor4d(y_, n, out_.channels, out_.height, out_.width);
  }
  Shape3 in_, out_;
  GpuContext* c_;
  TensorDesc x_, y_;
  PoolDesc pool_;
};

// cuDNN's names for its algorithms and math types, less the enums' prefixes, for the
// layers' profile rows (GpuLayer::choices).
const char* AlgoName(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "?";
  }
}
const char* AlgoName(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
      return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
      return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "?";
  }
}
const char* AlgoName(cudnnConvolutionBwdFilterAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
      return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
      return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
      return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING:
      return "FFT_TILING";
    default:
      return "?";
  }
}
const char* MathName(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "default";
    case CUDNN_TENSOR_OP_MATH:
      return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "tensor_op_allow_conversion";
    case CUDNN_FMA_MATH:
      return "fma";
    default:
      return "?";
  }
}

// A convolution descriptor of the spec's geometry: cross-correlation, as the CPU engine's
// im2col computes it.
ConvDesc MakeConvDesc(const LayerSpec& s) {
  cudnnConvolutionDescriptor_t d = nullptr;
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
  ConvDesc owner(d);
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d, s.padding, s.padding, s.stride, s.stride, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  return owner;
}

class GpuConv2d : public GpuLayer {
 public:
  GpuConv2d(const LayerSpec& s, const Shape3& in, const Shape3& out, const std::string& name,
            GpuContext* c)
      : in_(in),
        out_(out),
        kernel_(s.kernel),
        name_(name.empty() ? "conv2d" : name),
        c_(c),
        dtype_(c->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT),
        x_(MakeTensorDesc()),
        y_(MakeTensorDesc()),
        y32_(MakeTensorDesc()),
        bias_desc_(MakeTensorDesc()),
        fwd_conv_(MakeConvDesc(s)),
        data_conv_(MakeConvDesc(s)),
        filter_conv_(MakeConvDesc(s)) {
    cudnnFilterDescriptor_t f = nullptr;
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&f));
    filter_ = FilterDesc(f);
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(f, dtype_, CUDNN_TENSOR_NCHW, out.channels, in.channels,
                                           s.kernel, s.kernel));
    SetTensor4d(bias_desc_, 1, out.channels, 1, 1);
  }
  void bind(const PointerMap& values, const PointerMap& grads, const PointerMap&) override {
    w_ = Lookup(values, "weight", "conv2d");
    b_ = Lookup(values, "bias", "conv2d");
    dw_ = Lookup(grads, "weight", "conv2d");
    db_ = Lookup(grads, "bias", "conv2d");
  }
  // In bf16 (bf16.hpp) the cuDNN calls take bf16 copies of x, the weights and dy, carved
  // from the context's transient arena, and their bf16 results are widened into y, dw and
  // dx; the bias and its gradient stay fp32 (y32_ describes the fp32 output).
  void forward(const float* x, float* y, int n, const ForwardContext&) override {
    if (n == 0) return;
    const Algos& a = prepare(n);
    const float one = 1, zero = 0;
    if (c_->bf16) {
      const std::vector<bf16*> t = CarveTransient(c_, {in_count(n), weights(), out_count(n)});
      ToBf16(x, t[0], in_count(n), c_->stream);
      ToBf16(w_, t[1], weights(), c_->stream);
      CUDNN_CHECK(cudnnConvolutionForward(c_->cudnn, &one, x_.get(), t[0], filter_.get(), t[1],
                                          fwd_conv_.get(), a.fwd, c_->workspace->get(), a.workspace,
                                          &zero, y_.get(), t[2]));
      FromBf16(t[2], y, out_count(n), c_->stream);
    } else {
      CUDNN_CHECK(cudnnConvolutionForward(c_->cudnn, &one, x_.get(), x, filter_.get(), w_,
                                          fwd_conv_.get(), a.fwd, c_->workspace->get(), a.workspace,
                                          &zero, y_.get(), y));
    }
    CUDNN_CHECK(cudnnAddTensor(c_->cudnn, &one, bias_desc_.get(), b_, &one, y32_.get(), y));
  }
  void backward(const float* x, const float*, const float* dy, float* dx, int n) override {
    const float one = 1, zero = 0;
    if (n == 0) {
      Fill(dw_, 0, weights(), c_->stream);
      Fill(db_, 0, size_t(out_.channels), c_->stream);
      return;
    }
    const Algos& a = prepare(n);
    CUDNN_CHECK(cudnnConvolutionBackwardBias(c_->cudnn, &one, y32_.get(), dy, &zero,
                                             bias_desc_.get(), db_));
    if (c_->bf16) {
      const std::vector<bf16*> t =
          CarveTransient(c_, {in_count(n), out_count(n), weights(), in_count(n), weights()});
      ToBf16(x, t[0], in_count(n), c_->stream);
      ToBf16(dy, t[1], out_count(n), c_->stream);
      CUDNN_CHECK(cudnnConvolutionBackwardFilter(
          c_->cudnn, &one, x_.get(), t[0], y_.get(), t[1], filter_conv_.get(), a.bwd_filter,
          c_->workspace->get(), a.workspace, &zero, filter_.get(), t[4]));
      FromBf16(t[4], dw_, weights(), c_->stream);
      if (dx != nullptr) {
        MarkPass(c_, "backward-data");
        ToBf16(w_, t[2], weights(), c_->stream);
        CUDNN_CHECK(cudnnConvolutionBackwardData(
            c_->cudnn, &one, filter_.get(), t[2], y_.get(), t[1], data_conv_.get(), a.bwd_data,
            c_->workspace->get(), a.workspace, &zero, x_.get(), t[3]));
        FromBf16(t[3], dx, in_count(n), c_->stream);
      }
      return;
    }
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        c_->cudnn, &one, x_.get(), x, y_.get(), dy, filter_conv_.get(), a.bwd_filter,
        c_->workspace->get(), a.workspace, &zero, filter_.get(), dw_));
    if (dx == nullptr) return;
    MarkPass(c_, "backward-data");
    CUDNN_CHECK(cudnnConvolutionBackwardData(c_->cudnn, &one, filter_.get(), w_, y_.get(), dy,
                                             data_conv_.get(), a.bwd_data, c_->workspace->get(),
                                             a.workspace, &zero, x_.get(), dx));
  }

 private:
  // Each pass's algorithm and the math type (plain FMA, or tensor cores, TF32 for fp32 on
  // Ampere and newer) cuDNN rated it with.
  struct Algos {
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math;
    size_t workspace = 0;  // the largest of the three passes'
    size_t fwd_workspace = 0, bwd_data_workspace = 0, bwd_filter_workspace = 0;
  };

  void plan(int n) override { prepare(n); }

  std::vector<PassChoice> choices(int n) const override {
    const auto it = algos_.find(n);
    if (it == algos_.end()) return {};
    const Algos& a = it->second;
    return {
        {"forward", AlgoName(a.fwd), MathName(a.fwd_math), a.fwd_workspace},
        {"backward-weights", AlgoName(a.bwd_filter), MathName(a.bwd_filter_math),
         a.bwd_filter_workspace},
        {"backward-data", AlgoName(a.bwd_data), MathName(a.bwd_data_math), a.bwd_data_workspace}};
  }

  size_t weights() const { return size_t(out_.channels) * in_.channels * kernel_ * kernel_; }
  size_t in_count(int n) const { return size_t(n) * size_t(in_.elements()); }
  size_t out_count(int n) const { return size_t(n) * size_t(out_.elements()); }
  // fp32 with "tf32": "none": FMA math only (PickAlgo's tensor_ops).
  bool tensor_ops() const { return c_->bf16 || c_->tf32_convolutions; }

  // Describes batch n and sets each pass's descriptor to the math type of its algorithm:
  // every pass has its own descriptor because the three math types may differ, and the
  // setting is per batch size because the algorithms may.
  const Algos& prepare(int n) {
    SetTensor4d(x_, n, in_.channels, in_.height, in_.width, dtype_);
    SetTensor4d(y_, n, out_.channels, out_.height, out_.width, dtype_);
    SetTensor4d(y32_, n, out_.channels, out_.height, out_.width);
    auto it = algos_.find(n);
    if (it == algos_.end()) it = algos_.emplace(n, choose(n)).first;
    const Algos& a = it->second;
    CUDNN_CHECK(cudnnSetConvolutionMathType(fwd_conv_.get(), a.fwd_math));
    CUDNN_CHECK(cudnnSetConvolutionMathType(data_conv_.get(), a.bwd_data_math));
    CUDNN_CHECK(cudnnSetConvolutionMathType(filter_conv_.get(), a.bwd_filter_math));
    return a;
  }

  // The algorithms for batch n (x_ and y_ describe it), from cuDNN's heuristics.
  Algos choose(int n) {
    // The heuristics see the descriptor's math type: start each query from cuDNN's
    // default (FMA where TF32 is off), so that the choice does not depend on which batch
    // size came first.
    const cudnnMathType_t start = tensor_ops() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    for (const ConvDesc* d : {&fwd_conv_, &data_conv_, &filter_conv_})
      CUDNN_CHECK(cudnnSetConvolutionMathType(d->get(), start));
    int on = 0, oc = 0, oh = 0, ow = 0;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(fwd_conv_.get(), x_.get(), filter_.get(), &on,
                                                      &oc, &oh, &ow));
    if (oc != out_.channels || oh != out_.height || ow != out_.width)
      throw CudaError("conv2d: cuDNN's output shape differs from the spec's (internal error)");
    const size_t limit = c_->workspace_limit;
    int got = 0;
    bool fwd_det = true, data_det = true, filter_det = true;
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
        c_->cudnn, x_.get(), filter_.get(), fwd_conv_.get(), y_.get(),
        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fwd));
    const auto f = PickAlgo(fwd, got, limit, "forward", &fwd_det, tensor_ops());
    cudnnConvolutionBwdDataAlgoPerf_t bd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        c_->cudnn, filter_.get(), y_.get(), data_conv_.get(), x_.get(),
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, bd));
    const auto d = PickAlgo(bd, got, limit, "backward-data", &data_det, tensor_ops());
    cudnnConvolutionBwdFilterAlgoPerf_t bf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        c_->cudnn, x_.get(), y_.get(), filter_conv_.get(), filter_.get(),
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, bf));
    const auto w = PickAlgo(bf, got, limit, "backward-filter", &filter_det, tensor_ops());
    if (!(fwd_det && data_det && filter_det))
      warn_nondeterministic(n, fwd_det, data_det, filter_det);
    Algos a;
    a.fwd = f.algo;
    a.bwd_data = d.algo;
    a.bwd_filter = w.algo;
    // Where TF32 is off, a result cuDNN rated in its default math (which allows TF32 on
    // Ampere and newer) runs in FMA math.
    auto math = [this](cudnnMathType_t m) { return tensor_ops() ? m : CUDNN_FMA_MATH; };
    a.fwd_math = math(f.mathType);
    a.bwd_data_math = math(d.mathType);
    a.bwd_filter_math = math(w.mathType);
    a.fwd_workspace = f.memory;
    a.bwd_data_workspace = d.memory;
    a.bwd_filter_workspace = w.memory;
    a.workspace = std::max({f.memory, d.memory, w.memory});
    GrowWorkspace(c_, a.workspace);
    if (c_->bf16)
      GrowTransient(c_,
                    TransientBytes({in_count(n), out_count(n), weights(), in_count(n), weights()}));
    return a;
  }

  // Never silent: a non-deterministic algorithm breaks DLH's promise that a resumed run
  // repeats the uninterrupted one bit for bit. One line, the first time for this layer.
  void warn_nondeterministic(int n, bool fwd, bool data, bool filter) {
    if (warned_) return;
    warned_ = true;
    std::string passes;
    const std::pair<bool, const char*> all[] = {
        {fwd, "forward"}, {data, "backward-data"}, {filter, "backward-filter"}};
    for (const auto& [deterministic, pass] : all)
      if (!deterministic) passes += std::string(passes.empty() ? "" : ", ") + pass;
    std::fprintf(stderr,
                 "dlh: warning: %s: cuDNN has no deterministic %s algorithm for batch %d within "
                 "%zu MiB of workspace; using a non-deterministic one, so this layer's results "
                 "may differ between runs and a resumed run will not repeat an uninterrupted "
                 "one bit for bit\n",
                 name_.c_str(), passes.c_str(), n, c_->workspace_limit >> 20);
  }

  Shape3 in_, out_;
  int kernel_;
  std::string name_;
  GpuContext* c_;
  cudnnDataType_t dtype_;  // of x_, y_ and filter_: what the cuDNN calls compute on
  TensorDesc x_, y_, y32_, bias_desc_;
  FilterDesc filter_;
  ConvDesc fwd_conv_, data_conv_, filter_conv_;  // one per pass: their math types differ
  std::map<int, Algos> algos_;  // by batch size: training and evaluation batches differ
  bool warned_ = false;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
};

class GpuBatchNorm : public GpuLayer {
 public:
  GpuBatchNorm(const LayerSpec& s, const Shape3& in, int max_batch, GpuContext* c)
      : in_(in),
        momentum_(s.momentum),
        epsilon_(s.epsilon),
        c_(c),
        xhat_(size_t(max_batch) * size_t(in.elements())),
        stats_(size_t(2 * in.channels)),
        inv_std_(size_t(in.channels)),
        scratch_(BatchNormScratchSize(in.channels)) {}
  void bind(const PointerMap& values, const PointerMap& grads, const PointerMap& buffers) override {
    gamma_ = Lookup(values, "gamma", "batchnorm");
    beta_ = Lookup(values, "beta", "batchnorm");
    dgamma_ = Lookup(grads, "gamma", "batchnorm");
    dbeta_ = Lookup(grads, "beta", "batchnorm");
    mean_ = Lookup(buffers, "running_mean", "batchnorm");
    var_ = Lookup(buffers, "running_var", "batchnorm");
  }
  void forward(const float* x, float* y, int n, const ForwardContext& ctx) override {
    const int hw = in_.height * in_.width;
    if (ctx.training)
      BatchNormTrainForward(x, y, xhat_.get(), stats_.get(), inv_std_.get(), gamma_, beta_,
                            scratch_.get(), n, in_.channels, hw, epsilon_, c_->stream);
    else
      BatchNormInferForward(x, y, gamma_, beta_, mean_, var_, n, in_.channels, hw, epsilon_,
                            c_->stream);
  }
  void backward(const float*, const float*, const float* dy, float* dx, int n) override {
    BatchNormBackward(dy, xhat_.get(), gamma_, inv_std_.get(), dgamma_, dbeta_, dx, scratch_.get(),
                      n, in_.channels, in_.height * in_.width, c_->stream);
  }
  float* batch_stats() override { return stats_.get(); }
  int batch_stats_len() const override { return 2 * in_.channels; }
  void commit_batch_stats() override {
    BatchNormCommit(mean_, var_, stats_.get(), in_.channels, momentum_, c_->stream);
  }

 private:
  Shape3 in_;
  double momentum_, epsilon_;
  GpuContext* c_;
  DeviceArray<float> xhat_, stats_, inv_std_;
  DeviceArray<double> scratch_;  // the reductions' per-part partial sums
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  float *mean_ = nullptr, *var_ = nullptr;
};

}  // namespace

void GrowWorkspace(GpuContext* c, size_t bytes) {
  if (c->workspace->size() >= bytes) return;
  DeviceArray<char> grown(bytes);
  if (c->workspace->size() > 0) c->retired_workspaces.push_back(std::move(*c->workspace));
  *c->workspace = std::move(grown);
}

std::unique_ptr<GpuLayer> MakeGpuLayer(const LayerSpec& spec, const Shape3& in, const Shape3& out,
                                       int max_batch, GpuContext* context,
                                       const std::string& name) {
  switch (spec.kind) {
    case LayerKind::Conv2d:
      return std::make_unique<GpuConv2d>(spec, in, out, name, context);
    case LayerKind::MaxPool2d:
      return std::make_unique<GpuMaxPool>(spec, in, out, context);
    case LayerKind::Dense:
      return MakeGpuDense(in, out, context);
    case LayerKind::Relu:
      return std::make_unique<GpuRelu>(in, context);
    case LayerKind::Flatten:
      return std::make_unique<GpuFlatten>();
    case LayerKind::Dropout:
      return std::make_unique<GpuDropout>(in, spec.rate, max_batch, context);
    case LayerKind::BatchNorm:
      return std::make_unique<GpuBatchNorm>(spec, in, max_batch, context);
    case LayerKind::AvgPool2d:
    case LayerKind::GlobalAvgPool2d:
    case LayerKind::Gelu:
    case LayerKind::Silu:
      return MakeGpuKernelLayer(spec, in, out, context);
    case LayerKind::Residual:
      return MakeGpuResidual(spec, in, max_batch, context, name);
  }
  throw Error("no GPU implementation of layer kind " + std::string(LayerKindName(spec.kind)));
}

}  // namespace cuda
}  // namespace dlh
