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
#include "estimator/model/time_model.hpp"

namespace dlh {

struct SweepEntry {
  TrainSpec spec;  // input shape, layers; optimizer sgd+momentum; classes 10
  int64_t batch = 0;
};

// The calibration sweep: vary conv layers (0-4), filters (8-128), kernel (3, 5), FC layers
// (0-2) and nodes (64-2048), input size (16-64 px, 1 or 3 channels) and batch (16-256), one
// factor at a time around a base model plus a space-filling random set (fixed seed), then
// four models of 4-6 FC layers. `quick` gives a small sweep (22 entries) for tests; the full
// one has 80 (calibrate_sweep.cpp).
std::vector<SweepEntry> CalibrationSweep(bool quick);

// Hand-picked architectures NOT in the sweep, for `dlh-estimate validate`: LeNet-like,
// VGG-like, wide-shallow, deep-narrow, MLP, and the Fashion-MNIST example's shape. These
// are the "term" set: the time model's terms were chosen on them, so they do not judge it.
std::vector<SweepEntry> ValidationModels();

// The GPU sweep (dlh-estimate calibrate --device cuda): the same pattern at GPU sizes,
// conv layers 0-4 of 16-512 filters, FC layers 0-2 of 256-4096 nodes, inputs 32-224 px of 1
// or 3 channels, batches 64-1024, one factor at a time around a base model (3 conv of 128
// filters, 1 FC of 1024, 3x64x64, batch 256) plus a space-filling random set (fixed seed)
// inside a time and memory budget (at most about 26 GB of training memory by the estimator's
// count). 96 entries; `quick`: 15.
std::vector<SweepEntry> GpuCalibrationSweep(bool quick);

// ValidationModels() plus GPU-sized ones outside the GPU sweep: VGG stages at ResNet
// widths on 224 px and on 32 px inputs, and a wide MLP at batch 1024; then, last, every
// JudgedValidationModels() model.
std::vector<SweepEntry> GpuValidationModels();

// The judged set (issue 40): models that took no part in choosing the time model's terms,
// of shapes neither the sweep nor ValidationModels() (the "term" set) has: strided,
// wide, deep-narrow, MLP-only at several widths and depths, large inputs (96 and 112 px),
// small and large batches, mixed kernel sizes (1, 3, 5, 7) and an overlapping pool. The
// spec has no residual layer, so none is residual. Each step takes at most a few tens of
// ms on a 2-core CPU.
std::vector<SweepEntry> JudgedValidationModels();

// A validation set by name: "term" (ValidationModels(), or on a GPU GpuValidationModels()
// without the judged ones), "judged" (JudgedValidationModels()) or "all" (term, then
// judged). Throws UsageError for another name.
std::vector<SweepEntry> ValidationSet(const std::string& set, bool gpu);

struct TimingOptions {
  int warmup = 2;   // steps excluded from the measurement
  int repeats = 5;  // timed blocks; the median is reported
  int steps_per_repeat = 3;
  int threads = 0;  // OpenBLAS threads (0: leave as is)
  // Through dlh-launch on a GPU only (TimeThroughLaunch): then this many steps timed layer by
  // layer (time-steps --profile).
  int profile_steps = 0;
};

// Times forward + loss + backward + optimizer update on random data of the entry's shape
// with the real engine. Returns the median seconds per step (and joules per step when the
// CPU packages' RAPL counters are readable, common/energy.hpp, else -1).
TimingSample TimeTrainingStep(const SweepEntry& entry, const TimingOptions& options);

// One update of each optimizer kind (plain SGD, SGD with momentum as the sweep trains, Adam)
// by the engine on about a million parameters at `threads`, the median of a few, per
// parameter (optimizer_cost.hpp).
OptimizerUpdateCost MeasureOptimizerUpdate(int threads, bool quick);

// The engine's GELU and SiLU layers, forward and backward, on 65,536 values (512 features x a
// batch of 128) at `threads`, the median of a few, per value (activation_cost.hpp).
ActivationCost MeasureActivationCost(int threads, bool quick);

// Runs the sweep, calling `progress(done, total, entry)` after each entry.
std::vector<TimingSample> RunSweep(
    const std::vector<SweepEntry>& entries, const TimingOptions& options,
    const std::function<void(size_t, size_t, const TimingSample&)>& progress);

// "Intel(R) Xeon(R) Processor, 2 cores" (from /proc/cpuinfo and the affinity mask).
std::string CpuDescription();
// "gcc 12.2.0", and OpenBLAS's own description ("OpenBLAS 0.3.21 DYNAMIC_ARCH ...").
std::string CompilerDescription();
std::string BlasDescription();

}  // namespace dlh
