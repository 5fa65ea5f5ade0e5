// DLH — one step of the Trainer: the batch, forward and backward with the gradient
// allreduce, the control allreduce, the optimizer, and the step's record (trainer_impl.hpp).
#include <algorithm>

#include "launcher/comm/collective.hpp"
#include "launcher/train/signals.hpp"
#include "launcher/train/trainer_impl.hpp"

namespace dlh {
namespace trainer_detail {
namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

// Every rank decides alike: the counters and the stop flag are the same on all ranks.
bool Trainer::keep_training() const {
  return step_ < total_steps_ && !stop_ && (o_.max_steps <= 0 || step_ < o_.max_steps);
}

// This rank's part of the step: its slice of the batch forward and backward; the gradient
// sums across ranks run during backward and are complete when this returns.
StepSums Trainer::compute_step(StepTimes* times) {
  Batch batch = take_batch();
  const auto t_compute = Clock::now();
  times->data = Seconds(t_compute - times->start) + ahead_wait_;
  ahead_wait_ = 0;
  if (batch.epoch != epoch_ || batch.step_in_epoch != step_in_epoch_)
    throw Error("data loader out of step (internal error)");

  ForwardContext ctx;
  ctx.training = true;
  ctx.seed = spec_.seed;
  ctx.step = uint64_t(step_);
  ctx.rank = rank_;
  const float loss_scale = begin_step_sync();
  const StepSums sums =
      engine_->forward_backward(batch, ctx, loss_scale, [this] { return batch_ahead(); });
  const auto t_backward = Clock::now();
  times->compute = Seconds(t_backward - t_compute) - ahead_wait_;
  times->allreduce = engine_->finish_gradients();
  compute_seconds_ += times->compute;
  if (tracer_) {
    const auto t_end = Clock::now();
    tracer_->slice(TraceLane::Compute, "data wait", times->start, t_compute, trace_step_);
    tracer_->slice(TraceLane::Compute, "forward", t_compute, forward_done_, trace_step_);
    tracer_->slice(TraceLane::Compute, "backward", forward_done_, t_backward, trace_step_);
    tracer_->slice(TraceLane::Compute, "allreduce wait", t_backward, t_end, trace_step_);
  }
  return sums;
}

// The step's batch: the one taken ahead during the last step's backward, else the loader's.
Batch Trainer::take_batch() {
  if (!ahead_) return loader_->next();
  Batch batch = std::move(*ahead_);
  ahead_.reset();
  return batch;
}

// The next step's batch, for the engine to copy to its device while this step's backward
// runs (Engine::forward_backward). A batch the loader fails to prepare is not taken here:
// the loader keeps its failure, and the next step's take_batch() raises it where it always
// did, after this step's update and checkpoint.
const Batch* Trainer::batch_ahead() {
  if (delayed_) delayed_->poke();  // stale-synchronous training's sums: after backward
  if (!ahead_) {
    const auto started = Clock::now();
    try {
      ahead_ = loader_->next();
    } catch (const std::exception&) {
      return nullptr;
    }
    ahead_wait_ += Since(started);
  }
  return &*ahead_;
}

// Control values, summed: loss, correct, then batchnorm statistics weighted by this rank's
// share of the batch. Flags, maxed: a pending signal (3 SIGINT or 2 SIGTERM: stop, 1 SIGUSR1:
// checkpoint; kept apart so that metrics.jsonl and the exit code name the one that came), a
// time-based checkpoint request (rank 0's clock decides), rank 0's newest written checkpoint
// and a failed write. A rank may have been signalled alone (a user's kill); the allreduce
// tells everyone at the same step. One allreduce carries both (launcher/comm/control_reduce).
StepControl Trainer::sync_control(const StepSums& sums, StepTimes* times) {
  TraceSpan span(tracer_.get(), TraceLane::Compute, "control allreduce", trace_step_);
  auto t_ctrl = Clock::now();
  fill_control(sums);
  control_reduce_->run(control_.data(), control_sum_.data(), comm_.get());
  const StepControl control = apply_control(control_sum_.data(), true);
  times->allreduce += Since(t_ctrl);
  allreduce_seconds_ += times->allreduce;
  return control;
}

// This rank's control message for the step, into control_.
void Trainer::fill_control(const StepSums& sums) {
  const int sig = TakePendingSignal();
  control_[0] = sums.loss;
  control_[1] = double(sums.correct);
  size_t k = 2;
  for (float s : engine_->batch_stats()) control_[k++] = weight_ * double(s);
  // Rank 0's writer: the newest checkpoint that reached the disk since the last step, or
  // its failure, which fails every rank from here.
  int64_t written_step = -1, write_failed = 0;
  if (writer_) {
    try {
      for (const WrittenCheckpoint& w : writer_->take_written()) {
        note_written(w);
        written_step = w.step;
      }
    } catch (const std::exception&) {
      write_failed = 1;
    }
  }
  const double flags[kControlFlags] = {
      double(SignalStrength(sig)),
      rank_ == 0 && o_.checkpoint_seconds > 0 && Since(last_ckpt_) >= o_.checkpoint_seconds ? 1.0
                                                                                            : 0.0,
      double(written_step), double(write_failed)};
  std::copy(flags, flags + kControlFlags, control_.begin() + long(k));
}

// What every rank agreed on, from a summed control message: the batch-norm statistics are
// committed, a failed write fails every rank, the newest checkpoint on disk becomes the one a
// failure report names. Without `flags` (a message restored from a checkpoint: its flags were
// the run's that wrote it) only the sums count.
StepControl Trainer::apply_control(const double* sum, bool flags) {
  const size_t k = 2 + stats_len_;
  int64_t flags_max[kControlFlags] = {0, 0, -1, 0};
  if (flags)
    for (size_t i = 0; i < kControlFlags; ++i) flags_max[i] = int64_t(sum[k + i]);
  if (flags_max[3] > 0)  // rank 0's wait() throws the failure, RunCollectively on every rank
    RunCollectively(comm_.get(), [&] {
      if (writer_) writer_->wait();
    });
  if (flags_max[2] >= 0) {
    result_.last_checkpoint = ckpt_dir_.path_for_step(flags_max[2]);
    SetPeerWatchCheckpoint(result_.last_checkpoint);
  }
  if (stats_len_ > 0) {
    for (size_t i = 0; i < stats_len_; ++i) averaged_stats_[i] = float(sum[2 + i]);
    engine_->commit_batch_stats(averaged_stats_);
  }
  StepControl control;
  control.loss_sum = sum[0];
  control.correct_sum = sum[1];
  control.signal = SignalOfStrength(flags_max[0]);
  control.time_due = flags_max[1] > 0;
  return control;
}

// The optimizer step, then the cursor: after this the position is that of a completed step,
// the only place a checkpoint may be taken. Returns the learning rate used.
double Trainer::advance() {
  const double lr = LearningRate(spec_, step_ - step_base_, steps_per_epoch_);
  {
    TraceSpan span(tracer_.get(), TraceLane::Compute, "optimizer", trace_step_);
    // Stale-synchronous training applies its gradients as they come due (stale_exchange).
    if (!spec_.sync.stale_sync()) engine_->update(lr, step_);
  }
  ++step_;
  SetPeerWatchStep(step_);
  samples_seen_ += spec_.batch_size;
  if (++step_in_epoch_ == steps_per_epoch_) {
    step_in_epoch_ = 0;
    ++epoch_;
    evaluated_epoch_ = false;
  }
  return lr;
}

// One metrics.jsonl record per step and the progress line, on rank 0; the values are the
// global batch's, so the other ranks have nothing to add. Stale-synchronous training learns a
// step's loss only when its sums come due: the record waits for them (stale_sums_arrived).
void Trainer::record(const StepControl& control, double lr, const StepTimes& times) {
  const double t_total = Since(times.start);
  ema_step_ = ema_step_ == 0 ? t_total : 0.9 * ema_step_ + 0.1 * t_total;
  energy_->poll();  // every rank: a RAPL counter must be read before it wraps
  if (rank_ != 0) return;
  step_seconds_.push_back(std::max(0.0, t_total - times.checkpoint));
  StepRecord r;
  r.step = step_;
  r.epoch = epoch_ + (step_in_epoch_ == 0 ? 0 : 1);
  r.progress_step = step_ - step_base_;
  r.progress_epoch = step_in_epoch_ == 0 ? epoch_ - 1 : epoch_;
  r.lr = lr;
  r.total = t_total;
  r.times = times;
  r.timed = true;
  if (!spec_.sync.stale_sync()) {
    r.loss_sum = control.loss_sum;
    r.correct_sum = control.correct_sum;
    write_record(r);
    return;
  }
  StepRecord& pending = pending_records_[r.step];
  r.loss_sum = pending.loss_sum;
  r.correct_sum = pending.correct_sum;
  r.summed = pending.summed;
  pending = r;
  flush_records();
}

void Trainer::write_record(const StepRecord& r) {
  const double loss = r.loss_sum / double(spec_.batch_size);
  const double acc = r.correct_sum / double(spec_.batch_size);
  nlohmann::json rec = {{"step", r.step},
                        {"epoch", r.epoch},
                        {"loss", loss},
                        {"accuracy", acc},
                        {"lr", r.lr},
                        {"samples_per_s", double(spec_.batch_size) / r.total},
                        {"time",
                         {{"total", r.total},
                          {"compute", r.times.compute},
                          {"allreduce", r.times.allreduce},
                          {"data", r.times.data},
                          {"checkpoint", r.times.checkpoint}}}};
  // The split the run started (or resumed) with; later changes have "balance" records.
  if (r.step == first_step_ + 1)
    rec["rank_batches"] = history_.empty() ? rank_batches_ : SplitAt(history_, r.step - 1);
  energy_->add_to(&rec);
  append_metrics(rec);
  progress_->step(r.progress_step, r.progress_epoch, loss, acc,
                  double(spec_.batch_size) / ema_step_, ema_step_);
}
}  // namespace trainer_detail
}  // namespace dlh
