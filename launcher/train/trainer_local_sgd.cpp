// DLH — the Trainer's local SGD (SyncSpec in common/spec.hpp): which steps keep their
// gradients to themselves, and the model average that ends each period (trainer_impl.hpp).
//
// Why a resumed run matches an uninterrupted one: a period's end is a function of the cursor
// (every `period` steps of an epoch, the epoch's end, the run's last step), which a checkpoint
// stores, and a checkpoint is only taken where the ranks hold one model (maybe_checkpoint).
// Why the average is weighted by the rank's share of the global batch: with period 1 it is then
// the synchronous step's update exactly (in real arithmetic) for SGD with momentum and weight
// decay, whose updates are linear in the gradient; tests/scripts/local_sgd.sh checks it.
#include "launcher/train/trainer_impl.hpp"

namespace dlh {
namespace trainer_detail {

// Before the step: the synchronous warm-up sums gradients as always; a local step does not,
// and takes the mean over this rank's own samples instead of its share of the global mean.
float Trainer::begin_step_sync() {
  step_is_local_ = spec_.sync.local_sgd() && step_ >= spec_.sync.warmup_steps;
  // Stale-synchronous training sums the gradients itself (stale_exchange).
  engine_->set_gradient_sync(!step_is_local_ && !spec_.sync.stale_sync());
  return step_is_local_ && rank_batch_ > 0 ? 1.0f / float(rank_batch_) : loss_scale_;
}

// After the optimizer step: at a period's end every rank takes the weighted average of the
// models. Returns the seconds it took (0 when not due).
double Trainer::end_step_sync() {
  if (!step_is_local_) return 0;
  const bool last = step_ == total_steps_ || (o_.max_steps > 0 && step_ == o_.max_steps);
  if (step_in_epoch_ % spec_.sync.period != 0 && !last) {
    models_agree_ = false;
    return 0;
  }
  TraceSpan span(tracer_.get(), TraceLane::Compute, "model average", trace_step_);
  const auto t = Clock::now();
  engine_->export_state(&average_params_, &average_buffers_, &average_state_);
  size_t n = 0;
  for (const auto* arrays : {&average_params_, &average_state_})
    for (const NamedArray& a : *arrays) n += a.data.size();
  average_flat_.resize(n);
  size_t k = 0;
  const float w = float(weight_);
  for (const auto* arrays : {&average_params_, &average_state_})
    for (const NamedArray& a : *arrays)
      for (float v : a.data) average_flat_[k++] = w * v;
  // In pieces an int can count: MPI's counts are ints.
  constexpr size_t kPiece = size_t(1) << 30;
  for (size_t at = 0; at < n; at += kPiece)
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, average_flat_.data() + at, int(std::min(kPiece, n - at)),
                            MPI_FLOAT, MPI_SUM, comm_.get()));
  k = 0;
  for (auto* arrays : {&average_params_, &average_state_})
    for (NamedArray& a : *arrays)
      for (float& v : a.data) v = average_flat_[k++];
  // Batch-norm buffers are the same on every rank already (the control allreduce each step).
  engine_->import_state(average_params_, average_buffers_, average_state_);
  models_agree_ = true;
  ++model_averages_;
  const double took = Since(t);
  model_average_seconds_ += took;
  return took;
}

// Between two averages each rank holds its own model, and a checkpoint holds one: a signal or a
// due checkpoint waits for the period's end (at most period - 1 steps), where the run averages
// anyway. The strongest signal held wins (SignalStrength). Returns whether the step may
// checkpoint and answer signals now; `control->signal` and `*due` then carry what was held.
bool Trainer::release_held(StepControl* control, bool* due) {
  if (SignalStrength(control->signal) > SignalStrength(held_signal_))
    held_signal_ = control->signal;
  held_due_ = held_due_ || *due;
  if (!models_agree_) {
    control->signal = 0;
    return false;
  }
  control->signal = held_signal_;
  *due = held_due_;
  held_signal_ = 0;
  held_due_ = false;
  return true;
}

nlohmann::json Trainer::local_sgd_summary() const {
  return {{"mode", "local_sgd"},
          {"period", spec_.sync.period},
          {"warmup_steps", spec_.sync.warmup_steps},
          {"averages", model_averages_},
          {"average_s", model_average_seconds_}};
}

}  // namespace trainer_detail
}  // namespace dlh
