// A program's progress lines as the run's records (launcher/run/run_records.hpp): the
// metrics.jsonl records in train's schema, as dlh-report reads them, and summary.json.
#include "launcher/run/run_records.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <map>

namespace dlh {
namespace {

RunContext Context() {
  RunContext c;
  c.program = "train";
  c.command = {"python3", "train.py"};
  c.run_id = "77";
  c.world_size = 2;
  c.hosts = {"node1"};
  c.rank_batches = {12, 4};
  c.global_batch = 16;
  c.launch_unix = 1000;
  c.file_bytes = [](const std::string& path) -> int64_t { return path == "/c/s-2.pt" ? 4096 : -1; };
  return c;
}

// The records of `lines` fed to a fresh log at times 1, 2, 3, ... (Unix 1001, 1002, ...).
std::vector<nlohmann::json> Records(RunRecorder* r, const std::vector<std::string>& lines) {
  ProgressLog log;
  std::vector<nlohmann::json> out;
  double t = 1;
  for (const std::string& line : lines) {
    EXPECT_TRUE(log.Feed(line + "\n", t).empty()) << line;
    for (const ProgressEvent& e : log.TakeEvents())
      for (nlohmann::json& rec : r->Take(e, "cpu", 1000 + e.time)) out.push_back(std::move(rec));
    t += 1;
  }
  return out;
}

TEST(RunRecorderTest, StepLinesBecomeTrainsStepRecordsAfterAStart) {
  RunRecorder r(Context());
  const std::vector<nlohmann::json> recs =
      Records(&r, {"step 12 loss=2.5 epoch=1 compute=0.5 allreduce=0.25",
                   "step 12 loss=2.0 accuracy=0.5 epoch=1 data=0.125", "step 6"});
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[0]["event"], "start");
  EXPECT_EQ(recs[0]["step"], 0);
  EXPECT_EQ(recs[0]["t"], 1000);  // the launch, not the first line
  EXPECT_TRUE(recs[0]["resumed_from"].is_null());
  EXPECT_EQ(recs[0]["spec_name"], "train");
  EXPECT_EQ(recs[0]["device"], "cpu");
  EXPECT_EQ(recs[0]["rank_batches"], nlohmann::json({12, 4}));
  // The first step: no time of its own (its gap is the start-up), the split it had.
  EXPECT_EQ(recs[1]["step"], 1);
  EXPECT_EQ(recs[1]["epoch"], 1);
  EXPECT_EQ(recs[1]["loss"], 2.5);
  EXPECT_EQ(recs[1]["time"], nlohmann::json({{"compute", 0.5}, {"allreduce", 0.25}}));
  EXPECT_EQ(recs[1]["rank_batches"], nlohmann::json({12, 4}));
  EXPECT_FALSE(recs[1].contains("samples_per_s"));
  // Then 1 s per step: 12 samples on rank 0 of a global 16 is 16 samples/s.
  EXPECT_EQ(recs[2]["step"], 2);
  EXPECT_EQ(recs[2]["t"], 1002);
  EXPECT_EQ(recs[2]["accuracy"], 0.5);
  EXPECT_EQ(recs[2]["time"]["total"], 1);
  EXPECT_EQ(recs[2]["time"]["data"], 0.125);
  EXPECT_EQ(recs[2]["samples_per_s"], 16);
  EXPECT_FALSE(recs[2].contains("rank_batches"));
  // A bare step: the key the reader needs, null; the epoch carried on.
  EXPECT_TRUE(recs[3]["loss"].is_null());
  EXPECT_EQ(recs[3]["epoch"], 1);
  EXPECT_EQ(recs[3]["samples_per_s"], 8);
  const RankFigures f = r.Figures();
  EXPECT_DOUBLE_EQ(f.batch, 12);  // the median
  EXPECT_DOUBLE_EQ(f.compute_s, 0.5);
  EXPECT_DOUBLE_EQ(f.data_s, 0.125);
  EXPECT_DOUBLE_EQ(f.allreduce_s, 0.25);
}

TEST(RunRecorderTest, StepLinesReadTogetherTakeTheirTimedPartsNotAZeroGap) {
  RunRecorder r(Context());
  ProgressLog log;
  // A busy launcher reads three lines in one go: one arrival time for all of them.
  EXPECT_TRUE(
      log.Feed("step 12 compute=0.5\nstep 12 compute=0.25 data=0.25\nstep 12\n", 5).empty());
  std::vector<nlohmann::json> recs;
  for (const ProgressEvent& e : log.TakeEvents())
    for (nlohmann::json& rec : r.Take(e, "cpu", 1000 + e.time)) recs.push_back(std::move(rec));
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[2]["time"]["total"], 0.5);         // compute + data, the program's own figures
  EXPECT_EQ(recs[2]["samples_per_s"], 32);          // 16 samples in 0.5 s
  EXPECT_FALSE(recs[3]["time"].contains("total"));  // nothing timed: no total, no rate
  EXPECT_FALSE(recs[3].contains("samples_per_s"));
}

