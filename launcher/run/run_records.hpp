// DLH — a program's run as a DLH run (issue 44): what the program of `dlh-launch run` says on
// its progress channel (progress.hpp) becomes the run folder's metrics.jsonl and
// summary.json, in the schema the built-in trainer writes (docs/reference/run-folder.md),
// so that dlh-report shows a program's run as it shows train's.
//
// Every rank keeps a RunRecorder: its own program's lines give its figures for the summary
// (the mean step split, the samples per step), which rank 0 gathers at the end. Rank 0 also
// appends the records Take, Signal and End return to metrics.jsonl. Pure: the times are
// passed in (Unix seconds), the file sizes through `file_bytes`, so it is unit-tested with
// plain values.
//
// What the records hold, from which line:
//   start       before the first record of the run: its step is the `resume` line's
//               (0 without one), resumed_from the resume's path, else DLH_CHECKPOINT's;
//   step        per step line: step (counted from the start's), epoch, loss (null when not
//               given: the reader needs the key), accuracy, lr, samples_per_s (the
//               program's, else SAMPLES scaled by rank 0's share of the global batch over the
//               step's time), time {total: since the previous step line, data, compute,
//               allreduce: the program's}; the first also rank_batches;
//   eval        per eval line: epoch, step, and its metrics under their names;
//   checkpoint  per checkpoint line: step, path, bytes (the file's size when it is there),
//               background false;
//   signal      per signal the rank passed on, after the program's next checkpoint line (or
//               at the end): step, signal, checkpoint;
//   end         when the program ended well or obeyed a stop: step, finished, stop_signal,
//               train_seconds.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/run/progress.hpp"

namespace dlh {

struct RunContext {
  std::string program;  // DefaultRunName: the records' spec_name
  std::vector<std::string> command;
  std::string run_id;
  int world_size = 1;
  std::vector<std::string> hosts;     // distinct
  std::vector<int64_t> rank_batches;  // every rank's DLH_BATCH in rank order; empty: no plan
  int64_t global_batch = 0;           // the plan's; 0: no plan
  int64_t total_steps = 0;            // the plan's predicted steps; 0: unknown
  std::string checkpoint;             // DLH_CHECKPOINT ("": none)
  nlohmann::json plan;                // the plan as given; null: none
  double launch_unix = 0;             // when the rank started, Unix seconds
  // A file's size in bytes, -1 when it cannot be read (nullptr: never asked).
  std::function<int64_t(const std::string& path)> file_bytes;
};

// One rank's figures for summary.json, gathered by rank 0 (as doubles, kFigures each).
struct RankFigures {
  static constexpr int kFigures = 7;
  double batch = 0;    // median SAMPLES of its step lines (0: none given)
  double samples = 0;  // their sum over this run (0: a step line gave none)
  // Mean seconds per step of the program's own split over the steps that gave it (NaN: none).
  double data_s = __builtin_nan(""), compute_s = __builtin_nan(""), allreduce_s = __builtin_nan("");
  double cpu_cores_busy = __builtin_nan(""), peak_rss_mib = __builtin_nan("");
  void ToArray(double* out) const;
  static RankFigures FromArray(const double* in);
};

class RunRecorder {
 public:
  explicit RunRecorder(RunContext context) : c_(std::move(context)) {}

  // The records for one line at Unix time `t` (each with "t"); `device` is what the
  // program's description said ("": nothing yet).
  std::vector<nlohmann::json> Take(const ProgressEvent& e, const std::string& device, double t);
  // A signal the rank passed on to its program at `t`: its record waits for the program's
  // end, and names the last checkpoint it wrote, the one its stop took (train writes its
  // signal record after that checkpoint). Not the next checkpoint line: ranks that agree
  // on when to stop (dlh.should_stop(agree=True)) may pass a periodic checkpoint first.
  void Signal(int signal, double t);
  // The last records of a program that ended well or obeyed a stop (`stop_signal`: the stop
  // or SIGUSR1 it obeyed, 0: none; `finished`: it did all it meant to).
  std::vector<nlohmann::json> End(bool finished, int stop_signal, const std::string& device,
                                  double t);

  RankFigures Figures() const;  // cpu_cores_busy and peak_rss_mib are the caller's
  int64_t step() const { return step_; }
  const std::string& last_checkpoint() const { return last_checkpoint_; }
  int64_t checkpoints() const { return checkpoints_; }
  const nlohmann::json& last_eval() const { return last_eval_; }  // null: none
  double last_lr() const { return last_lr_; }                     // 0: none given
  double first_step_unix() const { return first_step_t_; }        // 0: no step
  double last_step_unix() const { return last_step_t_; }
  int64_t steps_run() const { return steps_run_; }  // step lines of this run

 private:
  void Start(std::vector<nlohmann::json>* out, const std::string& device, double t);
  void Flush(std::vector<nlohmann::json>* out, double t);  // the held signal records

  RunContext c_;
  bool started_ = false;
  int64_t step_ = 0, steps_run_ = 0, epoch_ = -1;
  std::string resumed_from_;
  double previous_step_t_ = 0, first_step_t_ = 0, last_step_t_ = 0;
  std::vector<int> held_signals_;
  std::string last_checkpoint_;
  int64_t checkpoints_ = 0;
  nlohmann::json last_eval_;
  double last_lr_ = 0;
  std::vector<double> samples_;
  double sums_[3] = {0, 0, 0};  // data, compute, allreduce
  int64_t counts_[3] = {0, 0, 0};
};

struct RunSummaryInputs {
  const RunContext* context = nullptr;
  const RunRecorder* rank0 = nullptr;
  std::vector<RankFigures> ranks;       // every rank's, in rank order
  std::vector<std::string> rank_types;  // with a plan on two or more types: each rank's part's gpu
  std::string device;                   // the program's description ("": unknown)
  double lr = 0;                        // DLH_LR (0: none)
  bool finished = false;
  int stop_signal = 0;
  double ended_unix = 0;
  // ProgramEnergySummary's (program_energy.hpp); null: not measured.
  nlohmann::json energy;
  // With a plan that predicts: its figures (prediction.* of the trainer's summary).
  std::string plan_origin;
  double predicted_total_s = 0, predicted_step_s = 0, time_limit_s = 0;
  int64_t predicted_steps = 0;
};

// summary.json of a program's run (rank 0).
nlohmann::json RunSummary(const RunSummaryInputs& in);

}  // namespace dlh
