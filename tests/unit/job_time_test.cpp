// The whole-job time model (estimator/model/job_time.hpp): each phase against a hand computation.
#include "estimator/model/job_time.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "common/spec.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/time_model.hpp"

namespace dlh {
namespace {

TEST(JobTime, WorkCountsTheDataSetAndTheCheckpoint) {
  ModelFeatures f;
  f.input_elements = 784;
  f.params = 1000;
  const JobWork w = WorkOf(f, 60000, 10000, 8, 1);
  EXPECT_DOUBLE_EQ(w.data_bytes, 70000.0 * 785);
  EXPECT_DOUBLE_EQ(w.checkpoint_bytes, 4.0 * 1000 * 2);  // parameters and momentum
  EXPECT_EQ(w.eval_samples, 10000);
  EXPECT_EQ(WorkOf(f, 600, -5, 1, 0).eval_samples, 0);  // negative: none
}

TEST(JobTime, PhasesAddUpByHand) {
  JobWork w;
  w.samples = 60000;
  w.eval_samples = 10000;
  w.epochs = 2;
  w.data_bytes = 1e9;
  w.checkpoint_bytes = 5e8;
  w.forward_fraction = 0.25;
  StepShape s;
  s.steps = 1000;
  s.step_s = 2.0;  // 2000 s of steps: one checkpoint at 30 min besides the two epochs'
  s.gpus = 3;
  s.per_sample_s = 0.001;
  s.fixed_s = 0.01;
  Runtime rt;
  rt.read_gbs = 2;
  rt.write_gbs = 0.5;
  const JobPhases p = PredictJobPhases(w, s, rt, 7);
  EXPECT_DOUBLE_EQ(p.startup_s, 7);
  EXPECT_DOUBLE_EQ(p.data_s, 0.5);
  EXPECT_DOUBLE_EQ(p.warmup_s, kWarmupSteps * 2.0);
  EXPECT_DOUBLE_EQ(p.steps_s, 2000);
  // The slowest rank evaluates ceil(10000 / 3) = 3334 samples in 14 chunks of <= 256.
  EXPECT_EQ(p.evaluations, 2);
  EXPECT_NEAR(p.eval_s, 2 * 0.25 * (3334 * 0.001 + 14 * 0.01), 1e-12);
  EXPECT_EQ(p.checkpoints, 3);
  // The last is written whole (1 s at 0.5 GB/s), the two before it in the background: their
  // snapshots only, as the 667 s between checkpoints outlast a write.
  EXPECT_NEAR(p.checkpoint_s, kCheckpointFixedSeconds + 1.0 + 2 * 5e8 / (kSnapshotGbs * 1e9),
              1e-12);
  EXPECT_NEAR(p.total_s(), 7 + 0.5 + 6 + 2000 + p.eval_s + p.checkpoint_s, 1e-9);
  const std::string text = PhasesText(p, s.steps);
  EXPECT_NE(text.find("start-up 7s"), std::string::npos) << text;
  EXPECT_NE(text.find("1000 steps 33m20s"), std::string::npos) << text;
  EXPECT_NE(text.find("2 evaluations"), std::string::npos) << text;
  EXPECT_NE(text.find("3 checkpoints"), std::string::npos) << text;

  w.eval_samples = 0;  // eval-samples=0: no evaluation, and the text leaves it out
  const JobPhases none = PredictJobPhases(w, s, rt, 0);
  EXPECT_EQ(none.eval_s, 0);
  EXPECT_EQ(PhasesText(none, s.steps).find("evaluation"), std::string::npos);
  EXPECT_EQ(PhasesText(none, s.steps).find("start-up"), std::string::npos);
}

// A job that stages its data set: every node copies it (stage_gbs) and reads the copy back,
// then the ranks read it locally (local_read_gbs) instead of from the shared file system.
TEST(JobTime, StagingCountsTheCopyAndReadsLocally) {
  JobWork w;
  w.samples = 1000;
  w.epochs = 1;
  w.data_bytes = 2e9;
  StepShape s;
  s.steps = 10;
  s.step_s = 1.0;
  s.gpus = 1;
  Runtime rt;
  rt.read_gbs = 1;
  rt.stage_gbs = 0.5;
  rt.local_read_gbs = 2;
  const JobPhases shared = PredictJobPhases(w, s, rt, 0);
  EXPECT_DOUBLE_EQ(shared.stage_s, 0);
  EXPECT_DOUBLE_EQ(shared.data_s, 2);
  w.staged = true;
  const JobPhases staged = PredictJobPhases(w, s, rt, 0);
  EXPECT_DOUBLE_EQ(staged.stage_s, 2e9 / 0.5e9 + 2e9 / 2e9);
  EXPECT_DOUBLE_EQ(staged.data_s, 1);
  EXPECT_NEAR(staged.total_s() - shared.total_s(), 5 + 1 - 2, 1e-12);
  EXPECT_NE(PhasesText(staged, s.steps).find("staging 5s + data 1s"), std::string::npos)
      << PhasesText(staged, s.steps);
}

// Checkpoints closer together than one write takes: each background one also waits for the
// rest of the write before it.
TEST(JobTime, ABackgroundCheckpointWaitsForAWriteLongerThanTheInterval) {
  JobWork w;
  w.samples = 1000;
  w.epochs = 2;
  w.checkpoint_bytes = 5e9;  // 10 s at 0.5 GB/s
  StepShape s;
  s.steps = 10;
  s.step_s = 1.0;  // 10 s of steps: the two epochs' checkpoints 5 s apart
  s.gpus = 1;
  Runtime rt;
  rt.write_gbs = 0.5;
  const JobPhases p = PredictJobPhases(w, s, rt, 0);
  ASSERT_EQ(p.checkpoints, 2);
  const double write_s = kCheckpointFixedSeconds + 10;
  EXPECT_NEAR(p.checkpoint_s, write_s + 5e9 / (kSnapshotGbs * 1e9) + (write_s - 5), 1e-9);
}

TEST(JobTime, RanksSharingCores) {
  // Without a probe: the measured default, (from / to)^0.88 per sample.
  const double doubling = std::pow(2.0, kThreadScalingExponent);
  EXPECT_NEAR(doubling, 1.84, 0.01);
  // Calibrated with 2 threads on 2 cores: one rank runs as calibrated.
  CpuShare one = CpuRankShare(2, 2, 1);
  EXPECT_DOUBLE_EQ(one.per_sample, 1);
  EXPECT_DOUBLE_EQ(one.fixed, 1);
  // Two ranks: one thread each, not half the speed per sample (the measured 1.84x), no
  // oversubscription.
  CpuShare two = CpuRankShare(2, 2, 2);
  EXPECT_DOUBLE_EQ(two.per_sample, doubling);
  EXPECT_LT(two.per_sample, 2);
  EXPECT_DOUBLE_EQ(two.fixed, 1);
  // Four ranks on two cores: one thread each, taking turns (twice the compute), and a wait
  // in every step's allreduce for the peers not running.
  CpuShare four = CpuRankShare(2, 2, 4);
  EXPECT_DOUBLE_EQ(four.per_sample, doubling * 2);
  EXPECT_DOUBLE_EQ(four.fixed, 2);
  EXPECT_DOUBLE_EQ(four.wait_s, kOversubscribedWaitS);
  EXPECT_DOUBLE_EQ(CpuRankShare(2, 2, 8).wait_s, 3 * kOversubscribedWaitS);
  EXPECT_DOUBLE_EQ(two.wait_s, 0);
  // The job's own thread count (OPENBLAS_NUM_THREADS): one rank of 1 thread on 2 cores runs
  // as two ranks do, without their contention; one of 4 threads oversubscribes the 2 cores.
  const CpuShare single = CpuRankShare(2, 2, 1, {}, 1);
  EXPECT_DOUBLE_EQ(single.per_sample, doubling);
  EXPECT_DOUBLE_EQ(single.fixed, 1);
  const CpuShare crowded = CpuRankShare(2, 2, 1, {}, 4);
  EXPECT_DOUBLE_EQ(crowded.fixed, 2);
  EXPECT_DOUBLE_EQ(crowded.wait_s, kOversubscribedWaitS);
  EXPECT_DOUBLE_EQ(CpuRankShare(2, 2, 2, {}, 1).per_sample, two.per_sample);
  // A 16-core node with 4 ranks: 4 threads each, faster per sample than a 2-thread
  // calibration, by less than the threads' ratio.
  EXPECT_DOUBLE_EQ(CpuRankShare(2, 16, 4).per_sample, 1 / doubling);
  // Not a CPU calibration, or nothing known: no change.
  EXPECT_DOUBLE_EQ(CpuRankShare(0, 2, 4).per_sample, 1);
  EXPECT_DOUBLE_EQ(CpuRankShare(2, 0, 4).fixed, 1);
  // Measured side by side (the observation store): that count, and any larger count
  // carries the largest measured one of 2 or more; 1 rank alone carries only its own.
  ThreadScaling learned;
  learned.learned_log_by_ranks = {{1, std::log(1.1)}, {2, std::log(1.5)}};
  EXPECT_DOUBLE_EQ(CpuRankShare(2, 2, 2, learned).per_sample, two.per_sample * 1.5);
  EXPECT_DOUBLE_EQ(CpuRankShare(2, 2, 4, learned).fixed, four.fixed * 1.5);
  EXPECT_DOUBLE_EQ(CpuRankShare(2, 2, 1, learned).per_sample, one.per_sample * 1.1);
  learned.learned_log_by_ranks = {{1, std::log(1.1)}};
  EXPECT_DOUBLE_EQ(CpuRankShare(2, 2, 2, learned).per_sample, two.per_sample);
}

TEST(JobTime, RanksSharingCoresByTheProbe) {
  // A probe of a 4-core host: sgemm scales well, memory bandwidth hardly.
  ThreadScaling probe;
  probe.gflops = {100, 190, 270, 340};
  probe.gbs = {30, 36, 38, 39};
  probe.compute_fraction = 1;  // all GEMM
  // Calibrated at 4 threads, a rank with 1 thread: 340 / 100 slower per sample, not 4x.
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(probe, 4, 1), 3.4);
  EXPECT_DOUBLE_EQ(CpuRankShare(4, 4, 4, probe).per_sample, 3.4);
  EXPECT_DOUBLE_EQ(CpuRankShare(4, 4, 2, probe).per_sample, 340.0 / 190);
  // Half the time in memory passes: alone, those slow down by the bandwidth's ratio only...
  probe.compute_fraction = 0.5;
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(probe, 4, 1), 0.5 * 3.4 + 0.5 * 39.0 / 30);
  // ...and 4 ranks of a thread each share the bandwidth of 4 threads: 39 / 4 GB/s each.
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(probe, 4, 1, 4), 0.5 * 3.4 + 0.5 * 4);
  EXPECT_DOUBLE_EQ(CpuRankShare(4, 4, 4, probe).per_sample, 0.5 * 3.4 + 0.5 * 4);
  EXPECT_DOUBLE_EQ(CpuRankShare(4, 4, 2, probe).per_sample,
                   0.5 * 340 / 190 + 0.5 * 39 / (39.0 / 2));
  // The other way round (a rank with more threads than the calibration): faster.
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(probe, 1, 4), 0.5 * 100.0 / 340 + 0.5 * 30.0 / 39);
  // Beyond the probe's counts: sgemm grown in proportion (8 threads: 2 x 4's), bandwidth
  // saturated at its last.
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(probe, 8, 4), 0.5 * 2 + 0.5 * 1);
  // Oversubscribed (8 ranks on 4 cores, a thread each): 4 run at once, taking turns.
  EXPECT_DOUBLE_EQ(CpuRankShare(4, 4, 8, probe).per_sample, (0.5 * 3.4 + 0.5 * 4) * 2);
  // Only sgemm measured: all of it at that rate, whatever the fraction.
  ThreadScaling flops_only;
  flops_only.gflops = {100, 190};
  flops_only.compute_fraction = 0.3;
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(flops_only, 2, 1), 1.9);
  // A reading above linear scaling is a noisy probe: clamped to linear, both ways.
  ThreadScaling noisy;
  noisy.gflops = {16.6, 42.4};
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(noisy, 2, 1), 2.0);
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(noisy, 1, 2), 0.5);
  // A damaged curve (a zero) is no measurement: the default.
  ThreadScaling bad;
  bad.gflops = {100, 0};
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(bad, 2, 1), std::pow(2.0, kThreadScalingExponent));
  // Same count, or nonsense counts: no change.
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(probe, 3, 3), 1);
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(probe, 0, 3), 1);
}

