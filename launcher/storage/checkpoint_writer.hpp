// DLH — checkpoints written in the background: the training loop hands a snapshot in host
// memory to one writer thread and goes on while HDF5 writes and fsyncs it (CheckFreq's
// split of snapshot and persist, Mohan et al., FAST '21).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_cpu.hpp"
#include "launcher/storage/checkpoint.hpp"

namespace dlh {

// A checkpoint that is on disk: renamed into place and its folder synced.
struct WrittenCheckpoint {
  int64_t step = 0;
  std::string path;
  double write_seconds = 0;  // the writer's time for the whole CheckpointDir::save
  // The CPU time of the writer thread and the checksum's thread over that save: where every
  // core trains, what the write takes from training although the loop does not wait for it.
  CpuSeconds cpu;
  uint64_t bytes = 0;  // file size
  // When the writer thread began it: with write_seconds, the write's place on a timeline
  // (metrics.jsonl, --trace).
  std::chrono::steady_clock::time_point started;
};

// One writer thread for the checkpoints of one CheckpointDir. At most one write runs and
// one snapshot exists: submit() waits for the previous write before it refills that
// write's state, so host memory holds one extra copy of the state, never a queue.
// The library is HDF5's serial build, which only one thread may call at a time: while a
// write runs, nothing else in the process may call HDF5 (the trainer reads every file it
// needs before its loop starts). Not itself thread-safe: one thread calls its members.
class CheckpointWriter {
 public:
  CheckpointWriter(CheckpointDir dir, int keep);
  // Waits for a write in flight: a complete file is worth the wait, even while an error
  // unwinds the run. Never throws.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Waits for the previous write to end, throws its failure if it failed, then calls
  // `fill` on this thread with the state the previous write is done with (empty at first)
  // and hands it to the writer. Refilling it reuses memory that is already mapped: a
  // snapshot into fresh pages costs more than the write saves. Returns at once after that;
  // the write's outcome comes from take_written() or wait().
  void submit(const std::function<void(TrainState* state)>& fill);
  // What every checkpoint of the run records besides the state `fill` gives: the classes'
  // names of the data set it trains on (TrainState::class_names). Set before the first
  // submit().
  void set_class_names(std::vector<std::string> names) { class_names_ = std::move(names); }
  // Waits until no write runs; throws the failure of one that failed.
  void wait();
  // Waits as wait() does, then frees the state kept for the next snapshot: a run that
  // will write no more checkpoints gives back one copy of its parameters and optimizer
  // state before the end's own copies (the check that ranks agree). A later submit()
  // takes fresh pages.
  void release_spare();
  // The writes that ended since the last call, oldest first, without waiting; throws the
  // failure of one that failed (once taken, a failure is thrown again by every call: the
  // writer is unusable after it).
  std::vector<WrittenCheckpoint> take_written();
  // Whether the last write failed (the next take_written() or wait() throws).
  bool failed() const;

 private:
  void run();
  void rethrow_failure_locked() const;

  CheckpointDir dir_;  // used by the thread only, once constructed
  const int keep_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<TrainState> pending_;     // handed over, not yet taken by the thread
  TrainState spare_;                      // the last written state, to be refilled
  std::vector<std::string> class_names_;  // the caller's, copied into each state
  bool writing_ = false;
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::vector<WrittenCheckpoint> written_;
  std::thread thread_;  // last: starts once everything it reads exists
};

}  // namespace dlh
