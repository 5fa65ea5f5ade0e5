// DLH — the picture of a learning-rate range test: loss against log10(lr) as a plain SVG
// file (any browser shows it; no plotting library needed).
#pragma once

#include <string>
#include <vector>

#include "launcher/train/lr_fit.hpp"

namespace dlh {

// Raw losses (grey), the smoothed loss (blue), the fitted polynomial (orange, over the
// fitted rates), the suggested interval (shaded) and rate (green line). Non-finite losses
// are left out; the loss axis stops at 4x the best smoothed loss so a blow-up does not
// flatten the rest. `title` is escaped.
std::string LrPlotSvg(const std::vector<LrPoint>& points, const LrSuggestion& suggestion,
                      const std::string& title);

}  // namespace dlh
