// DLH estimator — the prediction band and the time limit (see prediction_band.hpp).
#include "estimator/model/prediction_band.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/duration.hpp"

namespace dlh {

namespace {

// The excess of a part predicted at `t` at its 90% upper end.
double Excess(double t, double sigma) {
  if (!(t > 0) || !(sigma > 0)) return 0;
  return t * std::expm1(kBandZ * sigma);
}

}  // namespace

double UpperEnd(const JobPhases& p, double step_log_sigma) {
  const double total = p.total_s();
  if (!std::isfinite(total)) return total;
  const double step = Excess(p.warmup_s + p.steps_s + p.eval_s, step_log_sigma);
  const double startup = Excess(p.startup_s, kStartupLogSigma);
  const double io = Excess(p.stage_s + p.data_s + p.checkpoint_s, kIoLogSigma);
  return total + std::sqrt(step * step + startup * startup + io * io);
}

TimeLimit TimeLimitFor(const JobPhases& p, double upper_s, bool signal) {
  const double upper = std::max({0.0, p.total_s(), upper_s});
  double need = upper + std::max(kMinRoomSeconds, kRoomFraction * upper);
  if (signal)
    need =
        std::max(need, upper + std::max(0.0, p.stop_s) + kStopSlackSeconds + kSignalEarlySeconds);
  TimeLimit t;
  // The tolerance keeps exact multiples of a minute from rounding up.
  double minutes = std::ceil(need / 60 - 1e-9);
  // A job over two minutes gets at most 1.5x its time where the band allows it: the room
  // shrinks, never below the band's upper end. Its time, not its prediction: a job may end
  // anywhere in its band, so the cap is 1.5x the band's lower end, as far below the
  // prediction (in ratio) as the upper end is above it (whole jobs, BENCHMARKS.md, run
  // 2026-11-30T1714Z: cnn-1x2-long predicted 160.1 s, 4:00 = 1.5x that, took 157.0 s: 1.53x).
  // Not with a signal: its room is what keeps a job inside its band from being signalled.
  const double total = p.total_s();
  if (!signal && total > kSqueezeAboveSeconds) {
    const double lower = upper > total ? total * total / upper : total;
    const double cap = std::floor(kMostOfPrediction * lower / 60 + 1e-9);
    if (cap < minutes && cap * 60 >= upper) minutes = cap;
  }
  const double most = 100 * 365.0 * 24 * 60;
  if (!(minutes <= most)) minutes = most;  // also NaN
  t.minutes = std::max(1L, long(minutes));
  if (signal) {
    // As late as the stop allows: what the rounding up to a minute added stays before the
    // signal, where a job a little past its band can still finish without a requeue.
    const double lead = std::ceil(std::max(0.0, p.stop_s) + kStopSlackSeconds);
    t.signal_lead_s = int(std::min<double>(kMaxSignalLead, std::max(1.0, lead)));
  }
  return t;
}

std::string SlurmMinutes(long minutes) {
  minutes = std::max(0L, minutes);
  const long d = minutes / (24 * 60), h = (minutes / 60) % 24, m = minutes % 60;
  char buf[48];
  if (d > 0)
    std::snprintf(buf, sizeof buf, "%ld-%02ld:%02ld:00", d, h, m);
  else
    std::snprintf(buf, sizeof buf, "%02ld:%02ld:00", h, m);
  return buf;
}

std::string BandText(double total_s, double upper_s) {
  std::string s = HumanDuration(total_s);
  if (upper_s > total_s && std::isfinite(upper_s)) s += " (90% <= " + HumanDuration(upper_s) + ")";
  return s;
}

std::string SpreadText(double log_sigma) {
  if (!(log_sigma > 0) || !std::isfinite(log_sigma)) return "";
  char buf[48];
  std::snprintf(buf, sizeof buf, ", 90%% <= +%.0f%%", 100 * std::expm1(kBandZ * log_sigma));
  return buf;
}

}  // namespace dlh
