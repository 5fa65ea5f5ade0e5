// DLH — the GPU engine's device setup (cuda_engine.hpp) and the CUDA backend's entry points
// (backend_api.hpp), which make the GPU engine or a pipeline stage of it (cuda_pipeline.hpp).
#include "launcher/engine/cuda/cuda_engine.hpp"

#include "launcher/engine/cuda/cuda_pipeline.hpp"

namespace dlh {
namespace cuda {

void CudaEngine::setup_device() {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  if (count <= 0) throw CudaError("no CUDA device");
  device_ = GpuIndexFor(config_.device, config_.local_rank, count);  // as device.cpp chose
  if (device_ >= count)
    throw UsageError("GPU " + std::to_string(device_) + " requested, " + std::to_string(count) +
                     " visible");
  CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  // "cuda:N (NAME, ...)", the form every reader of a run's device takes a GPU's by: the
  // observation record's probe and GPU count (launcher/train/trainer_observe.cpp), refit's
  // choice of the records of a calibration's GPU, CpuEngineDevice. "NAME (GPU N, ...)" read
  // as a CPU there: a GPU job's record probed the host's CPU and said 0 GPUs a node.
  char text[320];
  std::snprintf(text, sizeof text, "cuda:%d (%s, sm_%d%d, %.0f GiB)", device_, prop.name,
                prop.major, prop.minor, double(prop.totalGlobalMem) / (1 << 30));
  device_name_ = text;
  char bus_id[32] = {};  // "0000:3B:00.0": 13 bytes with the terminator
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, int(sizeof bus_id), device_));
  pci_bus_id_ = bus_id;

  compute_ = MakeStream();
  copy_ = MakeStream();
  loss_ready_ = MakeEvent();
  backward_done_ = MakeEvent();
  cublasHandle_t blas = nullptr;
  CUBLAS_CHECK(cublasCreate(&blas));
  cublas_ = Cublas(blas);
  CUBLAS_CHECK(cublasSetStream(blas, compute_.get()));
  cublasLtHandle_t blas_lt = nullptr;  // cuBLASLt takes the stream per call
  CUBLAS_CHECK(cublasLtCreate(&blas_lt));
  cublas_lt_ = CublasLt(blas_lt);
  cudnnHandle_t dnn = nullptr;
  CUDNN_CHECK(cudnnCreate(&dnn));
  cudnn_ = Cudnn(dnn);
  CUDNN_CHECK(cudnnSetStream(dnn, compute_.get()));

  // Flat layouts of parameters (and gradients and optimizer slots) and of buffers.
  for (const auto& p : host_.params()) {
    param_slots_.push_back(Slot{p.name, param_total_, p.ref.value->size(), p.ref.value->shape()});
    param_total_ += AlignUp(p.ref.value->size());
  }
  for (const auto& b : host_.export_buffers()) {
    buffer_slots_.push_back(Slot{b.name, buffer_total_, b.data.size(), b.shape});
    buffer_total_ += AlignUp(b.data.size());
  }
  params_.resize(std::max<size_t>(param_total_, 1));
  grads_.resize(std::max<size_t>(param_total_, 1));
  slot_a_.resize(std::max<size_t>(param_total_, 1));
  slot_b_.resize(std::max<size_t>(param_total_, 1));
  buffers_.resize(std::max<size_t>(buffer_total_, 1));
  // Alignment gaps are reduced with the gradients: they must hold zeros, not garbage.
  for (auto* a : {&params_, &grads_, &slot_a_, &slot_b_, &buffers_})
    Fill(a->get(), 0, a->size(), compute_.get());
  // Which kParamAlign chunks of the flat arrays take weight decay (gaps: none).
  std::vector<uint8_t> decays(std::max<size_t>(param_total_ / kAlign, 1), 0);
  for (size_t i = 0; i < param_slots_.size(); ++i)
    if (host_.params()[i].ref.decay)
      std::fill(
          decays.begin() + long(param_slots_[i].offset / kAlign),
          decays.begin() + long(AlignUp(param_slots_[i].offset + param_slots_[i].count) / kAlign),
          uint8_t(1));
  decay_chunks_.resize(decays.size());
  CUDA_CHECK(cudaMemcpy(decay_chunks_.get(), decays.data(), decays.size(), cudaMemcpyHostToDevice));

