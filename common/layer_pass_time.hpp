// DLH — one pass of one layer of a GPU training step, timed (issue 40, part 5): what
// launcher/engine/layer_timing.hpp returns, `dlh-launch time-steps --profile` stores
// (common/time_steps_file.hpp) and `dlh-estimate profile --device cuda` prints.
#pragma once

#include <cstdint>
#include <string>

namespace dlh {

// One pass of one layer of a timed step (or the loss, or the optimizer's update).
struct LayerPassTime {
  int layer = -1;    // index in the spec's layers; -1: the loss or the update
  std::string kind;  // the layer's type as the spec spells it ("conv2d"), "loss" or "update"
  // "forward"; "backward-weights" and "backward-data" for a layer whose backward computes
  // both apart (convolution, dense), "backward" for the others; "loss"; "update".
  std::string pass;
  // Between CUDA events on the stream around the pass's calls, the stream held until the
  // whole step was enqueued, so that no pass waits for the host to issue it: the device's
  // own time.
  double device_s = 0;
  double host_s = 0;  // the host's time to enqueue the pass's calls
  // What runs the pass where a library chooses: cuDNN's algorithm ("IMPLICIT_PRECOMP_GEMM"),
  // cuBLASLt's matmul; empty for the engine's own kernels.
  std::string algorithm;
  std::string math;  // "fma", "tensor_op" (cuDNN); "fp32", "tf32", "bf16" (GEMMs); or empty
  int64_t workspace_bytes = 0;
};

}  // namespace dlh
