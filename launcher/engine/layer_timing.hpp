// DLH — a training step timed layer by layer on the GPU (issue 40, part 5): `dlh-launch
// time-steps --profile` asks the engine for it, and `dlh-estimate profile --device cuda`
// prints it and saves it for the GPU layer model (estimator/model/gpu_layer_model.hpp).
//
// The CPU engine has no such interface: `dlh-estimate profile SPEC` times its layers
// in-process (estimator/calibrate/calibrate_profile.hpp). Kept apart from engine.hpp, whose
// every line is part of the CPU engine's fingerprint.
#pragma once

#include <string>
#include <vector>

#include "common/layer_pass_time.hpp"
#include "launcher/engine/engine.hpp"

namespace dlh {

// What an engine that can time its layers offers. Off by default: the timing events and
// the held stream change the step, so a profiled step is never a timed one.
class LayerTiming {
 public:
  virtual ~LayerTiming() = default;
  virtual void set_layer_timing(bool on) = 0;
  // The passes of the last training step (forward_backward, then update) in the order they
  // ran; waits for the device. Throws Error when no whole step was timed since the last call.
  virtual std::vector<LayerPassTime> last_step_layer_times() = 0;
  // Whether that step ran held until it was issued, so that its device times are the GPU's
  // own. A step the host could not issue while held (a library call that waits for the
  // stream) is not, and neither is any later one: its device times hold the host's gaps.
  virtual bool last_step_held() const = 0;
};

// The layer timing of an engine that MakeEngine (device.hpp) made on the GPU; nullptr for
// any other engine, or where the CUDA backend has none.
LayerTiming* GpuLayerTiming(Engine* engine, const std::string& device_kind);

}  // namespace dlh
