// DLH estimator — timing the calibration models on a GPU (or, for tests, the CPU) through
// `dlh-launch time-steps` in a child process: dlh-estimate stays free of MPI and CUDA, and a
// crash of the GPU stack takes down the child, not the estimator.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/time_steps_file.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/model/time_model.hpp"

namespace dlh {

// dlh-launch: $DLH_LAUNCH, else dlh-launch beside this executable (/proc/self/exe).
std::string LaunchPath();

struct LaunchedTiming {
  std::vector<TimingSample> samples;  // the entries that could be timed, in order
  std::vector<size_t> entry_of;       // samples[i] timed entries[entry_of[i]]
  std::vector<std::string> failures;  // "MODEL b256: REASON" for each entry that could not
  nlohmann::json device;              // the child's "device" (time_steps_file.hpp)
  nlohmann::json options;             // and its "options"
  // Every entry's sample as the child wrote it (failed ones too), with its passes where
  // TimingOptions::profile_steps asked for them.
  std::vector<TimeStepsSample> results;
};

// Writes the entries as a request, runs `dlh-launch time-steps --device DEVICE` on it (DEVICE:
// cpu, cuda or cuda:N), calls `progress(done, total, line)` for each of its progress lines
// (first `progress(0, total, DEVICE-NAME)` once the device is known), and reads the result
// back. Throws UsageError (a missing GPU, bad options: the child's exit
// code 2) or Error (any other failure) with one line that names dlh-launch and its reason.
LaunchedTiming TimeThroughLaunch(
    const std::vector<SweepEntry>& entries, const std::string& device, const TimingOptions& options,
    const std::function<void(size_t, size_t, const std::string&)>& progress);

// One line for a calibration's host field: "NVIDIA H100 80GB HBM3 (GPU 0, sm_90, 132 SMs,
// 79.1 GiB, 1980 MHz), driver CUDA 13.0, runtime 13.0"; and the libraries timed: "cuDNN
// 9.10.0, cuBLAS 13.0.0, NCCL 2.28.9". From dlh_cuda_describe's object.
std::string GpuHostLine(const nlohmann::json& device);
std::string GpuLibrariesLine(const nlohmann::json& device);

}  // namespace dlh
