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
// so the spec's rate applies as given. With momentum 0.9 that price was high: the example
// Fashion-MNIST spec lost 4.08 points of test accuracy after 2 epochs at staleness 2 (make
// bench, 2026-12-01), as asynchrony adds momentum of its own (Mitliagkas et al.,
// "Asynchrony begets momentum", 2016).
//
// So by default (sync.own_gradient_first) each rank also steps at once with its own gradient:
// Delayed Gradient Averaging (Zhu et al., NeurIPS 2021). The model a rank's next forward runs
// is the model every rank agrees on (every sum applied so far) advanced by this rank's own
// gradients of the S steps in flight, each scaled to estimate its step's mean gradient and
// applied by the optimizer with its step's rate. When a step's sum arrives it replaces the
// rank's own gradient of that step. Kept apart, the agreed model stays the same bits on every
// rank and is what a checkpoint, an evaluation and the end hold; the rank's own steps are
// redone on it each step (S optimizer updates: a few milliseconds where a step takes tens).
// A checkpoint outside a drain also stores every rank's own gradients in flight (rank 0
// gathers them), so that a run resumed on as many ranks redoes the same own steps and ends
// bit-identical; on another rank count the ranks step with the sums in flight instead.
//
// Where the pipeline empties: at each epoch's end and at the run's last step every gradient in
// flight is applied, so that evaluations and the final model have every step's gradient. A
// checkpoint elsewhere (steps, seconds, a signal, --max-steps) stores the summed gradients
// still to come (TrainState::in_flight) instead: taking one does not change the run, and a
// resumed run applies them at the steps an uninterrupted one would.
#include <algorithm>
#include <cstdlib>
#include <limits>

#include "launcher/comm/collective.hpp"
#include "launcher/train/trainer_impl.hpp"

namespace dlh {
namespace trainer_detail {
namespace {

constexpr char kGradients[] = "/gradients";
constexpr char kSums[] = "/sums";
constexpr char kOwn[] = "/own/";  // then the rank

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
        "); " + (own_gradient_first() ? "each rank steps with its own gradient meanwhile; " : "") +
        "every gradient is applied at each epoch's end and at the last step");
    if (!own_in_flight_.empty()) {
      step_with_own_gradients();
    } else if (own_gradient_first() && delayed_->in_flight() > 0) {
      say("the checkpoint holds no own gradients of these " + std::to_string(size_) +
          " ranks: they step with the " + std::to_string(delayed_->in_flight()) +
          " sum(s) in flight instead");
      step_with_sums_in_flight();
    }
    return;
  }
  const size_t n = delayed_->in_flight();
  StepControl ignored;
  while (delayed_->in_flight() > 0) apply_oldest(&ignored);
  delayed_.reset();
  say("applied the checkpoint's " + std::to_string(n) +
      " gradient(s) in flight (it was written by stale-synchronous training)");
}

