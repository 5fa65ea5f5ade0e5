// DLH — the engine's thread pool (see thread_pool.hpp for why it exists).
//
// Workers claim blocks from a shared counter, so a core that another process steals for a
// while simply computes fewer blocks. Between jobs a worker spins for a few tens of
// microseconds (a training step issues its parallel passes back to back) and then sleeps
// on a condition variable: an idle engine costs no CPU.
#include "launcher/nn/thread_pool.hpp"

#include <cblas.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DLH_PAUSE() _mm_pause()
#else
#define DLH_PAUSE() std::this_thread::yield()
#endif

namespace dlh {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kWorkerSpin = std::chrono::microseconds(50);   // before a worker sleeps
constexpr auto kCallerSpin = std::chrono::microseconds(200);  // before the caller sleeps

// Index of the pool thread running a block on this thread, -1 outside blocks: a nested
// ParallelFor runs inline and keeps that index, so per-thread scratch stays private.
thread_local int t_thread = -1;

// Spins until pred() holds or `limit` has passed; returns pred().
template <class Pred>
bool SpinFor(Clock::duration limit, Pred pred) {
  const auto end = Clock::now() + limit;
  for (int i = 0;; ++i) {
    if (pred()) return true;
    DLH_PAUSE();
    if ((i & 31) == 31 && Clock::now() >= end) return pred();
  }
}

class Pool {
 public:
  explicit Pool(int threads) {
    for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { Work(t); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int threads() const { return int(workers_.size()) + 1; }

  void Run(int blocks, detail::BlockFn fn, void* ctx) {
    std::lock_guard<std::mutex> one_job(dispatch_mu_);
    fn_ = fn;
    ctx_ = ctx;
    blocks_ = blocks;
    error_ = nullptr;
    next_.store(0, std::memory_order_relaxed);
    active_.store(int(workers_.size()), std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);
      generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    wake_.notify_all();
    Claim(0);
    auto all_done = [this] { return active_.load(std::memory_order_acquire) == 0; };
    if (!SpinFor(kCallerSpin, all_done)) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, all_done);
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void Claim(int thread) {
    t_thread = thread;
    for (int b; (b = next_.fetch_add(1, std::memory_order_relaxed)) < blocks_;) {
      try {
        fn_(ctx_, b, thread);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    t_thread = -1;
  }

  void Work(int thread) {
    uint64_t seen = 0;
    for (;;) {
      auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!SpinFor(kWorkerSpin, fresh)) {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return stop_ || fresh(); });
        if (stop_) return;
      }
      seen = generation_.load(std::memory_order_acquire);
      Claim(thread);
      if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // the caller may be between check and wait
        done_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex dispatch_mu_;  // one job at a time, whoever calls
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> next_{0}, active_{0};
  bool stop_ = false;
  detail::BlockFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int blocks_ = 0;
  std::exception_ptr error_;
};

std::mutex g_mu;
std::unique_ptr<Pool> g_pool;  // null: one thread

// The trainer tells OpenBLAS how many threads a rank may use; take that count over and
// keep OpenBLAS itself single-threaded so that only the engine's threads run.
void AdoptBlasThreads() {
  const int blas = openblas_get_num_threads();
  if (blas > 1) SetCpuThreads(blas);
}

}  // namespace

void SetCpuThreads(int threads) {
  if (threads < 1) threads = 1;
  openblas_set_num_threads(1);
  std::lock_guard<std::mutex> lock(g_mu);
  const int have = g_pool ? g_pool->threads() : 1;
  if (have == threads) return;
  g_pool.reset();
  if (threads > 1) g_pool = std::make_unique<Pool>(threads);
}

int CpuThreads() {
  AdoptBlasThreads();
  std::lock_guard<std::mutex> lock(g_mu);
  return g_pool ? g_pool->threads() : 1;
}

namespace detail {

void RunBlocks(int blocks, BlockFn fn, void* ctx) {
  if (blocks <= 0) return;
  AdoptBlasThreads();
  Pool* pool = g_pool.get();  // only SetCpuThreads replaces it, never during a step
  if (pool == nullptr || blocks == 1 || t_thread >= 0) {
    const int thread = t_thread >= 0 ? t_thread : 0;
    for (int b = 0; b < blocks; ++b) fn(ctx, b, thread);
    return;
  }
  pool->Run(blocks, fn, ctx);
}

}  // namespace detail
}  // namespace dlh
