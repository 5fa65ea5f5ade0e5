// DLH — pipeline model parallelism on the CPU (ParallelSpec in common/spec.hpp).
//
// The world's ranks are replicas of a pipeline of P stages: rank r is stage r % P of replica
// r / P, and holds the layers of its stage only (common/pipeline_stages.hpp cuts them). A replica's
// batch (every stage of it takes the same slice from the loader: stage 0 its images, the last
// its labels) is cut into M micro-batches. The schedule is GPipe's: every micro-batch forward
// through the stages, the activations passed on by MPI, then every micro-batch backward, last
// first, the input gradients passed back. A stage keeps only each micro-batch's input and
// runs its forward again before that micro-batch's backward (GPipe's re-materialization: the
// layers keep one set of activations; the last micro-batch's are still live and are not
// recomputed). Gradients add up over the micro-batches, each scaled as a share of the global
// batch, so their sum is the same global mean gradient as unpipelined training's; the ranks of
// one stage (one per replica) then sum them with GradientSync, as data parallelism does.
//
// Batch normalization sees micro-batches, as in GPipe: its running statistics take the
// micro-batches' mean. Dropout masks are keyed by (replica, micro-batch) where unpipelined
// training keys them by rank. A network without either trains to the unpipelined run's
// parameters within float rounding (tests/scripts/pipeline.sh).
//
// Checkpoints hold the whole model in the usual layout: gather_state() brings the other
// stages' arrays to rank 0 before its snapshot, and a stage imports its own arrays by name
// from a whole-model file, so a pipelined run resumes unpipelined and the reverse.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/error.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/engine/engine.hpp"
#include "launcher/engine/pipeline_parts.hpp"
#include "launcher/nn/network.hpp"
#include "launcher/nn/optimizer.hpp"

namespace dlh {
namespace {

std::vector<int> WithBatch(int n, const Shape3& s) { return {n, s.channels, s.height, s.width}; }

class PipelineEngine : public Engine {
 public:
  explicit PipelineEngine(const EngineConfig& c)
      : spec_(*c.spec),
        comm_(c.comm),
        stages_(c.spec->parallel.pipeline_stages),
        micro_(c.spec->parallel.micro_batches),
        opt_(MakeOptimizer(c.spec->optimizer)),
        on_forward_done_(c.on_forward_done) {
    place_ = PlaceInPipeline(spec_, comm_);
    rank_ = place_.rank;
    size_ = place_.size;
    stage_ = place_.stage;
    replica_ = place_.replica;
    first_ = place_.first;
    last_ = place_.last;
    const std::vector<Shape3> shapes = LayerShapes(spec_);
    in_ = shapes[first_];
    out_ = shapes[last_];
    net_ = std::make_unique<Network>(spec_, first_, last_);
    net_->init(spec_.seed);
    MPI_CHECK(MPI_Comm_split(comm_, stage_, rank_, &stage_comm_));
    GradSyncOptions sync = c.sync;
    sync.reducer = nullptr;
    sync_ = std::make_unique<GradientSync>(stage_comm_, net_->params(), net_->param_layer(), sync);
    for (size_t i = 0; i < net_->num_layers(); ++i)
      if (Tensor* s = net_->layer(i).batch_stats()) {
        stat_layers_.push_back(&net_->layer(i));
        stats_.push_back(s);
      }
    // The statistics every rank exchanges are the whole network's, stage after stage.
    for (Tensor* s : stats_) own_stats_ += s->size();
    const StatsPlacement placed = PlaceStageStats(place_, own_stats_, comm_);
    stats_offset_ = placed.offset;
    stats_total_ = placed.total;
    num_values_ = WholeNetworkValues(place_, net_->num_param_values(), comm_);
  }

  ~PipelineEngine() override {
    if (stage_comm_ != MPI_COMM_NULL) MPI_Comm_free(&stage_comm_);
  }

  std::string device_name() const override {
    return "cpu, pipeline stage " + std::to_string(stage_ + 1) + " of " + std::to_string(stages_) +
           " (layers " + std::to_string(first_) + "-" + std::to_string(last_ - 1) + ")";
  }
  std::string allreduce_name() const override {
    return "flat, per stage across " + std::to_string(size_ / stages_) + " replica(s)";
  }
  size_t num_param_values() const override { return num_values_; }
  const char* optimizer_name() const override { return opt_->name(); }

  // The stage's parameters from replica 0's (initial values are the same on every rank; the
  // broadcast makes that a fact, as on one rank).
  void broadcast_params() override {
    for (auto& p : net_->params()) {
      Tensor& t = *p.ref.value;
      MPI_CHECK(MPI_Bcast(t.data(), int(t.size()), MPI_FLOAT, 0, stage_comm_));
    }
  }

