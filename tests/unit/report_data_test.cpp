// DLH — tests of dlh-report's reading of a run folder: attempts, torn and foreign lines,
// heartbeats and the run's state, and the report built from whatever could be read.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.hpp"
#include "launcher/report/headline.hpp"
#include "launcher/report/report_html.hpp"
#include "launcher/report/run_data.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh::report {
namespace {

class RunDataTest : public ::testing::Test {
 protected:
  void Write(const std::string& name, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(dir_ + "/" + name).parent_path());
    std::ofstream(dir_ + "/" + name, std::ios::binary) << text;
  }
  static std::string Step(int step, double t) {
    return "{\"step\":" + std::to_string(step) + ",\"epoch\":1,\"t\":" + std::to_string(t) +
           ",\"loss\":1.5,\"accuracy\":0.5,\"lr\":0.1,\"samples_per_s\":100,"
           "\"time\":{\"total\":0.1,\"compute\":0.05,\"allreduce\":0.02,\"data\":0.01,"
           "\"checkpoint\":0}}\n";
  }
  test::TempDir tmp_{"dlh-report"};
  const std::string dir_ = tmp_.path();
};

TEST_F(RunDataTest, SplitsAttemptsAtEachStart) {
  std::string m =
      "{\"event\":\"start\",\"t\":1000,\"step\":0,\"total_steps\":10,\"spec_name\":\"net\"}\n";
  for (int s = 1; s <= 6; ++s) m += Step(s, 1000 + s);
  m += "{\"event\":\"checkpoint\",\"t\":1006,\"step\":4,\"write_s\":0.1,\"bytes\":1000}\n";
  m += "{\"event\":\"end\",\"t\":1007,\"step\":6,\"finished\":false,\"stop_signal\":\"SIGTERM\"}\n";
  m += "{\"event\":\"start\",\"t\":1100,\"step\":4,\"resumed_from\":\"ckpt-4.h5\",\"total_steps\":"
       "10}\n";
  for (int s = 5; s <= 10; ++s) m += Step(s, 1100 + s);
  Write("metrics.jsonl", m);
  const RunData run = LoadRun(dir_);
  EXPECT_TRUE(run.problems.empty());
  ASSERT_EQ(run.steps.size(), 12u);
  EXPECT_EQ(run.attempts, 2);
  EXPECT_EQ(run.steps[5].attempt, 0);
  EXPECT_EQ(run.steps[6].attempt, 1);
  EXPECT_EQ(run.steps[6].step, 5);
  EXPECT_EQ(run.last_step()->step, 10);
  EXPECT_EQ(run.events_named("checkpoint").size(), 1u);
  // The second attempt has no end yet, and its records are recent: running.
  EXPECT_EQ(StateOf(run, run.modified + 1), RunState::Running);
  EXPECT_EQ(StateOf(run, run.modified + 3600), RunState::Stopped);
  const Headline h = HeadlineOf(run, run.modified + 1);
  EXPECT_EQ(h.name, "net");
  EXPECT_EQ(h.total_steps, 10);
  EXPECT_GE(h.eta_s, 0);
}

TEST_F(RunDataTest, OlderLogsWithoutStartEventsStillSplitAtResumes) {
  std::string m;
  for (int s = 1; s <= 5; ++s) m += Step(s, 0);
  for (int s = 3; s <= 8; ++s) m += Step(s, 0);  // resumed from a checkpoint of step 2
  Write("metrics.jsonl", m);
  const RunData run = LoadRun(dir_);
  EXPECT_EQ(run.attempts, 2);
  EXPECT_EQ(run.steps.back().attempt, 1);
}

TEST_F(RunDataTest, SkipsAndNamesEveryLineItCannotUse) {
  std::string m = Step(1, 1) + "not json\n" + "{\"foreign\":1}\n" + "[1,2]\n" + Step(2, 2) +
                  "{\"step\":3,\"lo";  // torn: no newline
  Write("metrics.jsonl", m);
  Write("summary.json", "{\"finished\": tr");
  const RunData run = LoadRun(dir_);
  EXPECT_EQ(run.steps.size(), 2u);
  ASSERT_EQ(run.problems.size(), 5u);
  EXPECT_EQ(run.problems[0], "metrics.jsonl line 2: not a JSON object, skipped (a damaged file?)");
  EXPECT_EQ(run.problems[1], "metrics.jsonl line 3: neither a step nor an event record, skipped");
  EXPECT_NE(run.problems[3].find("line 6: an incomplete last line"), std::string::npos);
  EXPECT_NE(run.problems[4].find("summary.json: not a JSON object"), std::string::npos);
  EXPECT_TRUE(run.summary.is_null());
  // The report is still written, and says what it left out.
  ReportOptions o;
  o.now = 1e9;
  const std::string html = ReportHtml(run, o);
  EXPECT_NE(html.find("an incomplete last line"), std::string::npos);
  EXPECT_NE(html.find("class=\"dlh-chart\""), std::string::npos);
}

