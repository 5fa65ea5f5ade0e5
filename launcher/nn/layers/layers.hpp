// DLH — the concrete CPU layers behind MakeLayer(). Private to launcher/nn/layers/: the rest
// of the engine only sees the Layer interface of launcher/nn/layer.hpp.
//
// Every layer is built for one per-sample input shape (validated by MakeLayer) and takes
// any batch size N; the batch size is read from dim 0 of the input tensor. Scratch
// buffers are members so that steady-state training does not allocate.
#pragma once

#include <cstdint>
#include <vector>

#include "launcher/nn/init.hpp"
#include "launcher/nn/layer.hpp"
#include "launcher/nn/layer_stack.hpp"

namespace dlh {

// Batch size of `in`, after checking that it holds N samples of `shape`. A mismatch
// is a bug in the caller (the trainer), not a user error, but it must not corrupt memory.
int BatchSize(const Tensor& in, const Shape3& shape, const char* layer);

class Conv2d : public Layer {
 public:
  Conv2d(const Shape3& in, int filters, int kernel, int stride, int padding, ParamInit init = {});
  LayerKind kind() const override { return LayerKind::Conv2d; }
  Shape3 output_shape() const override { return out_; }
  void init(std::mt19937_64& rng) override;
  void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;
  std::vector<ParamRef> params() override;
  // Layers that run inside this one (layers/fuse.hpp): a ReLU on the output (which then
  // masks the output gradient), and after it a 2x2, stride-2 max pool, whose output becomes
  // this layer's output: the full-size output then never leaves the core's cache.
  void fuse_relu() { fused_relu_ = true; }
  void fuse_pool2x2() { fused_pool_ = true; }
  // One sample's column copies of a training step (columns.hpp).
  void run_column_copies(const float* sample, bool backward, bool grad_in,
                         std::vector<float>& scratch, std::vector<float>& grad_sample) const;

 private:
  // One sample's output rows [row_begin, row_end) (conv_tiles.hpp); col2im's cols is
  // scratch, and it adds into grad_in.
  void im2col(const float* in, int row_begin, int row_end, float* cols) const;
  void col2im(float* cols, int row_begin, int row_end, float* grad_in) const;

  Shape3 in_, out_;
  int kernel_, stride_, padding_;
  ParamInit param_init_;
  bool fused_relu_ = false, fused_pool_ = false;
  std::vector<int32_t> argmax_;  // fused pool: per pooled output, its winner in the plane
  Tensor weight_, bias_, grad_weight_, grad_bias_;
  // Per-thread column buffers: (C*K*K) x (rows*Wo) for one tile of one sample's output
  // rows, small enough to stay in cache between im2col and the GEMM that reads it.
  std::vector<float> scratch_;
  // Backward: weight and bias gradient of each fixed chunk of samples, summed in chunk
  // order afterwards (a deterministic reduction whatever the thread count).
  std::vector<float> partial_w_;
  std::vector<double> partial_b_;
};

class MaxPool2d : public Layer {
 public:
  MaxPool2d(const Shape3& in, int kernel, int stride, int padding);
  LayerKind kind() const override { return LayerKind::MaxPool2d; }
  Shape3 output_shape() const override { return out_; }
  void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;
  bool plain_2x2() const { return kernel_ == 2 && stride_ == 2 && padding_ == 0; }
  // The layer before runs it (layers/fuse.hpp); the network no longer calls this one.
  void mark_fused() { fused_ = true; }
  bool fused() const { return fused_; }

 private:
  Shape3 in_, out_;
  int kernel_, stride_, padding_;
  bool fused_ = false;
  std::vector<int32_t> argmax_;  // per output: index of the winner within its input plane
};

class Dense : public Layer {
 public:
  Dense(const Shape3& in, int units, ParamInit init = {});
  LayerKind kind() const override { return LayerKind::Dense; }
  Shape3 output_shape() const override { return Shape3{units_, 1, 1}; }
  void init(std::mt19937_64& rng) override;
  void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;
  std::vector<ParamRef> params() override;

 private:
  Shape3 in_;
  int in_features_, units_;
  ParamInit param_init_;
  Tensor weight_, bias_, grad_weight_, grad_bias_;
};

class Relu : public Layer {
 public:
  explicit Relu(const Shape3& in) : in_(in) {}
  LayerKind kind() const override { return LayerKind::Relu; }
  Shape3 output_shape() const override { return in_; }
  void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;
  // The layer before runs it (layers/fuse.hpp); the network no longer calls this one.
  void mark_fused() { fused_ = true; }
  bool fused() const { return fused_; }

