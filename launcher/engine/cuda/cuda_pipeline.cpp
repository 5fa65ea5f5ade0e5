// DLH — pipeline model parallelism on GPUs (see cuda_pipeline.hpp).
//
// The schedule is the CPU pipeline's (launcher/engine/pipeline_engine.cpp): GPipe, every
// micro-batch forward through the stages, then every micro-batch backward, last first, each
// stage keeping only each micro-batch's input and running its forward again before that
// micro-batch's backward (the last micro-batch's activations are still live). Here every
// step of it is queued on the compute stream: an activation goes to the next stage with
// ncclSend and comes from the previous one with ncclRecv on the same stream, so a stage's
// layers wait for their input on the device, and the host waits once per step, for the last
// backward, as the whole-network engine does.
//
// The layers overwrite the parameter gradients on each backward; a micro-batch's are added to
// `accumulated_` (the last micro-batch's copied, the others added in the CPU's order), which
// goes back into the gradient array before the ranks of this stage (one per replica) sum it
// with the whole-network engine's bucketed NCCL allreduce.
//
// The bubble is measured on the device: an event pair around every send and receive of a
// training step (a receive lasts while the peer stage has not yet sent), summed once the step
// is done (pipeline_wait_seconds).
//
// Communicators: p2p_ over every rank (a replica's stages talk to their neighbours in it),
// the gradient sum's over the ranks of one stage. Before a GPU has run it this path is refused
// unless DLH_TEST_CUDA_UNVERIFIED=1 (common/cuda_support.cpp); share/gpu/gpu-check.sh checks it
// against the unpipelined GPU run, two stages on one GPU through the NCCL stand-in.
#include "launcher/engine/cuda/cuda_pipeline.hpp"

#include <memory>
#include <utility>

#include "launcher/engine/cuda/cuda_engine.hpp"
#include "launcher/engine/cuda/nccl_comm.hpp"
#include "launcher/engine/pipeline_parts.hpp"

namespace dlh {
namespace cuda {
namespace {

// The ranks of this stage (one per replica), split off config.comm, and their hosts.
LayerPart StagePart(const EngineConfig& c, const PipelinePlace& place) {
  LayerPart part;
  part.first = place.first;
  part.last = place.last;
  MPI_CHECK(MPI_Comm_split(c.comm, place.stage, place.rank, &part.replicas));
  for (size_t r = size_t(place.stage); r < c.node_of_rank.size(); r += size_t(place.stages))
    part.replica_nodes.push_back(c.node_of_rank[r]);
  return part;
}

Event MakeTimingEvent() {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreate(&e));
  return Event(e);
}

class CudaPipelineEngine : public CudaEngine {
 public:
  CudaPipelineEngine(const EngineConfig& c, const PipelinePlace& place)
      : CudaEngine(c, StagePart(c, place)), place_(place), micro_(c.spec->parallel.micro_batches) {
    const std::vector<Shape3> shapes = LayerShapes(spec_);
    in_values_ = size_t(shapes[place_.first].elements());
    out_values_ = size_t(shapes[place_.last].elements());
    // The largest micro-batch any call passes (a batch of max_batch cut into micro_ pieces).
    const size_t most = size_t((std::max(config_.max_batch, 1) + micro_ - 1) / micro_);
    const size_t whole = size_t(std::max(config_.max_batch, 1));
    if (!place_.first_stage()) {
      for (int m = 0; m < micro_; ++m) inputs_.emplace_back(most * in_values_);
      grad_in_.resize(most * in_values_);
      eval_x_.resize(whole * in_values_);
    }
    if (place_.last_stage()) {
      for (int m = 0; m < micro_; ++m) grad_logits_.emplace_back(most * size_t(spec_.classes));
      micro_sums_.resize(2 * size_t(micro_));
      micro_bad_.resize(size_t(micro_));
      host_micro_sums_.resize(2 * size_t(micro_));
      host_micro_bad_.resize(size_t(micro_));
    } else {
      grad_out_.resize(most * out_values_);
    }
    accumulated_.resize(std::max<size_t>(param_total_, 1));
    own_stats_ = stats_total_;
    const StatsPlacement placed = PlaceStageStats(place_, own_stats_, config_.comm);
    stats_offset_ = placed.offset;
    whole_stats_ = placed.total;
    whole_values_ = WholeNetworkValues(place_, host_.num_param_values(), config_.comm);
    RunCollectively(config_.comm, [&] {
      p2p_ = std::make_unique<NcclComm>(config_.comm, config_.comm_timeout_s);
    });
  }

