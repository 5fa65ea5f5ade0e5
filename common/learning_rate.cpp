// DLH — the learning rate a spec's optimizer and schedule give at each step (LearningRate,
// declared and specified in spec.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/spec.hpp"

namespace dlh {
namespace {

constexpr double kPi = 3.14159265358979323846;

}  // namespace

double LearningRate(const TrainSpec& spec, int64_t step, int64_t steps_per_epoch) {
  const OptimizerSpec& opt = spec.optimizer;
  const ScheduleSpec& sch = spec.schedule;
  const int64_t spe = std::max<int64_t>(1, steps_per_epoch);
  step = std::max<int64_t>(0, step);
  const int64_t total = int64_t(spec.epochs) * spe;
  const int64_t warmup = std::llround(sch.warmup_epochs * double(spe));
  if (step < warmup) return opt.lr * double(step + 1) / double(warmup);

  switch (sch.decay) {
    case ScheduleSpec::Decay::Constant:
      return opt.lr;
    case ScheduleSpec::Decay::Step: {
      const double period = sch.step_epochs * double(spe);
      if (!(period > 0)) return opt.lr;
      return opt.lr * std::pow(sch.gamma, std::floor(double(step) / period));
    }
    case ScheduleSpec::Decay::OneCycle: {
      auto anneal = [](double from, double to, double x) {
        return to + (from - to) * 0.5 * (1 + std::cos(kPi * x));
      };
      const double lo = opt.lr / sch.div_factor, end = lo / sch.final_div_factor;
      const double up = sch.pct_start * double(total) - 1, last = double(total) - 1;
      const double s = double(step);
      if (s <= up) return anneal(lo, opt.lr, up > 0 ? s / up : 1.0);
      if (!(last > up)) return end;
      return anneal(opt.lr, end, std::min(1.0, (s - up) / (last - up)));
    }
    case ScheduleSpec::Decay::Cosine: {
      const int64_t t = step - warmup;
      const int64_t T = std::max<int64_t>(1, total - warmup);
      const double frac = double(std::min(t, T)) / double(T);
      return sch.min_lr + (opt.lr - sch.min_lr) * 0.5 * (1 + std::cos(kPi * frac));
    }
  }
  return opt.lr;
}

}  // namespace dlh
