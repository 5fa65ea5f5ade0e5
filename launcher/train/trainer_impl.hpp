// DLH — the Trainer behind Train() (trainer.hpp), declared for the files that hold its
// phases: trainer.cpp (the run in order, and what every phase uses), trainer_start.cpp
// (inputs, engine, announcement, the loop's start), trainer_resume.cpp, trainer_balance.cpp
// (the split of the global batch and how it moves), trainer_step.cpp, trainer_checkpoint.cpp
// (checkpoints and signals), trainer_eval.cpp and trainer_end.cpp (finish, agreement,
// summary, trace). Internal to those files; everything else goes through Train().
// Not in the CPU engine's fingerprint (estimator/module.mk, CPU_OUTSIDE_STEP_SRCS): what a
// step runs belongs in the step's .cpp files, so that a change to it marks calibrations as
// measured with another engine; here only members, prototypes and small helpers.
#pragma once

#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/process_age.hpp"
#include "common/spec.hpp"
#include "common/thread_cpu.hpp"
#include "launcher/comm/binding.hpp"
#include "launcher/comm/control_reduce.hpp"
#include "launcher/comm/delayed_allreduce.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/data/dataset.hpp"
#include "launcher/data/loader.hpp"
#include "launcher/data/sample_source.hpp"
#include "launcher/engine/device.hpp"
#include "launcher/engine/engine.hpp"
#include "launcher/storage/checkpoint.hpp"
#include "launcher/storage/checkpoint_writer.hpp"
#include "launcher/train/balancer.hpp"
#include "launcher/train/metrics.hpp"
#include "launcher/train/plan.hpp"
#include "launcher/train/run_energy.hpp"
#include "launcher/train/split_history.hpp"
#include "launcher/train/trace.hpp"
#include "launcher/train/trainer.hpp"
#include "launcher/watch/peer_watch.hpp"

