// DLH — a run's headline figures, the same in the HTML report and the terminal view
// (dlh-report --follow): where it is, how fast it goes, how well it learns, when it ends.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "launcher/report/run_data.hpp"

namespace dlh::report {

struct Headline {
  RunState state = RunState::Unknown;
  std::string name;         // the spec's name (the folder's name when not logged)
  int64_t step = 0;         // the highest step logged
  int64_t total_steps = 0;  // 0: not known
  int64_t epoch = 0;
  double loss = 0, accuracy = 0;  // the last step's (NaN: none)
  double test_accuracy = -1;      // the last evaluation (-1: none)
  int64_t test_epoch = 0;
  double samples_per_s = 0;    // mean over the last 50 steps logged (0: none)
  double step_s = 0;           // the same steps' mean step time
  double eta_s = -1;           // at that pace, to the last step (-1: not known)
  double since_update_s = -1;  // since metrics.jsonl last changed
  int attempts = 0;
  int world_size = 0;
  std::string device;
  // How the ranks keep one model, when not synchronously: "local SGD, period 4 (28 model
  // averages)", "stale-synchronous, staleness 2 (120 gradients applied)", "pipeline of 2
  // stages x 1 replica(s), 4 micro-batches (bubble 36% measured, 20% predicted)" (the start
  // record's "sync" or "parallel"; the counts from summary.json). Empty: synchronous.
  std::string training;
  std::string last_checkpoint;
  std::string stop;  // how the last attempt ended, in words (empty: running)
};

Headline HeadlineOf(const RunData& run, double now);

// Name-value rows of the headline, as both views show them.
std::vector<std::pair<std::string, std::string>> HeadlineRows(const Headline& h);

// Seconds as a person reads them: "42 s", "3 min 05 s", "2 h 10 min".
std::string Duration(double seconds);

}  // namespace dlh::report
