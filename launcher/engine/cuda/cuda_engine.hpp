// DLH — the GPU engine (cuda_engine.cpp makes it; cuda_pipeline.cpp derives a pipeline stage
// from it). In a header only so that the pipeline stage can reuse its memory, streams and
// layers; nothing outside the CUDA backend includes it.
//
// Memory: every parameter, gradient and optimizer slot lives in one flat device array
// each, at the same offsets (aligned to 256 bytes), so a fused allreduce bucket is a range
// of the gradient array and needs no packing. A host copy of the network (the CPU layers,
// never run) supplies names, shapes and the initial values, so a GPU run starts from the
// very parameters a CPU run starts from, and checkpoints move between the two.
//
// Streams: the batch is copied on a copy stream from pinned staging; layers, loss and
// optimizer run on the compute stream; gradient buckets are reduced on the communication
// stream while backward goes on. The host waits once per step, for backward (the loss is
// ready by then), and once for the gradients, always under the communication watchdog.
//
// Input double buffering: two input slots (pinned staging and device memory each). While
// step k's backward runs on the device, the host takes step k+1's batch from the trainer
// (forward_backward's `next`), copies it into the other slot's staging and queues its copy
// to the device, so step k+1's forward starts without waiting for the host or the bus.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "common/cuda_support.hpp"
#include "common/error.hpp"
#include "launcher/comm/collective.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/comm/planner.hpp"
#include "launcher/engine/cuda/backend_api.hpp"
#include "launcher/engine/cuda/gpu_allreduce.hpp"
#include "launcher/engine/cuda/gpu_layers.hpp"
#include "launcher/engine/cuda/gpu_stack.hpp"
#include "launcher/engine/cuda/kernels.hpp"
#include "launcher/engine/gpu_assignment.hpp"
#include "launcher/engine/layer_timing.hpp"
#include "launcher/nn/network.hpp"

namespace dlh {
namespace cuda {

// Parameter offsets are multiples of kParamAlign (kernels.hpp): the one-launch optimizer
// update tells parameters apart by chunks of that size.
inline constexpr size_t kAlign = kParamAlign;

inline size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// cuDNN's scratch limit: an eighth of the GPU's memory, from 1 to 16 GiB. At a fixed 1 GiB,
// an H100 ran the sweep's base CNN (3 convolutions of 128 filters at 64 px) 7.3x slower at
// batch 1024 than at 256, for 4x the work: no fast deterministic algorithm fitted. The limit
// goes by the total, not by what is free, so that a GPU type always gets the same algorithms.
inline size_t ConvWorkspaceLimit(size_t total_bytes) {
  constexpr size_t kGiB = size_t(1) << 30;
  return std::clamp(total_bytes / 8, kGiB, 16 * kGiB);
}

// "03.conv2d/weight" -> 3 and "weight".
inline size_t LayerOf(const std::string& name) {
  return size_t(std::stoul(name.substr(0, name.find('.'))));
}
inline std::string LeafOf(const std::string& name) { return name.substr(name.find('/') + 1); }

struct Slot {  // one array inside a flat device array
  std::string name;
  size_t offset, count;
  std::vector<int> shape;
};

// `spec` when this engine can train it, else SpecError naming the field: before the host
// network is built or any GPU work starts. dlh-launch refuses earlier (device.cpp, with or
// without a GPU); this covers any other caller of the backend.
inline const TrainSpec& Trainable(const TrainSpec& spec) {
  if (const std::string why = CudaEngineUnsupported(spec); !why.empty())
    throw SpecError(why +
                    (CpuEngineUnsupported(spec).empty() ? "; train it with --device cpu" : ""));
  return spec;
}

// The part of the network an engine holds: the spec's layers [first, last), and the ranks
// that hold the same layers, whose gradients it sums and whose parameters it starts from
// (`replicas`, with the hosts of its ranks). The whole network over every rank by default;
// one pipeline stage over the replicas of the pipeline in cuda_pipeline.cpp.
struct LayerPart {
  size_t first = 0, last = 0;
  MPI_Comm replicas = MPI_COMM_NULL;
  std::vector<std::string> replica_nodes;
};
inline LayerPart WholeNetwork(const EngineConfig& c) {
  return LayerPart{0, c.spec->layers.size(), c.comm, c.node_of_rank};
}

class CudaEngine : public Engine, public LayerTiming {
 public:
  explicit CudaEngine(const EngineConfig& c) : CudaEngine(c, WholeNetwork(c)) {}
  CudaEngine(const EngineConfig& c, const LayerPart& part)
      : spec_(Trainable(*c.spec)), host_(spec_, part.first, part.last), config_(c), part_(part) {
    host_.init(spec_.seed);
    MPI_CHECK(MPI_Comm_rank(c.comm, &rank_));
    // Device setup can fail on one rank alone (no memory, a broken GPU); all ranks must
    // learn of it before anyone enters NCCL's collective initialisation.
    RunCollectively(c.comm, [&] { setup_device(); });
    RunCollectively(c.comm, [&] {
      sync_ = std::make_unique<GpuGradientSync>(part.replicas, part.replica_nodes, c.allreduce,
                                                grads_.get(), param_total_, make_buckets(),
                                                c.sync.overlap, compute_.get(), c.comm_timeout_s,
                                                c.peer_wait.enter != nullptr);
    });
  }