 private:
  Shape3 in_;
  bool fused_ = false;
};

class Flatten : public Layer {
 public:
  explicit Flatten(const Shape3& in) : in_(in) {}
  LayerKind kind() const override { return LayerKind::Flatten; }
  Shape3 output_shape() const override { return Shape3{int(in_.elements()), 1, 1}; }
  void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;

 private:
  Shape3 in_;
};

class Dropout : public Layer {
 public:
  Dropout(const Shape3& in, double rate) : in_(in), rate_(rate) {}
  LayerKind kind() const override { return LayerKind::Dropout; }
  Shape3 output_shape() const override { return in_; }
  void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;

 private:
  Shape3 in_;
  double rate_;
  std::vector<float> mask_;  // 0 or 1/(1-rate) per element of the last forward
};

class BatchNorm : public Layer {
 public:
  BatchNorm(const Shape3& in, double momentum, double epsilon);
  LayerKind kind() const override { return LayerKind::BatchNorm; }
  Shape3 output_shape() const override { return in_; }
  void init(std::mt19937_64& rng) override;
  void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;
  std::vector<ParamRef> params() override;
  std::vector<BufferRef> buffers() override;
  Tensor* batch_stats() override { return &stats_; }
  void commit_batch_stats() override;

 private:
  void reset();  // gamma 1, beta 0, running mean 0, running var 1

  Shape3 in_;
  double momentum_, epsilon_;
  Tensor gamma_, beta_, grad_gamma_, grad_beta_;
  Tensor running_mean_, running_var_;
  Tensor stats_;                // {mean[C], unbiased var[C]} of the last training forward
  std::vector<float> xhat_;     // normalised input of the last training forward
  std::vector<float> inv_std_;  // per channel 1/sqrt(var + eps) of that forward
};

class AvgPool2d : public Layer {
 public:
  AvgPool2d(const Shape3& in, int kernel, int stride, int padding);
  LayerKind kind() const override { return LayerKind::AvgPool2d; }
  Shape3 output_shape() const override { return out_; }
  void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;

 private:
  Shape3 in_, out_;
  int kernel_, stride_, padding_;
};

class GlobalAvgPool2d : public Layer {
 public:
  explicit GlobalAvgPool2d(const Shape3& in) : in_(in) {}
  LayerKind kind() const override { return LayerKind::GlobalAvgPool2d; }
  Shape3 output_shape() const override { return Shape3{in_.channels, 1, 1}; }
  void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;

 private:
  Shape3 in_;
};

class Gelu : public Layer {
 public:
  explicit Gelu(const Shape3& in) : in_(in) {}
  LayerKind kind() const override { return LayerKind::Gelu; }
  Shape3 output_shape() const override { return in_; }
  void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;

 private:
  Shape3 in_;
};

class Silu : public Layer {
 public:
  explicit Silu(const Shape3& in) : in_(in) {}
  LayerKind kind() const override { return LayerKind::Silu; }
  Shape3 output_shape() const override { return in_; }
  void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;

 private:
  Shape3 in_;
};

// A residual block: its main path and its shortcut (none: the identity) both run on the
// block's input, and the block outputs their sum. Each path is a LayerStack of its own; the
// block names their parameters "main.<j>.<kind>/..." and "shortcut.<j>.<kind>/...", and
// gathers their batch statistics into one array, main path first.
class Residual : public Layer {
 public:
  Residual(const LayerSpec& spec, const Shape3& in);
  LayerKind kind() const override { return LayerKind::Residual; }
  Shape3 output_shape() const override { return out_; }
  void init(std::mt19937_64& rng) override;
  void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;
  std::vector<ParamRef> params() override;
  std::vector<BufferRef> buffers() override;
  Tensor* batch_stats() override { return stats_.size() > 0 ? &stats_ : nullptr; }
  void commit_batch_stats() override;

 private:
  template <typename F>
  void for_each_layer(F f);

  Shape3 out_;
  LayerStack main_;
  std::unique_ptr<LayerStack> shortcut_;  // null: the identity
  std::vector<Layer*> stat_layers_;       // the paths' layers with batch statistics, in order
  Tensor stats_;                          // theirs, one after the other
  Tensor grad_shortcut_;                  // the shortcut's input gradient
};

}  // namespace dlh
