// DLH — which engine a run trains on: --device auto|cpu|cuda.
//
//   cpu   the CPU engine, the CUDA backend is not even loaded.
//   cuda  the CUDA backend on every rank, or an error naming the rank that has no GPU.
//   auto  cuda when every rank has a usable GPU, else the CPU, with one line saying why;
//         but never the CPU once every rank holds a GPU (two ranks sharing one, out of GPU
//         memory: one error), nor under a plan for real GPUs (PlanGpuRequirement).
// A spec the CUDA engine cannot train yet (a layer kind or option it lacks:
// common/cuda_support.hpp): cuda refuses it, naming the spec's field, before looking for a
// GPU; auto trains on the CPU and says why (an error under a plan for GPUs).
// Ranks always agree: a GPU run in which one rank trained on its CPU would neither be fast
// nor bit-identical across ranks.
#pragma once

#include <memory>
#include <string>

#include "launcher/engine/engine.hpp"
#include "launcher/engine/gpu_assignment.hpp"

namespace dlh {

// Throws UsageError unless `kind` is auto, cpu or cuda.
void CheckDeviceKind(const std::string& kind);

// Where dlh-launch looks for libdlh_cuda.so: $DLH_CUDA_BACKEND, else lib/dlh/ beside the
// binary's bin/ (the build tree and `make install` both use that layout).
std::string CudaBackendPath();

// MakeEngine in two parts, so that a run can learn before it writes anything (its run
// folder) whether its device will do: ChooseDevice decides the engine and finds every
// rank's GPU (the refusals of --device cuda and of a plan for GPUs come from here);
// BuildEngine builds it (the GPU's own failures, out of memory, come from there). Both
// collective over config.comm; ChooseDevice reads config.spec, comm, node_of_rank, device,
// local_rank and allreduce only.
struct DeviceChoice {
  std::string device;           // auto, cpu or cuda, as asked
  std::string gpu_required_by;  // as MakeEngine's
  bool gpu = false;             // every rank trains on its GPU
  bool gpu_found = false;       // every rank found a GPU (used or not)
  std::string note;             // auto's fallback line ("" when the device asked for is used)
  int gpu_index = -1;           // this rank's GPU among the visible ones
  RankGpu mine;                 // and its host and PCI bus id
};
DeviceChoice ChooseDevice(const std::string& device, const EngineConfig& config,
                          const std::string& gpu_required_by = "");
std::unique_ptr<Engine> BuildEngine(const DeviceChoice& choice, const EngineConfig& config);

// Collective over config.comm. `note` receives the fallback line for auto (empty when the
// requested device is used); `gpu_found`, when given, whether every rank found a GPU.
// `gpu_required_by`: why this run must not train on the CPU ("the plan (DLH_PLAN) put this
// job on a100 (compute capability 8.0) GPUs"; the same on every rank), which turns auto's
// fallback into an error that says so. Throws CollectiveError on every rank alike.
std::unique_ptr<Engine> MakeEngine(const std::string& device, const EngineConfig& config,
                                   std::string* note, bool* gpu_found = nullptr,
                                   const std::string& gpu_required_by = "");

// Whether MakeEngine's note (--device auto training on the CPU, and why) is worth a line.
// Quiet where nothing is wrong: a run that nobody asked a GPU of, on a machine without one,
// trains on the CPU as it should. `asked`: this rank's reasons to expect a GPU (--device on
// the command line, a plan for GPUs, GPUs in its environment: Binding::gpus_given, GPUs
// found but not usable: MakeEngine's gpu_found) or --verbose. True on every rank when any
// rank asked. Collective over `comm`.
bool DeviceNoteWanted(MPI_Comm comm, bool asked);

// Visible GPU `device` as a JSON object (name, PCI bus id, memory, clocks, driver, CUDA,
// cuDNN, cuBLAS, NCCL: dlh_cuda_describe), for `dlh-launch time-steps`. Not collective.
// Throws UsageError "no usable GPU on HOST: REASON" on a machine without one.
std::string DescribeCudaDevice(int device);

}  // namespace dlh
