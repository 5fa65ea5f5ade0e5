// The prediction band and the time limit made from it (estimator/model/prediction_band.hpp).
#include "estimator/model/prediction_band.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace dlh {
namespace {

// A job of `seconds`, nearly all of it steps, with a short start-up and checkpoint.
JobPhases Job(double seconds) {
  JobPhases p;
  p.startup_s = std::min(2.0, 0.05 * seconds);
  p.checkpoint_s = 0.01 * seconds;
  p.steps_s = seconds - p.startup_s - p.checkpoint_s;
  p.stop_s = 1;
  return p;
}

TEST(PredictionBand, UpperEndIsThePredictionAtSigmaZero) {
  JobPhases p;
  p.steps_s = 100;
  EXPECT_DOUBLE_EQ(UpperEnd(p, 0), 100);
  // Start-up and I/O keep their own uncertainty even when the step's is 0.
  p.startup_s = 10;
  EXPECT_GT(UpperEnd(p, 0), 110);
}

TEST(PredictionBand, OnePartIsItsOwnNinetyPercentQuantile) {
  JobPhases p;
  p.steps_s = 100;
  EXPECT_NEAR(UpperEnd(p, 0.1), 100 * std::exp(1.2816 * 0.1), 1e-9);
  EXPECT_NEAR(UpperEnd(p, 0.25), 100 * std::exp(1.2816 * 0.25), 1e-9);
  // Warm-up and evaluations run at the step's speed: the same factor.
  p.warmup_s = 5;
  p.eval_s = 15;
  EXPECT_NEAR(UpperEnd(p, 0.1), 120 * std::exp(1.2816 * 0.1), 1e-9);
}

TEST(PredictionBand, UpperEndGrowsWithSigma) {
  const JobPhases p = Job(300);
  double last = UpperEnd(p, 0);
  for (double sigma : {0.02, 0.05, 0.1, 0.2, 0.4, 0.8}) {
    const double upper = UpperEnd(p, sigma);
    EXPECT_GT(upper, last) << sigma;
    last = upper;
  }
}

TEST(PredictionBand, PartsAddInQuadrature) {
  JobPhases p;
  p.steps_s = 100;
  p.startup_s = 10;
  p.data_s = 4;
  const double step = 100 * std::expm1(kBandZ * 0.1);
  const double start = 10 * std::expm1(kBandZ * kStartupLogSigma);
  const double io = 4 * std::expm1(kBandZ * kIoLogSigma);
  const double upper = UpperEnd(p, 0.1);
  EXPECT_NEAR(upper, 114 + std::sqrt(step * step + start * start + io * io), 1e-9);
  // Between the largest part's excess and the sum of them all.
  EXPECT_GT(upper, 114 + std::max({step, start, io}));
  EXPECT_LT(upper, 114 + step + start + io);
}

TEST(PredictionBand, LimitRules) {
  // 30 s: one minute, the least Slurm takes.
  const JobPhases short_job = Job(30);
  const TimeLimit a = TimeLimitFor(short_job, UpperEnd(short_job, 0.1), false);
  EXPECT_EQ(a.minutes, 1);
  EXPECT_EQ(a.signal_lead_s, 0);
  // 5 min with sigma 0.1: upper 5m41s, + 5% room: 6 minutes, 1.2x the job, not 5m + 3 min.
  const JobPhases five = Job(300);
  const double upper5 = UpperEnd(five, 0.1);
  const TimeLimit b = TimeLimitFor(five, upper5, false);
  EXPECT_EQ(b.minutes, 6);
  EXPECT_GE(b.seconds(), upper5 + kMinRoomSeconds);
  EXPECT_LE(b.seconds(), 1.5 * 300);
  // 3 h: the room grows with the job (5% of the upper end), to whole minutes.
  const JobPhases three = Job(3 * 3600);
  const double upper3 = UpperEnd(three, 0.1);
  const TimeLimit c = TimeLimitFor(three, upper3, false);
  EXPECT_EQ(c.minutes, long(std::ceil(upper3 * 1.05 / 60)));
  EXPECT_LE(c.seconds(), 1.5 * 3 * 3600);
  EXPECT_GE(c.seconds(), upper3 * 1.05);
  // Exact minutes do not round up; nonsense gives the least.
  JobPhases exact;
  exact.steps_s = 60 / 1.05 * 10;
  EXPECT_EQ(TimeLimitFor(exact, exact.steps_s, false).minutes, 10);
  JobPhases none;
  EXPECT_EQ(TimeLimitFor(none, 0, false).minutes, 1);
  EXPECT_EQ(TimeLimitFor(none, std::nan(""), false).minutes, 1);
}

TEST(PredictionBand, NoJobOfTwoMinutesOrMoreGetsOverOneAndAHalfTimes) {
  // With the spread of an own calibration (sigma up to 0.15) and no signal: a job that ends
  // anywhere in its band, down to its lower end (as far below the prediction as the upper
  // end is above it), gets at most 1.5x its time.
  for (double seconds = 121; seconds < 48 * 3600; seconds *= 1.01) {
    const JobPhases p = Job(seconds);
    for (double sigma : {0.0, 0.05, 0.1, 0.15}) {
      const double upper = UpperEnd(p, sigma), lower = seconds * seconds / upper;
      // A band wider than 1.5x leaves nothing to cap: whole minutes cannot fit between.
      if (std::floor(1.5 * lower / 60) * 60 < upper) continue;
      const TimeLimit t = TimeLimitFor(p, upper, false);
      EXPECT_LE(t.seconds(), 1.5 * lower) << seconds << " s, sigma " << sigma;
      EXPECT_GE(t.seconds(), upper) << seconds << " s, sigma " << sigma;
    }
  }
  // The bench's cnn-1x2-long (run 2026-11-30T1714Z): predicted 160.1 s, 90% <= 170.7 s; it
  // took 157.0 s. 4:00 was 1.5x the prediction and 1.53x the job; 3:00 holds the band.
  JobPhases long_job;
  long_job.steps_s = 160.1;
  EXPECT_EQ(TimeLimitFor(long_job, 170.7, false).minutes, 3);
}

TEST(PredictionBand, AWideBandLosesItsRoomBeforeAMinute) {
  // The bench's strided-2x1-long (run 2026-12-02T1040Z): predicted 183.5 s, 90% <= 226.2 s,
  // it took 185.8 s. No minute is 1.5x the band's lower end; the room (15 s) took the limit
  // past 4:00 to 5:00 (1.61x the job). 4:00 holds the band and is the likelier to hold the
  // job within 1.5x.
  JobPhases strided;
  strided.steps_s = 183.5;
  EXPECT_EQ(TimeLimitFor(strided, 226.2, false).minutes, 4);
  // With a signal the room stays: it keeps a job inside its band from being signalled.
  EXPECT_GE(TimeLimitFor(strided, 226.2, true).seconds(), 226.2 + kSignalEarlySeconds);
  // Every limit still holds the band's upper end, and a job of 5 minutes or more (its room
  // 5% of it) that no minute caps at 1.5x keeps its whole room.
  for (double seconds = 121; seconds < 48 * 3600; seconds *= 1.01)
    for (double sigma : {0.0, 0.1, 0.2, 0.4}) {
      const JobPhases p = Job(seconds);
      const double upper = UpperEnd(p, sigma);
      const TimeLimit t = TimeLimitFor(p, upper, false);
      EXPECT_GE(t.seconds(), upper) << seconds << " s, sigma " << sigma;
      const double lower = seconds * seconds / upper;
      const bool capped = std::floor(1.5 * lower / 60) * 60 >= upper;
      if (!capped && kRoomFraction * upper >= kMinRoomSeconds) {
        EXPECT_GE(t.seconds(), upper * (1 + kRoomFraction)) << seconds << " s, sigma " << sigma;
      }
    }
}

TEST(PredictionBand, ASignalComesOnlyAfterTheUpperEnd) {
  // The example job script asks SIGUSR1 before the limit to checkpoint and requeue: the
  // limit leaves the stop's time and Slurm's early minute after the band's upper end.
  for (double seconds : {30.0, 112.0, 300.0, 3600.0, 3 * 3600.0}) {
    JobPhases p = Job(seconds);
    p.stop_s = 20;
    const double upper = UpperEnd(p, 0.1);
    const TimeLimit t = TimeLimitFor(p, upper, true);
    ASSERT_GT(t.signal_lead_s, 0) << seconds;
    // The earliest the signal can come is still after the upper end...
    EXPECT_GE(t.seconds() - t.signal_lead_s - kSignalEarlySeconds, upper - 1) << seconds;
    // ...and as late as leaves the stop and its slack before the limit.
    EXPECT_EQ(t.signal_lead_s, 30) << seconds;
    // Never shorter than without a signal.
    EXPECT_GE(t.minutes, TimeLimitFor(p, upper, false).minutes) << seconds;
  }
  // A band wider than 1.5x the job keeps its limit: the job may need it.
  const JobPhases wide = Job(600);
  EXPECT_GT(TimeLimitFor(wide, UpperEnd(wide, 0.5), false).seconds(), 1.5 * 600);
  // A job long enough: the room with a signal is still within 1.5x.
  const JobPhases p = Job(600);
  EXPECT_LE(TimeLimitFor(p, UpperEnd(p, 0.1), true).seconds(), 1.5 * 600);
}

TEST(PredictionBand, Texts) {
  EXPECT_EQ(SlurmMinutes(1), "00:01:00");
  EXPECT_EQ(SlurmMinutes(23 * 60 + 59), "23:59:00");
  EXPECT_EQ(SlurmMinutes(24 * 60), "1-00:00:00");
  EXPECT_EQ(SlurmMinutes(2 * 24 * 60 + 62), "2-01:02:00");
  EXPECT_EQ(BandText(112, 140), "1m52s (90% <= 2m20s)");
  EXPECT_EQ(BandText(112, 0), "1m52s");
  EXPECT_EQ(SpreadText(0), "");
  EXPECT_EQ(SpreadText(0.1), ", 90% <= +14%");
}

}  // namespace
}  // namespace dlh
