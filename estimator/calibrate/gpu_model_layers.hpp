// DLH estimator — the layers of a GPU calibration's samples, rebuilt by name.
//
// A calibration file keeps each sample's feature totals, not its layers; the GPU layer model
// (estimator/model/gpu_layer_model.hpp) needs the layers, so every sample of the GPU sweep or
// of the GPU validation models is rebuilt from its name: those models are fixed by a seed
// (calibrate_gpu_test checks their hash). A row `refit` added from an observed job ("observed
// NAME") keeps no spec in the file, so it cannot be rebuilt and is left to the caller.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/spec.hpp"
#include "estimator/model/time_model.hpp"

namespace dlh {

// Every model a GPU calibration's or validation file's samples may name, by name.
const std::map<std::string, TrainSpec>& KnownGpuModels();

// Whether `model` is a row refit added from an observed job (its layers are not kept).
bool ObservedRow(const std::string& model);

// `samples` with their layers, rebuilt from their names. Rows of observed jobs are left out
// and counted in *observed (when given; else they throw as unknown models). Throws UsageError
// naming `path` for any other name no GPU sweep or validation model has, or for no samples.
std::vector<TimingSample> GpuSamplesWithLayers(std::vector<TimingSample> samples,
                                               const std::string& path, int* observed = nullptr);

}  // namespace dlh
