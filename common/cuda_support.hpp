// DLH — what each engine can train, decided from the spec alone. Mostly the CUDA engine
// (launcher/engine/cuda/); the CPU engine refuses only bf16 (CpuEngineUnsupported).
//
// The CPU engine runs every layer kind of common/spec.hpp; the CUDA engine lags behind it:
// its avgpool2d, globalavgpool2d, gelu, silu, residual blocks, label smoothing, bf16
// precision and the TF32 switches are built but have never run on a GPU, so they are refused
// until a GPU check has compared them with the CPU engine (DLH_TEST_CUDA_UNVERIFIED=1 lets
// that check, share/gpu/gpu-check.sh, train them). Three places must agree on that, so the list is
// kept here, in one switch that names every kind (-Wswitch flags a kind added without deciding):
//   - dlh-launch, before it picks an engine: --device cuda refuses, --device auto trains on
//     the CPU and says why (launcher/engine/device.cpp), with or without a GPU;
//   - the CUDA backend itself, before any GPU work (cuda_engine.cpp), for any other caller;
//   - the recommender, which leaves GPU types out of the plan for such a spec
//     (estimator/recommend/recommender.cpp), since the job would find no engine there.
#pragma once

#include <string>

#include "common/spec.hpp"

namespace dlh {

// Empty when the CUDA engine can train `spec`, else one line naming the first field it
// cannot: "spec.json: layers[3]: residual is not supported by the CUDA engine yet" or
// "spec.json: label_smoothing: 0.1 is not supported by the CUDA engine yet (its loss's
// smoothing has not run on a GPU)"; a residual block's paths are looked into
// ("layers[3].layers[1]: gelu ..."). Callers add what to do ("train it with --device cpu").
std::string CudaEngineUnsupported(const TrainSpec& spec);

// Empty when the CPU engine can train `spec`, else one line naming the field: a bf16 spec
// ("spec.json: precision: \"bf16\" needs the CUDA engine; ..."). dlh-launch refuses it on the
// CPU, and the recommender leaves CPU-rank types out of its plan.
std::string CpuEngineUnsupported(const TrainSpec& spec);

}  // namespace dlh