TEST(RunRecorderTest, AResumeSetsTheStartsStepAndTheStepsCountOnFromIt) {
  RunContext c = Context();
  c.checkpoint = "/c/s-300.pt";
  RunRecorder r(c);
  const std::vector<nlohmann::json> recs = Records(&r, {"resume 300", "step 12 loss=1"});
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0]["event"], "start");
  EXPECT_EQ(recs[0]["step"], 300);
  EXPECT_EQ(recs[0]["resumed_from"], "/c/s-300.pt");  // DLH_CHECKPOINT: the line gave none
  EXPECT_EQ(recs[1]["step"], 301);
  RunRecorder named(Context());
  EXPECT_EQ(Records(&named, {"resume 7 /elsewhere/s-7.pt"})[0]["resumed_from"],
            "/elsewhere/s-7.pt");
}

TEST(RunRecorderTest, EvalAndCheckpointRecordsAndASignalAfterTheCheckpoint) {
  RunRecorder r(Context());
  std::vector<nlohmann::json> recs =
      Records(&r, {"step 12 epoch=1", "step 12 epoch=1", "eval test_loss=0.5 test_accuracy=0.8"});
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[3], nlohmann::json({{"event", "eval"},
                                     {"t", 1003},
                                     {"epoch", 1},
                                     {"step", 2},
                                     {"test_loss", 0.5},
                                     {"test_accuracy", 0.8}}));
  r.Signal(SIGUSR1, 1004);
  ProgressLog log;
  // A periodic checkpoint, then the stop's: the signal's record names the stop's.
  log.Feed("checkpoint 2 /c/s-2.pt\n", 5);
  recs = r.Take(log.TakeEvents()[0], "cpu", 1005);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0], nlohmann::json({{"event", "checkpoint"},
                                     {"t", 1005},
                                     {"step", 2},
                                     {"path", "/c/s-2.pt"},
                                     {"background", false},
                                     {"bytes", 4096}}));
  log.Feed("checkpoint 2 /c/s-2b.pt\n", 6);
  recs = r.Take(log.TakeEvents()[0], "cpu", 1006);
  ASSERT_EQ(recs.size(), 1u);
  recs = r.End(false, SIGUSR1, "cpu", 1010);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0], nlohmann::json({{"event", "signal"},
                                     {"t", 1010},
                                     {"step", 2},
                                     {"signal", "SIGUSR1"},
                                     {"checkpoint", "/c/s-2b.pt"}}));
  EXPECT_EQ(recs[1], nlohmann::json({{"event", "end"},
                                     {"t", 1010},
                                     {"step", 2},
                                     {"finished", false},
                                     {"stop_signal", "SIGUSR1"},
                                     {"train_seconds", 10}}));
}

TEST(RunRecorderTest, AProgramThatSaidNothingStillGetsAStartAndAnEnd) {
  RunRecorder r(Context());
  r.Signal(SIGTERM, 1001);
  const std::vector<nlohmann::json> recs = r.End(false, SIGTERM, "", 1002);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0]["event"], "start");
  EXPECT_FALSE(recs[0].contains("device"));
  EXPECT_EQ(recs[1]["event"], "signal");
  EXPECT_TRUE(recs[1]["checkpoint"].is_null());
  EXPECT_EQ(recs[2]["event"], "end");
}

