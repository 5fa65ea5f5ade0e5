// balance_mpitest — adaptive batch balancing under mpirun (2, 3 and 4 ranks). The ranks'
// compute times come from a test clock (TrainOptions::balance_clock): the last rank takes 3
// ms a sample, the others 1 ms, so every decision is known in advance and the tests need no
// timing. Adaptive runs move samples to the fast ranks and record every split; a run that
// replays the recorded history (from summary.json or a checkpoint) ends bit-identical to the
// run that recorded it; a resumed adaptive run continues with the checkpoint's split; bad
// histories and modes fail every rank alike before anything is written.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/comm/collective.hpp"
#include "launcher/data/dataset.hpp"
#include "launcher/storage/checkpoint.hpp"
#include "launcher/train/trainer.hpp"
#include "tests/mpi/mpi_test_util.hpp"

namespace dlh {
namespace {

using test::Rank;
using test::SharedDir;
using test::Size;

// Batchnorm and dropout: their statistics and masks depend on each rank's slice, so only
// the same splits at the same steps give the same bits.
constexpr const char* kSpec = R"({
  "name": "balance",
  "input": {"channels": 1, "height": 8, "width": 8},
  "classes": 4,
  "layers": [
    {"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1},
    {"type": "batchnorm"},
    {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2},
    {"type": "flatten"},
    {"type": "dropout", "rate": 0.1},
    {"type": "dense", "units": 4}
  ],
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
  "batch_size": 24,
  "epochs": 3,
  "seed": 11,
  "dataset": "data.h5"
})";

constexpr int kEvery = 4;  // steps per decision

// 12 samples per rank to start with (the even split).
int64_t Global() { return 12 * Size(); }

// The last rank is 3x slower per sample than the others.
double Clock(int64_t, int rank, int64_t batch, double) {
  return double(batch) * (rank == Size() - 1 ? 0.003 : 0.001);
}

std::vector<SplitChange> FromJson(const nlohmann::json& history) {
  std::vector<SplitChange> out;
  for (const auto& e : history)
    out.push_back({e["step"].get<int64_t>(), e["rank_batches"].get<std::vector<int64_t>>()});
  return out;
}

bool SameParams(const TrainState& a, const TrainState& b) {
  if (a.params.size() != b.params.size()) return false;
  for (size_t i = 0; i < a.params.size(); ++i)
    if (a.params[i].data.size() != b.params[i].data.size() ||
        std::memcmp(a.params[i].data.data(), b.params[i].data.data(),
                    a.params[i].data.size() * sizeof(float)) != 0)
      return false;
  return true;
}

class BalanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Size() < 2) GTEST_SKIP() << "balancing needs two ranks";
    if (Rank() == 0) {
      WriteSyntheticDataset(dir_.path() + "/data.h5", Shape3{1, 8, 8}, 4, 2000, 40, 5);
      std::ofstream(dir_.path() + "/spec.json") << kSpec;
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  TrainOptions Options(const std::string& run) const {
    TrainOptions o;
    o.spec_path = dir_.path() + "/spec.json";
    o.run_dir = dir_.path() + "/" + run;
    o.progress = ProgressMode::None;
    o.threads = 1;
    o.eval = false;
    o.batch_size = int(Global());
    o.max_steps = 60;
    return o;
  }
  TrainOptions Adaptive(const std::string& run) const {
    TrainOptions o = Options(run);
    o.balance = "adaptive";
    o.balance_every = kEvery;
    o.balance_clock = Clock;
    return o;
  }
  nlohmann::json Summary(const std::string& run) const {
    std::ifstream in(dir_.path() + "/" + run + "/summary.json");
    return nlohmann::json::parse(in);
  }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  static std::string Fails(const TrainOptions& o, int* code) {
    try {
      Train(o, MPI_COMM_WORLD);
    } catch (const CollectiveError& e) {
      *code = e.exit_code;
      return e.what();
    }
    return "no error";
  }
  SharedDir dir_;
};