TEST_F(RunDataTest, BinaryJunkIsCountedNotListedLineByLine) {
  std::string junk;
  for (int i = 0; i < 50; ++i) junk += std::string("\x01\xff\xfe garbage", 11) + "\n";
  Write("metrics.jsonl", junk);
  const RunData run = LoadRun(dir_);
  EXPECT_TRUE(run.steps.empty());
  ASSERT_EQ(run.problems.size(), 6u);
  EXPECT_EQ(run.problems.back(), "metrics.jsonl: 45 more lines skipped");
  ReportOptions o;
  o.now = 1e9;
  const std::string html = ReportHtml(run, o);
  EXPECT_NE(html.find("Training loss: nothing logged yet."), std::string::npos);
}

// A program that wrote no progress lines: the page says so once, and still sets the job's
// time against the plan's.
TEST_F(RunDataTest, ProgramWithoutProgressLinesIsExplained) {
  Write("summary.json",
        "{\"program\":\"plain\",\"finished\":true,\"steps\":0,"
        "\"prediction\":{\"total_s\":8},\"measured\":{\"total_s\":10}}");
  const RunData run = LoadRun(dir_);
  ReportOptions o;
  o.now = 1e9;
  const std::string html = ReportHtml(run, o);
  EXPECT_NE(html.find("The program wrote no progress lines"), std::string::npos);
  EXPECT_NE(html.find("Predicted and measured time by phase"), std::string::npos);
}

// A run that --max-steps ended wrote its end record: it was not killed nor lost, and the
// headline said so before (2026-12-07: "no record since 0.1 s: killed, ...").
TEST_F(RunDataTest, AnEndBeforeTheLastStepIsNotAKill) {
  Write("metrics.jsonl", Step(1, 1) + Step(2, 2) +
                             "{\"event\":\"end\",\"step\":2,\"finished\":false,"
                             "\"stop_signal\":null,\"train_seconds\":2}\n");
  const RunData run = LoadRun(dir_);
  const Headline h = HeadlineOf(run, run.modified + 1);
  EXPECT_EQ(h.state, RunState::Stopped);
  EXPECT_NE(h.stop.find("ended at step 2 before its last, without a signal"), std::string::npos)
      << h.stop;
  EXPECT_EQ(h.stop.find("killed"), std::string::npos) << h.stop;
}

// A program under `dlh-launch run`: its own checkpoints (the dlh module's ckpt-<step>.pt)
// are the run's, and each rank's process figures stand for the step parts it did not report.
TEST_F(RunDataTest, AProgramsCheckpointsAndRankFigures) {
  Write("metrics.jsonl", Step(1, 1) + Step(2, 2));
  Write("summary.json",
        "{\"program\":\"train.py\",\"finished\":true,\"steps\":2,"
        "\"rank_process\":{\"cpu_cores_busy\":[0.9,0.8],\"peak_rss_mib\":[301,287]}}");
  Write("checkpoints/ckpt-00000010.pt", "x");
  Write("checkpoints/ckpt-00000002.pt", "x");
  Write("checkpoints/notes.txt", "x");
  const RunData run = LoadRun(dir_);
  ASSERT_EQ(run.checkpoints.size(), 2u);
  EXPECT_EQ(run.checkpoints.back(), "ckpt-00000010.pt");  // by step
  ReportOptions o;
  o.now = 1e9;
  const std::string html = ReportHtml(run, o);
  EXPECT_NE(html.find("CPU cores busy"), std::string::npos);
  EXPECT_EQ(html.find("summary.json is written when a run ends"), std::string::npos);
  EXPECT_NE(html.find("dlh.evaluation"), std::string::npos);
}

TEST_F(RunDataTest, HeartbeatsAndAStallThatWasNotGotPast) {
  Write("metrics.jsonl", Step(1, 1) + Step(2, 2));
  Write("heartbeat/rank-0.json",
        "{\"rank\":0,\"host\":\"n1\",\"step\":2,\"time\":5,\"finished\":false,"
        "\"waiting\":{\"in\":\"MPI_Allreduce\",\"seconds\":30}}");
  Write("heartbeat/rank-1.json", "{\"rank\":1,\"ho");  // being replaced: reported, skipped
  Write("heartbeat/stalled-abc.json",
        "{\"rank\":0,\"host\":\"n1\",\"step\":2,\"culprit\":\"rank 1 (n2) "
        "stopped answering\"}");
  const RunData run = LoadRun(dir_);
  ASSERT_EQ(run.heartbeats.size(), 1u);
  EXPECT_EQ(run.heartbeats[0].waiting_in, "MPI_Allreduce");
  EXPECT_EQ(run.problems.size(), 1u);
  EXPECT_EQ(StateOf(run, run.modified + 1), RunState::Stopped);
  EXPECT_NE(HeadlineOf(run, run.modified + 1).stop.find("stalled at step 2: rank 1 (n2)"),
            std::string::npos);
}

