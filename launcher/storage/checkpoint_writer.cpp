// DLH — the background checkpoint writer (checkpoint_writer.hpp).
#include "launcher/storage/checkpoint_writer.hpp"

#include <sys/stat.h>

#include <chrono>
#include <utility>

namespace dlh {

CheckpointWriter::CheckpointWriter(CheckpointDir dir, int keep)
    : dir_(std::move(dir)), keep_(keep), thread_([this] { run(); }) {}

CheckpointWriter::~CheckpointWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void CheckpointWriter::rethrow_failure_locked() const {
  if (failure_) std::rethrow_exception(failure_);
}

void CheckpointWriter::submit(const std::function<void(TrainState* state)>& fill) {
  TrainState state;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !writing_ && !pending_; });
    rethrow_failure_locked();
    state = std::move(spare_);
  }
  // Outside the lock: the snapshot (a copy of the parameters) is the caller's time, and the
  // thread is idle until it is handed over.
  fill(&state);
  state.class_names = class_names_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_ = std::move(state);
  }
  changed_.notify_all();
}

void CheckpointWriter::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return !writing_ && !pending_; });
  rethrow_failure_locked();
}

void CheckpointWriter::release_spare() {
  TrainState freed;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !writing_ && !pending_; });
    rethrow_failure_locked();
    std::swap(freed, spare_);
  }
  // `freed` goes here, outside the lock.
}

std::vector<WrittenCheckpoint> CheckpointWriter::take_written() {
  std::lock_guard<std::mutex> lock(mutex_);
  rethrow_failure_locked();
  return std::exchange(written_, {});
}

bool CheckpointWriter::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_ != nullptr;
}

void CheckpointWriter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || pending_; });
    if (!pending_) return;  // stopping, and nothing handed over is left unwritten
    TrainState state = std::move(*pending_);
    pending_.reset();
    writing_ = true;
    lock.unlock();

    WrittenCheckpoint done;
    std::exception_ptr failure;
    const auto start = std::chrono::steady_clock::now();
    const CpuSeconds cpu_before = ThisThreadCpu();
    try {
      done.step = state.step;
      done.started = start;
      CpuSeconds checksum_cpu;
      done.path = dir_.save(state, keep_, &checksum_cpu);
      done.write_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      done.cpu = ThisThreadCpu() - cpu_before;
      done.cpu += checksum_cpu;
      struct stat st {};
      if (stat(done.path.c_str(), &st) == 0) done.bytes = uint64_t(st.st_size);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    spare_ = std::move(state);  // the next snapshot refills it: one copy at a time
    writing_ = false;
    if (failure)
      failure_ = failure;
    else
      written_.push_back(std::move(done));
    changed_.notify_all();
  }
}

}  // namespace dlh