namespace dlh {
namespace trainer_detail {

using Clock = std::chrono::steady_clock;

inline Clock::time_point ProcessStart() {
  return Clock::now() - std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(ProcessAgeSeconds()));
}
inline double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Wall-clock time, the "t" of metrics.jsonl records: what puts a run (and the runs before
// and after a requeue) on one time axis with other logs.
inline double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline const char* SignalName(int signal) {
  return signal == SIGUSR1 ? "SIGUSR1" : signal == SIGINT ? "SIGINT" : "SIGTERM";
}

// How strongly a signal stops the run: SIGINT 3 and SIGTERM 2 stop it, SIGUSR1 1 only
// checkpoints, 0 none. Where two come together the stronger one is answered (the control
// allreduce's max, local SGD's held signal); SignalOfStrength is the inverse.
inline int SignalStrength(int signal) {
  return signal == SIGINT ? 3 : signal == SIGTERM ? 2 : signal == SIGUSR1 ? 1 : 0;
}
inline int SignalOfStrength(int64_t strength) {
  return strength == 3 ? SIGINT : strength == 2 ? SIGTERM : strength == 1 ? SIGUSR1 : 0;
}

// snprintf into a std::string, for messages (up to 255 characters).
std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Each rank evaluates a contiguous slice of the test set; sums are combined.
constexpr int64_t kEvalChunk = 256;

struct EvalResult {
  double loss = 0, accuracy = 0;
};

// Seconds one step spent in each part, for metrics.jsonl's "time" record.
struct StepTimes {
  Clock::time_point start;
  double data = 0, compute = 0, allreduce = 0, checkpoint = 0;
};

// A step's metrics.jsonl record: its place, its times and (once known) its global sums.
struct StepRecord {
  int64_t step = 0, epoch = 0;                    // as metrics.jsonl counts them (from 1)
  int64_t progress_step = 0, progress_epoch = 0;  // for the progress line
  double lr = 0, total = 0;
  StepTimes times;
  double loss_sum = 0, correct_sum = 0;
  bool timed = false, summed = false;  // its times and its sums are in
};

// What every rank agreed on in a step's control allreduce.
struct StepControl {
  double loss_sum = 0;     // over the global batch
  double correct_sum = 0;  // likewise
  int signal = 0;          // SIGINT, SIGTERM, SIGUSR1 or 0, whichever rank got it
  bool time_due = false;   // rank 0's clock says a time-based checkpoint is due
};

// A checkpoint must be on disk before the step goes on: one answering a signal (the job
// may be killed right after) and the run's last (what the run leaves behind).
enum class Durability { Background, Wait };

class Trainer {
 public:
  Trainer(const TrainOptions& options, MPI_Comm world);
  // The stall watchdog ends with the run, also when an error unwinds it.
  ~Trainer() { FinishPeerWatch(); }  // stopped after MPI_Finalize (mpi::Env)
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Collective over `world`. Throws dlh::Error; input errors fail every rank alike.
  TrainResult run();

 private:
  // Setup phases, in order.
  void load_inputs();
  void start_peer_watch();
  void choose_split();
  void choose_balance();
  void choose_device();
  void start_engine();
  void resume();
  void continue_shape(const TrainState& st);
  void continue_split(const TrainState& st);
  void announce();
  void open_loop();

  // One step's phases, in order.
  bool keep_training() const;
  StepSums compute_step(StepTimes* times);
  Batch take_batch();
  const Batch* batch_ahead();
  StepControl sync_control(const StepSums& sums, StepTimes* times);
  void fill_control(const StepSums& sums);
  StepControl apply_control(const double* sum, bool flags);
  double advance();
  void rebalance(const StepTimes& times);
  double maybe_checkpoint(StepControl* control);
  double write_checkpoint(Durability durability);
  void snapshot(TrainState* st) const;
  void note_written(const WrittenCheckpoint& written);
  void collect_written();
  void handle_signal(int signal);
  void record(const StepControl& control, double lr, const StepTimes& times);
  void write_record(const StepRecord& r);
  // Local SGD (trainer_local_sgd.cpp): the step's loss scale, the period's model average, the
  // signals and checkpoints held until the ranks hold one model, and the summary's part.
  float begin_step_sync();
  double end_step_sync();
  bool release_held(StepControl* control, bool* due);
  nlohmann::json local_sgd_summary() const;
  nlohmann::json pipeline_summary(const std::vector<double>& per_rank, int fields) const;
  // Stale-synchronous training (trainer_stale.cpp): the sums' start, the step's exchange in
  // place of sync_control(), one gradient applied, what a checkpoint and a resume carry, the
  // records waiting for their sums, the end and the summary's part.
  void start_stale();
  StepControl stale_exchange(const StepSums& sums, StepTimes* times);
  void apply_oldest(StepControl* control);
  void gather_own_in_flight();
  void snapshot_in_flight(TrainState* st) const;
  void restore_in_flight();
  void stale_sums_arrived(int64_t step, double loss_sum, double correct_sum);
  void flush_records();
  void finish_stale();
  nlohmann::json stale_summary() const;
  // Delayed Gradient Averaging (trainer_stale.cpp): the model every rank agrees on back into
  // the engine; this rank's own gradients in flight applied on top of it.
  bool own_gradient_first() const;
  void hold_agreed_model();
  void step_with_own_gradients();
  void step_with_sums_in_flight();
  void evaluate_epoch();

  // After the last step, in order.
  void finish();
  uint32_t check_ranks_agree();
  void record_end();
  void write_summary(uint32_t crc);
  void write_trace();
  // trainer_observe.cpp: the run's observation record into its store (rank 0; never throws).
  void write_observation(const nlohmann::json& summary, double wall_s, double startup_s,
                         const nlohmann::json& node_probe);
  std::string observation_store() const;
  bool observation_due() const;
  nlohmann::json probe_for_observation() const;

  // Appends `record` to metrics.jsonl (rank 0) with "t", the Unix time now unless it has one.
  void append_metrics(nlohmann::json record);
  void record_start();
  // --trace: checks the file collectively, then every rank takes the common origin.
  void start_trace();

  EvalResult evaluate();
  void say(const std::string& text);
  // Where the peak rate came from: found for the plan, the plan's linear scaling, the spec.
  std::string lr_source() const {
    return (!o_.lr_source.empty() ? o_.lr_source
            : plan_.present       ? "plan, linear scaling"
                                  : "spec") +
           lr_resumed_;
  }
  // The rate was found by lr-find for this run's batch (lr_source.hpp), not set for another.
  bool lr_found() const {
    return o_.lr > 0 && o_.lr_source.rfind("plan, linear scaling", 0) == std::string::npos;
  }
  // The split a checkpoint records: every rank's batch when the plan set it or the run
  // balances, else none (the even split, whose files stay as they were before splits were
  // recorded).
  std::vector<int64_t> recorded_split() const {
    return plan_split_ || !history_.empty() ? rank_batches_ : std::vector<int64_t>();
  }
  // Makes `batches` the split from the next step on: this rank's slice, its weight in the
  // batchnorm statistics and, once the loop runs, the loader.
  void set_split(const std::vector<int64_t>& batches);
  void change_split(const std::vector<int64_t>& batches, const BalanceDecision* why);
  void record_split(int64_t step, const std::vector<int64_t>& batches);
  std::unique_ptr<Loader> make_loader() const;
  void open_data();

  // Declared in the order they come to be, so that they go in reverse (the loader's thread
  // before the data it reads, the engine before the spec it points to and the
  // communicators it uses).
  const TrainOptions o_;
  mpi::Comm comm_;
  const int rank_, size_;
  mpi::Comm local_;
  const std::string host_;
  // The timeline (--trace), null without it; trace_step_ is the step (counted from 1, as in
  // metrics.jsonl) its events belong to, forward_done_ the end of the step's forward.
  std::unique_ptr<Tracer> tracer_;
  int64_t trace_step_ = -1;
  Clock::time_point forward_done_;
  double trace_origin_unix_ = 0;  // the origin's Unix time (rank 0's goes in the metadata)

  // Inputs.
  TrainSpec spec_;
  // The data set's metadata and labels (its images too in memory mode), and where the loader
  // and the evaluation read samples: memory or the file (open_data()).
  Dataset data_;
  std::unique_ptr<SampleSource> train_source_, test_source_;
  bool streaming_ = false;
  LaunchPlan plan_;
  Binding binding_;
  std::string run_dir_;
  CheckpointDir ckpt_dir_{""};
  std::string run_id_;  // the peer watch's, in heartbeats and metrics.jsonl's start record
  int hosts_ = 0;       // distinct hosts of the ranks

  // Engine and the shape of the run.
  // Data-parallel place: this rank's replica and the replica count (a pipeline's stages share
  // one; without a pipeline, the rank and the world size).
  int dp_rank_ = 0, dp_size_ = 1;
  int64_t rank_offset_ = 0, rank_batch_ = 0;  // this rank's slice of the global batch
  std::vector<int64_t> rank_batches_;         // every rank's batch, in rank order
  std::vector<int> rank_parts_;               // every rank's plan part (plan split only)
  bool plan_split_ = false;                   // the plan's per-part batches set the split
  // Balancing (balancer.hpp, split_history.hpp): the mode, every split this run trained with
  // (from step 0, through the runs before a resume; empty when it never balanced), the
  // replayed history and the next change of it to apply, and this rank's compute seconds
  // per step since the last decision.
  BalanceMode balance_ = BalanceMode::Off;
  int64_t max_rank_batch_ = 0;  // the most samples balancing may give one rank
  SplitHistory history_, replay_;
  size_t replay_next_ = 0;
  std::vector<double> window_;
  int balance_lines_ = 0;  // changes announced on the progress output
  std::unique_ptr<Engine> engine_;
  DeviceChoice device_choice_;  // choose_device, before the run folder; start_engine builds it
  int64_t steps_per_epoch_ = 0, total_steps_ = 0;
  std::unique_ptr<Progress> progress_;

  // Position: what a checkpoint stores and a resume restores.
  int64_t step_ = 0, epoch_ = 0, step_in_epoch_ = 0, samples_seen_ = 0;
  double elapsed_before_ = 0;  // training seconds of the runs before this one
  std::string resume_path_;
  // step_ - (epoch_ * steps_per_epoch_ + step_in_epoch_): 0 unless a resume changed the
  // global batch (elastic.hpp), which moves the cursor but not the count of optimizer steps.
  // The schedule and the end of the run go by the cursor, step_ - step_base_.
  int64_t step_base_ = 0;
  std::string lr_resumed_;  // how a resume changed the rate, for lr_source()

  // The loop.
  std::unique_ptr<MetricsLog> log_;  // rank 0 only
  std::unique_ptr<Loader> loader_;
  // The next step's batch, taken from the loader while this step's backward runs
  // (batch_ahead), and the seconds that took: they count as the next step's data time.
  std::optional<Batch> ahead_;
  double ahead_wait_ = 0;
  std::unique_ptr<CheckpointWriter> writer_;  // rank 0 only
  std::unique_ptr<RunEnergy> energy_;         // this rank's meter, from the loop's start
  int64_t samples_at_start_ = 0;              // samples_seen_ then: the meter's samples
  size_t stats_len_ = 0;  // batchnorm statistics carried in the control allreduce
  // The control allreduce (sync_control): 2 + stats_len_ values summed, then the flags maxed.
  static constexpr size_t kControlFlags = 4;
  std::unique_ptr<SumMaxAllreduce> control_reduce_;
  std::vector<double> control_, control_sum_;
  std::vector<float> averaged_stats_;
  float loss_scale_ = 0;  // 1 / global batch: gradients are of the mean loss
  // Local SGD: whether this step keeps its gradients, whether every rank holds the same model
  // (false between two averages), what waits for the period's end, the average's arrays (kept
  // between averages: no fresh pages each time) and what it cost.
  bool step_is_local_ = false, models_agree_ = true, held_due_ = false;
  int held_signal_ = 0;
  std::vector<NamedArray> average_params_, average_buffers_, average_state_;
  std::vector<float> average_flat_;
  int64_t model_averages_ = 0;
  double model_average_seconds_ = 0;
  // Stale-synchronous training: the sums in flight, what a resume brought of them (until the
  // loop starts), rank 0's records waiting for their sums (by step), the seconds spent
  // waiting for sums and the gradients applied.
  std::unique_ptr<DelayedAllreduce> delayed_;
  std::vector<NamedArray> restored_in_flight_;
  std::map<int64_t, StepRecord> pending_records_;
  double stale_wait_seconds_ = 0;
  int64_t stale_applied_ = 0, stale_drains_ = 0;
  // Delayed Gradient Averaging (spec sync.own_gradient_first): the model and optimizer state
  // every rank agrees on (the sums applied so far), this rank's own gradients of the steps in
  // flight (its estimate of each step's mean gradient, oldest first), and whether the engine
  // holds the agreed model with those applied on top (the model the next forward runs).
  struct OwnGradient {
    int64_t step = 0;
    std::vector<float> values;
  };
  std::deque<OwnGradient> own_in_flight_;
  std::vector<std::vector<float>> own_spare_;  // arrays of applied ones, for the next steps
  std::vector<float> own_gathered_;  // rank 0, at a checkpoint: every rank's, step by step
  std::vector<NamedArray> agreed_params_, agreed_buffers_, agreed_state_;
  bool engine_runs_ahead_ = false;
  int64_t own_updates_ = 0;
  double weight_ = 0;  // this rank's share of the global batch
  // This process's run from the process's start: the loader, MPI_Init and the options
  // before the Trainer are part of what the job paid (common/process_age.hpp).
  Clock::time_point launch_start_ = ProcessStart();
  Clock::time_point train_start_, last_ckpt_;
  double cpu_at_start_ = 0;  // the process's CPU seconds when train_start_ was taken
  // This run's seconds in evaluations and checkpoints (inside the loop's time): summary.json
  // compares them with the plan's phases.
  double eval_seconds_ = 0, checkpoint_seconds_ = 0;
  // The writer's seconds and files of this run (rank 0): summary.json's "checkpoints".
  double checkpoint_write_seconds_ = 0;
  CpuSeconds checkpoint_write_cpu_;
  int64_t checkpoints_written_ = 0;
  int64_t waited_step_ = -1;  // the step of the last checkpoint the loop waited for
  // This rank's seconds in compute and in the allreduces over this run's steps: summary.json
  // shows every rank's mean, which is where a slow rank makes the others wait.
  double compute_seconds_ = 0, allreduce_seconds_ = 0;
  int64_t first_step_ = 0;  // step_ when this run's loop began (after a resume: not 0)
  // For the observation record (rank 0): every step's seconds (its checkpoint wait left
  // out), the evaluations and the checkpoints that held up the loop, every rank's node.
  std::vector<double> step_seconds_;
  int64_t evaluations_ = 0, checkpoint_stops_ = 0;
  double first_eval_seconds_ = -1;  // this run's first evaluation (< 0: none yet)
  std::vector<std::string> node_of_rank_;
  double ema_step_ = 0;  // seconds per step, smoothed for the progress line
  bool stop_ = false;
  bool evaluated_epoch_ = false;
  bool said_no_test_ = false;  // the note that the data set has no test split, said once
  TrainResult result_;
};

}  // namespace trainer_detail
}  // namespace dlh
