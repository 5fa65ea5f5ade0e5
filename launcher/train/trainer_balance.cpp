// DLH — the Trainer's split of the global batch: chosen at the start (even, or the plan's
// parts), and how it moves during the run (balancer.hpp: adaptive or replayed).
#include <algorithm>

#include "launcher/comm/collective.hpp"
#include "launcher/train/batch_split.hpp"
#include "launcher/train/trainer_impl.hpp"

namespace dlh {
namespace trainer_detail {

// This rank's slice of the global batch, fixed for the whole run (batch_split.hpp): the even
// split, or with a plan on several GPU types its part's per_gpu_batch, placed after the
// slices of the ranks before it. Every rank gathers every batch, so all check the same sum
// and fail alike.
void Trainer::choose_split() {
  plan_split_ = PlanSplitsBatch(plan_, o_.batch_size > 0);
  rank_batches_.assign(size_t(size_), 0);
  rank_parts_.assign(size_t(size_), -1);
  if (plan_split_ && spec_.parallel.pipelined())
    RunCollectively(comm_.get(), [&] {
      throw UsageError(o_.plan_origin + ": a plan on several GPU types splits the batch by rank; " +
                       o_.spec_path + " asks for a pipeline (parallel), which it cannot split");
    });
  if (!plan_split_) {
    // The stages of a pipeline replica take the same slice: the first its images, the last
    // its labels (ParallelSpec).
    const int stages = spec_.parallel.pipeline_stages;
    for (int r = 0; r < size_; ++r)
      rank_batches_[size_t(r)] = EvenShare(spec_.batch_size, r / stages, size_ / stages).batch;
    const RankShare mine = EvenShare(spec_.batch_size, dp_rank_, dp_size_);
    rank_offset_ = mine.offset;
    rank_batch_ = mine.batch;
    return;
  }
  int64_t mine[2] = {0, -1};  // batch, part
  RunCollectively(comm_.get(), [&] {
    const int part = PartOfRank(plan_, o_.plan_origin, o_.gpu_type, o_.gpu_type_origin,
                                o_.node_name, rank_, size_);
    mine[0] = plan_.parts[size_t(part)].per_gpu_batch;
    mine[1] = part;
  });
  std::vector<int64_t> all(2 * size_t(size_), 0);
  MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, comm_.get()));
  for (size_t r = 0; r < size_t(size_); ++r) {
    rank_batches_[r] = all[2 * r];
    rank_parts_[r] = int(all[2 * r + 1]);
  }
  std::vector<int64_t> offsets;
  RunCollectively(comm_.get(), [&] {
    offsets = SplitOffsets(rank_batches_, rank_parts_, plan_, o_.plan_origin, spec_.batch_size);
  });
  rank_offset_ = offsets[size_t(rank_)];
  rank_batch_ = rank_batches_[size_t(rank_)];
}

// How the split may move (balancer.hpp): --balance, else the plan's "balance", else off. A
// history to replay is read and checked by every rank, so a bad one fails all alike, before
// anything is written. Adaptive and replayed runs record their history from step 0.
void Trainer::choose_balance() {
  RunCollectively(comm_.get(), [&] {
    const bool from_plan = o_.balance.empty() && !plan_.balance.empty();
    balance_ = ParseBalanceMode(!o_.balance.empty() ? o_.balance
                                : from_plan         ? plan_.balance
                                                    : "off",
                                from_plan ? o_.plan_origin + ": balance" : o_.balance_origin);
    if (balance_ != BalanceMode::Off && spec_.parallel.pipelined())
      throw UsageError((from_plan ? o_.plan_origin : o_.balance_origin) +
                       ": balancing moves samples between ranks, not between pipeline replicas; " +
                       "not with parallel.pipeline_stages in " + o_.spec_path);
    max_rank_batch_ = BalanceMaxBatch(spec_.batch_size, size_, rank_batches_);
    if (balance_ != BalanceMode::Replay) return;
    std::string origin;
    replay_ = ReadSplitHistory(o_.balance_history, &origin);
    CheckSplitHistory(replay_, size_, spec_.batch_size, spec_.batch_size - (size_ - 1), origin);
    max_rank_batch_ = 1;
    for (const SplitChange& c : replay_)
      for (int64_t b : c.batches) max_rank_batch_ = std::max(max_rank_batch_, b);
  });
  if (balance_ == BalanceMode::Adaptive) history_ = {{0, rank_batches_}};
  if (balance_ == BalanceMode::Replay) {
    set_split(replay_.front().batches);
    history_ = {replay_.front()};
    replay_next_ = 1;
  }
}

