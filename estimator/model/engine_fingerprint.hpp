// DLH estimator — which engine a calibration timed.
//
// A calibration is true only for the code that it timed: when the engine gets faster, the
// shipped calibration predicts it too slow (issue 13: 110% validation error after an engine
// speed-up, 6% after recalibrating). The build stamps a fingerprint of the engine's source
// files into every binary (estimator/module.mk: for "cpu", a hash of launcher/nn/, the CPU
// engine, launcher/comm/ and launcher/train/, with the compiler flags and version; for
// "cuda", of launcher/engine/cuda/ and launcher/nn/'s headers, since a GPU step runs none of
// the CPU layers' code, with the host's part of a step (launcher/train/, launcher/comm/), the
// flags and nvcc's version and architectures); calibrate records it, and recommend, predict and the
// plugin say when a calibration was measured with another engine. What the fingerprint cannot see
// (the machine, OpenBLAS's kernels) the calibration's probe records (launcher/probe/).
//
// The fingerprint is one hash over a list of files, so it changes when a file joins or
// leaves the list as when one is edited. Each file's own hash is kept besides: a calibration
// records them, and where every file this build times is the same as in the calibration,
// the calibration is this engine's even though the fingerprints differ (a file judged not
// to run in a step left the list, issue 40).
#pragma once

#include <map>
#include <string>

namespace dlh {

// A file's path (relative to the repository) -> the first 12 hex digits of its sha256.
using EngineSourceHashes = std::map<std::string, std::string>;

// Whether `device` ("cpu", "cuda:0 (...)") runs the CPU engine rather than the GPU one.
bool CpuEngineDevice(const std::string& device);

// The fingerprint of this build's engine for `device` ("cpu", "cuda:0", ...): 12 hex digits.
std::string EngineFingerprint(const std::string& device);

// Each file of this build's engine fingerprint for `device` with its hash, and "build-flags"
// (the compiler flags and version; for a GPU, nvcc's too). GPU calibrations made before
// 2026-12-04 recorded none: their fingerprint alone decides.
const EngineSourceHashes& EngineSources(const std::string& device);

// Why a calibration that timed `engine` (its fingerprint) and `sources` (its files' hashes,
// may be empty) is not this build's engine for `device`; "" when it is: the same fingerprint,
// or every file this build times present in `sources` with the same hash. Names up to three
// of the files that differ.
std::string EngineDifference(const std::string& device, const std::string& engine,
                             const EngineSourceHashes& sources);

}  // namespace dlh
