// DLH — the Trainer's resume: the newest valid checkpoint, then the shape (rank count, global
// batch, rate) and the split the run continues with (trainer_impl.hpp, elastic.hpp).
#include <algorithm>

#include "launcher/comm/collective.hpp"
#include "launcher/train/batch_split.hpp"
#include "launcher/train/elastic.hpp"
#include "launcher/train/trainer_impl.hpp"

namespace dlh {
namespace trainer_detail {
namespace {

// "rank batches [96, 32]" or "an even split": a checkpoint's split in messages.
std::string DescribeSplit(const std::vector<int64_t>& batches) {
  return batches.empty() ? "an even split" : "rank batches " + FormatBatches(batches);
}

}  // namespace

// A requeued or restarted job continues from the newest checkpoint that validates. Rank 0
// picks it (reporting newer files it skips) and every rank loads that same file, so all
// continue from identical state; without one, every rank starts from rank 0's parameters.
void Trainer::resume() {
  if (o_.resume && rank_ == 0) {
    TrainState probe;
    int skipped = 0;
    ckpt_dir_.load_newest_valid(&probe, &resume_path_, [&](const std::string& m) {
      say("warning: " + m);
      ++skipped;
    });
    // Every checkpoint there unusable: the run starts over, which the warnings alone did not
    // say (2026-12-07); the files stay until rotation passes them.
    if (resume_path_.empty() && skipped > 0)
      say("warning: no checkpoint in " + ckpt_dir_.dir() + " validates (" +
          std::to_string(skipped) + " skipped): starting from step 0");
  }
  resume_path_ = mpi::BroadcastString(comm_.get(), resume_path_);
  if (resume_path_.empty()) {
    // Buffers (batchnorm running statistics) start at constants; parameters are rank 0's.
    engine_->broadcast_params();
    return;
  }
  RunCollectively(comm_.get(), [&] {
    TrainState st = LoadCheckpoint(resume_path_);
    try {
      if (st.optimizer != engine_->optimizer_name())
        throw CheckpointError("optimizer is " + st.optimizer + " but the spec says " +
                              engine_->optimizer_name());
      engine_->import_state(st.params, st.buffers, st.optimizer_state);
    } catch (const CheckpointError& e) {
      throw CheckpointError(resume_path_ + ": does not match " + o_.spec_path + ": " + e.what());
    }
    step_ = st.step;
    restored_in_flight_ = std::move(st.in_flight);  // checked and applied by start_stale()
    SetPeerWatchStep(step_);
    SetPeerWatchCheckpoint(resume_path_);
    epoch_ = st.epoch;
    step_in_epoch_ = st.step_in_epoch;
    samples_seen_ = st.samples_seen;
    elapsed_before_ = st.elapsed_seconds;
    continue_shape(st);
    continue_split(st);
  });
  say("resumed from " + resume_path_ + " at step " + std::to_string(step_) + " (epoch " +
      std::to_string(epoch_ + 1) + ")");
}

// Elastic resume (elastic.hpp): another rank count with the same global batch changes only
// the order of the gradient sums, and says so. Another global batch moves the cursor to the
// equivalent position (samples_seen and the optimizer's step count stay as they are) and
// takes the checkpoint's rate, rescaled by the plan's rule (linear scaling), unless lr-find
// found one for this batch. With the same batch the checkpoint's rate is kept too, so that a
// run resumed again after a rescale goes on with the rescaled rate. Files written before
// the batch and rate were recorded: the batch is samples_seen / step, the rate this run's.
void Trainer::continue_shape(const TrainState& st) {
  const int64_t batch = spec_.batch_size;
  const int64_t was_batch = CheckpointBatch(st.global_batch, st.samples_seen, st.step);
  const bool same_batch = was_batch == 0 || was_batch == batch;
  const bool dropout =
      std::any_of(spec_.layers.begin(), spec_.layers.end(),
                  [](const LayerSpec& l) { return l.kind == LayerKind::Dropout && l.rate > 0; });
  if (st.world_size != size_) say(RankCountNote(st.world_size, size_, batch, same_batch, dropout));
  const double lr = spec_.optimizer.lr;
  if (!same_batch) {
    const Cursor from{epoch_, step_in_epoch_};
    const Cursor to = EquivalentCursor(from, was_batch, batch, data_.train.count);
    epoch_ = to.epoch;
    step_in_epoch_ = to.step_in_epoch;
    std::string rule;
    if (lr_found()) {
      rule = lr_source();
    } else if (st.lr > 0) {
      spec_.optimizer.lr = LinearScaledLr(st.lr, was_batch, batch);
      rule = "linear scaling, the plan's rule: lr x " + std::to_string(batch) + "/" +
             std::to_string(was_batch);
      lr_resumed_ = Printf(", rescaled for batch %lld from the checkpoint's %g at batch %lld",
                           (long long)batch, st.lr, (long long)was_batch);
    } else {
      rule = "this run's rate: the checkpoint predates recorded rates, nothing to rescale from";
    }
    say(BatchChangeNote(was_batch, batch, st.lr > 0 ? st.lr : lr, spec_.optimizer.lr, rule, from,
                        to));
  } else if (st.lr > 0 && st.lr != lr && !lr_found()) {
    spec_.optimizer.lr = st.lr;
    lr_resumed_ = Printf(", kept from the checkpoint (this run's own: %g)", lr);
    say(
        Printf("lr %g kept from the checkpoint for global batch %lld (this run's own setting is "
               "%g; --no-resume to start over with it)",
               st.lr, (long long)batch, lr));
  }
  // The loader's cursor must be a step of this data set's epoch. Past its end, the run
  // trained on another (larger) set: resumed anyway, it counted the epoch done without a
  // step and "finished" (2026-12-07: 18 steps of a 4-step epoch, summary 18 of 8 steps).
  if (step_in_epoch_ >= steps_per_epoch_)
    throw CheckpointError(Printf(
        "%s: its loader stands at step %lld of epoch %lld, but %s has %lld training samples, "
        "%lld steps of %lld an epoch: not the data set the run trained on (--no-resume to "
        "start over with it)",
        resume_path_.c_str(), (long long)step_in_epoch_ + 1, (long long)epoch_ + 1,
        spec_.dataset.c_str(), (long long)data_.train.count, (long long)steps_per_epoch_,
        (long long)batch));
  // Data order, dropout masks and augmentation are functions of the seed (checkpoint.hpp):
  // with another one the run would go on as a different run from this one's parameters, so
  // the checkpoint's seed is kept, as its rate is.
  if (st.seed != spec_.seed) {
    say(
        Printf("seed %llu kept from the checkpoint (this run's own setting is %llu; --no-resume "
               "to start over with it)",
               (unsigned long long)st.seed, (unsigned long long)spec_.seed));
    spec_.seed = st.seed;
  }
  step_base_ = step_ - (epoch_ * steps_per_epoch_ + step_in_epoch_);
  total_steps_ = step_base_ + steps_per_epoch_ * spec_.epochs;
}

// The split a resumed run continues with. Adaptive: the one in effect at the checkpoint, and
// its history, when the checkpoint has one and the rank count is the same; replay: the
// replayed history's split at the checkpoint's step. Otherwise (off, or nothing to continue
// from) the split chosen at start, as before balancing existed: a different split sums the
// same global gradient in another order, allowed like a different rank count, since a
// requeued mix may come back on other nodes.
void Trainer::continue_split(const TrainState& st) {
  // A split this run can take: one batch per rank, each within what balancing may give one
  // rank, summing to this run's global batch (a resume may change it with --batch-size).
  auto fits = [&](const std::vector<int64_t>& batches) {
    int64_t sum = 0;
    for (int64_t b : batches) {
      if (b < 1 || b > std::max(max_rank_batch_, rank_batch_)) return false;
      sum += b;
    }
    return batches.size() == size_t(size_) && sum == spec_.batch_size;
  };
  // The split the checkpoint's last steps ran with (an even one is not written down).
  std::vector<int64_t> was = st.rank_batches;
  if (was.empty())
    for (int r = 0; r < size_; ++r) was.push_back(EvenShare(spec_.batch_size, r, size_).batch);
  const bool history_fits = !st.split_history.empty() &&
                            std::all_of(st.split_history.begin(), st.split_history.end(),
                                        [&](const SplitChange& c) { return fits(c.batches); });
  if (balance_ == BalanceMode::Adaptive && history_fits) {
    history_ = st.split_history;
    set_split(st.rank_batches);
    say("balance: continuing with rank batches " + FormatBatches(rank_batches_) +
        ", the split in effect at the checkpoint");
    return;
  }
  if (balance_ == BalanceMode::Replay) {
    set_split(SplitAt(replay_, st.step));
    history_.clear();
    for (replay_next_ = 0; replay_next_ < replay_.size() && replay_[replay_next_].step <= st.step;
         ++replay_next_)
      history_.push_back(replay_[replay_next_]);
  } else if (balance_ == BalanceMode::Adaptive) {
    // The steps before the checkpoint ran with its split, when that is one of this run.
    history_ = {{0, fits(was) ? was : rank_batches_}};
    record_split(st.step, rank_batches_);
  } else if (history_fits) {
    // Balancing off after a balanced run: its history goes on, with the split chosen now.
    history_ = st.split_history;
    record_split(st.step, rank_batches_);
  }
  if (rank_ == 0 && st.world_size == size_ && was != rank_batches_)
    say("warning: checkpoint was written with " + DescribeSplit(st.rank_batches) +
        ", resuming with " + DescribeSplit(recorded_split()) +
        " (training continues, but not bit-identically)");
}
}  // namespace trainer_detail
}  // namespace dlh