TEST_F(BalanceTest, AdaptiveMovesSamplesToTheFastRanksAndRecordsEverySplit) {
  const TrainResult r = Train(Adaptive("adaptive"), MPI_COMM_WORLD);
  ASSERT_EQ(r.steps, 60);
  const TrainState st = LoadCheckpoint(r.last_checkpoint);
  const std::vector<SplitChange>& h = st.split_history;
  ASSERT_GE(h.size(), 3u) << "a 3x slower rank must lose samples";
  EXPECT_EQ(h.front(), (SplitChange{0, std::vector<int64_t>(size_t(Size()), 12)}));
  for (size_t i = 1; i < h.size(); ++i) {
    EXPECT_EQ(h[i].step % kEvery, 0) << "changes only at decisions";
    int64_t sum = 0;
    for (int64_t b : h[i].batches) sum += b;
    EXPECT_EQ(sum, Global());
    EXPECT_LE(h[i].batches.back(), h[i - 1].batches.back()) << "the slow rank only loses";
  }
  // Rates 1000 samples/s and 333: the slow rank's share is 1 / (3 (n - 1) + 1).
  const double ideal = double(Global()) / (3.0 * (Size() - 1) + 1);
  EXPECT_NEAR(double(st.rank_batches.back()), ideal, 1.5) << "converged";
  EXPECT_EQ(st.rank_batches, h.back().batches);
  if (Rank() == 0) {
    const nlohmann::json s = Summary("adaptive");
    EXPECT_EQ(s["balance"]["mode"], "adaptive");
    EXPECT_EQ(s["balance"]["every"], kEvery);
    EXPECT_EQ(FromJson(s["balance"]["history"]), h);
    EXPECT_EQ(s["rank_batches"].get<std::vector<int64_t>>(), h.back().batches);
    EXPECT_EQ(s["rank_step_seconds"]["compute"].size(), size_t(Size()));
    // One "balance" record per change, at the step it took effect.
    std::ifstream in(Path("adaptive/metrics.jsonl"));
    std::vector<SplitChange> events;
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json rec = nlohmann::json::parse(line);
      if (rec.value("event", "") == "balance")
        events.push_back({rec["step"], rec["rank_batches"].get<std::vector<int64_t>>()});
    }
    EXPECT_EQ(events, std::vector<SplitChange>(h.begin() + 1, h.end()));
  }
}

TEST_F(BalanceTest, ReplayingTheRecordedHistoryIsBitIdentical) {
  const TrainResult recorded = Train(Adaptive("recorded"), MPI_COMM_WORLD);
  const TrainState want = LoadCheckpoint(recorded.last_checkpoint);
  ASSERT_GE(want.split_history.size(), 3u);
  int runs = 0;
  for (const std::string& source : {Path("recorded/summary.json"), recorded.last_checkpoint}) {
    TrainOptions o = Options("replay-" + std::to_string(++runs));
    o.balance = "replay";
    o.balance_history = source;
    const TrainResult replayed = Train(o, MPI_COMM_WORLD);
    EXPECT_EQ(replayed.param_crc, recorded.param_crc) << source;
    const TrainState got = LoadCheckpoint(replayed.last_checkpoint);
    EXPECT_TRUE(SameParams(got, want)) << source;
    EXPECT_EQ(got.split_history, want.split_history) << source;
  }
  // The history is what made the bits: the even split for the whole run gives others.
  EXPECT_NE(Train(Options("off"), MPI_COMM_WORLD).param_crc, recorded.param_crc);
}

// Stopped at a decision's step (a multiple of kEvery), the resumed run continues with the
// checkpoint's split and history and, the clock being exact, decides as the whole run did.
TEST_F(BalanceTest, ResumedAdaptiveRunContinuesWithTheCheckpointsSplit) {
  const TrainResult whole = Train(Adaptive("whole"), MPI_COMM_WORLD);
  TrainOptions first = Adaptive("parts");
  first.max_steps = 24;
  const TrainResult half = Train(first, MPI_COMM_WORLD);
  const TrainState at = LoadCheckpoint(half.last_checkpoint);
  ASSERT_EQ(at.step, 24);
  ASSERT_GE(at.split_history.size(), 2u);
  TrainOptions rest = Adaptive("parts");
  rest.balance_clock = [&](int64_t step, int rank, int64_t batch, double s) {
    // The resumed run's first step trains with the checkpoint's split.
    if (step == 24) {
      EXPECT_EQ(batch, at.rank_batches[size_t(rank)]);
    }
    return Clock(step, rank, batch, s);
  };
  const TrainResult end = Train(rest, MPI_COMM_WORLD);
  EXPECT_EQ(end.steps, 60);
  EXPECT_EQ(end.param_crc, whole.param_crc);
  EXPECT_EQ(LoadCheckpoint(end.last_checkpoint).split_history,
            LoadCheckpoint(whole.last_checkpoint).split_history);
}

// Balancing off after a balanced run (a requeue without the option): the split chosen at
// start, and the history goes on, so the files still say how every step was split.
TEST_F(BalanceTest, BalancingOffAfterABalancedRunKeepsTheHistory) {
  TrainOptions o = Adaptive("then-off");
  o.max_steps = 24;
  // From step 20 the first rank is the slow one, so the split changes at step 24, the
  // checkpoint's: the resumed run's split replaces that change rather than follow it.
  o.balance_clock = [](int64_t step, int rank, int64_t batch, double) {
    const bool slow = step < 20 ? rank == Size() - 1 : rank == 0;
    return double(batch) * (slow ? 0.003 : 0.001);
  };
  const TrainState at = LoadCheckpoint(Train(o, MPI_COMM_WORLD).last_checkpoint);
  ASSERT_GE(at.split_history.size(), 3u);
  ASSERT_EQ(at.split_history.back().step, 24);
  TrainOptions off = Options("then-off");
  off.max_steps = 30;
  const TrainState end = LoadCheckpoint(Train(off, MPI_COMM_WORLD).last_checkpoint);
  const std::vector<int64_t> even(size_t(Size()), 12);
  EXPECT_EQ(end.rank_batches, even);
  ASSERT_GE(end.split_history.size(), 2u);
  EXPECT_EQ(end.split_history.back(), (SplitChange{24, even}));
  for (size_t i = 0; i + 1 < end.split_history.size(); ++i)
    EXPECT_EQ(end.split_history[i], at.split_history[i]);
}

