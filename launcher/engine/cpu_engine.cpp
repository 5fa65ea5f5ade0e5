// DLH — the CPU engine: the layer stack of launcher/nn/layers/ on host memory, gradients
// summed by GradientSync (fused MPI buckets overlapped with backward) or, for the
// hierarchical algorithm, by the CPU HierarchicalAllreducer at the end of backward.
#include <functional>
#include <memory>

#include "launcher/comm/allreduce.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/engine/engine.hpp"
#include "launcher/nn/network.hpp"
#include "launcher/nn/optimizer.hpp"

namespace dlh {
namespace {

class CpuEngine : public Engine {
 public:
  explicit CpuEngine(const EngineConfig& c)
      : comm_(c.comm),
        input_(c.spec->input),
        label_smoothing_(c.spec->label_smoothing),
        net_(*c.spec),
        opt_(MakeOptimizer(c.spec->optimizer)),
        on_forward_done_(c.on_forward_done) {
    net_.init(c.spec->seed);
    reducer_ = MakeAllreducer(c.allreduce, c.comm, c.node_of_rank);
    GradSyncOptions sync = c.sync;
    if (auto* h = dynamic_cast<HierarchicalAllreducer*>(reducer_.get())) {
      // Flat keeps GradientSync's own MPI path, which overlaps buckets with backward; only
      // the hierarchical allreduce is passed in as a reducer.
      sync.reducer = h;
      allreduce_name_ = "hierarchical (" + DescribeTopology(h->topology()) + ")";
    } else {
      allreduce_name_ = "flat";
    }
    sync_ = std::make_unique<GradientSync>(c.comm, net_.params(), net_.param_layer(), sync);
    for (size_t i = 0; i < net_.num_layers(); ++i)
      if (Tensor* s = net_.layer(i).batch_stats()) {
        stat_layers_.push_back(&net_.layer(i));
        stats_.push_back(s);
      }
  }

  std::string device_name() const override { return "cpu"; }
  std::string allreduce_name() const override { return allreduce_name_; }
  size_t num_param_values() const override { return net_.num_param_values(); }
  const char* optimizer_name() const override { return opt_->name(); }

  void broadcast_params() override {
    for (auto& p : net_.params()) {
      Tensor& t = *p.ref.value;
      MPI_CHECK(MPI_Bcast(t.data(), int(t.size()), MPI_FLOAT, 0, comm_));
    }
  }

  // The host computes, so there is no copy to overlap with backward; `next` is still called,
  // after backward, so that the trainer takes its batches alike on either engine.
  StepSums forward_backward(const Batch& batch, const ForwardContext& ctx, float loss_scale,
                            const NextBatch& next) override {
    const Tensor& logits = net_.forward(batch.images, ctx);
    StepSums sums;
    sums.loss = SoftmaxCrossEntropy(logits, batch.labels.data(), loss_scale, &grad_logits_,
                                    &sums.correct, label_smoothing_);
    if (on_forward_done_) on_forward_done_();
    net_.backward(grad_logits_, [&](size_t layer) {
      if (sync_gradients_) sync_->layer_done(layer);
    });
    if (next) next();
    return sums;
  }

  double finish_gradients() override { return sync_gradients_ ? sync_->finish() : 0; }
  void set_gradient_sync(bool on) override { sync_gradients_ = on; }
  std::vector<float>* gradient_values() override { return &sync_->values(); }

  std::vector<float> batch_stats() override {
    std::vector<float> out;
    for (Tensor* s : stats_) out.insert(out.end(), s->begin(), s->end());
    return out;
  }

  void commit_batch_stats(const std::vector<float>& averaged) override {
    size_t k = 0;
    for (Tensor* s : stats_)
      for (size_t i = 0; i < s->size(); ++i) (*s)[i] = averaged.at(k++);
    for (Layer* l : stat_layers_) l->commit_batch_stats();
  }

  void update(double lr, int64_t step) override { opt_->update(net_.params(), lr, step); }

  StepSums evaluate(const float* images, const int32_t* labels, int n,
                    const ForwardContext& ctx) override {
    const Shape3& in = input_;
    eval_x_.resize({n, in.channels, in.height, in.width});
    std::copy(images, images + eval_x_.size(), eval_x_.data());
    const Tensor& logits = net_.forward(eval_x_, ctx);
    StepSums sums;
    sums.loss =
        SoftmaxCrossEntropy(logits, labels, 1.0f, &eval_grad_, &sums.correct, label_smoothing_);
    return sums;
  }

  std::vector<NamedArray> export_params() override { return net_.export_params(); }
  std::vector<NamedArray> export_buffers() override { return net_.export_buffers(); }
  std::vector<NamedArray> export_optimizer_state() override {
    std::vector<NamedArray> state;
    opt_->export_state(net_.params(), &state);
    return state;
  }
  // The parameters and the optimizer state are copied into the previous snapshot's arrays:
  // on a VM a page fault costs tens of microseconds, and a snapshot into fresh memory took
  // longer than the write it hands to the background (arrays above malloc's 32 MB mmap
  // ceiling come as fresh pages every time). Batch-norm buffers are small.
  void export_state(std::vector<NamedArray>* params, std::vector<NamedArray>* buffers,
                    std::vector<NamedArray>* optimizer_state) override {
    const std::vector<NamedParam>& live = net_.params();
    params->resize(live.size());
    for (size_t i = 0; i < live.size(); ++i) {
      NamedArray& a = (*params)[i];
      a.name = live[i].name;
      a.shape = live[i].ref.value->shape();
      a.data.assign(live[i].ref.value->begin(), live[i].ref.value->end());
    }
    *buffers = net_.export_buffers();
    opt_->export_state(live, optimizer_state);
  }
  void import_state(const std::vector<NamedArray>& params, const std::vector<NamedArray>& buffers,
                    const std::vector<NamedArray>& optimizer_state) override {
    net_.import_params(params);
    net_.import_buffers(buffers);
    opt_->import_state(net_.params(), optimizer_state);
  }

 private:
  MPI_Comm comm_;
  Shape3 input_;
  double label_smoothing_;
  Network net_;
  std::unique_ptr<Optimizer> opt_;
  std::function<void()> on_forward_done_;
  std::unique_ptr<Allreducer> reducer_;
  std::unique_ptr<GradientSync> sync_;
  std::string allreduce_name_;
  bool sync_gradients_ = true;
  std::vector<Layer*> stat_layers_;
  std::vector<Tensor*> stats_;
  Tensor grad_logits_, eval_x_, eval_grad_;
};

}  // namespace

std::unique_ptr<Engine> MakeCpuEngine(const EngineConfig& config) {
  return std::make_unique<CpuEngine>(config);
}

}  // namespace dlh
