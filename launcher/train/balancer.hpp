// DLH — adaptive batch balancing (docs/reference/dlh-launch.md, "Adaptive balancing"): from
// every rank's measured busy time per step (all but its wait in the allreduces) and its current
// batch, the next integer split of the global batch. Pure: the trainer gathers the
// measurements and applies the answer.
//
// Why these rules. Data-parallel steps end when the slowest rank is done, so the step is
// fastest when every rank is busy for as long: batches proportional to the ranks' rates
// (samples/s). LB-BSP and Cannikin (cited by issue 14) move samples from slow to fast
// workers this way. Rates are measured, so they are noisy (±30% from step to step on a
// shared machine): the trainer hands in the median of a window of steps, and the split moves
//   - damped: only `damping` of the way to the rate-proportional split, so that a wrong
//     measurement costs half of what it would, and the iteration converges instead of
//     overshooting when the cost per sample is not constant (a fixed per-step part);
//   - bounded: no rank's batch moves by more than `max_move` of it (at least one sample);
//     every move is scaled by one factor, which keeps the sum, so the largest relative move
//     sets the pace;
//   - not at all inside a dead band: when the slowest rank is within `dead_band` of the ideal
//     step (the global batch at the sum of the rates), the split stays, so that noise does not
//     make it oscillate.
// The sum stays the global batch and every rank keeps between 1 and `max_batch` samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/median.hpp"  // Median, which the balancer's callers use

namespace dlh {

// How a run splits its global batch over the ranks: fixed (the even split or the plan's
// parts), adaptive (this file), or the splits of a recorded history (split_history.hpp).
enum class BalanceMode { Off, Adaptive, Replay };

// "off", "adaptive", "replay"; throws UsageError "<origin>: must be off, adaptive or replay,
// got '<text>'".
BalanceMode ParseBalanceMode(const std::string& text, const std::string& origin);
const char* BalanceModeName(BalanceMode mode);

// The most samples a balanced rank may take: twice the mean batch, or the largest batch of
// the split the run starts with when that is more, and never so many that another rank
// would have none. A function of the run's inputs alone, so that a resumed run bounds its
// splits as the uninterrupted one did; the GPU engine is sized for it.
int64_t BalanceMaxBatch(int64_t global_batch, int ranks, const std::vector<int64_t>& start);

struct BalancerConfig {
  int64_t global_batch = 0;  // the sum every split keeps
  int64_t max_batch = 0;     // most samples one rank may take (the engine is sized for it)
  double damping = 0.5;      // fraction of the way to the rate-proportional split, (0, 1]
  double max_move = 0.25;    // largest move of a rank's batch, as a fraction of it, (0, 1]
  double dead_band = 0.05;   // no move while the slowest rank is this close to ideal, >= 0
};

// One rank's measurements over a window of steps that all used `batch` samples.
struct RankTiming {
  int64_t batch = 0;   // samples per step
  double seconds = 0;  // robust busy seconds per step (the window's median), > 0
};

struct BalanceDecision {
  std::vector<int64_t> batches;  // the next split; equal to the current one when unchanged
  bool changed = false;
  std::vector<double> rates;  // samples/s of each rank, as measured
  double imbalance = 0;       // slowest rank's seconds / ideal seconds - 1, >= 0
};

// The split after `current` (rank order). Throws Error (an internal error: the trainer
// checks what it hands in) when the config is out of range, `current` is empty, its batches
// are outside [1, max_batch] or do not sum to global_batch, or a time is not finite and
// positive.
BalanceDecision ProposeSplit(const BalancerConfig& config, const std::vector<RankTiming>& current);

}  // namespace dlh
