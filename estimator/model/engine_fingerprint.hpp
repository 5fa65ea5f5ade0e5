// DLH estimator — which engine a calibration timed.
//
// A calibration is true only for the code that it timed: when the engine gets faster, the
// shipped calibration predicts it too slow (issue 13: 110% validation error after an engine
// speed-up, 6% after recalibrating). The build stamps a fingerprint of the engine's source
// files into every binary (estimator/module.mk: for "cpu", a hash of launcher/nn/, the CPU
// engine, launcher/comm/ and launcher/train/, with the compiler flags and version; for
// "cuda", of launcher/engine/cuda/ and launcher/nn/'s headers, since a GPU step runs none of
// the CPU layers' code); calibrate records it, and recommend, predict and the plugin say when
// a calibration was measured with another engine. What the fingerprint cannot see (the
// machine, OpenBLAS's kernels) the calibration's probe records (launcher/probe/).
#pragma once

#include <string>

namespace dlh {

// Whether `device` ("cpu", "cuda:0 (...)") runs the CPU engine rather than the GPU one.
bool CpuEngineDevice(const std::string& device);

// The fingerprint of this build's engine for `device` ("cpu", "cuda:0", ...): 12 hex digits.
std::string EngineFingerprint(const std::string& device);

}  // namespace dlh
