// split_mpitest — per-rank batches from a plan on two GPU types, under mpirun (2, 3 and 4
// ranks): an uneven split trains the same model as the even split of the same global batch,
// a one-part plan is the even split bit for bit, resume with an uneven split is bit-exact,
// a resume with another split continues, and bad plans or types fail every rank alike
// before anything is written.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
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

// No batchnorm and no dropout: with them a rank's statistics and masks depend on its slice,
// so only these layers give the same global mean gradient whatever the split.
constexpr const char* kPlainSpec = R"({
  "name": "split",
  "input": {"channels": 1, "height": 8, "width": 8},
  "classes": 4,
  "layers": [
    {"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1},
    {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2},
    {"type": "flatten"},
    {"type": "dense", "units": 16},
    {"type": "relu"},
    {"type": "dense", "units": 4}
  ],
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
  "schedule": {"warmup_epochs": 1, "decay": "cosine"},
  "batch_size": 25,
  "epochs": 2,
  "seed": 5,
  "dataset": "data.h5"
})";

// Batchnorm and dropout, for the resume tests (bit-exact needs no equality across splits).
constexpr const char* kFullSpec = R"({
  "name": "split-bn",
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
  "optimizer": {"type": "adam", "lr": 0.01},
  "batch_size": 25,
  "epochs": 2,
  "seed": 7,
  "dataset": "data.h5"
})";

// alpha: all ranks but one, kAlpha samples each; beta: one rank, kBeta samples.
constexpr int64_t kAlpha = 10, kBeta = 4;
int64_t MixedGlobal() { return (Size() - 1) * kAlpha + kBeta; }

std::string Plan(const std::vector<nlohmann::json>& parts, int64_t global) {
  nlohmann::json p = {{"format_version", 1}, {"global_batch", global},
                      {"lr", 0.05},          {"warmup_epochs", 1},
                      {"why", "test"},       {"allocation", {{"parts", parts}, {"gpus", Size()}}}};
  return p.dump();
}

nlohmann::json Part(const std::string& gpu, int64_t gpus, int64_t batch) {
  return {{"node_type", gpu + "-node"},
          {"gpu", gpu},
          {"nodes", 1},
          {"gpus_per_node", gpus},
          {"per_gpu_batch", batch}};
}

std::string MixedPlan() {
  return Plan({Part("alpha", Size() - 1, kAlpha), Part("beta", 1, kBeta)}, MixedGlobal());
}

class SplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Size() < 2) GTEST_SKIP() << "a mix needs two ranks";
    if (Rank() == 0) {
      WriteSyntheticDataset(dir_.path() + "/data.h5", Shape3{1, 8, 8}, 4, 600, 60, 3);
      std::ofstream(dir_.path() + "/plain.json") << kPlainSpec;
      std::ofstream(dir_.path() + "/full.json") << kFullSpec;
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  TrainOptions Options(const std::string& spec, const std::string& run) const {
    TrainOptions o;
    o.spec_path = dir_.path() + "/" + spec;
    o.run_dir = dir_.path() + "/" + run;
    o.progress = ProgressMode::None;
    o.threads = 1;
    o.eval = false;
    return o;
  }
  // The error every rank got, or "no error"; `code` gets its exit code.
  static std::string Fails(const TrainOptions& o, int* code) {
    try {
      Train(o, MPI_COMM_WORLD);
    } catch (const CollectiveError& e) {
      *code = e.exit_code;
      return e.what();
    }
    return "no error";
  }
  bool Exists(const std::string& run) const {
    return std::filesystem::exists(dir_.path() + "/" + run);
  }
  SharedDir dir_;
};

TEST_F(SplitTest, UnevenSplitTrainsTheSameModelAsTheEvenSplit) {
  TrainOptions even = Options("plain.json", "even");
  even.batch_size = int(MixedGlobal());
  even.max_steps = 40;
  TrainOptions mixed = Options("plain.json", "mixed");
  mixed.plan_json = MixedPlan();
  mixed.max_steps = 40;
  const TrainResult a = Train(even, MPI_COMM_WORLD), b = Train(mixed, MPI_COMM_WORLD);
  ASSERT_EQ(a.steps, b.steps);
  const TrainState sa = LoadCheckpoint(a.last_checkpoint), sb = LoadCheckpoint(b.last_checkpoint);
  EXPECT_TRUE(sa.rank_batches.empty());
  std::vector<int64_t> want(size_t(Size()), kAlpha);
  want.back() = kBeta;
  EXPECT_EQ(sb.rank_batches, want);
  // The same global mean gradient, summed in another order: equal to float rounding, which
  // 40 momentum steps amplify a little (measured with 2, 3 and 4 ranks: at most 2.1e-7).
  ASSERT_EQ(sa.params.size(), sb.params.size());
  double worst = 0;
  for (size_t i = 0; i < sa.params.size(); ++i)
    for (size_t k = 0; k < sa.params[i].data.size(); ++k)
      worst = std::max(worst, double(std::fabs(sa.params[i].data[k] - sb.params[i].data[k])));
  EXPECT_LT(worst, 1e-5);
  EXPECT_NE(a.param_crc, b.param_crc) << "the split changed nothing at all?";
}

TEST_F(SplitTest, OnePartPlanIsTheEvenSplitBitForBit) {
  TrainOptions none = Options("plain.json", "none");
  none.max_steps = 12;
  TrainOptions one = Options("plain.json", "one");
  one.plan_json = Plan({Part("alpha", Size(), 13)}, 25);
  one.gpu_type = "beta";  // ignored: one part means the even split
  one.max_steps = 12;
  EXPECT_EQ(Train(none, MPI_COMM_WORLD).param_crc, Train(one, MPI_COMM_WORLD).param_crc);
}

