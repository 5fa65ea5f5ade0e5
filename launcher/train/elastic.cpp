// DLH — resuming on another shape (see elastic.hpp).
#include "launcher/train/elastic.hpp"

#include <cstdio>

namespace dlh {
namespace {

std::string Num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

std::string Describe(Cursor c) {
  // Epochs count from 1 in messages, as in "resumed from ... (epoch 3)".
  return "epoch " + std::to_string(c.epoch + 1) + " step " + std::to_string(c.step_in_epoch);
}

}  // namespace

int64_t CheckpointBatch(int64_t recorded, int64_t samples_seen, int64_t step) {
  if (recorded > 0) return recorded;
  if (step <= 0 || samples_seen <= 0 || samples_seen % step != 0) return 0;
  return samples_seen / step;
}

Cursor EquivalentCursor(Cursor at, int64_t from, int64_t to, int64_t train_count) {
  if (from == to || from <= 0 || to <= 0) return at;
  const int64_t position = at.step_in_epoch * from;  // the epoch's next sample
  Cursor c{at.epoch, (position + to - 1) / to};
  if (c.step_in_epoch >= train_count / to) c = {at.epoch + 1, 0};
  return c;
}

double LinearScaledLr(double lr, int64_t from, int64_t to) {
  return from > 0 ? lr * double(to) / double(from) : lr;
}

std::string RankCountNote(int64_t from_ranks, int64_t to_ranks, int64_t batch, bool same_batch,
                          bool dropout) {
  std::string line = "checkpoint was written by " + std::to_string(from_ranks) +
                     " ranks, resuming on " + std::to_string(to_ranks);
  if (!same_batch) return line + " (and another global batch, below)";
  line += " with the same global batch " + std::to_string(batch) +
          ": the same samples in every step, only the order of the gradient sums differs, so "
          "the parameters follow the " +
          std::to_string(from_ranks) +
          "-rank run to float32 rounding (a reordered sum of n terms differs by up to n x 2^-24 "
          "relative, growing with the steps after the resume: docs/reference/dlh-launch.md, "
          "\"Elastic resume\" "
          "measured 6e-8 after 20 steps, 6e-7 after 100)";
  if (dropout)
    line += "; the spec has dropout, whose masks depend on the rank: they differ from the " +
            std::to_string(from_ranks) + "-rank run's";
  return line;
}

std::string BatchChangeNote(int64_t from_batch, int64_t to_batch, double from_lr, double to_lr,
                            const std::string& rule, Cursor from, Cursor to) {
  return "global batch " + std::to_string(from_batch) + " -> " + std::to_string(to_batch) +
         ", lr " + Num(from_lr) + " -> " + Num(to_lr) + " (" + rule + "); cursor " +
         Describe(from) + " -> " + Describe(to) + ", samples_seen kept";
}

}  // namespace dlh