// The calibration timed whole steps at 1 and 2 threads (Calibration::thread_scaling): a rank
// with 1 thread goes by that ratio, not by the curves, which say almost 2x for GEMMs.
TEST(JobTime, RanksSharingCoresByTheMeasuredStep) {
  ThreadScaling scaling;
  scaling.gflops = {112, 223};
  scaling.gbs = {45, 99};
  scaling.compute_fraction = 0.8;
  const double curves = ThreadTimeRatio(scaling, 2, 1);
  EXPECT_NEAR(curves, 0.8 * 223 / 112 + 0.2 * 99 / 45, 1e-12);
  scaling.measured_step_ratio = {{1, 1.68}, {2, 1}};
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(scaling, 2, 1), 1.68);
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(scaling, 1, 2), 1 / 1.68);
  // Side by side, the ranks add what the curves say sharing adds over one rank alone: here
  // memory at 99 / 2 GB/s each instead of 45 alone, a little faster, so nothing (a
  // neighbour never speeds a rank up).
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(scaling, 2, 1, 2), 1.68);
  EXPECT_DOUBLE_EQ(CpuRankShare(2, 2, 2, scaling).per_sample, 1.68);
  EXPECT_DOUBLE_EQ(CpuRankShare(2, 2, 2, scaling).fixed, 1);
  // Where bandwidth saturates (45 GB/s at 1 thread, 54 at 2), 2 ranks of a thread each get 27
  // GB/s, not 45: the memory part costs 45 / 27 over alone, on top of the measured ratio.
  scaling.gbs = {45, 54};
  const double alone = 0.8 * 223 / 112 + 0.2 * 54 / 45;
  const double shared = 0.8 * 223 / 112 + 0.2 * 54 / 27.0;
  EXPECT_NEAR(ThreadTimeRatio(scaling, 2, 1, 2), 1.68 * shared / alone, 1e-12);
  // Oversubscribed (4 ranks on 2 cores, a thread each): 2 run at once, taking turns.
  EXPECT_NEAR(CpuRankShare(2, 2, 4, scaling).per_sample, 2 * 1.68 * shared / alone, 1e-12);
  // A count it did not time: the curves.
  ThreadScaling curves_only = scaling;
  curves_only.measured_step_ratio.clear();
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(scaling, 2, 4), ThreadTimeRatio(curves_only, 2, 4));
}