  ~CudaPipelineEngine() override {
    if (compute_.get()) cudaStreamSynchronize(compute_.get());
    p2p_.reset();
    sync_.reset();  // its communicator is over part_.replicas, freed here
    if (part_.replicas != MPI_COMM_NULL) MPI_Comm_free(&part_.replicas);
  }

  std::string device_name() const override {
    return device_name_ + ", pipeline stage " + std::to_string(place_.stage + 1) + " of " +
           std::to_string(place_.stages) + " (layers " + std::to_string(place_.first) + "-" +
           std::to_string(place_.last - 1) + ")";
  }
  std::string allreduce_name() const override {
    return sync_->name() + ", per stage across " + std::to_string(place_.size / place_.stages) +
           " replica(s)";
  }
  size_t num_param_values() const override { return whole_values_; }

  StepSums forward_backward(const Batch& batch, const ForwardContext& ctx, float loss_scale,
                            const NextBatch& next) override {
    const int n = int(batch.labels.size());
    CheckMicroBatches(n, micro_);
    InputSlot& in = slot_for_step(batch, n);
    stat_sum_.assign(own_stats_, 0.0);
    timed_ = 0;
    in_step_ = true;
    // Forward, micro-batch after micro-batch.
    for (int m = 0; m < micro_; ++m) {
      int off = 0, cnt = 0;
      MicroBatchPiece(n, m, micro_, &off, &cnt);
      if (!place_.first_stage())
        receive(inputs_[size_t(m)].get(), size_t(cnt) * in_values_, place_.rank - 1);
      forward_from(micro_input(in, m, off), cnt, micro_context(ctx, m));
      if (place_.last_stage()) {
        CUDA_CHECK(cudaMemsetAsync(micro_bad_.get() + m, 0, sizeof(int), compute_.get()));
        SoftmaxCrossEntropy(stack_->output(), in.y.get() + off, cnt, spec_.classes, loss_scale,
                            grad_logits_[size_t(m)].get(), micro_sums_.get() + 2 * m,
                            micro_bad_.get() + m, compute_.get(), spec_.label_smoothing);
      } else {
        send(stack_->output(), size_t(cnt) * out_values_, place_.rank + 1);
      }
      add_batch_stats(double(cnt) / n);
    }
    if (place_.last_stage()) {
      CUDA_CHECK(cudaMemcpyAsync(host_micro_sums_.get(), micro_sums_.get(),
                                 2 * size_t(micro_) * sizeof(double), cudaMemcpyDeviceToHost,
                                 compute_.get()));
      CUDA_CHECK(cudaMemcpyAsync(host_micro_bad_.get(), micro_bad_.get(),
                                 size_t(micro_) * sizeof(int), cudaMemcpyDeviceToHost,
                                 compute_.get()));
      CUDA_CHECK(cudaEventRecord(loss_ready_.get(), compute_.get()));
    }
    if (config_.on_forward_done) {
      CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
      config_.on_forward_done();
    }
    // Backward, the last micro-batch first: its activations are the live ones.
    for (int m = micro_ - 1; m >= 0; --m) {
      int off = 0, cnt = 0;
      MicroBatchPiece(n, m, micro_, &off, &cnt);
      if (m != micro_ - 1) forward_from(micro_input(in, m, off), cnt, micro_context(ctx, m));
      const float* dy = nullptr;
      if (place_.last_stage()) {
        dy = grad_logits_[size_t(m)].get();
      } else {
        receive(grad_out_.get(), size_t(cnt) * out_values_, place_.rank + 1);
        dy = grad_out_.get();
      }
      stack_->backward(dy, place_.first_stage() ? nullptr : grad_in_.get(), cnt, {});
      if (!place_.first_stage()) send(grad_in_.get(), size_t(cnt) * in_values_, place_.rank - 1);
      accumulate(m == micro_ - 1);
    }
    in_step_ = false;
    CUDA_CHECK(cudaMemcpyAsync(grads_.get(), accumulated_.get(), param_total_ * sizeof(float),
                               cudaMemcpyDeviceToDevice, compute_.get()));
    if (sync_gradients_)
      for (size_t k = stack_->size(); k-- > 0;) sync_->layer_done(k);
    CUDA_CHECK(cudaEventRecord(in.released.get(), compute_.get()));
    if (next)
      if (const Batch* b = next()) stage_ahead(*b);
    CUDA_CHECK(cudaEventRecord(backward_done_.get(), compute_.get()));
    sync_->wait(backward_done_.get(), "backward", false);
    host_gradients_ = HostGradients::Stale;
    count_waits();
    return micro_sums();
  }

