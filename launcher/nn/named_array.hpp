// DLH — arrays and parameters by name: the currency between the network, the
// optimizer, gradient synchronisation and checkpoints. Names are the same on every
// engine, so a checkpoint moves between CPU and GPU.
#pragma once

#include <string>
#include <vector>

#include "launcher/nn/layer.hpp"

namespace dlh {

// A copy of one array, as it is saved and restored.
struct NamedArray {
  std::string name;  // "03.conv2d/weight" (may contain '/'; becomes HDF5 groups)
  std::vector<int> shape;
  std::vector<float> data;
};

// A live parameter of the network (value and gradient tensors, not owned).
struct NamedParam {
  std::string name;  // "03.conv2d/weight"
  ParamRef ref;
};

}  // namespace dlh
