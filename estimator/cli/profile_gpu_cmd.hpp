// DLH — `dlh-estimate profile --device cuda[:N]`: where a GPU training step goes, pass by
// pass (issue 40, part 5). The steps run in `dlh-launch time-steps --profile` (a child
// process, as calibrate --device cuda runs it), which times every layer's passes between
// CUDA events with the stream held until the step is issued (launcher/engine/cuda/
// step_timer.hpp), and reads each convolution's cuDNN algorithm, math type and workspace.
// `--out` keeps the child's result (common/time_steps_file.hpp); `--measured` prints a kept
// one again, and `dlh-estimate gpu-layers --profile` sets the GPU layer model against it.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// Whether profile's `args` ask for this command: --device or --measured before any "--".
bool IsGpuProfile(const std::vector<std::string>& args);

// dlh-estimate profile --device cuda[:N] (SPEC | --set NAME) [--batch B] [--steps S]
// [--out FILE] [--json], or profile --measured FILE [--json]. Exit 0, 2 bad options or no
// GPU (one line), 1 the child failed; a model that could not be profiled is a warning.
int ProfileGpuCommand(const std::vector<std::string>& args);

}  // namespace dlh
