// DLH — where a pipeline's stages begin (ParallelSpec in common/spec.hpp): the spec's layers
// cut into consecutive runs whose work per sample is as even as cuts between layers allow.
#pragma once

#include <cstddef>
#include <vector>

#include "common/spec.hpp"

namespace dlh {

// Per-sample work of each of the spec's top-level layers, for balancing: the multiply-adds of
// conv2d and dense layers, the output elements of the others (element-wise passes), a residual
// block's paths summed. The GEMMs dominate a step on every engine; the estimator's time model
// weighs the kinds finer; it plans a pipeline with this same cut (estimator/recommend).
std::vector<double> LayerWork(const TrainSpec& spec);

// `stages` + 1 layer indices: stage s holds layers [bounds[s], bounds[s + 1]), every stage at
// least one layer; the cut that makes the largest stage's work least (ties: the earliest).
// Requires 1 <= stages <= spec.layers.size().
std::vector<size_t> StageBounds(const TrainSpec& spec, int stages);

}  // namespace dlh
