// DLH — resuming a checkpoint on another shape (docs/reference/dlh-launch.md, "Elastic
// resume"): another rank count, or another global batch. Pure functions; the trainer applies
// them in Trainer::resume.
//
// Another rank count with the same global batch trains the same samples in every step (data
// order is a pure function of (seed, epoch) and the global batch, and the ranks' slices tile
// the batch in rank order), so only the order in which the gradient sums run differs.
// Another global batch changes the samples of a step and the steps of an epoch: the loader
// cursor moves to the equivalent position (EquivalentCursor), samples_seen stays exact, and
// the peak learning rate is rescaled by the plan's rule, linear scaling (LinearScaledLr).
#pragma once

#include <cstdint>
#include <string>

namespace dlh {

// The loader's cursor: the next batch is step `step_in_epoch` of epoch `epoch`.
struct Cursor {
  int64_t epoch = 0, step_in_epoch = 0;
  bool operator==(const Cursor& o) const {
    return epoch == o.epoch && step_in_epoch == o.step_in_epoch;
  }
};

// The global batch a checkpoint was trained with: `recorded` (its global_batch attribute)
// when positive; for a file written before that attribute, samples_seen / step when that
// divides exactly (every step took the same batch); else 0 (unknown, or no step taken).
int64_t CheckpointBatch(int64_t recorded, int64_t samples_seen, int64_t step);

// The cursor at global batch `to` equivalent to `at` at batch `from`, in epochs of
// `train_count` samples. Step k of an epoch takes positions [k·B, (k+1)·B) of the epoch's
// permutation, so the next sample at `at` is position p = at.step_in_epoch · from; the new
// cursor is the first step of batch `to` that starts at or after p, ceil(p / to): no sample
// is trained twice in an epoch, and at most to - 1 are skipped (as the epoch's last
// train_count mod B samples always are). When that step is past the epoch's last
// (train_count / to steps), the next epoch starts. Unchanged when from == to.
Cursor EquivalentCursor(Cursor at, int64_t from, int64_t to, int64_t train_count);

// Linear scaling (Goyal et al. 2017, "Accurate, large minibatch SGD"), the plan's rule
// (estimator/recommend/recommender.cpp: lr × global_batch / spec batch_size): lr × to / from.
double LinearScaledLr(double lr, int64_t from, int64_t to);

// The line a resume on another rank count prints (rank 0), e.g. "checkpoint was written by
// 2 ranks, resuming on 3 with the same global batch 20 (...)": what stays the same, the
// tolerance the changed summation order implies, and with dropout that the masks differ.
// `same_batch` false: the batch line (BatchChangeNote) says the rest.
std::string RankCountNote(int64_t from_ranks, int64_t to_ranks, int64_t batch, bool same_batch,
                          bool dropout);

// "global batch 20 -> 30, lr 0.002 -> 0.003 (linear scaling, the plan's rule: lr x 30/20);
// cursor: epoch 2 step 40 -> epoch 2 step 27, samples_seen 5000 kept". `rule` names where the
// new rate came from.
std::string BatchChangeNote(int64_t from_batch, int64_t to_batch, double from_lr, double to_lr,
                            const std::string& rule, Cursor from, Cursor to);

}  // namespace dlh
