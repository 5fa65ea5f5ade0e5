// DLH — the Trainer's checkpoints (when they are due, the snapshot, the background writer's
// files) and its answer to signals (trainer_impl.hpp).
#include "launcher/comm/collective.hpp"
#include "launcher/train/trainer_impl.hpp"

namespace dlh {
namespace trainer_detail {

// Checkpoints come every N steps, every T seconds, at epoch ends, on a signal and at the
// last step of the run; the decision uses only values every rank shares. With local SGD a
// signal or a due checkpoint waits for the period's end (release_held). Returns the seconds
// the loop was held up (0 when none was due).
double Trainer::maybe_checkpoint(StepControl* control) {
  const bool last = step_ == total_steps_ || (o_.max_steps > 0 && step_ == o_.max_steps);
  bool due = (o_.checkpoint_steps > 0 && step_ % o_.checkpoint_steps == 0) || control->time_due ||
             (o_.checkpoint_epochs && step_in_epoch_ == 0);
  if (spec_.sync.local_sgd() && !release_held(control, &due)) return 0;
  if (control->signal != 0 || last) return write_checkpoint(Durability::Wait);
  return due ? write_checkpoint(Durability::Background) : 0;
}

// Rank 0 writes (every rank holds the same bits). In the background the loop waits only
// for the previous write, if it still runs, and for the snapshot; the others go on at once
// and learn that the file is on disk from a later step's control allreduce. A checkpoint
// that must be durable (or every one, with --checkpoint-sync) is waited for by every rank,
// so that nobody exits before the file exists and a failed write fails every rank.
double Trainer::write_checkpoint(Durability durability) {
  auto t = Clock::now();
  const bool wait = durability == Durability::Wait || o_.checkpoint_sync;
  if (wait) waited_step_ = step_;
  // Stale-synchronous training's sums in flight go into the file: every rank waits for them.
  // With them each rank's own gradients of those steps (trainer_stale.cpp).
  if (delayed_) {
    delayed_->complete_all();
    gather_own_in_flight();
  }
  engine_->gather_state();  // a pipeline's stages to rank 0: the file holds the whole model
  RunCollectively(comm_.get(), [&] {
    if (rank_ != 0) return;
    writer_->submit([&](TrainState* st) {
      TraceSpan span(tracer_.get(), TraceLane::Compute, "checkpoint snapshot", trace_step_);
      snapshot(st);
    });
    if (wait) writer_->wait();
  });
  if (wait) collect_written();
  last_ckpt_ = Clock::now();
  if (tracer_)
    tracer_->slice(TraceLane::Compute, "checkpoint", t, last_ckpt_, trace_step_,
                   {{"waited", wait}});
  const double took = Since(t);
  checkpoint_seconds_ += took;
  ++checkpoint_stops_;
  return took;
}

// Everything a resume needs, copied to host memory at a step boundary into the previous
// snapshot's arrays: the writer owns the copy while the loop changes the parameters.
void Trainer::snapshot(TrainState* st) const {
  st->spec_json = spec_.json;
  st->step = step_;
  st->epoch = epoch_;
  st->step_in_epoch = step_in_epoch_;
  st->seed = spec_.seed;
  st->world_size = size_;
  st->rank_batches = recorded_split();
  st->split_history = history_;
  st->samples_seen = samples_seen_;
  st->global_batch = spec_.batch_size;
  st->lr = spec_.optimizer.lr;
  st->input_scale = data_.input_scale;
  st->input_mean = data_.input_mean;
  st->input_std = data_.input_std;
  st->elapsed_seconds = elapsed_before_ + Since(train_start_);
  st->optimizer = engine_->optimizer_name();
  // The model every rank agrees on, not the one this rank's own steps put ahead of it.
  if (engine_runs_ahead_) {
    st->params = agreed_params_;
    st->buffers = engine_->export_buffers();
    st->optimizer_state = agreed_state_;
  } else {
    engine_->export_state(&st->params, &st->buffers, &st->optimizer_state);
  }
  snapshot_in_flight(st);
}

// Rank 0: a checkpoint reached the disk. metrics.jsonl says when and how long it took.
void Trainer::note_written(const WrittenCheckpoint& written) {
  checkpoint_write_seconds_ += written.write_seconds;
  checkpoint_write_cpu_ += written.cpu;
  ++checkpoints_written_;
  const Clock::time_point done =
      written.started + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(written.write_seconds));
  if (tracer_)
    tracer_->slice(TraceLane::Writer, "checkpoint write", written.started, done, written.step,
                   {{"bytes", int64_t(written.bytes)}});
  // "t": when the file was on disk, not when the loop learnt of it.
  append_metrics({{"event", "checkpoint"},
                  {"t", UnixSeconds() - Since(done)},
                  {"step", written.step},
                  {"path", written.path},
                  {"write_s", written.write_seconds},
                  {"write_cpu_s", written.cpu.total()},
                  {"write_sys_s", written.cpu.system},
                  {"bytes", written.bytes},
                  {"background", written.step != waited_step_}});
}

// After the writer was waited for (collectively): every rank learns the newest file on
// disk, the one a failure report names and a resume would take.
void Trainer::collect_written() {
  std::string newest;
  if (writer_)
    for (const WrittenCheckpoint& w : writer_->take_written()) {
      note_written(w);
      newest = w.path;
    }
  newest = mpi::BroadcastString(comm_.get(), newest);
  if (newest.empty()) return;
  result_.last_checkpoint = newest;
  SetPeerWatchCheckpoint(newest);
}

// A signal has just been answered with a checkpoint. SIGTERM/SIGINT (Slurm's cancel or
// preemption) stop the run; SIGUSR1 (the pre-timeout warning) stops it only when asked to.
void Trainer::handle_signal(int signal) {
  if (signal == 0) return;
  if (tracer_) tracer_->instant("signal", Clock::now(), trace_step_, "signal", SignalName(signal));
  if (rank_ == 0)
    append_metrics({{"event", "signal"},
                    {"step", step_},
                    {"signal", SignalName(signal)},
                    {"checkpoint", result_.last_checkpoint}});
  say(std::string(signal == SIGUSR1 ? "SIGUSR1" : "SIGTERM/SIGINT") + " at step " +
      std::to_string(step_) + ": checkpoint written to " + result_.last_checkpoint);
  if (signal != SIGUSR1 || o_.stop_on_usr1) {
    stop_ = true;
    result_.stop_signal = signal;
  }
}
}  // namespace trainer_detail
}  // namespace dlh
