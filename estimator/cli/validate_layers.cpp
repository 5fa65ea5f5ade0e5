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
  // [model][layer] -> the rounds' seconds (whole, forward); rounds interleaved across models.
  std::vector<std::map<int, std::vector<double>>> seconds(models.size()), forwards(models.size());
  std::vector<std::map<int, LayerTimingSample>> rows(models.size());
  for (int r = 0; r < rounds; ++r) {
    std::fprintf(stderr, "dlh-estimate: validate --layers: round %d of %d, %zu models\n", r + 1,
                 rounds, models.size());
    for (size_t k = 0; k < models.size(); ++k)
      for (const LayerTimingSample& s :
           LayerTimingSamples(models[k].spec, int(models[k].batch), threads, 5, 1)) {
        seconds[k][s.layer].push_back(s.seconds);
        forwards[k][s.layer].push_back(s.forward_seconds);
        rows[k][s.layer] = s;
      }
  }
  std::printf("%s\n", markdown ? "| model | batch | layers | largest cut error, step-time model | "
                                 "largest cut error, layer model | forward's share, measured | "
                                 "forward's share, by the FLOPs |\n|---|---|---|---|---|---|---|"
                               : Printf("%-28s %6s %6s %12s %12s %9s %9s",
                                        "model (not in the sweep)", "batch", "layers", "step model",
                                        "layer model", "fwd meas", "fwd FLOPs")
                                     .c_str());
  double sum_whole = 0, sum_layer = 0, off_flops = 0;
  int counted = 0;
  // The forward's share of the layers' time, in %; "-" where nothing says.
  auto share = [](double part, double all) {
    return all > 0 ? Printf("%.1f", 100 * part / all) : "-";
  };
  for (size_t k = 0; k < models.size(); ++k) {
    std::vector<double> measured, by_whole, by_layer;
    double fwd_measured = 0, flops_fwd = 0, flops_all = 0;
    for (const auto& [layer, times] : seconds[k]) {
      if (times.size() != size_t(rounds)) continue;  // a layer not timed every round
      const LayerTimingSample& s = rows[k].at(layer);
      measured.push_back(Median(times));
      by_whole.push_back(LayerSeconds(whole, s.features, s.batch, true));
      by_layer.push_back(LayerSeconds(c.layer_model, s.features, s.batch, true));
      fwd_measured += Median(forwards[k].at(layer));
      flops_fwd += s.features.flops_fwd();
      flops_all += s.features.flops_train();
    }
    if (measured.size() < 2) continue;  // no cut
    const double w = LargestCutError(by_whole, measured), l = LargestCutError(by_layer, measured);
    sum_whole += w, sum_layer += l, ++counted;
    double all_measured = 0;
    for (double v : measured) all_measured += v;
    if (all_measured > 0 && flops_all > 0)
      off_flops += std::fabs(flops_fwd / flops_all - fwd_measured / all_measured);
    std::printf(markdown ? "| %s | %lld | %zu | %.1f | %.1f | %s | %s |\n"
                         : "%-28s %6lld %6zu %12.1f %12.1f %9s %9s\n",
                models[k].spec.name.c_str(), static_cast<long long>(models[k].batch),
                measured.size(), w, l, share(fwd_measured, all_measured).c_str(),
                share(flops_fwd, flops_all).c_str());
  }
  if (counted == 0) throw Error("validate --layers: no model has two layers that run on their own");
  std::printf(
      "mean of the largest cut errors over %d models, in points of the step: step-time "
      "model %.1f, layer model %.1f (%d layers of the sweep, %.1f%% of their step each)\n",
      counted, sum_whole / counted, sum_layer / counted, c.layer_model.samples,
      c.layer_model.step_error);
  // A pipeline's backward runs each stage's forward again, priced at the forward's share of
  // the stage's FLOPs (pipeline_plan.cpp): how far that share is from the forwards timed.
  std::printf(
      "the forward's share of a model's layers by the FLOPs, mean error %.1f points of "
      "the measured share\n",
      100 * off_flops / counted);
  return 0;
}

}  // namespace dlh
