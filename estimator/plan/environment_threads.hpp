// DLH planning — the threads a CPU rank of the job will compute with, from the environment the
// job inherits (the plugin and dlh-estimate slurm-plan plan with it).
#pragma once

#include <string>

#include "estimator/plan/plan.hpp"

namespace dlh::plan {

// The threads each CPU rank of the job will compute with when its environment says so:
// OPENBLAS_NUM_THREADS, which dlh-launch train takes before the node's cores over its ranks
// (launcher/train/trainer.cpp, SetThreads: its leading digits; nothing positive: none). The
// job has it from --export=...,OPENBLAS_NUM_THREADS=N, or from the submitting environment
// unless --export leaves that out (NONE, or names without ALL or it).
struct EnvironmentThreadCount {
  int threads = 0;     // 0: none
  std::string source;  // where it came from: "OPENBLAS_NUM_THREADS=1 in your environment"
};
EnvironmentThreadCount EnvironmentThreads(const PlanInputs& in);

}  // namespace dlh::plan