  // Batch statistics: the whole network's length on every rank, this stage's at its place.
  std::vector<float> batch_stats() override {
    std::vector<float> out(whole_stats_, 0.0f);
    for (size_t i = 0; i < stat_sum_.size(); ++i) out[stats_offset_ + i] = float(stat_sum_[i]);
    return out;
  }
  void commit_batch_stats(const std::vector<float>& averaged) override {
    if (averaged.size() < stats_offset_ + own_stats_)
      throw Error("batch statistics: too few values (internal)");
    CudaEngine::commit_batch_stats(
        std::vector<float>(averaged.begin() + long(stats_offset_),
                           averaged.begin() + long(stats_offset_ + own_stats_)));
  }

  // The chunk passes through the replica's stages like a micro-batch; the last stage has the
  // sums, the others report none.
  StepSums evaluate(const float* images, const int32_t* labels, int n,
                    const ForwardContext& ctx) override {
    InputSlot& in = slots_[pending_ >= 0 ? pending_ ^ 1 : current_ ^ 1];
    current_ = int(&in - slots_);
    stage(in, images, labels, n, 0);
    CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), in.copied.get(), 0));
    const float* x = in.x.get();
    if (!place_.first_stage()) {
      receive(eval_x_.get(), size_t(n) * in_values_, place_.rank - 1);
      x = eval_x_.get();
    }
    forward_from(x, n, ctx);
    if (!place_.last_stage()) {
      send(stack_->output(), size_t(n) * out_values_, place_.rank + 1);
      CUDA_CHECK(cudaEventRecord(in.released.get(), compute_.get()));
      CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
      return {};
    }
    loss(in, n, 1.0f, nullptr);
    CUDA_CHECK(cudaEventRecord(in.released.get(), compute_.get()));
    return read_loss();
  }

  // Stale-synchronous training is refused for pipelines (common/spec.cpp); local SGD's
  // averages go through the trainer's own path on the engine's exported parameters.
  std::vector<float>* gradient_values() override { return nullptr; }

  void set_layer_timing(bool on) override {
    if (on) throw Error("layer timing: not for a pipeline stage (profile the spec unpipelined)");
  }

  // Replica 0's later stages send their arrays to rank 0, which appends them to its own in
  // export_state(): the checkpoint's snapshot is the whole model, in layer order.
  void gather_state() override { gathered_.gather(place_, config_.comm, *this); }

  void export_state(std::vector<NamedArray>* params, std::vector<NamedArray>* buffers,
                    std::vector<NamedArray>* optimizer_state) override {
    *params = export_params();
    *buffers = export_buffers();
    *optimizer_state = export_optimizer_state();
    gathered_.append_to(place_, params, buffers, optimizer_state);
  }

  void update(double lr, int64_t step) override {
    CudaEngine::update(lr, step);
    gathered_.forget();
  }

  double pipeline_wait_seconds() const override { return wait_s_; }
  ModelPart model_part() const override {
    return ModelPart{place_.stage, place_.stages, place_.replica == 0, part_.replicas};
  }

 private:
  ForwardContext micro_context(ForwardContext ctx, int m) const {
    ctx.rank = place_.replica * micro_ + m;  // dropout masks: one key per micro-batch
    return ctx;
  }

  // Micro-batch m's input: its samples of the batch on the first stage, what the previous
  // stage sent elsewhere.
  const float* micro_input(const InputSlot& in, int m, int offset) const {
    if (place_.first_stage()) return in.x.get() + size_t(offset) * in_values_;
    return inputs_[size_t(m)].get();
  }

  // Point to point on the compute stream, timed there during a training step.
  void send(const float* data, size_t count, int to) {
    timed([&] {
      p2p_->enqueued(ncclSend(data, count, ncclFloat, to, p2p_->get(), compute_.get()),
                     "ncclSend (pipeline)");
    });
  }
  void receive(float* data, size_t count, int from) {
    timed([&] {
      p2p_->enqueued(ncclRecv(data, count, ncclFloat, from, p2p_->get(), compute_.get()),
                     "ncclRecv (pipeline)");
    });
  }
  template <class Call>
  void timed(const Call& call) {
    if (!in_step_) return call();
    if (timed_ == waits_.size()) waits_.emplace_back(MakeTimingEvent(), MakeTimingEvent());
    auto& [before, after] = waits_[timed_++];
    CUDA_CHECK(cudaEventRecord(before.get(), compute_.get()));
    call();
    CUDA_CHECK(cudaEventRecord(after.get(), compute_.get()));
  }
  // After the step's wait: every pair has been reached.
  void count_waits() {
    for (size_t i = 0; i < timed_; ++i) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, waits_[i].first.get(), waits_[i].second.get()));
      wait_s_ += double(ms) / 1000.0;
    }
  }

  // This stage's parameter gradients of the micro-batch just done into accumulated_: the
  // first copied, later ones added (cuBLAS's saxpy with 1: the plain sum, element by element).
  void accumulate(bool first) {
    if (first) {
      CUDA_CHECK(cudaMemcpyAsync(accumulated_.get(), grads_.get(), param_total_ * sizeof(float),
                                 cudaMemcpyDeviceToDevice, compute_.get()));
      return;
    }
    const float one = 1.0f;
    CUBLAS_CHECK(cublasSaxpy(context_.cublas, int(param_total_), &one, grads_.get(), 1,
                             accumulated_.get(), 1));
  }

  // The micro-batch's batch statistics, weighted by its share of the batch (the CPU
  // pipeline's mean): read back at once, so the stream waits here on stages with batch norm.
  void add_batch_stats(double share) {
    if (own_stats_ == 0) return;
    const std::vector<float> stats = CudaEngine::batch_stats();
    for (size_t i = 0; i < own_stats_; ++i) stat_sum_[i] += double(stats[i]) * share;
  }

  StepSums micro_sums() {
    StepSums sums;
    if (!place_.last_stage()) return sums;
    sync_->wait(loss_ready_.get(), "loss", false);
    for (int m = 0; m < micro_; ++m) {
      if (const int bad = host_micro_bad_.get()[m]; bad != 0)
        throw DataError("softmax cross-entropy: the label of sample " + std::to_string(bad - 1) +
                        " of micro-batch " + std::to_string(m) + " is outside [0, " +
                        std::to_string(spec_.classes) + ")");
      sums.loss += host_micro_sums_.get()[2 * m];
      sums.correct += int64_t(host_micro_sums_.get()[2 * m + 1]);
    }
    return sums;
  }

  PipelinePlace place_;
  int micro_ = 1;
  size_t in_values_ = 0, out_values_ = 0;  // per sample, of the stage's input and output
  std::unique_ptr<NcclComm> p2p_;
  std::vector<DeviceArray<float>> inputs_, grad_logits_;  // per micro-batch
  DeviceArray<float> grad_out_, grad_in_, eval_x_, accumulated_;
  DeviceArray<double> micro_sums_;
  DeviceArray<int> micro_bad_;
  PinnedArray<double> host_micro_sums_;
  PinnedArray<int> host_micro_bad_;
  size_t own_stats_ = 0, stats_offset_ = 0, whole_stats_ = 0, whole_values_ = 0;
  std::vector<double> stat_sum_;
  std::vector<std::pair<Event, Event>> waits_;  // around each send and receive of a step
  size_t timed_ = 0;                            // pairs recorded in this step
  bool in_step_ = false;
  double wait_s_ = 0;
  StageArraysGather gathered_;  // rank 0: the other stages' arrays for a checkpoint
};

}  // namespace

Engine* MakeCudaPipelineEngine(const EngineConfig& config) {
  const PipelinePlace place = PlaceInPipeline(*config.spec, config.comm);
  return new CudaPipelineEngine(config, place);
}

}  // namespace cuda
}  // namespace dlh
