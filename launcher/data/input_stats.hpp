// DLH — how a data set's inputs are standardised: (x * scale - mean) / std, with one mean and
// std for every value of a sample, one per channel, or one per element.
//
// Images get one per channel (as torchvision's Normalize): a channel's pixels share a scale.
// A row of features (a sample of height 1: CSV columns, a matrix's rows) gets one per element:
// its columns each have a scale of their own, and one figure for all of them leaves a column
// of incomes in the thousands next to features near 1, which the network cannot learn from
// (a tabular set: 50% test accuracy with one mean and std, 91% with one per column).
#pragma once

#include <string>
#include <vector>

#include "common/spec.hpp"

namespace dlh {

// The statistics an import computes for samples of `shape`: one per element for a row of
// features (height 1), one per channel otherwise.
bool StatsPerElement(const Shape3& shape);

// `stats` (one value, one per channel or one per element of `shape`) for each of the
// sample's shape.elements() values, channel by channel. Throws DataError naming `what` for
// any other count.
std::vector<double> StatsPerValue(const std::vector<double>& stats, const Shape3& shape,
                                  const std::string& what);

// The loader's one float multiply-add per value, for each element j of a sample:
// a[j] = float(scale / std[j]), b[j] = float(-mean[j] / std[j]).
struct LoadTransform {
  std::vector<float> a, b;
  bool identity = true;  // every a 1 and b 0: values load as stored, and the pass is skipped
};
LoadTransform MakeLoadTransform(const std::vector<double>& mean, const std::vector<double>& stddev,
                                double scale, const Shape3& shape, const std::string& what);

// Refuses (DataError naming `what`) statistics that are empty, not finite, or whose std is not
// positive, and a mean and std of different counts.
void CheckStats(const std::vector<double>& mean, const std::vector<double>& stddev,
                const std::string& what);

// "0.2860" for one value; "3 per channel: 0.4914, 0.4822, 0.4465" or "7 per element:
// 0.01, ..., 5.2" (the first and last few of a long list) for more.
std::string StatsText(const std::vector<double>& stats, const Shape3& shape);

}  // namespace dlh
