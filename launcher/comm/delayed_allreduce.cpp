// DLH — stale-synchronous training's non-blocking sums (delayed_allreduce.hpp).
#include "launcher/comm/delayed_allreduce.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "launcher/comm/mpi.hpp"

namespace dlh {
namespace {

// MPI counts are ints: a larger gradient goes in pieces of this many values.
constexpr size_t kPiece = size_t(1) << 30;

}  // namespace

DelayedAllreduce::DelayedAllreduce(MPI_Comm comm, size_t gradient_values,
                                   const SumMaxAllreduce* control)
    : comm_(comm), gradient_values_(gradient_values), control_(control) {}

DelayedAllreduce::~DelayedAllreduce() {
  for (auto& e : active_)
    for (MPI_Request& r : e->requests)
      if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
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
  for (size_t at = 0; at < gradient_values_; at += kPiece) {
    e->requests.push_back(MPI_REQUEST_NULL);
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, e->gradients.data() + at,
                             int(std::min(kPiece, gradient_values_ - at)), MPI_FLOAT, MPI_SUM,
                             comm_, &e->requests.back()));
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
  active_.push_back(std::move(e));
}

void DelayedAllreduce::poke() {
  for (auto& e : active_) {
    if (e->requests.empty()) continue;
    int done = 0;
    MPI_CHECK(MPI_Testall(int(e->requests.size()), e->requests.data(), &done, MPI_STATUSES_IGNORE));
    if (done) e->requests.clear();
  }
}

void DelayedAllreduce::wait(Entry* e) {
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
  free_.push_back(std::move(active_.front()));
  active_.pop_front();
}

}  // namespace dlh
