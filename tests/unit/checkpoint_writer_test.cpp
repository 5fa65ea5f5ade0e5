// DLH — tests of the background checkpoint writer: files land complete and in order, the
// snapshot is taken only once the previous write ended, a failure reaches the caller, and
// a writer that goes away finishes the file it was writing.
#include "launcher/storage/checkpoint_writer.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

// A state of `floats` parameters whose values say which step they belong to.
TrainState StateAt(int64_t step, size_t floats = 1000) {
  TrainState s;
  s.spec_json = "{}";
  s.step = step;
  s.world_size = 1;
  s.optimizer = "sgd";
  s.params.push_back({"00.dense/weight", {int(floats)}, std::vector<float>(floats, float(step))});
  return s;
}

class CheckpointWriterTest : public ::testing::Test {
 protected:
  // A file where the checkpoint folder should be: a write cannot create its temporary file.
  std::string BlockedDir() const {
    const std::string blocked = tmp_.path() + "/blocked";
    std::FILE* f = std::fopen(blocked.c_str(), "w");
    if (f) std::fclose(f);
    return blocked;
  }
  test::TempDir tmp_{"dlh-ckpt-writer-test"};
  const CheckpointDir dir_{tmp_.path() + "/checkpoints"};
};

TEST_F(CheckpointWriterTest, WritesEverySubmittedStateInOrder) {
  CheckpointWriter writer(dir_, 10);
  for (int64_t step = 1; step <= 5; ++step)
    writer.submit([&](TrainState* s) { *s = StateAt(step); });
  writer.wait();
  const std::vector<WrittenCheckpoint> written = writer.take_written();
  ASSERT_EQ(written.size(), 5u);
  for (size_t i = 0; i < written.size(); ++i) {
    EXPECT_EQ(written[i].step, int64_t(i + 1));
    EXPECT_EQ(written[i].path, dir_.path_for_step(int64_t(i + 1)));
    EXPECT_GT(written[i].bytes, 4000u);
    EXPECT_GE(written[i].write_seconds, 0);
    const TrainState back = LoadCheckpoint(written[i].path);
    EXPECT_EQ(back.step, int64_t(i + 1));
    EXPECT_EQ(back.params.at(0).data.at(999), float(i + 1));
  }
  EXPECT_TRUE(writer.take_written().empty());  // taken once
}

// The write's CPU time counts the writer's thread and the checksum's: a 32 MB state takes
// both some milliseconds of work (the checksum's in user space), never nothing.
TEST_F(CheckpointWriterTest, MeasuresTheWritesCpuTime) {
  CpuSeconds checksum;
  SaveCheckpoint(tmp_.path() + "/direct.h5", StateAt(1, 8u << 20), &checksum);
  EXPECT_GT(checksum.user, 0);
  EXPECT_GE(checksum.system, 0);

  CheckpointWriter writer(dir_, 2);
  writer.submit([&](TrainState* s) { *s = StateAt(2, 8u << 20); });
  writer.wait();
  const std::vector<WrittenCheckpoint> written = writer.take_written();
  ASSERT_EQ(written.size(), 1u);
  EXPECT_GT(written[0].cpu.user, 0);
  EXPECT_GE(written[0].cpu.system, 0);
}

TEST_F(CheckpointWriterTest, RotatesLikeTheFolder) {
  {
    CheckpointWriter writer(dir_, 2);
    for (int64_t step = 1; step <= 4; ++step)
      writer.submit([&](TrainState* s) { *s = StateAt(step); });
  }
  EXPECT_EQ(dir_.list_newest_first(),
            (std::vector<std::string>{dir_.path_for_step(4), dir_.path_for_step(3)}));
}

// The snapshot function runs only after the previous write is complete: at most one copy of
// the state waits besides the live one, and the file it follows is already on disk.
TEST_F(CheckpointWriterTest, SnapshotWaitsForThePreviousWrite) {
  CheckpointWriter writer(dir_, 10);
  writer.submit(
      [](TrainState* s) { *s = StateAt(1, 4u << 20); });  // 16 MiB: the write takes a while
  bool previous_on_disk = false;
  writer.submit([&](TrainState* s) {
    struct stat st {};
    previous_on_disk = stat(dir_.path_for_step(1).c_str(), &st) == 0;
    *s = StateAt(2);
  });
  EXPECT_TRUE(previous_on_disk);
  writer.wait();
  EXPECT_EQ(writer.take_written().size(), 2u);
}

