// DLH — `dlh-launch run`'s observation record (launcher/observe/): the program's steps as its
// progress lines timed them, where it ran and what its plan predicted, into the store.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/run/progress.hpp"
#include "launcher/train/plan.hpp"

namespace dlh {

struct RunObservationInputs {
  std::string store;  // --observations, else the plan's; "": no record
  std::vector<std::string> command;
  const LaunchPlan* plan = nullptr;
  std::string gpu_type;  // --gpu-type / DLH_GPU_TYPE, "" unknown
  const ProgressLog* log = nullptr;
  double started_s = 0, ended_s = 0;  // the launcher's clock (progress.hpp's `now`)
  int ranks = 1, ranks_per_node = 1;
  std::vector<std::string> hosts;
  double energy_j = -1;  // summary.json's energy.joules_total; < 0: not measured
};

// Rank 0, once the program ended well. Writes nothing when no store is named or the program
// reported fewer than 4 steps; prints one line either way (the record's file, or why none
// was written). Never throws.
void WriteRunObservation(const RunObservationInputs& in);

}  // namespace dlh
