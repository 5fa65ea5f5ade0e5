// DLH — `dlh-launch export SPEC --pytorch OUT.py`: the spec as a standalone PyTorch program a
// researcher reads and changes. It trains what `dlh-launch train` trains from the spec (the
// same layers, initialisation, optimizer, learning-rate schedule, augmentation and input
// normalisation, on DLH's HDF5 data set read with h5py), one process or DDP under torchrun
// or `dlh-launch run` (with the dlh module when it is there: the plan's batch and learning
// rate, progress, stop signals, checkpoints), and it loads a DLH checkpoint, to evaluate it or
// to export it as a PyTorch state dict or an ONNX model.
#pragma once

#include <string>

#include "common/spec.hpp"

namespace dlh {

struct PyTorchProgramOptions {
  std::string file_name;  // the program's own name, for its usage text
  std::string data;       // the default --data (the spec's data set, absolute), may be empty
};

// The program's text. Throws SpecError when the spec's layers do not fit together.
std::string WritePyTorchProgram(const TrainSpec& spec, const PyTorchProgramOptions& options);

}  // namespace dlh