  ~CudaEngine() override {
    sync_.reset();
    if (compute_.get()) cudaStreamSynchronize(compute_.get());
    if (copy_.get()) cudaStreamSynchronize(copy_.get());  // a batch staged ahead, unused
  }

  std::string device_name() const override { return device_name_; }
  std::string gpu_pci_bus_id() const override { return pci_bus_id_; }
  std::string allreduce_name() const override { return sync_->name(); }
  size_t num_param_values() const override { return host_.num_param_values(); }
  const char* optimizer_name() const override {
    return spec_.optimizer.kind == OptimizerSpec::Kind::Adam ? "adam" : "sgd";
  }

  // From the first of the ranks that hold the same layers (rank 0 of the whole network).
  void broadcast_params() override {
    for (auto& p : host_.params()) {
      Tensor& t = *p.ref.value;
      MPI_CHECK(MPI_Bcast(t.data(), int(t.size()), MPI_FLOAT, 0, part_.replicas));
    }
    upload_params();
  }

  StepSums forward_backward(const Batch& batch, const ForwardContext& ctx, float loss_scale,
                            const NextBatch& next) override {
    const int n = int(batch.labels.size());
    if (timer_) {  // a profiled step (layer_timing.hpp): held until it is all issued
      timer_->hold();
      timed_batch_ = n;
    }
    InputSlot& in = slot_for_step(batch, n);
    forward(in, n, ctx);
    if (timer_) timer_->mark(-1, "loss");
    loss(in, n, loss_scale, stack_->output_gradient());
    if (config_.on_forward_done) {
      // Only when timed (--trace): the host waits for forward, so its time is the GPU's.
      CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
      config_.on_forward_done();
    }
    stack_->backward(n, [&](size_t k) {
      if (sync_gradients_) sync_->layer_done(k);
    });
    if (timer_) timer_->close();
    CUDA_CHECK(cudaEventRecord(in.released.get(), compute_.get()));
    // While backward runs: the next step's batch into the other slot.
    if (next)
      if (const Batch* b = next()) stage_ahead(*b);
    // The host waits for backward here, so that the trainer's compute time is the GPU's.
    CUDA_CHECK(cudaEventRecord(backward_done_.get(), compute_.get()));
    if (timer_) timer_->release();
    sync_->wait(backward_done_.get(), "backward", false);
    host_gradients_ = HostGradients::Stale;  // backward rewrote the device's
    return read_loss();
  }

