// DLH — `dlh-launch bench-checkpoint`: times the checkpoint write training uses
// (CheckpointDir::save: temporary file, fsync, rename, folder fsync, rotation) for a state of
// a given size. `make bench` sets it beside `dd conv=fsync` of the same bytes.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/storage/checkpoint.hpp"

namespace dlh {

struct CheckpointBenchOptions {
  std::vector<size_t> param_bytes = {size_t(64) << 20};  // one measurement per size
  int repeats = 3;   // saves timed per size; the median is reported
  std::string dir;   // checkpoint folder (created; the saved files stay there)
  int keep = 1;      // CheckpointDir rotation, as `dlh-launch train --keep`
  bool raw = false;  // time a plain write(2) + fsync of the same arrays instead of save()
};

// A training state with `param_bytes` of parameters (in 16 MiB arrays, like the layers of a
// large model) and momentum optimizer state of the same size, filled with varied values.
TrainState MakeBenchState(size_t param_bytes);

// Saves `repeats` checkpoints per size into `dir` and times each whole save call (or, with
// `raw`, a plain write + fsync of the same arrays: the floor the format's cost sits on).
// Returns {"dir", "method": "save"|"raw", "keep", "sizes": [{"param_bytes", "file_bytes",
// "seconds": [...], "median_s"}]}.
// Throws CheckpointError / Error.
nlohmann::json RunCheckpointBench(const CheckpointBenchOptions& options);

// The command line: `dlh-launch bench-checkpoint [options]` (arguments after the command
// name). Only rank 0 measures (training writes checkpoints from rank 0 alone). Returns the
// exit code; throws UsageError for bad options.
int RunBenchCheckpointCommand(const std::vector<std::string>& args, int rank);

}  // namespace dlh
