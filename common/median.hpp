// DLH — the median of repeated measurements, the one summary every timer here reports.
#pragma once

#include <vector>

namespace dlh {

// The median of `values` (the mean of the two middle ones for an even count); 0 for none.
double Median(std::vector<double> values);

}  // namespace dlh