// resume(): the checkpoint's arrays, checked against this model ("<step>/gradients",
// "<step>/sums", then "<step>/own/<rank>" for every rank where the run stepped with its own
// gradients; oldest first); restore_in_flight() puts the sums in flight, and this rank's own
// gradients in own_in_flight_ where the checkpoint has one for each of these ranks.
void Trainer::restore_in_flight() {
  const size_t sums = 2 + stats_len_, n = restored_in_flight_.size();
  const size_t values = engine_->num_param_values();
  auto bad = [&](const std::string& why) {
    return CheckpointError(resume_path_ + ": in_flight: " + why);
  };
  int64_t last = -1;
  std::deque<OwnGradient> own;
  bool own_complete = true;
  for (size_t i = 0; i < n;) {
    if (i + 1 >= n) throw bad("'" + restored_in_flight_[i].name + "' has no sums");
    const NamedArray& g = restored_in_flight_[i];
    const NamedArray& s = restored_in_flight_[i + 1];
    const size_t slash = g.name.find('/');
    char* end = nullptr;
    const long long step = std::strtoll(g.name.c_str(), &end, 10);
    if (slash == std::string::npos || end != g.name.c_str() + slash || step < 0 ||
        g.name.substr(slash) != kGradients || s.name != g.name.substr(0, slash) + kSums)
      throw bad("unexpected array names '" + g.name + "', '" + s.name + "'");
    if (step <= last || step >= step_) throw bad("steps out of order at '" + g.name + "'");
    if (g.data.size() != values || s.data.size() != sums)
      throw bad("'" + g.name + "' does not fit this model (" + std::to_string(values) +
                " gradients, " + std::to_string(sums) + " sums)");
    last = step;
    delayed_->restore(step, g.data, std::vector<double>(s.data.begin(), s.data.end()));
    i += 2;
    const std::string own_prefix = g.name.substr(0, slash) + kOwn;
    int ranks = 0;
    for (; i < n && restored_in_flight_[i].name.rfind(own_prefix, 0) == 0; ++i, ++ranks) {
      const NamedArray& o = restored_in_flight_[i];
      if (o.name != own_prefix + std::to_string(ranks) || o.data.size() != values)
        throw bad("'" + o.name + "' is not rank " + std::to_string(ranks) +
                  "'s own gradient of this model (" + std::to_string(values) + " values)");
      if (ranks == rank_) own.push_back({step, o.data});
    }
    // Another rank count: the ranks' own gradients belong to other ranks' batches.
    if (ranks != size_) own_complete = false;
  }
  restored_in_flight_.clear();
  if (own_complete && own_gradient_first()) own_in_flight_ = std::move(own);
}

