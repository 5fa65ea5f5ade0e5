// DLH — `dlh-launch time-steps`: times training steps of the calibration models on one
// device, for `dlh-estimate calibrate|validate --device cuda[:N]` (which runs it as a child
// process, so that dlh-estimate links neither MPI nor CUDA).
//
//   dlh-launch time-steps --device cpu|cuda[:N] --in REQUEST.json --out RESULT.json
//                         [--warmup 2] [--repeats 5] [--steps-per-repeat 3] [--threads 0]
//
// One process, run directly (an MPI singleton, not under mpirun). For each request entry it
// builds the engine the trainer would (MakeEngine) and times forward_backward +
// finish_gradients + batch statistics + update on random data of the entry's shape: the
// median of `repeats` blocks of `steps-per-repeat` steps, after `warmup` steps. The file
// formats are in common/time_steps_file.hpp; the result is rewritten after every entry, and
// an entry that fails (too large for the GPU) records its error and the next one runs.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// Arguments after the command name. Returns the exit code; throws UsageError for bad
// options or a device that is not there, SpecError for a bad request file.
int RunTimeStepsCommand(const std::vector<std::string>& args, int rank, int size);

// "cpu" -> ("cpu", -1); "cuda" -> ("cuda", 0); "cuda:N" -> ("cuda", N). Throws UsageError.
void ParseTimingDevice(const std::string& text, std::string* kind, int* index);

}  // namespace dlh