TEST(RunSummaryTest, SummaryInTrainsSchemaFromEveryRanksFigures) {
  const RunContext c = Context();
  RunRecorder r(c);
  Records(&r, {"step 12 loss=1", "step 12 loss=0.5", "step 12 loss=0.25",
               "eval epoch=1 test_loss=0.4 test_accuracy=0.9 top5=0.99", "checkpoint 3 /c/s-2.pt"});
  RunSummaryInputs in;
  in.context = &c;
  in.rank0 = &r;
  RankFigures rank1;
  rank1.batch = 4;
  rank1.compute_s = 0.5;
  in.ranks = {r.Figures(), rank1};
  in.rank_types = {"alpha", "beta"};
  in.device = "cpu";
  in.lr = 0.05;
  in.finished = true;
  in.ended_unix = 1010;
  in.predicted_step_s = 2;
  in.predicted_total_s = 20;
  in.plan_origin = "DLH_PLAN";
  const nlohmann::json s = RunSummary(in);
  EXPECT_EQ(s["name"], "train");
  EXPECT_EQ(s["ranks"], 2);
  EXPECT_EQ(s["steps"], 3);
  EXPECT_EQ(s["finished"], true);
  EXPECT_EQ(s["stop_signal"], 0);
  EXPECT_EQ(s["lr"], 0.05);
  EXPECT_EQ(s["lr_source"], "plan");
  EXPECT_EQ(s["batch_split"], "plan");
  EXPECT_EQ(s["rank_batches"], nlohmann::json({12, 4}));
  EXPECT_EQ(s["rank_gpu_types"], nlohmann::json({"alpha", "beta"}));
  EXPECT_EQ(s["last_checkpoint"], "/c/s-2.pt");
  EXPECT_EQ(s["train_seconds"], 10);
  EXPECT_EQ(s["test_accuracy"], 0.9);
  EXPECT_EQ(s["test_loss"], 0.4);
  EXPECT_EQ(s["evaluation"]["top5"], 0.99);
  // Only the split some rank gave, null where a rank gave none.
  EXPECT_EQ(s["rank_step_seconds"], nlohmann::json({{"compute", {nullptr, 0.5}}}));
  EXPECT_EQ(s["energy"]["measured"], false);
  EXPECT_EQ(s["checkpoints"]["written"], 1);
  // Steps end at 1001, 1002, 1003: 1 s a step against 2 predicted.
  EXPECT_EQ(s["measured"]["step_s"], 1);
  EXPECT_EQ(s["measured"]["phases"]["startup_s"], 1);
  EXPECT_EQ(s["measured"]["step_error_pct"], 100);
  EXPECT_EQ(s["measured"]["total_error_pct"], 100);
  EXPECT_EQ(s["prediction"]["origin"], "DLH_PLAN");
}

// A program that writes no step lines still has its whole time set against the plan's.
TEST(RunSummaryTest, ProgramWithoutStepLinesGetsItsWholeTimeAgainstThePlan) {
  const RunContext c = Context();
  RunRecorder r(c);
  RunSummaryInputs in;
  in.context = &c;
  in.rank0 = &r;
  in.ranks = {r.Figures()};
  in.finished = true;
  in.ended_unix = 1010;
  in.predicted_step_s = 2;
  in.predicted_total_s = 8;
  in.time_limit_s = 60;
  in.plan_origin = "DLH_PLAN";
  const nlohmann::json s = RunSummary(in);
  EXPECT_EQ(s["steps"], 0);
  EXPECT_EQ(s["prediction"]["total_s"], 8);
  EXPECT_FALSE(s["prediction"].contains("step_s"));
  EXPECT_EQ(s["measured"]["total_s"], 10);
  EXPECT_FALSE(s["measured"].contains("step_s"));
  EXPECT_EQ(s["measured"]["whole_job"], true);
  EXPECT_EQ(s["measured"]["total_error_pct"], -20);
  in.predicted_total_s = 0;  // no plan's figure: nothing to set against
  EXPECT_FALSE(RunSummary(in).contains("prediction"));
}

}  // namespace
}  // namespace dlh
