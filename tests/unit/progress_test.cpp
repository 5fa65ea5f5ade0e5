// The progress channel of dlh-launch run (launcher/run/progress.hpp): lines split across
// reads, the description lines, bad lines warned about once, the timing of steps.
#include "launcher/run/progress.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include "common/error.hpp"

namespace dlh {
namespace {

TEST(ProgressLogTest, StepLinesSplitAcrossReadsCountOnceTheirEndArrives) {
  ProgressLog log;
  EXPECT_TRUE(log.Feed("step 6", 1.0).empty());
  EXPECT_EQ(log.steps(), 0);
  EXPECT_TRUE(log.Feed("4\nstep 64\r\nst", 2.0).empty());
  EXPECT_TRUE(log.Feed("ep\n\n", 3.0).empty());
  ASSERT_EQ(log.steps(), 3);
  EXPECT_EQ(log.step_times(), (std::vector<double>{2.0, 2.0, 3.0}));
  EXPECT_EQ(log.step_samples(), (std::vector<int64_t>{64, 64, 0}));  // "step": no count
}

// A program's last line written without a newline counts once the program is gone; it was
// dropped (2026-12-07).
TEST(ProgressLogTest, ALastLineWithoutANewlineCountsAtTheEnd) {
  ProgressLog log;
  EXPECT_TRUE(log.Feed("step 8\nstep 8", 1.0).empty());
  EXPECT_EQ(log.steps(), 1);
  EXPECT_TRUE(log.Finish(2.0).empty());
  EXPECT_EQ(log.steps(), 2);
  EXPECT_TRUE(log.Finish(3.0).empty());  // nothing left: no line twice
  EXPECT_EQ(log.steps(), 2);
}

// "stop SIGNAME": the program obeys a stop its own rank may not have been sent; the more
// severe of two stands, and a bad name is warned about, not taken.
TEST(ProgressLogTest, AStopLineNamesTheSignalObeyed) {
  ProgressLog log;
  EXPECT_EQ(log.stop_signal(), 0);
  EXPECT_TRUE(log.Feed("stop SIGUSR1\n", 1.0).empty());
  EXPECT_EQ(log.stop_signal(), SIGUSR1);
  EXPECT_TRUE(log.Feed("stop SIGTERM\nstop SIGUSR1\n", 2.0).empty());
  EXPECT_EQ(log.stop_signal(), SIGTERM);
  ProgressLog bad;
  EXPECT_EQ(bad.Feed("stop SIGKILL\n", 1.0).size(), 1u);
  EXPECT_EQ(bad.stop_signal(), 0);
}

TEST(ProgressLogTest, DescriptionLinesFillTheProfileFields) {
  ProgressLog log;
  EXPECT_TRUE(log.Feed("params 206922\nsamples 60000\nepochs 3\nglobal_batch 128\nlr 0.05\n"
                       "optimizer_slots 2\nmemory 1.5e9\ndevice cuda:0 (NVIDIA H100)\n"
                       "threads 4\n",
                       0)
                  .empty());
  const ProgramProfile& d = log.described();
  EXPECT_EQ(d.params, 206922);
  EXPECT_EQ(d.samples, 60000);
  EXPECT_EQ(d.epochs, 3);
  EXPECT_EQ(d.global_batch, 128);
  EXPECT_DOUBLE_EQ(d.lr, 0.05);
  EXPECT_EQ(d.optimizer_slots, 2);
  EXPECT_DOUBLE_EQ(d.memory_bytes, 1.5e9);
  EXPECT_EQ(d.device, "cuda:0 (NVIDIA H100)");
  EXPECT_EQ(d.cpu_threads, 4);
}

TEST(ProgressLogTest, BadLinesAreWarnedAboutOncePerKindAndChangeNothing) {
  ProgressLog log;
  std::vector<std::string> w = log.Feed("step -3\nstep 0\nstep 1.5\n", 0);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0],
            "progress: a step line needs a positive sample count or none, got 'step -3': "
            "ignored (further lines like it are ignored silently)");
  EXPECT_EQ(log.steps(), 0);
  w = log.Feed("params lots\nparams 0\nlr -1\nlr nan\nhello world\nhello again\nbye\n", 0);
  // params, lr, and one for every unknown line: 10 KB of random bytes on the channel gave a
  // hundred warnings, one for each first word (2026-12-07).
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NE(
      w[0].find("'params' needs a positive integer up to 9223372036854775807, got 'params lots'"),
      std::string::npos);
  EXPECT_NE(w[1].find("'lr' needs a positive number"), std::string::npos);
  EXPECT_NE(w[2].find("unknown line 'hello world'"), std::string::npos);
  EXPECT_EQ(log.described().params, 0);
  EXPECT_EQ(log.described().lr, 0);
  // Control characters and a NUL are written out, not sent to the log.
  ProgressLog raw;
  w = raw.Feed(std::string("x\x1b[31mred\x01\0z\n", 13), 0);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("unknown line 'x\\x1b[31mred\\x01\\x00z'"), std::string::npos) << w[0];
}