  // Without the sums the compute stream already holds this rank's gradients in order.
  double finish_gradients() override { return sync_gradients_ ? sync_->finish() : 0; }
  void set_gradient_sync(bool on) override { sync_gradients_ = on; }

  // Stale-synchronous training sums the gradients itself (engine.hpp): it reads them after
  // forward_backward() and writes the sums to apply before update(). Here they live on the
  // device, so they are staged through a host copy, packed in forward order as the CPU
  // engine's: read back when asked for after a step (gradient sync off), and written to the
  // device by each update() once handed out, until the next step's backward replaces them.
  // Unverified on a GPU (common/cuda_support.cpp refuses the mode there by default).
  std::vector<float>* gradient_values() override {
    if (grad_mirror_.size() != host_.num_param_values())
      grad_mirror_.resize(host_.num_param_values());
    if (sync_gradients_) return &grad_mirror_;  // asked whether the engine has them at all
    if (host_gradients_ == HostGradients::Stale) {
      std::vector<float> flat(param_total_);
      copy_to_host(flat.data(), grads_.get(), param_total_);
      size_t at = 0;
      for (const Slot& slot : param_slots_) {
        std::memcpy(grad_mirror_.data() + at, flat.data() + slot.offset,
                    slot.count * sizeof(float));
        at += slot.count;
      }
    }
    host_gradients_ = HostGradients::HandedOut;
    return &grad_mirror_;
  }

  // The statistics travel through pinned staging (stats_host_): the copies are DMA, and
  // commit_batch_stats() returns without waiting for its upload.
  std::vector<float> batch_stats() override {
    if (stats_total_ == 0) return {};
    size_t at = 0;
    for (GpuLayer* l : stat_layers_) {
      const size_t len = size_t(l->batch_stats_len());
      CUDA_CHECK(cudaMemcpyAsync(stats_host_.get() + at, l->batch_stats(), len * sizeof(float),
                                 cudaMemcpyDeviceToHost, compute_.get()));
      at += len;
    }
    CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
    return std::vector<float>(stats_host_.get(), stats_host_.get() + stats_total_);
  }

  void commit_batch_stats(const std::vector<float>& averaged) override {
    if (stats_total_ == 0) return;
    if (averaged.size() < stats_total_) throw Error("batch statistics: too few values (internal)");
    // The last upload must have left the staging before the host overwrites it (it has,
    // unless two commits came without a batch_stats() between them).
    CUDA_CHECK(cudaEventSynchronize(stats_uploaded_.get()));
    std::memcpy(stats_host_.get(), averaged.data(), stats_total_ * sizeof(float));
    size_t at = 0;
    for (GpuLayer* l : stat_layers_) {
      const size_t len = size_t(l->batch_stats_len());
      CUDA_CHECK(cudaMemcpyAsync(l->batch_stats(), stats_host_.get() + at, len * sizeof(float),
                                 cudaMemcpyHostToDevice, compute_.get()));
      l->commit_batch_stats();
      at += len;
    }
    CUDA_CHECK(cudaEventRecord(stats_uploaded_.get(), compute_.get()));
  }

  void update(double lr, int64_t step) override {
    const OptimizerSpec& o = spec_.optimizer;
    const bool adam = o.kind == OptimizerSpec::Kind::Adam;
    const float rate = float(lr), wd = float(o.weight_decay);
    const double t = double(step + 1);
    const float c1 = float(1.0 / (1.0 - std::pow(o.beta1, t)));
    const float c2 = float(1.0 / (1.0 - std::pow(o.beta2, t)));
    if (host_gradients_ == HostGradients::HandedOut) {  // the caller's sums, to apply
      std::vector<float> flat(param_total_, 0.0f);      // alignment gaps stay zero
      size_t at = 0;
      for (const Slot& slot : param_slots_) {
        std::memcpy(flat.data() + slot.offset, grad_mirror_.data() + at,
                    slot.count * sizeof(float));
        at += slot.count;
      }
      copy_to_device(grads_.get(), flat.data(), param_total_);
    }
    if (timer_) {
      timer_->hold();
      timer_->mark(-1, "update");
    }
    // One launch over the flat arrays, the same arithmetic per element as one launch per
    // parameter; the alignment gaps (zero weights, gradients and slots) stay zero.
    if (adam)
      AdamUpdate(params_.get(), grads_.get(), slot_a_.get(), slot_b_.get(), decay_chunks_.get(),
                 param_total_, rate, float(o.beta1), float(o.beta2), c1, c2, float(o.epsilon),
                 rate * wd, compute_.get());
    else
      SgdUpdate(params_.get(), grads_.get(), o.momentum != 0 ? slot_a_.get() : nullptr,
                decay_chunks_.get(), param_total_, rate, float(o.momentum), wd, o.nesterov,
                compute_.get());
    if (timer_) {
      timer_->close();
      timer_->release();
    }
  }