  StepSums forward_backward(const Batch& batch, const ForwardContext& ctx, float loss_scale,
                            const NextBatch& next) override {
    const int n = int(batch.labels.size());
    CheckMicroBatches(n, micro_);
    inputs_.resize(size_t(micro_));
    grad_logits_.resize(size_t(micro_));
    stat_sum_.assign(own_stats_, 0.0);
    in_step_ = true;
    StepSums sums;
    // Forward, micro-batch after micro-batch.
    for (int m = 0; m < micro_; ++m) {
      int off = 0, cnt = 0;
      MicroBatchPiece(n, m, micro_, &off, &cnt);
      Tensor& x = inputs_[size_t(m)];
      x.resize(WithBatch(cnt, in_));
      if (stage_ == 0) {
        const size_t per = size_t(in_.elements());
        std::copy(batch.images.data() + size_t(off) * per,
                  batch.images.data() + size_t(off + cnt) * per, x.data());
      } else {
        Recv(x.data(), x.size(), rank_ - 1, kPipelineForwardTag + m);
      }
      const Tensor& y = net_->forward(x, MicroContext(ctx, m));
      if (stage_ == stages_ - 1) {
        int64_t correct = 0;
        sums.loss += SoftmaxCrossEntropy(y, batch.labels.data() + off, loss_scale,
                                         &grad_logits_[size_t(m)], &correct, spec_.label_smoothing);
        sums.correct += correct;
      } else {
        Send(y.data(), y.size(), rank_ + 1, kPipelineForwardTag + m);
      }
      // Batch-norm statistics: the micro-batches' mean, weighted by their sizes.
      size_t k = 0;
      for (Tensor* s : stats_)
        for (float v : *s) stat_sum_[k++] += double(v) * cnt / n;
    }
    if (on_forward_done_) on_forward_done_();
    // Backward, the last micro-batch first: its activations are the live ones.
    std::vector<float>& flat = sync_->values();
    for (int m = micro_ - 1; m >= 0; --m) {
      int off = 0, cnt = 0;
      MicroBatchPiece(n, m, micro_, &off, &cnt);
      if (m != micro_ - 1) net_->forward(inputs_[size_t(m)], MicroContext(ctx, m));
      const Tensor* grad_out = &grad_logits_[size_t(m)];
      if (stage_ != stages_ - 1) {
        grad_from_next_.resize(WithBatch(cnt, out_));
        Recv(grad_from_next_.data(), grad_from_next_.size(), rank_ + 1, kPipelineBackwardTag + m);
        grad_out = &grad_from_next_;
      }
      net_->backward(*grad_out, stage_ > 0 ? &grad_in_ : nullptr, {});
      if (stage_ > 0) Send(grad_in_.data(), grad_in_.size(), rank_ - 1, kPipelineBackwardTag + m);
      if (m == micro_ - 1)
        accumulated_.assign(flat.begin(), flat.end());
      else
        for (size_t i = 0; i < flat.size(); ++i) accumulated_[i] += flat[i];
    }
    in_step_ = false;
    std::copy(accumulated_.begin(), accumulated_.end(), flat.begin());
    if (sync_gradients_)
      for (size_t k = net_->num_layers(); k-- > 0;) sync_->layer_done(k);
    if (next) next();
    return sums;
  }

  double finish_gradients() override { return sync_gradients_ ? sync_->finish() : 0; }
  void set_gradient_sync(bool on) override { sync_gradients_ = on; }

  std::vector<float> batch_stats() override {
    std::vector<float> out(stats_total_, 0.0f);
    for (size_t i = 0; i < stat_sum_.size(); ++i) out[stats_offset_ + i] = float(stat_sum_[i]);
    return out;
  }

  void commit_batch_stats(const std::vector<float>& averaged) override {
    size_t k = stats_offset_;
    for (Tensor* s : stats_)
      for (size_t i = 0; i < s->size(); ++i) (*s)[i] = averaged.at(k++);
    for (Layer* l : stat_layers_) l->commit_batch_stats();
  }

  void update(double lr, int64_t step) override {
    opt_->update(net_->params(), lr, step);
    gathered_.forget();
  }