// The caller goes on while the file is written: submit() returns before the write ends.
TEST_F(CheckpointWriterTest, SubmitReturnsBeforeTheWriteEnds) {
  CheckpointWriter writer(dir_, 10);
  int in_flight = 0;
  for (int64_t step = 1; step <= 5; ++step) {
    writer.submit([&](TrainState* s) { *s = StateAt(step, 8u << 20); });  // 32 MiB, fsynced
    struct stat st {};
    in_flight += stat(dir_.path_for_step(step).c_str(), &st) != 0;
  }
  writer.wait();
  EXPECT_GT(in_flight, 0) << "every write had ended before submit() returned";
  EXPECT_EQ(writer.take_written().size(), 5u);
}

TEST_F(CheckpointWriterTest, AFailedWriteReachesTheCallerAndStaysFailed) {
  const std::string blocked = BlockedDir();
  CheckpointWriter writer(CheckpointDir(blocked), 3);
  writer.submit([](TrainState* s) { *s = StateAt(7); });
  EXPECT_THROW(writer.wait(), CheckpointError);
  EXPECT_TRUE(writer.failed());
  EXPECT_THROW(writer.take_written(), CheckpointError);
  bool snapshot_taken = false;
  EXPECT_THROW(writer.submit([&](TrainState* s) {
    snapshot_taken = true;
    *s = StateAt(8);
  }),
               CheckpointError);
  EXPECT_FALSE(snapshot_taken);
}

TEST_F(CheckpointWriterTest, ErrorNamesTheFile) {
  const std::string blocked = BlockedDir();
  CheckpointWriter writer(CheckpointDir(blocked), 3);
  writer.submit([](TrainState* s) { *s = StateAt(7); });
  try {
    writer.wait();
    FAIL() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(blocked), std::string::npos) << e.what();
  }
}

// An error unwinding the run destroys the writer mid-write: the file still lands whole.
TEST_F(CheckpointWriterTest, DestructorFinishesTheWriteInFlight) {
  {
    CheckpointWriter writer(dir_, 3);
    writer.submit([](TrainState* s) { *s = StateAt(3, 4u << 20); });
  }
  const TrainState back = LoadCheckpoint(dir_.path_for_step(3));
  EXPECT_EQ(back.params.at(0).data.back(), 3.0f);
}

// Each snapshot refills the arrays of the one written before it: no fresh memory to fault in.
TEST_F(CheckpointWriterTest, SnapshotRefillsThePreviousState) {
  CheckpointWriter writer(dir_, 10);
  const float* first_data = nullptr;
  writer.submit([&](TrainState* s) {
    EXPECT_TRUE(s->params.empty());  // nothing written yet
    *s = StateAt(1, 1u << 16);
    first_data = s->params[0].data.data();
  });
  writer.submit([&](TrainState* s) {
    ASSERT_EQ(s->params.size(), 1u);
    EXPECT_EQ(s->params[0].data.data(), first_data);
    EXPECT_EQ(s->params[0].data.back(), 1.0f);  // step 1's, written and handed back
    s->step = 2;
    s->params[0].data.assign(1u << 16, 2.0f);
    EXPECT_EQ(s->params[0].data.data(), first_data);
  });
  writer.wait();
  EXPECT_EQ(LoadCheckpoint(dir_.path_for_step(1)).params.at(0).data.back(), 1.0f);
  EXPECT_EQ(LoadCheckpoint(dir_.path_for_step(2)).params.at(0).data.back(), 2.0f);
}

// release_spare() waits for the write in flight and frees the kept state: the next snapshot
// starts empty, and the writer still writes it.
TEST_F(CheckpointWriterTest, ReleasedSpareLeavesTheNextSnapshotEmpty) {
  CheckpointWriter writer(dir_, 10);
  writer.submit([&](TrainState* s) { *s = StateAt(1, 1u << 16); });
  writer.release_spare();
  EXPECT_TRUE(std::filesystem::exists(dir_.path_for_step(1)));  // waited for
  writer.submit([&](TrainState* s) {
    EXPECT_TRUE(s->params.empty());
    EXPECT_EQ(s->step, 0);
    *s = StateAt(2);
  });
  writer.wait();
  EXPECT_EQ(LoadCheckpoint(dir_.path_for_step(2)).params.at(0).data.back(), 2.0f);
}

// release_spare() reports a failed write as wait() does.
TEST_F(CheckpointWriterTest, ReleaseSpareThrowsAFailedWrite) {
  CheckpointWriter writer(CheckpointDir(BlockedDir()), 10);
  writer.submit([&](TrainState* s) { *s = StateAt(1); });
  EXPECT_THROW(writer.release_spare(), CheckpointError);
}

// A writer whose thread never got work stops at once.
TEST_F(CheckpointWriterTest, IdleWriterStops) {
  { CheckpointWriter writer(dir_, 3); }
  EXPECT_TRUE(dir_.list_newest_first().empty());
}

}  // namespace
}  // namespace dlh