  // LayerTiming (launcher/engine/layer_timing.hpp).
  void set_layer_timing(bool on) override {
    // --trace waits for forward in the middle of the step, which a held stream never ends.
    if (on && config_.on_forward_done)
      throw Error("layer timing: not with a timeline (--trace) of the same steps");
    if (on && !timer_) timer_ = std::make_unique<GpuStepTimer>(compute_.get());
    if (!on) timer_.reset();
    context_.timer = timer_.get();
    stack_->set_timer(timer_.get());
  }

  bool last_step_held() const override { return timer_ && timer_->held(); }

  std::vector<LayerPassTime> last_step_layer_times() override {
    if (!timer_) throw Error("layer timing is off (internal)");
    const std::vector<GpuStepTimer::Segment> segments = timer_->collect();
    std::vector<LayerPassTime> out;
    for (const GpuStepTimer::Segment& s : segments) {
      LayerPassTime t;
      t.layer = s.layer;
      t.pass = s.pass;
      t.device_s = s.device_s;
      t.host_s = s.host_s;
      if (s.layer < 0) {
        t.kind = s.pass;  // "loss" or "update"
      } else {
        const LayerKind kind = spec_.layers[size_t(s.layer)].kind;
        t.kind = LayerKindName(kind);
        // The stack marks each layer's backward as one pass, and a convolution or dense
        // layer marks its input gradient's apart: what is left is its weights' (all of it
        // for the first layer, which computes no input gradient).
        if ((kind == LayerKind::Conv2d || kind == LayerKind::Dense) && t.pass == "backward")
          t.pass = "backward-weights";
        for (const GpuLayer::PassChoice& c : stack_->layer(size_t(s.layer)).choices(timed_batch_))
          if (c.pass == t.pass) {
            t.algorithm = c.algorithm;
            t.math = c.math;
            t.workspace_bytes = int64_t(c.workspace_bytes);
          }
      }
      out.push_back(std::move(t));
    }
    return out;
  }

