// DLH — the training engine behind the run loop: where the model lives (host memory and
// OpenBLAS, or a GPU with cuDNN/cuBLAS), how one rank's step runs, and how gradients are
// summed across ranks. The trainer (trainer.cpp and its phase files, trainer_impl.hpp) owns
// everything that is the same on every device: data, plan, checkpoints, signals, metrics and the
// per-step control values.
//
// Both engines name parameters, buffers and optimizer state alike ("03.conv2d/weight",
// "03.conv2d/weight/momentum"), so a checkpoint written on a GPU resumes on the CPU and
// back.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/spec.hpp"
#include "launcher/comm/grad_sync.hpp"
#include "launcher/data/loader.hpp"
#include "launcher/nn/layer.hpp"
#include "launcher/storage/checkpoint.hpp"
#include "launcher/watch/peer_watch.hpp"

namespace dlh {

struct EngineConfig {
  const TrainSpec* spec = nullptr;        // must outlive the engine
  MPI_Comm comm = MPI_COMM_NULL;          // all ranks
  std::vector<std::string> node_of_rank;  // host of every rank, the same on every rank
  std::string allreduce = "auto";         // auto, flat or hierarchical
  GradSyncOptions sync;
  int local_rank = 0;  // rank within the node
  int device = -1;     // GPU index among the visible ones (-1: local_rank modulo count)
  double comm_timeout_s =
      kDefaultCommTimeoutS;  // GPU: a collective stalled this long aborts the job
  PeerWaitHooks peer_wait;   // the launcher's peer watch, for a backend's MPI calls
  int max_batch = 0;         // largest local batch any call will pass (training or evaluation)
  // When set, forward_backward() calls it between the loss and backward, so that a timeline
  // (dlh-launch train --trace) can show the two apart. The GPU engine then waits for the
  // forward kernels first, so the time is the device's, not that of queueing them.
  std::function<void()> on_forward_done;
};

using NextBatch = std::function<const Batch*()>;  // see Engine::forward_backward

struct StepSums {       // over this rank's samples
  double loss = 0;      // sum of per-sample losses (unscaled)
  int64_t correct = 0;  // argmax hits
};

// Which part of the model a rank holds: the whole (the default) or one of `parts` pipeline
// stages. `peers` are the ranks that hold the same part and must agree bit for bit
// (MPI_COMM_NULL: every rank); `lead` says this rank's copy speaks for its part (replica 0).
struct ModelPart {
  int index = 0, parts = 1;
  bool lead = true;
  MPI_Comm peers = MPI_COMM_NULL;
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual std::string device_name() const = 0;     // "cpu (OpenBLAS)", "NVIDIA H100 (GPU 0)"
  virtual std::string allreduce_name() const = 0;  // "flat (NCCL)", "hierarchical (2 nodes x 2)"
  virtual size_t num_param_values() const = 0;
  virtual const char* optimizer_name() const = 0;
  // PCI bus id of this rank's GPU ("0000:3B:00.0"), for its energy meter (NVML finds the
  // device by it, whatever CUDA_VISIBLE_DEVICES renumbered); empty on the CPU engine.
  virtual std::string gpu_pci_bus_id() const { return {}; }

  // Rank 0's parameters to every rank. Collective.
  virtual void broadcast_params() = 0;

  // Forward, loss (scaled by `loss_scale` for the gradient) and backward of this rank's
  // part of the global batch. Gradient sums across ranks start during backward; the
  // gradients are the global sums once finish_gradients() returns.
  //
  // `next`, when given, hands over the batch of the following step early: the GPU engine
  // calls it once backward is queued and copies that batch to the device while backward
  // runs, so the next forward_backward() (given a batch of the same serial) starts at once.
  // It may return nullptr (no next batch). The CPU engine, with no copy to overlap, calls it
  // after backward. The batch it returns must stay unchanged until it is passed in.
  virtual StepSums forward_backward(const Batch& batch, const ForwardContext& ctx, float loss_scale,
                                    const NextBatch& next = {}) = 0;
  // Returns the seconds spent waiting for communication that backward did not hide.
  virtual double finish_gradients() = 0;
  // Off: forward_backward() leaves every gradient this rank's own and finish_gradients()
  // sums nothing (local SGD's steps between two model averages). On by default.
  virtual void set_gradient_sync(bool on) = 0;
  // This rank's gradients as one array (forward order, packed tight) for a trainer that sums
  // them itself (stale-synchronous training, gradient sync off): read after forward_backward(),
  // overwritten before update(). Null where they live elsewhere (the GPU engine's device
  // memory): the trainer refuses the mode there.
  virtual std::vector<float>* gradient_values() { return nullptr; }

  // Batchnorm statistics of the last training forward, every such layer's {mean[C],
  // var[C]} in layer order; the trainer averages them over ranks and hands them back.
  virtual std::vector<float> batch_stats() = 0;
  virtual void commit_batch_stats(const std::vector<float>& averaged) = 0;

  virtual void update(double lr, int64_t step) = 0;

  // Inference on n samples (loss and hits, no gradient).
  virtual StepSums evaluate(const float* images, const int32_t* labels, int n,
                            const ForwardContext& ctx) = 0;

  virtual std::vector<NamedArray> export_params() = 0;
  virtual std::vector<NamedArray> export_buffers() = 0;
  virtual std::vector<NamedArray> export_optimizer_state() = 0;
  // All three into the caller's arrays (a checkpoint snapshot), reusing their memory where
  // the engine can; by default new arrays replace them.
  virtual void export_state(std::vector<NamedArray>* params, std::vector<NamedArray>* buffers,
                            std::vector<NamedArray>* optimizer_state) {
    *params = export_params();
    *buffers = export_buffers();
    *optimizer_state = export_optimizer_state();
  }
  // Collective, before rank 0's export_state() for a checkpoint: an engine whose ranks hold
  // parts of the model (a pipeline) brings the others' arrays to rank 0, so that its
  // export_state() is the whole model. export_params() and export_buffers() stay this rank's.
  virtual void gather_state() {}
  virtual ModelPart model_part() const { return {}; }
  // A pipeline stage's seconds, over the training steps so far, spent passing activations and
  // gradients to its neighbours and waiting for them: the bubble, measured. 0 otherwise.
  virtual double pipeline_wait_seconds() const { return 0; }
  // Throws CheckpointError naming the first missing or misshapen array.
  virtual void import_state(const std::vector<NamedArray>& params,
                            const std::vector<NamedArray>& buffers,
                            const std::vector<NamedArray>& optimizer_state) = 0;
};

std::unique_ptr<Engine> MakeCpuEngine(const EngineConfig& config);
// Pipeline model parallelism on the CPU (spec.parallel, pipeline_engine.cpp). Collective.
std::unique_ptr<Engine> MakePipelineEngine(const EngineConfig& config);

}  // namespace dlh
