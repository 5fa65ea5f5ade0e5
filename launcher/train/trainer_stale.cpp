// DLH — the Trainer's stale-synchronous training (SyncSpec in common/spec.hpp; trainer_impl.hpp).
//
// Each step's gradients (this rank's share of the global mean, as in synchronous training) and
// its control values go into non-blocking allreduces (launcher/comm/delayed_allreduce.hpp) as
// soon as backward ends. The step then applies, oldest first, every gradient more than
// `staleness` steps old, waiting for its sum only if it is not in yet. A rank therefore waits
// for nothing but a step every rank finished `staleness` steps ago: it runs up to that far
// ahead of the slowest rank, and a slow link's allreduce overlaps that many steps of compute.
// With staleness 0 this is synchronous training (the same sums, added in another order).
//
// Why a delayed allreduce (Pipe-SGD's scheme), not a parameter server or one-sided updates:
// - every rank applies every gradient exactly once, in step order, so the ranks hold one model
//   and the order of application is a function of the step counter: a run reproduces itself
//   without recording an order (the balancer must record its splits) and a checkpoint holds
//   one model in today's layout;
// - the traffic is an allreduce's, spread over every rank's links, where a parameter server's
//   links carry every rank's gradient in and the model out;
// - on a FUNNELED process Open MPI moves one-sided (passive-target) operations and
//   non-blocking point-to-point on only inside MPI calls, like a non-blocking collective, so
//   neither would progress further in the background than an MPI_Iallreduce poked a few times
//   a step.
// The price: every gradient is exactly S steps old, also where all ranks are equally fast.
// Asynchronous SGD with staleness-aware rates (Zhang et al., "Staleness-aware async-SGD",
// IJCAI 2016) divides the rate by each gradient's staleness; here it is the same S for all,
// so the spec's rate applies as given, and a user lowers it where S is large.
//
// Where the pipeline empties: at each epoch's end and at the run's last step every gradient in
// flight is applied, so that evaluations and the final model have every step's gradient. A
// checkpoint elsewhere (steps, seconds, a signal, --max-steps) stores the summed gradients
// still to come (TrainState::in_flight) instead: taking one does not change the run, and a
// resumed run applies them at the steps an uninterrupted one would.
#include <algorithm>
#include <cstdlib>

#include "launcher/comm/collective.hpp"
#include "launcher/train/trainer_impl.hpp"

