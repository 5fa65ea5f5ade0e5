// DLH estimator — which GPUs this build's CUDA engine can run (issue 42, part 5).
//
// The backend (launcher/engine/cuda/) is compiled for the targets in CUDA_ARCH_FLAGS
// (launcher/engine/cuda/module.mk): machine code for sm_80 and sm_90, and compute_90 PTX.
// Machine code sm_XY runs on compute capability X.Y and on later minors of major X (sm_80
// on 8.6 and 8.9); PTX compute_XY is compiled by the driver for any capability >= X.Y; an
// architecture-specific target (sm_90a) runs on its own capability only. CUDA 13 has no
// Volta (7.0) target at all, so a V100 can never run this engine: the planner must not
// offer it, and a job placed there would otherwise train on the node's CPU.
#pragma once

#include <string>
#include <vector>

namespace dlh {

struct ComputeCapability {
  int major = 0, minor = 0;
};

// What is wrong with `text` as a compute capability ("must be MAJOR.MINOR such as ..."), ""
// when it is one ("8.0", "9.0", "12.0").
std::string ComputeCapabilityProblem(const std::string& text);

// "8.0" -> {8, 0}: throws EstimateError(what + ": " + the problem) for anything else.
ComputeCapability ParseComputeCapability(const std::string& text, const std::string& what);

// The build's targets, "sm_80 sm_90 compute_90" (space-separated, as make passes them).
const std::vector<std::string>& BuiltCudaTargets();

// True when one of `targets` runs on `cc`.
bool CudaTargetsRun(const std::vector<std::string>& targets, ComputeCapability cc);

// Empty when this build's engine runs `text` (a type's compute_capability; empty: unknown,
// which is not refused), else why not: "compute capability 7.0: DLH's GPU engine is built
// for sm_80, sm_90 and PTX compute_90".
std::string WhyEngineCannotRun(const std::string& compute_capability);

}  // namespace dlh
