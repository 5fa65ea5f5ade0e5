// train_mpitest — data-parallel training in-process under mpirun (2 and 3 ranks):
// ranks stay bit-identical, training learns, resume equals an uninterrupted run, and
// bad input fails on every rank alike.
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "launcher/comm/collective.hpp"
#include "launcher/data/dataset.hpp"
#include "launcher/storage/checkpoint.hpp"
#include "launcher/train/trainer.hpp"
#include "tests/mpi/mpi_test_util.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

using test::Rank;
using test::SharedDir;
using test::Size;

constexpr const char* kSpec = R"({
  "name": "mpitest",
  "input": {"channels": 1, "height": 8, "width": 8},
  "classes": 4,
  "layers": [
    {"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1},
    {"type": "batchnorm"},
    {"type": "relu"},
    {"type": "maxpool2d", "kernel": 2},
    {"type": "flatten"},
    {"type": "dropout", "rate": 0.1},
    {"type": "dense", "units": 16},
    {"type": "relu"},
    {"type": "dense", "units": 4}
  ],
  "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": true, "weight_decay": 0.0001},
  "schedule": {"warmup_epochs": 1, "decay": "cosine"},
  "batch_size": 25,
  "epochs": 3,
  "seed": 11,
  "dataset": "data.h5"
})";

class TrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Rank() == 0) {
      WriteSyntheticDataset(dir_.path() + "/data.h5", Shape3{1, 8, 8}, 4, 1200, 200, 5);
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
    return o;
  }
  SharedDir dir_;
};

TEST_F(TrainTest, RanksStayBitIdenticalAndLearn) {
  TrainResult r = Train(Options("a"), MPI_COMM_WORLD);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.steps, 3 * (1200 / 25));
  // Train() already compares checksums across ranks; check it here independently too.
  uint32_t crc = r.param_crc, max = 0, min = 0;
  MPI_Allreduce(&crc, &max, 1, MPI_UINT32_T, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&crc, &min, 1, MPI_UINT32_T, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_EQ(min, max);
  EXPECT_GT(r.test_accuracy, 0.6) << "synthetic 4-class data should be learnable";
  // Final checkpoint exists and loads.
  TrainState st = LoadCheckpoint(r.last_checkpoint);
  EXPECT_EQ(st.step, r.steps);
}

TEST_F(TrainTest, ResumeEqualsUninterruptedRun) {
  TrainResult full = Train(Options("full"), MPI_COMM_WORLD);
  TrainOptions first = Options("split");
  first.max_steps = 67;  // mid-epoch, not on a checkpoint boundary of the full run
  TrainResult part = Train(first, MPI_COMM_WORLD);
  EXPECT_EQ(part.steps, 67);
  EXPECT_FALSE(part.finished);
  TrainResult rest = Train(Options("split"), MPI_COMM_WORLD);
  EXPECT_TRUE(rest.finished);
  EXPECT_EQ(rest.param_crc, full.param_crc);
  TrainState a = LoadCheckpoint(full.last_checkpoint), b = LoadCheckpoint(rest.last_checkpoint);
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) EXPECT_EQ(a.params[i].data, b.params[i].data);
  for (size_t i = 0; i < a.optimizer_state.size(); ++i)
    EXPECT_EQ(a.optimizer_state[i].data, b.optimizer_state[i].data);
}

TEST_F(TrainTest, MissingSpecFailsOnEveryRank) {
  TrainOptions o = Options("bad");
  o.spec_path = dir_.path() + "/nope.json";
  try {
    Train(o, MPI_COMM_WORLD);
    FAIL() << "expected an error";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(e.exit_code, kExitBadInput);
    EXPECT_NE(std::string(e.what()).find("nope.json"), std::string::npos) << e.what();
  }
}

TEST_F(TrainTest, DataShapeMismatchFailsOnEveryRank) {
  if (Rank() == 0) WriteSyntheticDataset(dir_.path() + "/wrong.h5", Shape3{3, 8, 8}, 4, 100, 20, 1);
  MPI_Barrier(MPI_COMM_WORLD);
  TrainOptions o = Options("bad");
  o.data_path = dir_.path() + "/wrong.h5";
  try {
    Train(o, MPI_COMM_WORLD);
    FAIL() << "expected an error";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(e.exit_code, kExitBadInput);
    EXPECT_NE(std::string(e.what()).find("3x8x8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dlh