TEST_F(SplitTest, ResumeWithAnUnevenSplitIsBitExact) {
  TrainOptions full = Options("full.json", "full");
  full.plan_json = MixedPlan();
  full.max_steps = 30;
  // Types instead of positions, beta first: the split is [4, 10, ...].
  full.gpu_type = Rank() == 0 ? "beta" : "alpha";
  full.gpu_type_origin = "DLH_GPU_TYPE";
  const TrainResult whole = Train(full, MPI_COMM_WORLD);
  TrainOptions part = full;
  part.run_dir = dir_.path() + "/parts";
  part.max_steps = 13;
  EXPECT_EQ(Train(part, MPI_COMM_WORLD).steps, 13);
  part.max_steps = 30;
  const TrainResult rest = Train(part, MPI_COMM_WORLD);
  EXPECT_EQ(rest.steps, 30);
  EXPECT_EQ(rest.param_crc, whole.param_crc);
  const TrainState st = LoadCheckpoint(rest.last_checkpoint);
  EXPECT_EQ(st.rank_batches.front(), kBeta);
  EXPECT_EQ(st.rank_batches.back(), kAlpha);
  if (Rank() == 0) {
    std::ifstream in(part.run_dir + "/summary.json");
    const nlohmann::json summary = nlohmann::json::parse(in);
    EXPECT_EQ(summary["batch_split"], "plan");
    EXPECT_EQ(summary["rank_batches"].get<std::vector<int64_t>>(), st.rank_batches);
    EXPECT_EQ(summary["rank_gpu_types"][0], "beta");
  }
}

// Like a different rank count: the run goes on (not bit-identically) and says so; the new
// checkpoints record the new split.
TEST_F(SplitTest, ResumeWithAnotherSplitContinues) {
  TrainOptions o = Options("full.json", "other");
  o.plan_json = MixedPlan();
  o.max_steps = 8;
  Train(o, MPI_COMM_WORLD);
  o.gpu_type = Rank() == 0 ? "beta" : "alpha";  // beta moves from the last rank to the first
  o.max_steps = 16;
  const TrainResult r = Train(o, MPI_COMM_WORLD);
  EXPECT_EQ(r.steps, 16);
  EXPECT_EQ(LoadCheckpoint(r.last_checkpoint).rank_batches.front(), kBeta);
}

TEST_F(SplitTest, UnknownTypeOnOneRankFailsEveryRankBeforeWriting) {
  TrainOptions o = Options("plain.json", "unknown");
  o.plan_json = MixedPlan();
  o.gpu_type = Rank() == Size() - 1 ? "gamma" : "alpha";
  o.gpu_type_origin = "DLH_GPU_TYPE";
  int code = 0;
  EXPECT_EQ(Fails(o, &code), "DLH_GPU_TYPE: 'gamma' (rank " + std::to_string(Size() - 1) +
                                 ") is not a GPU type of DLH_PLAN allocation.parts (alpha, beta)");
  EXPECT_EQ(code, kExitBadInput);
  EXPECT_FALSE(Exists("unknown"));
}

TEST_F(SplitTest, BatchesThatDoNotSumToTheGlobalBatchFail) {
  TrainOptions o = Options("plain.json", "sum");
  o.plan_json = MixedPlan();
  o.gpu_type = "alpha";  // every rank claims alpha
  int code = 0;
  const std::string got = Fails(o, &code);
  EXPECT_EQ(got, "DLH_PLAN: allocation.parts: the per_gpu_batch of the " + std::to_string(Size()) +
                     " ranks sum to " + std::to_string(Size() * kAlpha) +
                     " (alpha: " + std::to_string(Size()) +
                     " x 10, beta: 0 x 4), not global_batch " + std::to_string(MixedGlobal()));
  EXPECT_EQ(code, kExitBadInput);
  EXPECT_FALSE(Exists("sum"));
}

TEST_F(SplitTest, PlanForAnotherRankCountFailsWithoutTypes) {
  TrainOptions o = Options("plain.json", "count");
  o.plan_json =
      Plan({Part("alpha", Size(), kAlpha), Part("beta", 1, kBeta)}, Size() * kAlpha + kBeta);
  int code = 0;
  EXPECT_EQ(Fails(o, &code), "DLH_PLAN: allocation.parts: the plan is for " +
                                 std::to_string(Size() + 1) + " GPUs (alpha " +
                                 std::to_string(Size()) + ", beta 1) but " +
                                 std::to_string(Size()) +
                                 " ranks run; give each rank its type with --gpu-type or "
                                 "DLH_GPU_TYPE");
  EXPECT_EQ(code, kExitBadInput);
  EXPECT_FALSE(Exists("count"));
}

TEST_F(SplitTest, BadPartBatchFails) {
  TrainOptions o = Options("plain.json", "bad");
  nlohmann::json beta = Part("beta", 1, kBeta);
  beta["per_gpu_batch"] = 2.5;
  o.plan_json = Plan({Part("alpha", Size() - 1, kAlpha), beta}, MixedGlobal());
  int code = 0;
  EXPECT_EQ(Fails(o, &code),
            "DLH_PLAN: allocation.parts[1].per_gpu_batch: must be a positive integer (at most "
            "1073741824), got 2.5");
  EXPECT_EQ(code, kExitBadInput);
  EXPECT_FALSE(Exists("bad"));
}

}  // namespace
}  // namespace dlh