// In place of sync_control(): posts this step's sums, then applies what is due. The step's
// allreduce time is what it spent posting and waiting for sums not yet in.
StepControl Trainer::stale_exchange(const StepSums& sums, StepTimes* times) {
  TraceSpan span(tracer_.get(), TraceLane::Compute, "stale exchange", trace_step_);
  const auto t = Clock::now();
  fill_control(sums);
  const std::vector<float>& grads = *engine_->gradient_values();
  delayed_->post(step_, grads.data(), control_.data());
  times->allreduce += Since(t);
  const bool drain = step_in_epoch_ + 1 == steps_per_epoch_ || step_ + 1 == total_steps_;
  const size_t keep = drain ? 0 : size_t(spec_.sync.staleness);
  if (own_gradient_first() && !drain) {
    // This rank's share of the global mean over its share of the batch: its own estimate
    // of the step's mean gradient.
    OwnGradient own{step_, {}};
    if (!own_spare_.empty()) {
      own.values = std::move(own_spare_.back());
      own_spare_.pop_back();
    }
    own.values.resize(grads.size());
    const float inverse_weight = float(1.0 / weight_);
    for (size_t i = 0; i < grads.size(); ++i) own.values[i] = grads[i] * inverse_weight;
    own_in_flight_.push_back(std::move(own));
  }
  const double waited_before = stale_wait_seconds_;
  StepControl control;
  hold_agreed_model();
  while (delayed_->in_flight() > keep) apply_oldest(&control);
  step_with_own_gradients();
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

bool Trainer::own_gradient_first() const {
  return spec_.sync.stale_sync() && spec_.sync.own_gradient_first && spec_.sync.staleness > 0 &&
         weight_ > 0;
}

// The agreed model back into the engine, in place of the one ahead of it by this rank's own
// steps. Batch-norm buffers stay as they are: no own step changes them, and the ranks share them.
void Trainer::hold_agreed_model() {
  if (!engine_runs_ahead_) return;
  engine_->import_state(agreed_params_, engine_->export_buffers(), agreed_state_);
  engine_runs_ahead_ = false;
}

// With the engine holding the agreed model: keeps it, then applies this rank's gradients of
// the steps still in flight on top, oldest first, each with its own step's rate.
void Trainer::step_with_own_gradients() {
  const int64_t next = delayed_->in_flight() > 0 ? delayed_->entries().front()->step : step_ + 1;
  while (!own_in_flight_.empty() && own_in_flight_.front().step < next) {
    own_spare_.push_back(std::move(own_in_flight_.front().values));
    own_in_flight_.pop_front();
  }
  if (own_in_flight_.empty()) return;
  engine_->export_state(&agreed_params_, &agreed_buffers_, &agreed_state_);
  std::vector<float>& grads = *engine_->gradient_values();
  TraceSpan span(tracer_.get(), TraceLane::Compute, "own steps", trace_step_);
  for (const OwnGradient& own : own_in_flight_) {
    std::copy(own.values.begin(), own.values.end(), grads.begin());
    engine_->update(LearningRate(spec_, own.step - step_base_, steps_per_epoch_), own.step);
    ++own_updates_;
  }
  engine_runs_ahead_ = true;
}

// Where every sum in flight is in (a checkpoint, a resume): the rank's own steps are redone
// with the sums in place of its own gradients, so that a run resumed from the checkpoint holds
// the same model as the run that wrote it.
void Trainer::step_with_sums_in_flight() {
  if (!own_gradient_first()) return;
  hold_agreed_model();
  for (OwnGradient& own : own_in_flight_) own_spare_.push_back(std::move(own.values));
  own_in_flight_.clear();
  for (const auto& e : delayed_->entries()) own_in_flight_.push_back({e->step, e->gradients});
  step_with_own_gradients();
}

// Collective, at a checkpoint (every sum in flight in): every rank's own gradient of each
// step in flight to rank 0, in the entries' order (zeros from a rank without one: an empty
// batch). Nothing where the spec has the ranks apply only the sums.
void Trainer::gather_own_in_flight() {
  own_gathered_.clear();
  if (!spec_.sync.stale_sync() || !spec_.sync.own_gradient_first || !delayed_) return;
  const size_t values = engine_->num_param_values();
  if (values > size_t(std::numeric_limits<int>::max()))
    throw Error("stale-synchronous checkpoint: " + std::to_string(values) +
                " parameters are more than one MPI_Gather can carry");
  std::vector<float> zeros;
  own_gathered_.resize(rank_ == 0 ? delayed_->in_flight() * size_t(size_) * values : 0);
  size_t k = 0;
  for (const auto& e : delayed_->entries()) {
    const float* mine = nullptr;
    for (const OwnGradient& own : own_in_flight_)
      if (own.step == e->step) mine = own.values.data();
    if (mine == nullptr) {
      zeros.assign(values, 0.0f);
      mine = zeros.data();
    }
    MPI_CHECK(MPI_Gather(mine, int(values), MPI_FLOAT,
                         rank_ == 0 ? own_gathered_.data() + k * size_t(size_) * values : nullptr,
                         int(values), MPI_FLOAT, 0, comm_.get()));
    ++k;
  }
}

// Rank 0 (the snapshot's rank): the gradients still to come, their sums and every rank's own
// gradients of them, every entry complete (write_checkpoint waited for them on every rank).
void Trainer::snapshot_in_flight(TrainState* st) const {
  const size_t n = delayed_ ? delayed_->in_flight() : 0;
  const size_t ranks = own_gathered_.empty() ? 0 : size_t(size_);
  st->in_flight.resize(n * (2 + ranks));
  if (n == 0) return;
  const size_t sums = 2 + stats_len_, values = engine_->num_param_values();
  size_t i = 0, k = 0;
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
    for (size_t r = 0; r < ranks; ++r) {
      NamedArray& o = st->in_flight[i++];
      o.name = step + kOwn + std::to_string(r);
      o.shape = {int(values)};
      const float* from = own_gathered_.data() + (k * ranks + r) * values;
      o.data.assign(from, from + values);
    }
    ++k;
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
  hold_agreed_model();  // the run's model is the one every rank agrees on
  for (const auto& e : delayed_->entries())
    if (e->flags) stale_sums_arrived(e->step + 1, e->control_sum[0], e->control_sum[1]);
}

nlohmann::json Trainer::stale_summary() const {
  return {{"mode", "stale_sync"},
          {"staleness", spec_.sync.staleness},
          {"applied", stale_applied_},
          {"drains", stale_drains_},
          {"own_gradient_first", own_gradient_first()},
          {"own_updates", own_updates_},
          {"in_flight_at_end", delayed_ ? delayed_->in_flight() : 0},
          {"wait_s", stale_wait_seconds_}};
}

}  // namespace trainer_detail
}  // namespace dlh