  StepSums evaluate(const float* images, const int32_t* labels, int n,
                    const ForwardContext& ctx) override {
    // A batch staged ahead for the next training step stays where it is.
    InputSlot& in = slots_[pending_ >= 0 ? pending_ ^ 1 : current_ ^ 1];
    current_ = int(&in - slots_);
    stage(in, images, labels, n, 0);
    CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), in.copied.get(), 0));  // as slot_for_step
    forward(in, n, ctx);
    loss(in, n, 1.0f, nullptr);
    CUDA_CHECK(cudaEventRecord(in.released.get(), compute_.get()));
    return read_loss();
  }

  std::vector<NamedArray> export_params() override {
    return with_device_values(host_.export_params(), params_.get(), param_total_, param_slots_);
  }
  std::vector<NamedArray> export_buffers() override {
    return with_device_values(host_.export_buffers(), buffers_.get(), buffer_total_, buffer_slots_);
  }
  std::vector<NamedArray> export_optimizer_state() override {
    std::vector<NamedArray> out;
    std::vector<float> a(param_total_), b(param_total_);
    const std::vector<std::string> names = slot_names();
    if (names.empty()) return out;
    copy_to_host(a.data(), slot_a_.get(), param_total_);
    if (names.size() > 1) copy_to_host(b.data(), slot_b_.get(), param_total_);
    for (const Slot& s : param_slots_)
      for (size_t k = 0; k < names.size(); ++k) {
        const float* src = (k == 0 ? a.data() : b.data()) + s.offset;
        out.push_back(
            NamedArray{s.name + "/" + names[k], s.shape, std::vector<float>(src, src + s.count)});
      }
    return out;
  }
  void import_state(const std::vector<NamedArray>& params, const std::vector<NamedArray>& buffers,
                    const std::vector<NamedArray>& optimizer_state) override {
    host_.import_params(params);  // validates names and shapes
    host_.import_buffers(buffers);
    std::map<std::string, const NamedArray*> by;
    for (const auto& a : optimizer_state) by[a.name] = &a;
    const std::vector<std::string> names = slot_names();
    std::vector<float> a(param_total_, 0.0f), b(param_total_, 0.0f);
    for (const Slot& s : param_slots_)
      for (size_t k = 0; k < names.size(); ++k) {
        const std::string key = s.name + "/" + names[k];
        auto it = by.find(key);
        if (it == by.end()) throw CheckpointError("optimizer state '" + key + "' is missing");
        if (it->second->data.size() != s.count)
          throw CheckpointError("optimizer state '" + key + "' has " +
                                std::to_string(it->second->data.size()) + " values, expected " +
                                std::to_string(s.count));
        std::memcpy((k == 0 ? a.data() : b.data()) + s.offset, it->second->data.data(),
                    s.count * sizeof(float));
      }
    upload_params();
    upload_buffers();
    if (!names.empty()) copy_to_device(slot_a_.get(), a.data(), param_total_);
    if (names.size() > 1) copy_to_device(slot_b_.get(), b.data(), param_total_);
  }

 protected:
  std::vector<std::string> slot_names() const {
    if (spec_.optimizer.kind == OptimizerSpec::Kind::Adam) return {"m", "v"};
    if (spec_.optimizer.momentum != 0) return {"momentum"};
    return {};
  }

  // The GPU, its handles and streams, the flat arrays and the layers (cuda_engine.cpp).
  void setup_device();

  // The buckets of the CPU path (PlanBuckets in launcher/comm/planner.hpp); each is the
  // range of the gradient array from its first to its last parameter, alignment gaps
  // included (they hold zeros).
  std::vector<GradBucket> make_buckets() const {
    std::vector<size_t> counts;
    std::vector<ElementRange> ranges;
    for (const Slot& s : param_slots_) {
      counts.push_back(s.count);
      ranges.push_back(ElementRange{s.offset, s.count});
    }
    std::vector<GradBucket> out;
    for (const BucketPlan& b :
         PlanBuckets(counts, host_.param_layer(), config_.sync.bucket_bytes)) {
      const ElementRange span = BucketSpan(b, ranges);
      out.push_back(GradBucket{span.offset, span.count, b.min_layer});
    }
    return out;
  }

  // One batch's memory on both sides of the copy (see the file's comment).
  struct InputSlot {
    PinnedArray<float> host_x;
    PinnedArray<int32_t> host_y;
    DeviceArray<float> x;
    DeviceArray<int32_t> y;
    Event copied;         // the last copy into x and y (and out of host_x, host_y) is done
    Event released;       // the last work reading x and y is done
    uint64_t serial = 0;  // Batch::serial of what was staged here (0: not a loader's batch)
    int n = 0;
  };

  // Copies a batch into `in` on the copy stream. The host rewrites the staging only once its
  // last copy has left it, and the device copy waits for the last work that read the slot,
  // so neither needs the other slot or the compute stream to be idle.
  void stage(InputSlot& in, const float* images, const int32_t* labels, int n, uint64_t serial) {
    if (n > config_.max_batch) throw Error("batch larger than the engine's maximum (internal)");
    const size_t xs = size_t(n) * size_t(spec_.input.elements());
    CUDA_CHECK(cudaEventSynchronize(in.copied.get()));
    std::memcpy(in.host_x.get(), images, xs * sizeof(float));
    std::memcpy(in.host_y.get(), labels, size_t(n) * sizeof(int32_t));
    CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), in.released.get(), 0));
    CUDA_CHECK(cudaMemcpyAsync(in.x.get(), in.host_x.get(), xs * sizeof(float),
                               cudaMemcpyHostToDevice, copy_.get()));
    CUDA_CHECK(cudaMemcpyAsync(in.y.get(), in.host_y.get(), size_t(n) * sizeof(int32_t),
                               cudaMemcpyHostToDevice, copy_.get()));
    CUDA_CHECK(cudaEventRecord(in.copied.get(), copy_.get()));
    in.serial = serial;
    in.n = n;
  }

  // The next training step's batch, into the slot the running step does not read.
  void stage_ahead(const Batch& b) {
    const int n = int(b.labels.size());
    if (b.serial == 0 || n > config_.max_batch) return;  // not one a later step can find
    pending_ = current_ ^ 1;
    stage(slots_[pending_], b.images.data(), b.labels.data(), n, b.serial);
  }

  // The slot that holds `batch`: the one staged ahead if it is this batch (same serial and
  // size), else the other slot, with the batch copied now. A staged batch that is not this
  // one (the trainer changed its split) is dropped.
  InputSlot& slot_for_step(const Batch& batch, int n) {
    const bool ahead = pending_ >= 0 && batch.serial != 0 &&
                       slots_[pending_].serial == batch.serial && slots_[pending_].n == n;
    current_ = ahead ? pending_ : current_ ^ 1;
    pending_ = -1;
    InputSlot& in = slots_[current_];
    if (!ahead) stage(in, batch.images.data(), batch.labels.data(), n, batch.serial);
    CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), in.copied.get(), 0));
    return in;
  }

  // The slot holds the batch until work after this step's backward is queued (its
  // `released` event): as long as the stack needs it (gpu_stack.hpp).
  void forward(InputSlot& in, int n, const ForwardContext& ctx) {
    forward_from(in.x.get(), n, ctx);
  }
  // The layers on n samples at `x` (device memory), each with its whole-network index for
  // its dropout mask, as the CPU engine keys them.
  void forward_from(const float* x, int n, const ForwardContext& ctx) {
    stack_->forward(x, n, ctx, [this](size_t i) { return int(part_.first + i); });
  }

  void loss(InputSlot& in, int n, float scale, float* grad) {
    CUDA_CHECK(cudaMemsetAsync(bad_label_.get(), 0, sizeof(int), compute_.get()));
    SoftmaxCrossEntropy(stack_->output(), in.y.get(), n, spec_.classes, scale, grad, sums_.get(),
                        bad_label_.get(), compute_.get(), spec_.label_smoothing);
    CUDA_CHECK(cudaMemcpyAsync(host_sums_.get(), sums_.get(), 2 * sizeof(double),
                               cudaMemcpyDeviceToHost, compute_.get()));
    CUDA_CHECK(cudaMemcpyAsync(host_bad_.get(), bad_label_.get(), sizeof(int),
                               cudaMemcpyDeviceToHost, compute_.get()));
    CUDA_CHECK(cudaEventRecord(loss_ready_.get(), compute_.get()));
  }

  StepSums read_loss() {
    sync_->wait(loss_ready_.get(), "loss", false);
    if (host_bad_.get()[0] != 0)
      throw DataError("softmax cross-entropy: the label of sample " +
                      std::to_string(host_bad_.get()[0] - 1) + " of the batch is outside [0, " +
                      std::to_string(spec_.classes) + ")");
    return StepSums{host_sums_.get()[0], int64_t(host_sums_.get()[1])};
  }

  // `arrays` (names and shapes from the host network) with the values of the flat device
  // array laid out by `slots`.
  std::vector<NamedArray> with_device_values(std::vector<NamedArray> arrays, const float* device,
                                             size_t total, const std::vector<Slot>& slots) {
    std::vector<float> all(total);
    copy_to_host(all.data(), device, total);
    for (size_t i = 0; i < arrays.size(); ++i)
      std::memcpy(arrays[i].data.data(), all.data() + slots[i].offset,
                  slots[i].count * sizeof(float));
    return arrays;
  }

  void copy_to_host(float* dst, const float* src, size_t count) {
    CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
    CUDA_CHECK(cudaMemcpy(dst, src, count * sizeof(float), cudaMemcpyDeviceToHost));
  }
  void copy_to_device(float* dst, const float* src, size_t count) {
    CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
    CUDA_CHECK(cudaMemcpy(dst, src, count * sizeof(float), cudaMemcpyHostToDevice));
  }

  void upload_params() {
    std::vector<float> all(param_total_, 0.0f);
    const auto& params = host_.params();
    for (size_t i = 0; i < params.size(); ++i)
      std::memcpy(all.data() + param_slots_[i].offset, params[i].ref.value->data(),
                  param_slots_[i].count * sizeof(float));
    copy_to_device(params_.get(), all.data(), param_total_);
  }

  void upload_buffers() {
    std::vector<float> all(buffer_total_, 0.0f);
    const std::vector<NamedArray> buffers = host_.export_buffers();
    for (size_t i = 0; i < buffers.size(); ++i)
      std::memcpy(all.data() + buffer_slots_[i].offset, buffers[i].data.data(),
                  buffer_slots_[i].count * sizeof(float));
    copy_to_device(buffers_.get(), all.data(), buffer_total_);
  }

  const TrainSpec& spec_;
  Network host_;
  EngineConfig config_;
  LayerPart part_;
  int rank_ = 0, device_ = 0;
  std::string device_name_;
  std::string pci_bus_id_;
  Stream compute_, copy_;
  Event loss_ready_, backward_done_;
  Cublas cublas_;
  CublasLt cublas_lt_;
  Cudnn cudnn_;
  GpuContext context_;
  DeviceArray<char> workspace_;
  DeviceArray<char> transient_;  // bf16 operands (bf16.hpp)
  std::vector<Slot> param_slots_, buffer_slots_;
  size_t param_total_ = 0, buffer_total_ = 0;
  DeviceArray<float> params_, grads_, slot_a_, slot_b_, buffers_, ones_;
  DeviceArray<uint8_t> decay_chunks_;  // per kParamAlign chunk of params_: 1 if it decays
  InputSlot slots_[2];
  int current_ = 0;   // the slot the last forward read
  int pending_ = -1;  // the slot holding the next training step's batch, staged ahead
  // The layers and their activations; after the handles, context and workspace they use,
  // so destroyed before them.
  std::unique_ptr<GpuStack> stack_;
  std::vector<GpuLayer*> stat_layers_;
  size_t stats_total_ = 0;         // floats of batch statistics, all layers
  PinnedArray<float> stats_host_;  // their staging both ways
  Event stats_uploaded_;           // the last commit's upload left stats_host_
  DeviceArray<double> sums_;
  DeviceArray<int> bad_label_;
  PinnedArray<double> host_sums_;
  PinnedArray<int> host_bad_;
  std::unique_ptr<GpuGradientSync> sync_;
  bool sync_gradients_ = true;
  // gradient_values(): the host copy, and whether it is behind the device's gradients (Stale)
  // or handed out, and so what update() applies (HandedOut).
  enum class HostGradients { Stale, HandedOut };
  HostGradients host_gradients_ = HostGradients::Stale;
  std::vector<float> grad_mirror_;
  std::unique_ptr<GpuStepTimer> timer_;  // set while the layers are timed
  int timed_batch_ = 0;                  // the batch of the last profiled step
};

}  // namespace cuda
}  // namespace dlh
