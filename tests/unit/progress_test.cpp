// The progress channel of dlh-launch run (launcher/run/progress.hpp): lines split across
// reads, the description lines, bad lines warned about once, the timing of steps.
#include "launcher/run/progress.hpp"

#include <gtest/gtest.h>

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
  ASSERT_EQ(w.size(), 4u);  // params, lr, hello, bye
  EXPECT_NE(
      w[0].find("'params' needs a positive integer up to 9223372036854775807, got 'params lots'"),
      std::string::npos);
  EXPECT_NE(w[1].find("'lr' needs a positive number"), std::string::npos);
  EXPECT_NE(w[2].find("unknown line 'hello world'"), std::string::npos);
  EXPECT_NE(w[3].find("unknown line 'bye'"), std::string::npos);
  EXPECT_EQ(log.described().params, 0);
  EXPECT_EQ(log.described().lr, 0);
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
  // Steps end at 1, 3 (warm-up), then every 0.5 s but one of 2 s (an evaluation).
  const double ends[] = {1, 3, 3.5, 4, 6, 6.5, 7};
  for (double t : ends) log.Feed("step 32\n", t);
  log.Feed("step 8\n", 7.5);  // an epoch's short last step
  const ProfilePoint p = TimeSteps(log, 2, 6);
  EXPECT_EQ(p.steps, 6);
  EXPECT_DOUBLE_EQ(p.step_s, 0.5);
  EXPECT_DOUBLE_EQ(p.step_s_min, 0.5);
  EXPECT_DOUBLE_EQ(p.step_s_max, 2.0);
  EXPECT_EQ(p.batch, 32);
  EXPECT_THROW(TimeSteps(log, 2, 7), Error);  // 9 steps needed, 8 seen
  EXPECT_THROW(TimeSteps(log, 0, 3), Error);  // the first step has no start
}

TEST(ProgressLogTest, StepsWithoutCountsGiveNoBatch) {
  ProgressLog log;
  for (int t = 0; t < 4; ++t) log.Feed("step\n", t);
  EXPECT_EQ(TimeSteps(log, 1, 3).batch, 0);
}

}  // namespace
}  // namespace dlh
