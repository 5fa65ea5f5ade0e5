// DLH — stale-synchronous training's non-blocking sums (delayed_allreduce.hpp).
#include "launcher/comm/delayed_allreduce.hpp"

#include <algorithm>
#include <chrono>
#include <exception>

#include "common/error.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/comm/ring_sum.hpp"

namespace dlh {
namespace {

// How often the thread lets MPI move its sums on: each test advances a round of the
// allreduce; the sleep between leaves the core to the compute. 100 us is a few percent of the
// shortest steps measured here (2 ms) and far below a slow link's allreduce.
constexpr std::chrono::microseconds kTestInterval{100};

}  // namespace

DelayedAllreduce::DelayedAllreduce(MPI_Comm comm, size_t gradient_values,
                                   const SumMaxAllreduce* control)
    : comm_(comm), gradient_values_(gradient_values), control_(control) {
  if (!mpi::ThreadMultiple()) return;
  // Its own communicator: two threads' collectives must never meet on one.
  MPI_CHECK(MPI_Comm_dup(comm_, &thread_comm_));
  MPI_CHECK(MPI_Comm_set_errhandler(thread_comm_, MPI_ERRORS_RETURN));
  worker_ = std::thread([this] { work(); });
}

DelayedAllreduce::~DelayedAllreduce() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    // Unwinding from an error, the thread may stand in an allreduce whose peers are gone: the
    // run ends (MPI_Abort) without waiting for it.
    if (std::uncaught_exceptions() > 0) {
      worker_.detach();
      return;
    }
    worker_.join();
    MPI_Comm_free(&thread_comm_);
    return;
  }
  for (auto& e : active_)
    for (MPI_Request& r : e->requests)
      if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
}

void DelayedAllreduce::work() {
  RingSum gradient_sum(thread_comm_);
  for (;;) {
    Entry* e = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      e = queue_.front();
      queue_.pop_front();
    }
    std::exception_ptr failure;
    try {
      // Started non-blocking and tested every kTestInterval: Open MPI's blocking calls spin on
      // a core while they wait, one the ranks' compute needs (the point of the thread is
      // that the link works while the cores compute). The gradients go round a ring of
      // point-to-point messages (ring_sum.hpp: MPI_Iallreduce's algorithm for few ranks sends
      // them twice, one way at a time); the control values, a few doubles, by MPI_Iallreduce.
      MPI_Request control = MPI_REQUEST_NULL;
      control_->start(e->control.data(), e->control_sum.data(), thread_comm_, &control);
      gradient_sum.start(e->gradients.data(), gradient_values_);
      for (bool summed = false, controlled = false;;) {
        summed = summed || gradient_sum.test();
        if (!controlled) {
          int done = 0;
          MPI_CHECK(MPI_Test(&control, &done, MPI_STATUS_IGNORE));
          controlled = done != 0;
        }
        if (summed && controlled) break;
        std::this_thread::sleep_for(kTestInterval);
      }
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      e->summed = true;
      if (failure && !failure_) failure_ = failure;
    }
    changed_.notify_all();
    if (failure) return;
  }
}

std::unique_ptr<DelayedAllreduce::Entry> DelayedAllreduce::take_free() {
  if (free_.empty()) {
    auto e = std::make_unique<Entry>();
    e->gradients.resize(gradient_values_);
    e->control.resize(control_->size());
    e->control_sum.resize(control_->size());
    return e;
  }
  std::unique_ptr<Entry> e = std::move(free_.back());
  free_.pop_back();
  return e;
}

void DelayedAllreduce::post(int64_t step, const float* gradients, const double* control) {
  std::unique_ptr<Entry> e = take_free();
  e->step = step;
  e->flags = true;
  std::copy(gradients, gradients + gradient_values_, e->gradients.begin());
  std::copy(control, control + control_->size(), e->control.begin());
  e->requests.clear();
  if (threaded()) {
    Entry* queued = e.get();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      e->summed = false;
      active_.push_back(std::move(e));
      queue_.push_back(queued);
    }
    changed_.notify_all();
    return;
  }
  for (size_t at = 0; at < gradient_values_; at += mpi::kMaxMessageValues) {
    e->requests.push_back(MPI_REQUEST_NULL);
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, e->gradients.data() + at,
                             int(std::min(mpi::kMaxMessageValues, gradient_values_ - at)),
                             MPI_FLOAT, MPI_SUM, comm_, &e->requests.back()));
  }
  e->requests.push_back(MPI_REQUEST_NULL);
  control_->start(e->control.data(), e->control_sum.data(), comm_, &e->requests.back());
  active_.push_back(std::move(e));
}

void DelayedAllreduce::restore(int64_t step, const std::vector<float>& gradients,
                               const std::vector<double>& sums) {
  if (gradients.size() != gradient_values_ || sums.size() > control_->size())
    throw Error("in-flight gradients of step " + std::to_string(step) + " do not fit this model");
  std::unique_ptr<Entry> e = take_free();
  e->step = step;
  e->flags = false;
  e->gradients = gradients;
  std::fill(e->control_sum.begin(), e->control_sum.end(), 0.0);
  std::copy(sums.begin(), sums.end(), e->control_sum.begin());
  e->requests.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  e->summed = true;
  active_.push_back(std::move(e));
}

void DelayedAllreduce::poke() {
  if (threaded()) return;  // the thread moves them on
  for (auto& e : active_) {
    if (e->requests.empty()) continue;
    int done = 0;
    MPI_CHECK(MPI_Testall(int(e->requests.size()), e->requests.data(), &done, MPI_STATUSES_IGNORE));
    if (done) e->requests.clear();
  }
}

void DelayedAllreduce::wait(Entry* e) {
  if (threaded()) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return e->summed || failure_; });
    if (failure_) std::rethrow_exception(failure_);
    return;
  }
  if (e->requests.empty()) return;
  MPI_CHECK(MPI_Waitall(int(e->requests.size()), e->requests.data(), MPI_STATUSES_IGNORE));
  e->requests.clear();
}

void DelayedAllreduce::complete_all() {
  for (auto& e : active_) wait(e.get());
}

const DelayedAllreduce::Entry& DelayedAllreduce::wait_oldest() {
  if (active_.empty()) throw Error("no gradients in flight (internal error)");
  wait(active_.front().get());
  return *active_.front();
}

void DelayedAllreduce::release_oldest() {
  std::lock_guard<std::mutex> lock(mutex_);  // the thread holds pointers, not the deque
  free_.push_back(std::move(active_.front()));
  active_.pop_front();
}

}  // namespace dlh
