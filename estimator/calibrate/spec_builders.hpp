// DLH estimator — building specs in code, for the calibration sweep (calibrate_sweep.cpp)
// and the validation models (validation_models.cpp): one layer or a bare spec at a time, with
// the spec parser's defaults, so that both files build models the same way.
#pragma once

#include <string>

#include "common/spec.hpp"

namespace dlh::spec_builders {

constexpr int kClasses = 10;

inline LayerSpec Conv(int filters, int kernel, int stride, int padding) {
  LayerSpec l;
  l.kind = LayerKind::Conv2d;
  l.filters = filters;
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  return l;
}

inline LayerSpec Pool(int kernel) {
  LayerSpec l;
  l.kind = LayerKind::MaxPool2d;
  l.kernel = kernel;
  l.stride = kernel;  // the spec parser's default for maxpool2d
  return l;
}

inline LayerSpec Dense(int units) {
  LayerSpec l;
  l.kind = LayerKind::Dense;
  l.units = units;
  return l;
}

inline LayerSpec Simple(LayerKind kind) {
  LayerSpec l;
  l.kind = kind;
  return l;
}

inline LayerSpec Dropout(double rate) {
  LayerSpec l;
  l.kind = LayerKind::Dropout;
  l.rate = rate;
  return l;
}

inline TrainSpec BaseSpec(const std::string& name, Shape3 input, int batch,
                          const std::string& origin) {
  TrainSpec s;
  s.name = name;
  s.input = input;
  s.classes = kClasses;
  s.optimizer.kind = OptimizerSpec::Kind::Sgd;
  s.optimizer.lr = 0.01;
  s.optimizer.momentum = 0.9;
  s.batch_size = batch;
  s.epochs = 1;
  s.seed = 1;
  s.origin = origin;
  return s;
}

}  // namespace dlh::spec_builders