TEST_F(BalanceTest, ResumedReplayIsBitIdentical) {
  // A history written by hand, with a change right at the resume step.
  const std::vector<int64_t> even(size_t(Size()), 12);
  std::vector<int64_t> a = even, b = even;
  a.front() += 5, a.back() -= 5;
  b.front() -= 7, b.back() += 7;
  nlohmann::json history = {{{"step", 0}, {"rank_batches", even}},
                            {{"step", 9}, {"rank_batches", a}},
                            {{"step", 13}, {"rank_batches", b}},
                            {{"step", 31}, {"rank_batches", even}}};
  if (Rank() == 0)
    std::ofstream(Path("history.json")) << nlohmann::json{{"balance", {{"history", history}}}};
  MPI_Barrier(MPI_COMM_WORLD);
  TrainOptions o = Options("replay-whole");
  o.balance = "replay";
  o.balance_history = Path("history.json");
  o.max_steps = 40;
  const TrainResult whole = Train(o, MPI_COMM_WORLD);
  o.run_dir = Path("replay-parts");
  o.max_steps = 13;
  Train(o, MPI_COMM_WORLD);
  o.max_steps = 40;
  const TrainResult end = Train(o, MPI_COMM_WORLD);
  EXPECT_EQ(end.param_crc, whole.param_crc);
  const TrainState st = LoadCheckpoint(end.last_checkpoint);
  EXPECT_EQ(st.split_history.size(), 4u);
  EXPECT_EQ(st.rank_batches, even);
  TrainOptions off = Options("replay-off");
  off.max_steps = 40;
  EXPECT_NE(Train(off, MPI_COMM_WORLD).param_crc, whole.param_crc);
}

TEST_F(BalanceTest, BadHistoriesAndModesFailEveryRankBeforeWriting) {
  auto fails = [&](TrainOptions o, const std::string& want) {
    int code = 0;
    EXPECT_EQ(Fails(o, &code), want);
    EXPECT_EQ(code, kExitBadInput) << want;
    EXPECT_FALSE(std::filesystem::exists(o.run_dir)) << o.run_dir;
  };
  if (Rank() == 0) {
    std::ofstream(Path("other-ranks.json")) << nlohmann::json{
        {"balance",
         {{"history",
           {{{"step", 0}, {"rank_batches", std::vector<int64_t>(size_t(Size()) + 1, 12)}}}}}}};
    std::ofstream(Path("other-sum.json")) << nlohmann::json{
        {"balance",
         {{"history",
           {{{"step", 0}, {"rank_batches", std::vector<int64_t>(size_t(Size()), 10)}}}}}}};
  }
  MPI_Barrier(MPI_COMM_WORLD);
  TrainOptions o = Options("bad");
  o.balance = "replay";
  o.balance_history = Path("other-ranks.json");
  fails(o, Path("other-ranks.json") + ": balance.history[0].rank_batches: has " +
               std::to_string(Size() + 1) + " batches but " + std::to_string(Size()) +
               " ranks run");
  o.balance_history = Path("other-sum.json");
  fails(o, Path("other-sum.json") + ": balance.history[0].rank_batches: sum to " +
               std::to_string(10 * Size()) + ", not the global batch " + std::to_string(Global()));
  o.balance_history = Path("missing.json");
  fails(o, Path("missing.json") + ": cannot read: No such file or directory");
  o = Options("bad");
  o.balance = "fast";
  fails(o, "--balance: must be off, adaptive or replay, got 'fast'");
  o = Options("bad");
  o.plan_json = nlohmann::json{
      {"format_version", 1},
      {"global_batch", Global()},
      {"lr", 0.05},
      {"balance",
       "replay"}}.dump();
  fails(o, "DLH_PLAN: balance: must be \"off\" or \"adaptive\", got \"replay\"");
}

// The plan may ask for balancing; --balance off overrides it.
TEST_F(BalanceTest, ThePlanCanAskForAdaptiveAndTheOptionOverridesIt) {
  TrainOptions o = Options("plan");
  o.plan_json = nlohmann::json{
      {"format_version", 1},
      {"global_batch", Global()},
      {"lr", 0.05},
      {"balance",
       "adaptive"}}.dump();
  o.balance_every = kEvery;
  o.balance_clock = Clock;
  o.max_steps = 12;
  Train(o, MPI_COMM_WORLD);
  o.run_dir = Path("plan-off");
  o.balance = "off";
  Train(o, MPI_COMM_WORLD);
  if (Rank() == 0) {
    EXPECT_EQ(Summary("plan")["balance"]["mode"], "adaptive");
    EXPECT_FALSE(Summary("plan-off").contains("balance"));
  }
}

}  // namespace
}  // namespace dlh
