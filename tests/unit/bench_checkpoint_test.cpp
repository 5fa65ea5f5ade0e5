// DLH — tests of `dlh-launch bench-checkpoint`'s measurement: the state has the size asked
// for, and the timed saves write real checkpoints that load back, rotated like training's.
#include "launcher/bench/bench_checkpoint.hpp"

#include <gtest/gtest.h>

#include <string>

#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

size_t Bytes(const std::vector<NamedArray>& arrays) {
  size_t n = 0;
  for (const NamedArray& a : arrays) n += a.data.size() * sizeof(float);
  return n;
}

TEST(BenchCheckpoint, StateHasParametersAndAsMuchMomentum) {
  const size_t bytes = (size_t(17) << 20) + 12;  // more than one 16 MiB array, and a tail
  TrainState s = MakeBenchState(bytes);
  EXPECT_EQ(Bytes(s.params), bytes);
  EXPECT_EQ(Bytes(s.optimizer_state), bytes);
  ASSERT_EQ(s.params.size(), 2u);
  EXPECT_EQ(s.optimizer_state[1].name, s.params[1].name + "/momentum");
  EXPECT_NE(s.params[0].data[0], s.params[0].data[1]);  // varied values, not zeros
}

TEST(BenchCheckpoint, TimesSavesThatLoadBack) {
  test::TempDir tmp("dlh-bench-ckpt");
  const std::string dir = tmp / "ckpt";
  CheckpointBenchOptions o;
  o.param_bytes = {size_t(1) << 20, size_t(2) << 20};
  o.repeats = 3;
  o.dir = dir;
  o.keep = 2;
  nlohmann::json r = RunCheckpointBench(o);
  ASSERT_EQ(r["sizes"].size(), 2u);
  for (const auto& s : r["sizes"]) {
    EXPECT_EQ(s["seconds"].size(), 3u);
    EXPECT_GT(double(s["median_s"]), 0.0);
    // The file holds both halves of the state plus a little metadata.
    EXPECT_GE(size_t(s["file_bytes"]), 2 * size_t(s["param_bytes"]));
    EXPECT_LT(size_t(s["file_bytes"]), 2 * size_t(s["param_bytes"]) + (size_t(1) << 20));
  }
  CheckpointDir ckpt(dir);
  const auto files = ckpt.list_newest_first();
  ASSERT_EQ(files.size(), 2u);  // six saves, keep 2
  EXPECT_EQ(files[0], ckpt.path_for_step(6));
  TrainState loaded = LoadCheckpoint(files[0]);
  EXPECT_EQ(Bytes(loaded.params), size_t(2) << 20);
  EXPECT_EQ(loaded.optimizer_state[0].data,
            MakeBenchState(size_t(2) << 20).optimizer_state[0].data);

  // A second run into the same folder continues the step count instead of overwriting.
  o.param_bytes = {size_t(1) << 20};
  o.repeats = 1;
  RunCheckpointBench(o);
  EXPECT_EQ(ckpt.list_newest_first()[0], ckpt.path_for_step(7));
}

}  // namespace
}  // namespace dlh
