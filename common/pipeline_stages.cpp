// DLH — a pipeline's stage boundaries (pipeline_stages.hpp).
#include "common/pipeline_stages.hpp"

#include <algorithm>
#include <limits>

namespace dlh {
namespace {

double PathWork(const std::vector<LayerSpec>& layers, const std::vector<Shape3>& shapes) {
  double work = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    const Shape3 &in = shapes[i], &out = shapes[i + 1];
    switch (l.kind) {
      case LayerKind::Conv2d:
        work += double(out.elements()) * in.channels * l.kernel * l.kernel;
        break;
      case LayerKind::Dense:
        work += double(in.elements()) * l.units;
        break;
      case LayerKind::Residual:
        work += PathWork(l.layers, PathShapes(l.layers, in, "", "")) + double(out.elements());
        if (!l.shortcut.empty()) work += PathWork(l.shortcut, PathShapes(l.shortcut, in, "", ""));
        break;
      default:
        work += double(out.elements());
    }
  }
  return work;
}

}  // namespace

std::vector<double> LayerWork(const TrainSpec& spec) {
  const std::vector<Shape3> shapes = LayerShapes(spec);
  std::vector<double> work;
  for (size_t i = 0; i < spec.layers.size(); ++i)
    work.push_back(PathWork({spec.layers[i]}, {shapes[i], shapes[i + 1]}));
  return work;
}

std::vector<size_t> StageBounds(const TrainSpec& spec, int stages) {
  const std::vector<double> work = LayerWork(spec);
  const size_t n = work.size(), p = size_t(stages);
  std::vector<double> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + work[i];
  // best[s][i]: the least largest stage over layers [0, i) in s stages; cut[s][i] the start of
  // the last of them. Networks have tens of layers: the cubic search is instant.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(p + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> cut(p + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (size_t s = 1; s <= p; ++s)
    for (size_t i = s; i <= n; ++i)
      for (size_t j = s - 1; j < i; ++j) {
        const double v = std::max(best[s - 1][j], prefix[i] - prefix[j]);
        if (v < best[s][i]) {
          best[s][i] = v;
          cut[s][i] = j;
        }
      }
  std::vector<size_t> bounds(p + 1, n);
  for (size_t s = p, i = n; s > 0; --s) {
    bounds[s] = i;
    i = cut[s][i];
    bounds[s - 1] = i;
  }
  return bounds;
}

}  // namespace dlh