TEST(ProgressLogTest, AnEndlessLineDoesNotGrowWithoutBound) {
  ProgressLog log;
  const std::string junk(1 << 20, 'x');
  std::vector<std::string> w = log.Feed(junk, 0);
  w = log.Feed("\nstep 8\n", 1);
  ASSERT_EQ(w.size(), 1u);  // the junk, cut at 4096 characters, is one unknown line
  EXPECT_EQ(log.steps(), 1);
}

TEST(ProgressLogTest, TimeStepsTakesTheIntervalsAfterTheWarmUp) {
  ProgressLog log;
  // Steps end at 1, 3 (warm-up), then every 0.5 s but one of 2 s: an evaluation, which the
  // program reports before its next step.
  const double ends[] = {1, 3, 3.5, 4, 6, 6.5, 7};
  for (double t : ends) {
    if (t == 6) log.Feed("eval test_loss=0.4\n", 5.9);
    log.Feed("step 32\n", t);
  }
  log.Feed("step 8\n", 7.5);  // an epoch's short last step
  const ProfilePoint p = TimeSteps(log, 2, 6);
  EXPECT_EQ(p.steps, 6);
  EXPECT_DOUBLE_EQ(p.step_s, 0.5);  // the evaluation's interval left out
  EXPECT_DOUBLE_EQ(p.step_s_min, 0.5);
  EXPECT_DOUBLE_EQ(p.step_s_max, 2.0);
  EXPECT_EQ(p.batch, 32);
  EXPECT_THROW(TimeSteps(log, 2, 7), Error);  // 9 steps needed, 8 seen
  EXPECT_THROW(TimeSteps(log, 0, 3), Error);  // the first step has no start
}

// A rank under a CPU quota takes steps of one burst or of two: the profile is its rate, the
// mean, where the median would say the shorter kind. A pause it did not report counts at
// most 3x the median, and a checkpoint or resume line leaves its interval out.
TEST(ProgressLogTest, TimeStepsIsTheMeanOfBurstsWithPausesCapped) {
  ProgressLog log;
  double t = 0;
  log.Feed("step 16\n", t);
  // 3 steps of 10 ms for every 2 of 20 ms: the median says 10 ms, the rate 14 ms a step.
  for (int round = 0; round < 4; ++round)
    for (double s : {0.010, 0.020, 0.010, 0.020, 0.010}) log.Feed("step 16\n", t += s);
  EXPECT_NEAR(TimeSteps(log, 1, 20).step_s, 0.014, 1e-12);
  log.Feed("step 16\n", t += 0.5);  // an unreported pause: at most 3x the 10 ms median
  EXPECT_NEAR(TimeSteps(log, 1, 21).step_s, (20 * 0.014 + 0.030) / 21, 1e-12);
  log.Feed("checkpoint 22 /tmp/c.pt\n", t += 0.7);
  log.Feed("step 16\n", t += 0.01);  // the checkpoint's interval: no step's time
  const ProfilePoint p = TimeSteps(log, 1, 22);
  EXPECT_NEAR(p.step_s, (20 * 0.014 + 0.030) / 21, 1e-12);
  EXPECT_NEAR(p.step_s_max, 0.71, 1e-12);  // min and max: every interval
  // Every interval holds other work: they are what there is to time.
  ProgressLog all;
  all.Feed("step 4\n", 0);
  all.Feed("resume 1\n", 0.5);
  all.Feed("step 4\n", 1);
  EXPECT_DOUBLE_EQ(TimeSteps(all, 1, 1).step_s, 1.0);
}

TEST(ProgressLogTest, StepsWithoutCountsGiveNoBatch) {
  ProgressLog log;
  for (int t = 0; t < 4; ++t) log.Feed("step\n", t);
  EXPECT_EQ(TimeSteps(log, 1, 3).batch, 0);
}

TEST(ProgressLogTest, StepFieldsCarryTheLossAndTheRanksSplit) {
  ProgressLog log;
  EXPECT_TRUE(log.Feed("step 64 loss=0.5 accuracy=0.75 epoch=2 data=0.01 compute=0.2 "
                       "allreduce=0.03 lr=0.1 samples_per_s=640 loss=0.25\nstep loss=-1e-3\n",
                       5)
                  .empty());
  EXPECT_EQ(log.steps(), 2);
  const std::vector<ProgressEvent> e = log.TakeEvents();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].kind, ProgressEvent::Kind::kStep);
  EXPECT_EQ(e[0].samples, 64);
  EXPECT_EQ(e[0].epoch, 2);
  EXPECT_DOUBLE_EQ(e[0].time, 5);
  EXPECT_DOUBLE_EQ(e[0].value("loss", 0), 0.25);  // given twice: the last
  EXPECT_DOUBLE_EQ(e[0].value("accuracy", 0), 0.75);
  EXPECT_DOUBLE_EQ(e[0].value("compute", 0), 0.2);
  EXPECT_DOUBLE_EQ(e[0].value("allreduce", 0), 0.03);
  EXPECT_DOUBLE_EQ(e[0].value("samples_per_s", 0), 640);
  EXPECT_EQ(e[0].values.size(), 7u);
  EXPECT_EQ(e[1].samples, 0);
  EXPECT_DOUBLE_EQ(e[1].value("loss", 0), -1e-3);
  EXPECT_TRUE(log.TakeEvents().empty());  // taken once
}

