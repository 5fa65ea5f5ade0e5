// DLH — `dlh-estimate validate --layers` (validate_layers.hpp).
#include "estimator/cli/validate_layers.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "common/error.hpp"
#include "common/median.hpp"
#include "estimator/calibrate/calibrate_profile.hpp"
#include "estimator/cli/command_line.hpp"
#include "estimator/model/layer_time_model.hpp"

namespace dlh {

using cli::Printf;

int ValidateLayers(const Calibration& c, const std::vector<SweepEntry>& models, int threads,
                   int rounds, bool markdown) {
  if (c.device != "cpu")
    throw UsageError("validate --layers: a CPU calibration only (this one is " + c.device + "'s)");
  if (c.layer_model.empty())
    throw UsageError(
        "validate --layers: the calibration has no layer model (made before it: "
        "dlh-estimate calibrate)");
  if (rounds < 1 || rounds > 1000) throw UsageError("--rounds: must be in [1, 1000]");
  // The step-time model's own division: its terms, less the step's overhead and the update.
  LayerTimeModel whole;
  whole.coef = c.model.coef;
  // [model][layer] -> the rounds' seconds; rounds interleaved across the models.
  std::vector<std::map<int, std::vector<double>>> seconds(models.size());
  std::vector<std::map<int, LayerTimingSample>> rows(models.size());
  for (int r = 0; r < rounds; ++r) {
    std::fprintf(stderr, "dlh-estimate: validate --layers: round %d of %d, %zu models\n", r + 1,
                 rounds, models.size());
    for (size_t k = 0; k < models.size(); ++k)
      for (const LayerTimingSample& s :
           LayerTimingSamples(models[k].spec, int(models[k].batch), threads, 5, 1)) {
        seconds[k][s.layer].push_back(s.seconds);
        rows[k][s.layer] = s;
      }
  }
  std::printf("%s\n", markdown ? "| model | batch | layers | largest cut error, step-time model | "
                                 "largest cut error, layer model |\n|---|---|---|---|---|"
                               : Printf("%-28s %6s %6s %12s %12s", "model (not in the sweep)",
                                        "batch", "layers", "step model", "layer model")
                                     .c_str());
  double sum_whole = 0, sum_layer = 0;
  int counted = 0;
  for (size_t k = 0; k < models.size(); ++k) {
    std::vector<double> measured, by_whole, by_layer;
    for (const auto& [layer, times] : seconds[k]) {
      if (times.size() != size_t(rounds)) continue;  // a layer not timed every round
      const LayerTimingSample& s = rows[k].at(layer);
      measured.push_back(Median(times));
      by_whole.push_back(LayerSeconds(whole, s.features, s.batch, true));
      by_layer.push_back(LayerSeconds(c.layer_model, s.features, s.batch, true));
    }
    if (measured.size() < 2) continue;  // no cut
    const double w = LargestCutError(by_whole, measured), l = LargestCutError(by_layer, measured);
    sum_whole += w, sum_layer += l, ++counted;
    std::printf(
        markdown ? "| %s | %lld | %zu | %.1f | %.1f |\n" : "%-28s %6lld %6zu %12.1f %12.1f\n",
        models[k].spec.name.c_str(), static_cast<long long>(models[k].batch), measured.size(), w,
        l);
  }
  if (counted == 0) throw Error("validate --layers: no model has two layers that run on their own");
  std::printf(
      "mean of the largest cut errors over %d models, in points of the step: step-time "
      "model %.1f, layer model %.1f (%d layers of the sweep, %.1f%% of their step each)\n",
      counted, sum_whole / counted, sum_layer / counted, c.layer_model.samples,
      c.layer_model.step_error);
  return 0;
}

}  // namespace dlh
