// DLH — the two files of `dlh-launch time-steps`, the step timer that `dlh-estimate
// calibrate|validate --device cuda` (and --device cpu --via-launch) runs as a child process,
// so that dlh-estimate itself links no MPI and no CUDA:
//
//   request  {"format": "dlh-time-steps-request", "version": 1,
//             "entries": [{"batch": 64, "spec": {...spec JSON...}}, ...]}
//   result   {"format": "dlh-time-steps-result", "version": 1, "complete": true,
//             "device": {...}, "options": {...},
//             "samples": [{"model": "...", "batch": 64, "seconds": 0.0123, "joules": null,
//                          "error": null}, ...]}
//
// With `dlh-launch time-steps --profile N` a sample also has "layers": the passes of its step
// timed one by one on the GPU (common/layer_pass_time.hpp), each the median of N profiled
// steps: [{"layer": 0, "kind": "conv2d", "pass": "forward", "device_s": 1.2e-05,
// "host_s": 8e-06, "algorithm": "IMPLICIT_PRECOMP_GEMM", "math": "tensor_op",
// "workspace_bytes": 0}, ...] (algorithm and math null for the engine's own kernels), and
// "layers_held": false where the steps could not be held until issued
// (launcher/engine/cuda/step_timer.hpp; absent: they were).
//
// The result is rewritten after every entry, so a crash keeps the entries finished before
// it ("complete": false). A sample whose entry failed (too large for the GPU's memory) has
// "seconds": null and the one-line "error".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/layer_pass_time.hpp"
#include "common/spec.hpp"

namespace dlh {

struct TimeStepsEntry {
  TrainSpec spec;
  int64_t batch = 0;  // local batch timed (0: the spec's batch_size)
};

struct TimeStepsSample {
  std::string model;                  // the entry's spec name
  int64_t batch = 0;                  // the batch timed
  double seconds = -1;                // median seconds per step (-1: failed, see error)
  double joules = -1;                 // energy per step (-1: not measured)
  std::string error;                  // why the entry could not be timed ("" when it was)
  std::vector<LayerPassTime> layers;  // --profile: its passes (empty: not profiled)
  // Whether they were timed with the stream held until each step was issued (their device
  // times the GPU's own; false: the host's gaps between the calls are in them too).
  bool layers_held = true;
};

struct TimeStepsResult {
  nlohmann::json device = nlohmann::json::object();   // what was timed on (see time_steps.hpp)
  nlohmann::json options = nlohmann::json::object();  // warmup, repeats, ...
  bool complete = false;                              // every entry has a sample
  std::vector<TimeStepsSample> samples;
};

// The request as text (pretty JSON). Specs without a dataset get a placeholder: step timing
// reads no data.
std::string TimeStepsRequestText(const std::vector<TimeStepsEntry>& entries);
// Reads a request. Throws SpecError "<path>: entries[3].spec: layers[2].kernel: ..." (one
// line naming the file and the field).
std::vector<TimeStepsEntry> ReadTimeStepsRequest(const std::string& path);

std::string TimeStepsResultText(const TimeStepsResult& result);
// Throws EstimateError "<path>: samples[3].seconds: must be a positive number or null, got
// ..." (or "samples[3].layers[2].pass: ...").
TimeStepsResult ReadTimeStepsResult(const std::string& path);

}  // namespace dlh