namespace dlh {
namespace trainer_detail {
namespace {

constexpr char kGradients[] = "/gradients";
constexpr char kSums[] = "/sums";

}  // namespace

// After the control message's size is known (open_loop): the sums' ring, with what a resume
// brought. Another mode resuming a stale-synchronous checkpoint applies its gradients in
// flight at once, in order, and goes on as that mode.
void Trainer::start_stale() {
  std::vector<float>* grads = engine_->gradient_values();
  RunCollectively(comm_.get(), [&] {
    if (spec_.sync.stale_sync() && grads == nullptr)
      throw Error(o_.spec_path + ": sync.mode \"stale_sync\": the " + engine_->device_name() +
                  " engine cannot run it yet (its gradients stay on the device); use "
                  "\"local_sgd\" or \"sync\" there");
    if (!restored_in_flight_.empty() && grads == nullptr)
      throw CheckpointError(resume_path_ +
                            ": holds stale-synchronous training's gradients in flight; resume "
                            "it on the CPU engine (--device cpu)");
    if (spec_.sync.stale_sync() && balance_ != BalanceMode::Off)
      throw Error("--balance: not with sync.mode \"stale_sync\" in " + o_.spec_path +
                  " (a rank's batch must not change while its gradients are in flight)");
  });
  if (!spec_.sync.stale_sync() && restored_in_flight_.empty()) return;
  delayed_ = std::make_unique<DelayedAllreduce>(comm_.get(), grads->size(), control_reduce_.get());
  restore_in_flight();
  if (spec_.sync.stale_sync()) {
    say("stale-synchronous: each step's gradients are summed in the background and applied " +
        std::to_string(spec_.sync.staleness) +
        " step(s) later (a rank runs at most that far ahead of the slowest; the sums " +
        (delayed_->threaded()
             ? "run on a thread of their own"
             : "move on after each forward and backward (no MPI_THREAD_MULTIPLE)") +
        "); every gradient is applied at each epoch's end and at the last step");
    return;
  }
  const size_t n = delayed_->in_flight();
  StepControl ignored;
  while (delayed_->in_flight() > 0) apply_oldest(&ignored);
  delayed_.reset();
  say("applied the checkpoint's " + std::to_string(n) +
      " gradient(s) in flight (it was written by stale-synchronous training)");
}

// resume(): the checkpoint's arrays, checked against this model ("<step>/gradients" then
// "<step>/sums", oldest first); restore_in_flight() puts them in flight.
void Trainer::restore_in_flight() {
  const size_t sums = 2 + stats_len_;
  auto bad = [&](const std::string& why) {
    return CheckpointError(resume_path_ + ": in_flight: " + why);
  };
  if (restored_in_flight_.size() % 2 != 0) throw bad("arrays do not come in pairs");
  int64_t last = -1;
  for (size_t i = 0; i < restored_in_flight_.size(); i += 2) {
    const NamedArray& g = restored_in_flight_[i];
    const NamedArray& s = restored_in_flight_[i + 1];
    const size_t slash = g.name.find('/');
    char* end = nullptr;
    const long long step = std::strtoll(g.name.c_str(), &end, 10);
    if (slash == std::string::npos || end != g.name.c_str() + slash || step < 0 ||
        g.name.substr(slash) != kGradients || s.name != g.name.substr(0, slash) + kSums)
      throw bad("unexpected array names '" + g.name + "', '" + s.name + "'");
    if (step <= last || step >= step_) throw bad("steps out of order at '" + g.name + "'");
    if (g.data.size() != engine_->num_param_values() || s.data.size() != sums)
      throw bad("'" + g.name + "' does not fit this model (" +
                std::to_string(engine_->num_param_values()) + " gradients, " +
                std::to_string(sums) + " sums)");
    last = step;
    delayed_->restore(step, g.data, std::vector<double>(s.data.begin(), s.data.end()));
  }
  restored_in_flight_.clear();
}

// In place of sync_control(): posts this step's sums, then applies what is due. The step's
// allreduce time is what it spent posting and waiting for sums not yet in.
StepControl Trainer::stale_exchange(const StepSums& sums, StepTimes* times) {
  TraceSpan span(tracer_.get(), TraceLane::Compute, "stale exchange", trace_step_);
  const auto t = Clock::now();
  fill_control(sums);
  delayed_->post(step_, engine_->gradient_values()->data(), control_.data());
  times->allreduce += Since(t);
  const bool drain = step_in_epoch_ + 1 == steps_per_epoch_ || step_ + 1 == total_steps_;
  const size_t keep = drain ? 0 : size_t(spec_.sync.staleness);
  const double waited_before = stale_wait_seconds_;
  StepControl control;
  while (delayed_->in_flight() > keep) apply_oldest(&control);
  if (drain) ++stale_drains_;
  times->allreduce += stale_wait_seconds_ - waited_before;
  allreduce_seconds_ += times->allreduce;
  return control;
}

// The oldest gradient in flight, summed, becomes the engine's and is applied with the rate of
// its own step; its control values are committed, its flags merged into `control` (the
// strongest signal wins), and rank 0's record of its step gets its loss.
void Trainer::apply_oldest(StepControl* control) {
  const auto t = Clock::now();
  const DelayedAllreduce::Entry& e = delayed_->wait_oldest();
  stale_wait_seconds_ += Since(t);
  const StepControl c = apply_control(e.control_sum.data(), e.flags);
  if (SignalStrength(c.signal) > SignalStrength(control->signal)) control->signal = c.signal;
  control->time_due = control->time_due || c.time_due;
  std::vector<float>& grads = *engine_->gradient_values();
  std::copy(e.gradients.begin(), e.gradients.end(), grads.begin());
  {
    TraceSpan span(tracer_.get(), TraceLane::Compute, "optimizer", trace_step_);
    engine_->update(LearningRate(spec_, e.step - step_base_, steps_per_epoch_), e.step);
  }
  if (e.flags) stale_sums_arrived(e.step + 1, c.loss_sum, c.correct_sum);
  ++stale_applied_;
  delayed_->release_oldest();
}

// Rank 0 (the snapshot's rank): the gradients still to come and their sums, every entry
// complete (write_checkpoint waited for them on every rank).
void Trainer::snapshot_in_flight(TrainState* st) const {
  st->in_flight.resize(delayed_ ? 2 * delayed_->in_flight() : 0);
  if (!delayed_) return;
  const size_t sums = 2 + stats_len_;
  size_t i = 0;
  for (const auto& e : delayed_->entries()) {
    const std::string step = Printf("%09lld", (long long)e->step);
    NamedArray& g = st->in_flight[i++];
    g.name = step + kGradients;
    g.shape = {int(e->gradients.size())};
    g.data = e->gradients;
    NamedArray& s = st->in_flight[i++];
    s.name = step + kSums;
    s.shape = {int(sums)};
    s.data.assign(e->control_sum.begin(), e->control_sum.begin() + long(sums));
  }
}

void Trainer::stale_sums_arrived(int64_t step, double loss_sum, double correct_sum) {
  if (rank_ != 0) return;
  StepRecord& r = pending_records_[step];
  r.loss_sum = loss_sum;
  r.correct_sum = correct_sum;
  r.summed = true;
  flush_records();
}

// The waiting records, in step order, as far as both their times and their sums are in.
void Trainer::flush_records() {
  while (!pending_records_.empty()) {
    const auto first = pending_records_.begin();
    if (!first->second.timed || !first->second.summed) return;
    write_record(first->second);
    pending_records_.erase(first);
  }
}

// After the loop: a run that stopped early (a signal, --max-steps) leaves gradients in flight
// for its checkpoint; their steps' records are written now, from the sums.
void Trainer::finish_stale() {
  if (!delayed_) return;
  delayed_->complete_all();
  for (const auto& e : delayed_->entries())
    if (e->flags) stale_sums_arrived(e->step + 1, e->control_sum[0], e->control_sum[1]);
}

nlohmann::json Trainer::stale_summary() const {
  return {{"mode", "stale_sync"},
          {"staleness", spec_.sync.staleness},
          {"applied", stale_applied_},
          {"drains", stale_drains_},
          {"in_flight_at_end", delayed_ ? delayed_->in_flight() : 0},
          {"wait_s", stale_wait_seconds_}};
}

}  // namespace trainer_detail
}  // namespace dlh
