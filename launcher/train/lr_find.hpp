// DLH — `dlh-launch lr-find SPEC`: the learning-rate range test (Smith 2017). A short run
// from the spec's initial weights raises the rate geometrically from --min-lr to --max-lr,
// one rate per step, records the training loss, stops when it diverges, fits the curve
// (lr_fit.hpp) and suggests a rate and an interval for the spec's optimizer at the batch
// tested. It writes one JSON file and an SVG plot, never a run folder or checkpoint, and
// leaves the spec as it is.
//
// Data-parallel like train: under mpirun with several ranks the global batch is split the
// same way and the gradients are summed, so the curve is that of the global batch.
#pragma once

#include <mpi.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/comm/grad_sync.hpp"
#include "launcher/train/lr_fit.hpp"

namespace dlh {

struct LrFindOptions {
  std::string spec_path;
  std::string data_path;  // overrides the spec's dataset when not empty
  int batch = 0;          // global batch; overrides the spec when > 0
  LrSweepOptions sweep;
  std::string out = "lr-find.json";
  std::string plot;  // default: `out` with .svg for .json
  int threads = 0;   // as train --threads
  int prefetch = 2;
  std::string device = "auto";  // as train --device
  // A GPU was asked for (--device given, a plan for GPUs) or --verbose: --device auto says
  // that it trains on the CPU (device.hpp, DeviceNoteWanted).
  bool device_asked = false;
  std::string allreduce = "auto";
  GradSyncOptions sync;
  // In a training job (lr_source.hpp): fewer steps when one epoch of the data set cannot
  // hold them (at least 10), instead of refusing --steps, an option the job was not given.
  bool fit_steps_to_epoch = false;
};

// Runs the sweep (collective over `comm`), then rank 0 writes `out` and `plot` atomically
// and returns the JSON it wrote (other ranks: null). Throws UsageError / SpecError /
// DataError (the same on every rank) before any step, and never leaves a partial file.
nlohmann::json RunLrFind(const LrFindOptions& options, MPI_Comm comm);

// The command line: `dlh-launch lr-find SPEC [options]` (arguments after the command
// name). Prints the summary line on rank 0. Returns the exit code; throws UsageError.
int RunLrFindCommand(const std::vector<std::string>& args, int rank);

}  // namespace dlh