TEST(ProgressLogTest, BadStepFieldsAreDroppedAndTheStepStillCounts) {
  ProgressLog log;
  std::vector<std::string> w = log.Feed(
      "step 8 loss=nan accuracy=75 speed=3 compute=-1 epoch=1.5 loss\n"
      "step 8 loss=inf accuracy=2 colour=red\n",
      0);
  ASSERT_EQ(w.size(), 6u);  // loss, accuracy, unknown field, compute, epoch, not a field
  EXPECT_EQ(w[0],
            "progress: 'loss' needs a finite number, got 'loss=nan' in 'step 8 loss=nan "
            "accuracy=75 speed=3 compute=-1 epoch=1.5 loss': the field ignored (further lines "
            "like it are ignored silently)");
  EXPECT_NE(w[1].find("'accuracy' needs a fraction from 0 to 1"), std::string::npos);
  EXPECT_NE(w[2].find("unknown step field 'speed=3'"), std::string::npos);
  EXPECT_NE(w[3].find("'compute' needs non-negative seconds"), std::string::npos);
  EXPECT_NE(w[4].find("'epoch' needs a non-negative integer"), std::string::npos);
  EXPECT_NE(w[5].find("fields are NAME=VALUE, got 'loss'"), std::string::npos);
  EXPECT_EQ(log.steps(), 2);
  for (const ProgressEvent& e : log.TakeEvents()) {
    EXPECT_EQ(e.samples, 8);
    EXPECT_TRUE(e.values.empty());
    EXPECT_EQ(e.epoch, -1);
  }
}

TEST(ProgressLogTest, EvalCheckpointAndResumeLines) {
  ProgressLog log;
  EXPECT_TRUE(log.Feed("resume 300 /runs/a/checkpoints/step-300.pt\n"
                       "eval epoch=3 test_loss=0.41 test_accuracy=0.85\n"
                       "checkpoint 400 /runs/a/check points/step 400.pt\nresume 0\n",
                       1)
                  .empty());
  const std::vector<ProgressEvent> e = log.TakeEvents();
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].kind, ProgressEvent::Kind::kResume);
  EXPECT_EQ(e[0].step, 300);
  EXPECT_EQ(e[0].path, "/runs/a/checkpoints/step-300.pt");
  EXPECT_EQ(e[1].kind, ProgressEvent::Kind::kEval);
  EXPECT_EQ(e[1].epoch, 3);
  EXPECT_EQ(e[1].step, -1);
  ASSERT_EQ(e[1].values.size(), 2u);
  EXPECT_EQ(e[1].values[0].first, "test_loss");
  EXPECT_DOUBLE_EQ(e[1].values[1].second, 0.85);
  EXPECT_EQ(e[2].kind, ProgressEvent::Kind::kCheckpoint);
  EXPECT_EQ(e[2].step, 400);
  EXPECT_EQ(e[2].path, "/runs/a/check points/step 400.pt");  // spaces and all
  EXPECT_EQ(e[3].step, 0);
  EXPECT_EQ(e[3].path, "");
  EXPECT_EQ(log.steps(), 0);  // none of them is a step
}

TEST(ProgressLogTest, BadEvalCheckpointAndResumeLinesAreWarnedAboutOnce) {
  ProgressLog log;
  std::vector<std::string> w = log.Feed(
      "eval epoch=1\neval\ncheckpoint 5\ncheckpoint five /x\nresume\nresume -1\n"
      "eval test-loss=1 9lives=2 t=3 acc=high acc2=0.5\n",
      0);
  ASSERT_EQ(w.size(), 5u);  // eval, checkpoint, resume, eval name, eval value
  EXPECT_NE(w[0].find("an eval line needs at least one metric NAME=VALUE, got 'eval epoch=1'"),
            std::string::npos);
  EXPECT_NE(w[1].find("'checkpoint' needs a step and a path, got 'checkpoint 5'"),
            std::string::npos);
  EXPECT_NE(w[2].find("'resume' needs a step (and a path), got 'resume'"), std::string::npos);
  EXPECT_NE(w[3].find("named with letters, digits and '_', got 'test-loss=1'"), std::string::npos);
  EXPECT_NE(w[4].find("a metric needs a finite number, got 'acc=high'"), std::string::npos);
  const std::vector<ProgressEvent> e = log.TakeEvents();
  ASSERT_EQ(e.size(), 1u);  // the last eval, with the one metric it could read
  ASSERT_EQ(e[0].values.size(), 1u);
  EXPECT_EQ(e[0].values[0].first, "acc2");
}

}  // namespace
}  // namespace dlh