void Trainer::set_split(const std::vector<int64_t>& batches) {
  rank_batches_ = batches;
  rank_offset_ = 0;
  for (int r = 0; r < rank_; ++r) rank_offset_ += batches[size_t(r)];
  rank_batch_ = batches[size_t(rank_)];
  weight_ = double(rank_batch_) / double(spec_.batch_size);
  // The loader prepares batches ahead with the old slice: a new one starts at the cursor.
  if (loader_) {
    ahead_.reset();
    loader_.reset();
    loader_ = make_loader();
  }
}

// A new split from the next step on, recorded in the history (and so in checkpoints and
// summary.json), in metrics.jsonl and, the first few times, on the progress output.
void Trainer::change_split(const std::vector<int64_t>& batches, const BalanceDecision* why) {
  set_split(batches);
  record_split(step_, batches);
  if (tracer_)
    tracer_->instant("split change", Clock::now(), trace_step_, "rank_batches",
                     FormatBatches(batches));
  if (rank_ != 0) return;
  nlohmann::json rec = {{"event", "balance"}, {"step", step_}, {"rank_batches", batches}};
  std::string how;
  if (why) {
    rec["rates"] = why->rates;
    rec["imbalance"] = why->imbalance;
    how = Printf(" (the slowest rank was %.0f%% behind the ideal step)", 100 * why->imbalance);
  }
  append_metrics(rec);
  constexpr int kLines = 10;
  if (++balance_lines_ <= kLines)
    say("balance: from step " + std::to_string(step_) + " rank batches " + FormatBatches(batches) +
        how + (balance_lines_ == kLines ? "; further changes only in metrics.jsonl" : ""));
}

// Appends a change to the history; a second change at the same step (a resume that takes
// another split right at the checkpoint's step) replaces the first, so steps keep increasing.
void Trainer::record_split(int64_t step, const std::vector<int64_t>& batches) {
  if (!history_.empty() && history_.back().step == step) history_.pop_back();
  if (history_.empty() || history_.back().batches != batches) history_.push_back({step, batches});
}

// Adaptive: this rank's busy time of the step joins the window: all of it so far but the
// time in the allreduces (where a fast rank waits for the slow ones), so its data, forward,
// backward and optimizer update. The update does not grow with the batch and runs at the
// rank's own speed, so leaving it out would give a slow rank too much. Every balance_every
// steps rank 0 proposes the next split from every rank's median (balancer.hpp) and
// broadcasts it, so all ranks take the same one. Replay: the recorded change due at this
// step, if any. Either takes effect from the next step, and comes before the checkpoint,
// which so records the split a resumed run continues with.
void Trainer::rebalance(const StepTimes& times) {
  if (balance_ == BalanceMode::Replay) {
    if (replay_next_ < replay_.size() && replay_[replay_next_].step == step_)
      change_split(replay_[replay_next_++].batches, nullptr);
    return;
  }
  if (balance_ != BalanceMode::Adaptive) return;
  double seconds = std::max(0.0, Since(times.start) - times.allreduce);
  if (o_.balance_clock) seconds = o_.balance_clock(step_ - 1, rank_, rank_batch_, seconds);
  window_.push_back(seconds);
  // Every rank has the same window length, so all skip or decide alike. A short window (the
  // first after a resume) waits for the next multiple.
  if (step_ % o_.balance_every != 0 || int64_t(window_.size()) < (o_.balance_every + 1) / 2) return;
  const auto t_decide = Clock::now();
  const double mine = Median(window_);
  window_.clear();
  std::vector<double> medians(size_t(size_), 0);
  MPI_CHECK(MPI_Gather(&mine, 1, MPI_DOUBLE, medians.data(), 1, MPI_DOUBLE, 0, comm_.get()));
  std::vector<int64_t> next = rank_batches_;
  BalanceDecision decision;
  RunCollectively(comm_.get(), [&] {
    if (rank_ != 0) return;
    BalancerConfig config;
    config.global_batch = spec_.batch_size;
    config.max_batch = max_rank_batch_;
    std::vector<RankTiming> timings(rank_batches_.size());
    for (size_t r = 0; r < timings.size(); ++r)
      timings[r] = {rank_batches_[r], std::max(medians[r], 1e-9)};  // a clock's zero
    decision = ProposeSplit(config, timings);
    next = decision.batches;
  });
  MPI_CHECK(MPI_Bcast(next.data(), size_, MPI_INT64_T, 0, comm_.get()));
  if (tracer_)
    tracer_->slice(TraceLane::Compute, "balance", t_decide, Clock::now(), trace_step_,
                   {{"changed", next != rank_batches_}}, "rank_batches", FormatBatches(next));
  if (next != rank_batches_) change_split(next, rank_ == 0 ? &decision : nullptr);
}
}  // namespace trainer_detail
}  // namespace dlh