  // The chunk passes through the replica's stages like a micro-batch; the last stage has the
  // sums, the others report none.
  StepSums evaluate(const float* images, const int32_t* labels, int n,
                    const ForwardContext& ctx) override {
    eval_x_.resize(WithBatch(n, in_));
    if (stage_ == 0)
      std::copy(images, images + eval_x_.size(), eval_x_.data());
    else
      Recv(eval_x_.data(), eval_x_.size(), rank_ - 1, kPipelineForwardTag);
    const Tensor& y = net_->forward(eval_x_, ctx);
    StepSums sums;
    if (stage_ != stages_ - 1) {
      Send(y.data(), y.size(), rank_ + 1, kPipelineForwardTag);
      return sums;
    }
    sums.loss =
        SoftmaxCrossEntropy(y, labels, 1.0f, &eval_grad_, &sums.correct, spec_.label_smoothing);
    return sums;
  }

  // This stage's arrays: what the ranks of one stage must agree on.
  std::vector<NamedArray> export_params() override { return net_->export_params(); }
  std::vector<NamedArray> export_buffers() override { return net_->export_buffers(); }
  std::vector<NamedArray> export_optimizer_state() override {
    std::vector<NamedArray> state;
    opt_->export_state(net_->params(), &state);
    return state;
  }

  // Replica 0's later stages send their arrays to rank 0, which appends them to its own in
  // export_state(): the checkpoint's snapshot is the whole model, in layer order.
  void gather_state() override { gathered_.gather(place_, comm_, *this); }

  void export_state(std::vector<NamedArray>* params, std::vector<NamedArray>* buffers,
                    std::vector<NamedArray>* optimizer_state) override {
    *params = export_params();
    *buffers = export_buffers();
    *optimizer_state = export_optimizer_state();
    gathered_.append_to(place_, params, buffers, optimizer_state);
  }

  // A whole-model checkpoint: this stage's arrays by name, the rest left alone.
  void import_state(const std::vector<NamedArray>& params, const std::vector<NamedArray>& buffers,
                    const std::vector<NamedArray>& optimizer_state) override {
    net_->import_params(params);
    net_->import_buffers(buffers);
    opt_->import_state(net_->params(), optimizer_state);
  }

  double pipeline_wait_seconds() const override { return wait_s_; }

  ModelPart model_part() const override {
    return ModelPart{stage_, stages_, replica_ == 0, stage_comm_};
  }

 private:
  ForwardContext MicroContext(ForwardContext ctx, int m) const {
    ctx.rank = replica_ * micro_ + m;  // dropout masks: one key per micro-batch
    return ctx;
  }

  // Blocking: a stage stands here while the pipeline fills and drains (its bubble) and while
  // a neighbour is slower; training steps count those seconds (pipeline_wait_seconds).
  void Send(const float* data, size_t count, int to, int tag) {
    const double t = MPI_Wtime();
    MPI_CHECK(MPI_Send(data, int(count), MPI_FLOAT, to, tag, comm_));
    if (in_step_) wait_s_ += MPI_Wtime() - t;
  }
  void Recv(float* data, size_t count, int from, int tag) {
    const double t = MPI_Wtime();
    MPI_CHECK(MPI_Recv(data, int(count), MPI_FLOAT, from, tag, comm_, MPI_STATUS_IGNORE));
    if (in_step_) wait_s_ += MPI_Wtime() - t;
  }

  const TrainSpec& spec_;
  MPI_Comm comm_;
  PipelinePlace place_;
  int rank_ = 0, size_ = 1, stages_ = 1, micro_ = 1, stage_ = 0, replica_ = 0;
  size_t first_ = 0, last_ = 0;
  Shape3 in_, out_;
  std::unique_ptr<Network> net_;
  std::unique_ptr<Optimizer> opt_;
  std::function<void()> on_forward_done_;
  MPI_Comm stage_comm_ = MPI_COMM_NULL;
  std::unique_ptr<GradientSync> sync_;
  bool sync_gradients_ = true;
  size_t num_values_ = 0;
  std::vector<Layer*> stat_layers_;
  std::vector<Tensor*> stats_;
  size_t own_stats_ = 0, stats_offset_ = 0, stats_total_ = 0;
  std::vector<double> stat_sum_;
  std::vector<Tensor> inputs_, grad_logits_;
  Tensor grad_from_next_, grad_in_, eval_x_, eval_grad_;
  std::vector<float> accumulated_;
  bool in_step_ = false;        // inside forward_backward (evaluations are not counted)
  double wait_s_ = 0;           // seconds training steps stood in Send and Recv
  StageArraysGather gathered_;  // rank 0: the other stages' arrays for a checkpoint
};

}  // namespace

std::unique_ptr<Engine> MakePipelineEngine(const EngineConfig& config) {
  return std::make_unique<PipelineEngine>(config);
}

}  // namespace dlh
