// split_history_test — launcher/train/split_history.hpp and the /split_history dataset of
// checkpoints: the split at a step, the checks on a history handed to a run (one line naming
// the file and field each), summary.json and checkpoint files as sources, round trips and
// corrupt histories.
#include "launcher/train/split_history.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/storage/h5.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

const SplitHistory kHistory = {{0, {64, 64}}, {20, {76, 52}}, {40, {85, 43}}};

template <typename F>
std::string UsageErrorOf(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a UsageError: ") + e.what();
  }
  return "no error";
}

std::string CheckError(const SplitHistory& h, int ranks = 2, int64_t global = 128,
                       int64_t max_batch = 127) {
  return UsageErrorOf(
      [&] { CheckSplitHistory(h, ranks, global, max_batch, "s.json: balance.history"); });
}

TrainState StateWithHistory() {
  TrainState s;
  s.spec_json = "{}";
  s.step = 45;
  s.world_size = 2;
  s.optimizer = "sgd";
  s.rank_batches = {85, 43};
  s.split_history = kHistory;
  s.params.push_back({"w", {2}, {1.5f, -2}});
  return s;
}

TEST(SplitHistoryTest, SplitAtIsTheLastChangeAtOrBeforeTheStep) {
  EXPECT_EQ(SplitAt(kHistory, 0), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(SplitAt(kHistory, 19), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(SplitAt(kHistory, 20), (std::vector<int64_t>{76, 52}));
  EXPECT_EQ(SplitAt(kHistory, 1000), (std::vector<int64_t>{85, 43}));
  EXPECT_THROW(SplitAt({{5, {1, 1}}}, 4), Error);
  EXPECT_THROW(SplitAt({}, 0), Error);
}

TEST(SplitHistoryTest, AGoodHistoryPasses) { EXPECT_EQ(CheckError(kHistory), "no error"); }

TEST(SplitHistoryTest, EveryBadHistoryIsOneLineNamingTheField) {
  const std::string at = "s.json: balance.history";
  EXPECT_EQ(CheckError({}), at + ": is empty");
  EXPECT_EQ(CheckError({{3, {64, 64}}}),
            at + "[0].step: must be 0 (the split the run started with), got 3");
  EXPECT_EQ(CheckError({{0, {64, 64}}, {20, {76, 52}}, {20, {80, 48}}}),
            at + "[2].step: 20 does not come after the step before it (20)");
  EXPECT_EQ(CheckError({{0, {64, 64}}, {20, {40, 40, 48}}}),
            at + "[1].rank_batches: has 3 batches but 2 ranks run");
  EXPECT_EQ(CheckError({{0, {64, 64}}, {20, {100, 20}}}),
            at + "[1].rank_batches: sum to 120, not the global batch 128");
  EXPECT_EQ(CheckError({{0, {0, 128}}}), at + "[0].rank_batches: a batch of 0 is outside [1, 127]");
  EXPECT_EQ(CheckError(kHistory, 2, 128, 80),
            at + "[2].rank_batches: a batch of 85 is outside [1, 80]");
}

TEST(SplitHistoryTest, SummaryJsonIsASource) {
  test::TempDir dir("dlh-history");
  const std::string path = dir / "summary.json";
  std::ofstream(path) << nlohmann::json{{"steps", 60},
                                        {"balance",
                                         {{"mode", "adaptive"},
                                          {"history", SplitHistoryJson(kHistory)}}}}
                             .dump(2);
  std::string origin;
  EXPECT_EQ(ReadSplitHistory(path, &origin), kHistory);
  EXPECT_EQ(origin, path + ": balance.history");
}

TEST(SplitHistoryTest, ACheckpointIsASourceAndKeepsItsHistory) {
  test::TempDir dir("dlh-history");
  const std::string path = dir / "ckpt-000000045.h5";
  SaveCheckpoint(path, StateWithHistory());
  EXPECT_EQ(LoadCheckpoint(path).split_history, kHistory);
  {
    h5::File f(path, h5::Mode::ReadOnly);
    EXPECT_EQ(h5::ReadString(f.id(), "split_history"), "0:64x2\n20:76,52\n40:85,43");
  }
  std::string origin;
  EXPECT_EQ(ReadSplitHistory(path, &origin), kHistory);
  EXPECT_EQ(origin, path + ": split_history");
  // A run that did not balance writes no dataset: files as before balancing existed.
  TrainState off = StateWithHistory();
  off.split_history.clear();
  SaveCheckpoint(dir / "off.h5", off);
  h5::File f(dir / "off.h5", h5::Mode::ReadOnly);
  EXPECT_FALSE(h5::Exists(f.id(), "split_history"));
  EXPECT_EQ(UsageErrorOf([&] { ReadSplitHistory(dir / "off.h5", &origin); }),
            dir / "off.h5" +
                ": split_history: missing (the checkpoint is of a run that did not "
                "balance)");
}

TEST(SplitHistoryTest, BadSourcesAreOneLineNamingTheFileAndField) {
  test::TempDir dir("dlh-history");
  std::string origin;
  auto with = [&](const std::string& text) {
    std::ofstream(dir / "s.json") << text;
    return UsageErrorOf([&] { ReadSplitHistory(dir / "s.json", &origin); });
  };
  const std::string at = dir / "s.json";
  EXPECT_EQ(UsageErrorOf([&] { ReadSplitHistory(dir / "none.json", &origin); }),
            dir / "none.json" + ": cannot read: No such file or directory");
  EXPECT_EQ(with("{\"balance\": "), at + ": not valid JSON: parse error at line 1, column 13: "
                                         "syntax error while parsing value - unexpected end of "
                                         "input; expected '[', '{', or a literal");
  EXPECT_EQ(with("{\"steps\": 3}"),
            at + ": balance.history: missing (not the summary.json of a run that balanced)");
  EXPECT_EQ(with(R"({"balance": {"history": 3}})"),
            at + ": balance.history: must be an array, got 3");
  EXPECT_EQ(with(R"({"balance": {"history": [{"step": -1, "rank_batches": [1]}]}})"),
            at + ": balance.history[0].step: must be a non-negative integer, got -1");
  EXPECT_EQ(with(R"({"balance": {"history": [{"step": 0, "rank_batches": [64, "64"]}]}})"),
            at + ": balance.history[0].rank_batches: must be an array of positive integers, got "
                 "an item \"64\"");
  EXPECT_EQ(with(R"({"balance": {"history": [{"step": 0}]}})"),
            at + ": balance.history[0].rank_batches: must be an array of positive integers, got "
                 "null");
  EXPECT_EQ(UsageErrorOf([&] { ReadSplitHistory(dir / "none.h5", &origin); }),
            dir / "none.h5" + ": cannot open (No such file or directory)");
}

// The checksum covers the history, and a history that does not belong to its file is refused
// on save (a bug) and on load (a file written by hand), naming the dataset.
TEST(SplitHistoryTest, CheckpointHistoryIsChecked) {
  test::TempDir dir("dlh-history");
  const std::string path = dir / "a.h5";
  auto with = [&](const std::string& text) {
    SaveCheckpoint(path, StateWithHistory());
    {
      h5::Handle f(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
      H5_CHECK(H5Ldelete(f.id(), "split_history", H5P_DEFAULT));
      h5::WriteString(f.id(), "split_history", text);
    }
    try {
      LoadCheckpoint(path);
    } catch (const CheckpointError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string at = path + ": dataset /split_history: ";
  EXPECT_EQ(with("0:64x2\n20:76,52\n40:x"),
            at + "line 3 '40:x' is not STEP:BATCHES (\"20:96x2,32\")");
  EXPECT_EQ(with("0:64x2\n\n40:85,43"), at + "line 2 '' is not STEP:BATCHES (\"20:96x2,32\")");
  EXPECT_EQ(with("0:64x2\n40:85,43\n20:76,52"),
            at + "entry 3 (step 20): steps must increase from 0 on");
  EXPECT_EQ(with("0:64x3\n40:85,43"), at + "line 1 '0:64x3' is not STEP:BATCHES (\"20:96x2,32\")");
  EXPECT_EQ(with("0:64x2\n40:85,42"),
            at + "entry 2 (step 40) sums to 127, not 128 as the first entry");
  EXPECT_EQ(with("0:64x2\n50:85,43"), at + "the last entry's step 50 is after step 45");
  EXPECT_EQ(with("0:64x2\n40:84,44"), at + "the last entry is not rank_batches");
  // Well-formed, belonging to the file, but not what was written: the checksum.
  EXPECT_NE(with("0:64x2\n30:76,52\n40:85,43").find("checksum mismatch"), std::string::npos);

  TrainState wrong = StateWithHistory();
  wrong.split_history.back().batches = {84, 44};
  try {
    SaveCheckpoint(path, wrong);
    ADD_FAILURE() << "saved";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": split_history: the last entry is not rank_batches");
  }
}

}  // namespace
}  // namespace dlh
