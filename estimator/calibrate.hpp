// DLH estimator — the calibration runner: builds the sweep of systematically varied CNNs,
// times real training steps with the launcher's engine (one process, no MPI), and reads
// energy counters where the machine exposes them. Part of dlh-estimate only: the estimator
// library itself (features, fit, recommender) must not depend on the engine.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/spec.hpp"
#include "estimator/time_model.hpp"

namespace dlh {

struct SweepEntry {
  TrainSpec spec;  // input shape, layers; optimizer sgd+momentum; classes 10
  int64_t batch = 0;
};

// The calibration sweep: vary conv layers (0-4), filters (8-128), kernel (3, 5), FC layers
// (0-2) and nodes (64-2048), input size (16-64 px, 1 or 3 channels) and batch (16-256), one
// factor at a time around a base model plus a space-filling random set (fixed seed).
// `quick` gives a small sweep (17 entries) for tests; the full one has 72.
std::vector<SweepEntry> CalibrationSweep(bool quick);

// Hand-picked architectures NOT in the sweep, for `dlh-estimate validate`: LeNet-like,
// VGG-like, wide-shallow, deep-narrow, MLP, and the Fashion-MNIST example's shape.
std::vector<SweepEntry> ValidationModels();

struct TimingOptions {
  int warmup = 2;   // steps excluded from the measurement
  int repeats = 5;  // timed blocks; the median is reported
  int steps_per_repeat = 3;
  int threads = 0;  // OpenBLAS threads (0: leave as is)
};

// Times forward + loss + backward + optimizer update on random data of the entry's shape
// with the real engine. Returns the median seconds per step (and joules per step when an
// energy counter is readable, else -1).
TimingSample TimeTrainingStep(const SweepEntry& entry, const TimingOptions& options);

// Runs the sweep, calling `progress(done, total, entry)` after each entry.
std::vector<TimingSample> RunSweep(
    const std::vector<SweepEntry>& entries, const TimingOptions& options,
    const std::function<void(size_t, size_t, const TimingSample&)>& progress);

// Energy counter of the CPU package (Linux powercap RAPL), when readable. Returns false
// when there is none (as on most VMs) or it cannot be read.
bool ReadCpuEnergyJoules(double* joules);

// The pieces of ReadCpuEnergyJoules, for the timing loop and for tests with a fake tree.
struct EnergyZone {
  std::string name;       // "intel-rapl:0"
  double joules = 0;      // energy_uj / 1e6
  double max_joules = 0;  // max_energy_range_uj / 1e6, where the counter wraps (0: unknown)
};
// Top-level RAPL package zones (intel-rapl:N, not sub-zones like intel-rapl:0:0) under
// `powercap_dir` (normally /sys/class/powercap), sorted by name. False when there is none
// or one cannot be read.
bool ReadEnergyZones(const std::string& powercap_dir, std::vector<EnergyZone>* zones);
// Joules used between two readings of the same zones, allowing for one wrap of each
// counter. Returns -1 when the readings do not match or a wrap cannot be undone.
double EnergyBetween(const std::vector<EnergyZone>& before, const std::vector<EnergyZone>& after);

// "Intel(R) Xeon(R) Processor, 2 cores" (from /proc/cpuinfo and the affinity mask).
std::string CpuDescription();
// "gcc 12.2.0", and OpenBLAS's own description ("OpenBLAS 0.3.21 DYNAMIC_ARCH ...").
std::string CompilerDescription();
std::string BlasDescription();

}  // namespace dlh
