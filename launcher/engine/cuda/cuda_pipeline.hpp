// DLH — pipeline model parallelism on GPUs (spec.parallel; the CPU's is
// launcher/engine/pipeline_engine.cpp, whose schedule this follows step for step).
#pragma once

#include "launcher/engine/engine.hpp"

namespace dlh {
namespace cuda {

// This rank's stage of the pipeline: a CudaEngine holding the stage's layers, passing
// activations forward and their gradients back by NCCL send and receive. Collective over
// config.comm.
Engine* MakeCudaPipelineEngine(const EngineConfig& config);

}  // namespace cuda
}  // namespace dlh
