// A host fake of the CUDA device for GradSyncLogic (launcher/engine/cuda/grad_sync_logic.hpp):
// a stream is a thread that runs its work in order, an event a position in a stream, "device"
// memory is host memory, and the collectives are the NCCL stand-in's on host memory, run by
// the stream's thread. So the gradient sync's own code runs as on a GPU (work queued on
// streams, events polled, collectives in flight while the main thread goes on, MPI on the
// main thread), on a machine without one.
#pragma once

#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace dlh::test {

class HostStream {
 public:
  HostStream() : worker_([this] { run(); }) {}
  ~HostStream() {
    quit_flag_ = true;  // ends a wait the thread is in
    {
      std::lock_guard<std::mutex> lock(m_);
      quit_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  // Queues `work`; returns its position (1, 2, ...).
  uint64_t post(std::function<void()> work) {
    std::lock_guard<std::mutex> lock(m_);
    queue_.push_back(std::move(work));
    cv_.notify_all();
    return ++posted_;
  }
  uint64_t posted() const {
    std::lock_guard<std::mutex> lock(m_);
    return posted_;
  }
  uint64_t completed() const { return completed_.load(); }
  bool quitting() const { return quit_flag_.load(); }
  void synchronize() const {
    const uint64_t target = posted();
    while (completed() < target && !quitting())
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return quit_ || !queue_.empty(); });
        if (quit_) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();
      ++completed_;
    }
  }
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t posted_ = 0;
  std::atomic<uint64_t> completed_{0};
  bool quit_ = false;
  std::atomic<bool> quit_flag_{false};
  std::thread worker_;
};

struct HostEvent {
  HostStream* stream = nullptr;
  uint64_t position = 0;
};

// Owners with .get(), as the CUDA handles have.
template <class T>
class Owner {
 public:
  Owner() = default;
  explicit Owner(std::unique_ptr<T> p) : p_(std::move(p)) {}
  T* get() const { return p_.get(); }

 private:
  std::unique_ptr<T> p_;
};

struct HostDevice {
  using Stream = Owner<HostStream>;
  using Event = Owner<HostEvent>;
  using StreamRef = HostStream*;
  using EventRef = HostEvent*;
  template <class T>
  class HostArray {
   public:
    void resize(size_t n) { v_.assign(n, T()); }
    T* get() { return v_.data(); }

   private:
    std::vector<T> v_;
  };

  Stream make_stream() { return Stream(std::make_unique<HostStream>()); }
  Event make_event() { return Event(std::make_unique<HostEvent>()); }
  void record(HostEvent* e, HostStream* s) {
    e->stream = s;
    e->position = s->posted();
  }
  void wait_event(HostStream* s, HostEvent* e) {
    HostStream* source = e->stream;
    const uint64_t position = e->position;  // the event may be recorded again meanwhile
    s->post([=] {
      while (source && source->completed() < position && !s->quitting())
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    });
  }
  bool query(HostEvent* e) { return e->stream == nullptr || e->stream->completed() >= e->position; }
  void to_host(float* host, const float* device, size_t n, HostStream* s) {
    s->post([=] { std::memcpy(host, device, n * sizeof(float)); });
  }
  void to_device(float* device, const float* host, size_t n, HostStream* s) {
    s->post([=] { std::memcpy(device, host, n * sizeof(float)); });
  }
  void synchronize(HostStream* s) {
    if (s) s->synchronize();
  }
  // The stand-in runs a collective on host memory in the calling thread: the stream's. Its
  // failures show, as NCCL's do, in ncclCommGetAsyncError.
  ncclResult_t all_reduce(const float* in, float* out, size_t n, ncclComm_t c, HostStream* s) {
    s->post([=] { ncclAllReduce(in, out, n, ncclFloat, ncclSum, c, nullptr); });
    return ncclSuccess;
  }
  ncclResult_t reduce_scatter(const float* in, float* out, size_t n, ncclComm_t c, HostStream* s) {
    s->post([=] { ncclReduceScatter(in, out, n, ncclFloat, ncclSum, c, nullptr); });
    return ncclSuccess;
  }
  ncclResult_t all_gather(const float* in, float* out, size_t n, ncclComm_t c, HostStream* s) {
    s->post([=] { ncclAllGather(in, out, n, ncclFloat, c, nullptr); });
    return ncclSuccess;
  }
  ncclResult_t reduce(const float* in, float* out, size_t n, int root, ncclComm_t c,
                      HostStream* s) {
    s->post([=] { ncclReduce(in, out, n, ncclFloat, ncclSum, root, c, nullptr); });
    return ncclSuccess;
  }
  ncclResult_t broadcast(const float* in, float* out, size_t n, int root, ncclComm_t c,
                         HostStream* s) {
    s->post([=] { ncclBroadcast(in, out, n, ncclFloat, root, c, nullptr); });
    return ncclSuccess;
  }
};

}  // namespace dlh::test