TEST(JobTime, StopCostsAStepAndOneWholeCheckpoint) {
  JobWork w;
  w.samples = 1000;
  w.epochs = 1;
  w.checkpoint_bytes = 1e9;
  StepShape s;
  s.steps = 10;
  s.step_s = 0.5;
  s.gpus = 1;
  Runtime rt;
  rt.write_gbs = 0.5;
  const JobPhases p = PredictJobPhases(w, s, rt, 0);
  EXPECT_NEAR(p.stop_s, 0.5 + kCheckpointFixedSeconds + 2, 1e-9);
  EXPECT_NEAR(
      p.total_s(),
      p.startup_s + p.stage_s + p.data_s + p.warmup_s + p.steps_s + p.eval_s + p.checkpoint_s,
      1e-12);  // not part of the job
}

TEST(JobTime, CalibrationThreadsFromTheFileOrItsHost) {
  Calibration c;
  c.threads = 3;
  EXPECT_EQ(CalibrationThreads(c), 3);
  c.threads = 0;
  c.host = "AMD EPYC, 2 cores";
  EXPECT_EQ(CalibrationThreads(c), 2);
  c.host = "Intel(R) Xeon(R) Processor, 16 cores";
  EXPECT_EQ(CalibrationThreads(c), 16);
  c.host = "somewhere";
  EXPECT_EQ(CalibrationThreads(c), 1);
  c.host = ", cores";
  EXPECT_EQ(CalibrationThreads(c), 1);
}

}  // namespace
}  // namespace dlh