  const int max_batch = std::max(config_.max_batch, 1);
  std::vector<Shape3> shapes = LayerShapes(spec_);
  context_.stream = compute_.get();
  context_.cublas = blas;
  context_.cublaslt = blas_lt;
  context_.cudnn = dnn;
  context_.workspace = &workspace_;
  context_.workspace_limit = ConvWorkspaceLimit(prop.totalGlobalMem);
  // The spec's arithmetic, before any layer is made: a convolution describes its tensors
  // in the type it computes in. Master weights, optimizer state and gradients stay fp32.
  context_.bf16 = spec_.precision == Precision::Bf16;
  context_.tf32_convolutions = spec_.tf32 != Tf32Use::None;
  context_.tf32_gemms = spec_.tf32 == Tf32Use::All;
  context_.transient = &transient_;
  ones_.resize(size_t(max_batch));
  Fill(ones_.get(), 1.0f, ones_.size(), compute_.get());
  context_.ones = ones_.get();
  for (InputSlot& in : slots_) {
    in.host_x.resize(size_t(max_batch) * size_t(spec_.input.elements()));
    in.host_y.resize(size_t(max_batch));
    in.x.resize(in.host_x.size());
    in.y.resize(in.host_y.size());
    in.copied = MakeEvent();
    in.released = MakeEvent();
  }
  // The layers this engine holds (part_), named by their index in the whole network.
  std::vector<std::unique_ptr<GpuLayer>> layers;
  for (size_t i = part_.first; i < part_.last; ++i) {
    char name[64];  // as in the parameter names: "03.conv2d"
    std::snprintf(name, sizeof name, "%02zu.%s", i, LayerKindName(spec_.layers[i].kind));
    layers.push_back(
        MakeGpuLayer(spec_.layers[i], shapes[i], shapes[i + 1], max_batch, &context_, name));
  }
  // The stream: a pipeline stage whose first layer passes its input on (a flatten) copies
  // the input gradient it sends back (gpu_stack.hpp).
  stack_ = std::make_unique<GpuStack>(std::move(layers),
                                      std::vector<Shape3>(shapes.begin() + long(part_.first),
                                                          shapes.begin() + long(part_.last) + 1),
                                      max_batch, compute_.get());
  // Every workspace and algorithm of the full batch now, not in a step: the dense layers'
  // cuBLASLt scratch, and each convolution's algorithms and their scratch. A batch of
  // another size (an uneven split, a balancer's change, the last of an epoch) plans on
  // first use; a growth then never synchronises (GrowWorkspace).
  GrowWorkspace(&context_, DenseWorkspaceBytes(context_));
  stack_->plan(max_batch);
  const size_t layer_count = stack_->size();
  std::vector<PointerMap> values(layer_count), grads(layer_count), buffers(layer_count);
  for (const Slot& s : param_slots_) {
    values[LayerOf(s.name) - part_.first][LeafOf(s.name)] = params_.get() + s.offset;
    grads[LayerOf(s.name) - part_.first][LeafOf(s.name)] = grads_.get() + s.offset;
  }
  for (const Slot& s : buffer_slots_)
    buffers[LayerOf(s.name) - part_.first][LeafOf(s.name)] = buffers_.get() + s.offset;
  for (size_t i = 0; i < layer_count; ++i) {
    GpuLayer& layer = stack_->layer(i);
    layer.bind(values[i], grads[i], buffers[i]);
    if (layer.batch_stats()) {
      stat_layers_.push_back(&layer);
      stats_total_ += size_t(layer.batch_stats_len());
    }
  }
  stats_host_.resize(stats_total_);
  stats_uploaded_ = MakeEvent();
  sums_.resize(2);
  bad_label_.resize(1);
  host_sums_.resize(2);
  host_bad_.resize(1);
  upload_params();
  upload_buffers();
  CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
}

}  // namespace cuda
}  // namespace dlh

extern "C" {

// Every engine this library makes is a CudaEngine (a pipeline stage derives from it), so the cast
// needs no RTTI across the library's boundary (its type information is local to it: backend.lds).
__attribute__((visibility("default"))) dlh::LayerTiming* dlh_cuda_layer_timing(
    dlh::Engine* engine) {
  return static_cast<dlh::cuda::CudaEngine*>(engine);
}

__attribute__((visibility("default"))) dlh::Engine* dlh_cuda_make_engine(
    const dlh::EngineConfig* config) {
  // This library's MPI calls report to dlh-launch's peer watch (peer_watch.hpp).
  dlh::ForwardPeerWaits(config->peer_wait);
  if (config->spec->parallel.pipelined()) return dlh::cuda::MakeCudaPipelineEngine(*config);
  return new dlh::cuda::CudaEngine(*config);
}
}
