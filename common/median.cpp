// DLH — the median of repeated measurements (see median.hpp).
#include "common/median.hpp"

#include <algorithm>

namespace dlh {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + long(mid), values.end());
  if (values.size() % 2) return values[mid];
  const double upper = values[mid];
  return (*std::max_element(values.begin(), values.begin() + long(mid)) + upper) / 2;
}

}  // namespace dlh
