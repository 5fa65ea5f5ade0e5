// DLH — a data set's standardisation statistics (see input_stats.hpp).
#include "launcher/data/input_stats.hpp"

#include <cmath>
#include <cstdio>

#include "common/error.hpp"

namespace dlh {

bool StatsPerElement(const Shape3& shape) { return shape.height == 1; }

std::vector<double> StatsPerValue(const std::vector<double>& stats, const Shape3& shape,
                                  const std::string& what) {
  const size_t elements = size_t(shape.elements()), plane = elements / size_t(shape.channels);
  if (stats.size() == elements) return stats;
  std::vector<double> out(elements);
  if (stats.size() == 1) {
    out.assign(elements, stats[0]);
  } else if (stats.size() == size_t(shape.channels)) {
    for (size_t j = 0; j < elements; ++j) out[j] = stats[j / plane];
  } else {
    throw DataError(what + ": " + std::to_string(stats.size()) + " values, where samples of " +
                    std::to_string(shape.channels) + "x" + std::to_string(shape.height) + "x" +
                    std::to_string(shape.width) + " take 1, one per channel (" +
                    std::to_string(shape.channels) + ") or one per element (" +
                    std::to_string(elements) + ")");
  }
  return out;
}

LoadTransform MakeLoadTransform(const std::vector<double>& mean, const std::vector<double>& stddev,
                                double scale, const Shape3& shape, const std::string& what) {
  const std::vector<double> m = StatsPerValue(mean, shape, what + " mean"),
                            s = StatsPerValue(stddev, shape, what + " std");
  LoadTransform t;
  t.a.resize(m.size());
  t.b.resize(m.size());
  for (size_t j = 0; j < m.size(); ++j) {
    t.a[j] = float(scale / s[j]);
    t.b[j] = float(-m[j] / s[j]);
    t.identity = t.identity && t.a[j] == 1.0f && t.b[j] == 0.0f;
  }
  return t;
}

void CheckStats(const std::vector<double>& mean, const std::vector<double>& stddev,
                const std::string& what) {
  if (mean.empty() || mean.size() != stddev.size())
    throw DataError(what + ": " + std::to_string(mean.size()) + " means and " +
                    std::to_string(stddev.size()) + " stds (one std for each mean)");
  for (size_t i = 0; i < mean.size(); ++i)
    if (!std::isfinite(mean[i]) || !std::isfinite(stddev[i]) || !(stddev[i] > 0))
      throw DataError(what + ": mean " + std::to_string(mean[i]) + ", std " +
                      std::to_string(stddev[i]) +
                      (mean.size() > 1 ? " at value " + std::to_string(i) : "") +
                      " (std must be positive, both finite)");
}

std::string StatsText(const std::vector<double>& stats, const Shape3& shape) {
  auto number = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return std::string(buf);
  };
  if (stats.size() == 1) return number(stats[0]);
  std::string out = std::to_string(stats.size()) +
                    (stats.size() == size_t(shape.channels) ? " per channel: " : " per element: ");
  const size_t shown = 3, n = stats.size();
  for (size_t i = 0; i < n; ++i) {
    if (n > 2 * shown && i >= shown && i < n - shown) {
      if (i == shown) out += ", ...";
      continue;
    }
    out += (i ? ", " : "") + number(stats[i]);
  }
  return out;
}

}  // namespace dlh