TEST_F(RunDataTest, EnergyMeasuredOrSaidNotToBe) {
  // A GPU run: NVML's samples in the step records, the measured energy in summary.json.
  std::string m;
  for (int s = 1; s <= 3; ++s) {
    std::string rec = Step(s, 1000 + s);
    rec.insert(rec.size() - 2, ",\"energy_j\":" + std::to_string(100 * s) +
                                   ",\"gpu_power_w\":250,\"gpu_util\":90,\"gpu_mem_gib\":3.5");
    m += rec;
  }
  Write("metrics.jsonl", m);
  const RunData live = LoadRun(dir_);
  ASSERT_EQ(live.steps.size(), 3u);
  EXPECT_EQ(live.steps[2].energy_j, 300);
  EXPECT_EQ(live.steps[0].gpu_power_w, 250);
  EXPECT_EQ(live.steps[1].gpu_util, 90);
  EXPECT_EQ(live.steps[2].gpu_mem_gib, 3.5);
  ReportOptions o;
  std::string html = ReportHtml(live, o);
  EXPECT_NE(html.find("GPU power (rank 0)"), std::string::npos);
  EXPECT_NE(html.find("Energy so far: 300 J"), std::string::npos);
  Write("summary.json",
        "{\"finished\": true, \"energy\": {\"measured\": true, \"source\": \"nvml\", "
        "\"scope\": \"each rank's GPU\", \"joules_per_rank\": [1500, 1700], "
        "\"joules_total\": 3200, \"joules_per_sample\": 0.5, \"mean_power_w\": 320}}");
  html = ReportHtml(LoadRun(dir_), o);
  EXPECT_NE(html.find("3.2 kJ (nvml; each rank&#39;s GPU)"), std::string::npos);
  EXPECT_NE(html.find("Each rank&#39;s energy"), std::string::npos);
  // A CPU run without RAPL: no samples, and the reason instead of a figure.
  Write("metrics.jsonl", Step(1, 1001));
  Write("summary.json",
        "{\"finished\": true, \"energy\": {\"measured\": false, \"why\": \"RAPL not readable: "
        "no package zone (intel-rapl:N) under /sys/class/powercap\"}}");
  html = ReportHtml(LoadRun(dir_), o);
  EXPECT_EQ(html.find("GPU power"), std::string::npos);
  EXPECT_NE(html.find("Energy: not measured (RAPL not readable: no package zone"),
            std::string::npos);
}

// Every value of the run's files reaches the page as text: a results.json whose image is not
// base64 ("x\" onerror=\"alert(1)\" a=\"") put script into report.html's <img>; now that
// image is left out with one line naming the file and field, and names with markup are
// escaped wherever they show (run name, classes, the confused pairs, a stop signal).
TEST_F(RunDataTest, MarkupInTheRunsFilesIsTextOnThePage) {
  const std::string evil = "<script>alert(1)</script>";
  Write("metrics.jsonl",
        "{\"event\":\"start\",\"t\":1000,\"step\":0,\"total_steps\":2,"
        "\"spec_name\":\"" +
            evil + "\"}\n" + Step(1, 1001) + Step(2, 1002) +
            "{\"event\":\"end\",\"t\":1003,\"step\":2,\"finished\":false,"
            "\"stop_signal\":\"" +
            evil + "\"}\n");
  const std::string sample = R"({"index": 7, "true": 0, "predicted": 1, "confidence": 0.9,
      "image_bmp_base64": )";
  Write("results.json", R"({"split": "test", "checkpoint": ")" + evil + R"(", "accuracy": 0.5,
      "class_names": [")" + evil +
                            R"(", "b"],
      "confusion": [[1, 1], [0, 2]],
      "per_class": [{"name": ")" +
                            evil + R"(", "f1": 0.5}, {"name": "b", "f1": 0.8}],
      "most_confused": [{"true_name": ")" +
                            evil + R"(", "predicted_name": "b", "count": 1}],
      "misclassified": [)" + sample +
                            R"("x\" onerror=\"alert(1)\" a=\""},
        )" + sample + R"("Qk0+AAAA"}, )" +
                            sample + R"(42}]})");
  const RunData run = LoadRun(dir_);
  ASSERT_EQ(run.problems.size(), 1u);
  EXPECT_EQ(run.problems[0],
            "results.json: misclassified[0].image_bmp_base64: not base64: 2 images are left out");
  const std::string html = ReportHtml(run, ReportOptions{2000, 0, 1200});
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("onerror"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("src=\"data:image/bmp;base64,Qk0+AAAA\""), std::string::npos);
  EXPECT_EQ(html.find("<img", html.find("<img") + 1), std::string::npos);  // the good one only
}

TEST_F(RunDataTest, AFolderWithoutARunIsAnError) {
  EXPECT_THROW(LoadRun(dir_), Error);
  EXPECT_THROW(LoadRun(dir_ + "/missing"), Error);
  Write("summary.json", "{\"finished\": true, \"rank_batches\": [10, 10]}");
  const RunData run = LoadRun(dir_);
  EXPECT_EQ(StateOf(run, 0), RunState::Finished);
  EXPECT_EQ(HeadlineOf(run, 0).world_size, 2);
}

}  // namespace
}  // namespace dlh::report
