// DLH — the data-parallel training loop.
//
// Why ranks stay bit-identical: parameters start as rank 0's (broadcast); every rank
// applies the same summed gradient (MPI allreduce gives every rank the same bits) with
// the same optimizer arithmetic; batchnorm running statistics are averaged across ranks
// each step before they are folded in. Why a resumed run matches an uninterrupted one:
// everything random is a pure function of the seed and counters stored in the
// checkpoint (data order of (seed, epoch), dropout masks of (seed, rank, step, layer)),
// and a checkpoint is taken only between steps.
//
// A run is a Trainer going through its phases in order: inputs, engine, resume, announce,
// then per step: compute, control sync, advance, rebalance, checkpoint, record, evaluate; at
// the end finish, agreement and summary. Each phase is one member function; the state that
// crosses phases (spec, engine, the loader cursor, the result) is a member.
#include "launcher/train/trainer.hpp"

#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "common/atomic_file.hpp"
#include "common/duration.hpp"
#include "common/spec.hpp"
#include "common/thread_cpu.hpp"
#include "launcher/comm/binding.hpp"
#include "launcher/comm/collective.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/comm/peer_watch.hpp"
#include "launcher/comm/topology.hpp"
#include "launcher/data/dataset.hpp"
#include "launcher/data/file_source.hpp"
#include "launcher/data/loader.hpp"
#include "launcher/data/stage.hpp"
#include "launcher/engine/device.hpp"
#include "launcher/engine/engine.hpp"
#include "launcher/nn/thread_pool.hpp"
#include "launcher/storage/checkpoint.hpp"
#include "launcher/storage/checkpoint_writer.hpp"
#include "launcher/train/balancer.hpp"
#include "launcher/train/batch_split.hpp"
#include "launcher/train/elastic.hpp"
#include "launcher/train/plan.hpp"
#include "launcher/train/run_energy.hpp"
#include "launcher/train/signals.hpp"
#include "launcher/train/split_history.hpp"
#include "launcher/train/trace.hpp"

namespace dlh {
namespace {

using Clock = std::chrono::steady_clock;
// (predicted - measured) / measured, in percent.
double ErrorPercent(double predicted, double measured) {
  return 100 * (predicted - measured) / measured;
}

std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* fmt, ...) {
  char text[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  return text;
}

// "rank batches [96, 32]" or "an even split": a checkpoint's split in messages.
std::string DescribeSplit(const std::vector<int64_t>& batches) {
  return batches.empty() ? "an even split" : "rank batches " + FormatBatches(batches);
}

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Wall-clock time, the "t" of metrics.jsonl records: what puts a run (and the runs before
// and after a requeue) on one time axis with other logs.
double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const char* SignalName(int signal) {
  return signal == SIGUSR1 ? "SIGUSR1" : signal == SIGINT ? "SIGINT" : "SIGTERM";
}

uint32_t Crc(uint32_t crc, const std::vector<NamedArray>& arrays) {
  for (const auto& a : arrays)
    crc = uint32_t(crc32(crc, reinterpret_cast<const Bytef*>(a.data.data()),
                         uInt(a.data.size() * sizeof(float))));
  return crc;
}

// Batches prepared ahead when samples are read from the file (--prefetch is the floor).
constexpr int kStreamPrefetch = 8;

// MemAvailable of /proc/meminfo: free memory plus what the kernel can reclaim (the page
// cache) without swapping; 0 when unknown.
double AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  double kib = 0;
  while (std::getline(in, line))
    if (std::sscanf(line.c_str(), "MemAvailable: %lf kB", &kib) == 1) return kib * 1024;
  return 0;
}

void SetThreads(const TrainOptions& o, int local_size) {
  int threads = o.threads;
  if (threads <= 0) {
    // A user's OPENBLAS_NUM_THREADS wins; otherwise share the node's cores among its
    // ranks so that the threads of different ranks do not fight for cores.
    const char* env = std::getenv("OPENBLAS_NUM_THREADS");
    threads = env ? std::atoi(env) : 0;
    if (threads <= 0) {
      int cores = int(std::thread::hardware_concurrency());
      threads = std::max(1, cores / std::max(1, local_size));
    }
  }
  // The CPU engine's own pool runs every pass (OpenBLAS single-threaded inside it).
  SetCpuThreads(threads);
}

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
  double advance();
  void rebalance(const StepTimes& times);
  double maybe_checkpoint(const StepControl& control);
  double write_checkpoint(Durability durability);
  void snapshot(TrainState* st) const;
  void note_written(const WrittenCheckpoint& written);
  void collect_written();
  void handle_signal(int signal);
  void record(const StepControl& control, double lr, const StepTimes& times);
  void evaluate_epoch();

  // After the last step, in order.
  void finish();
  uint32_t check_ranks_agree();
  void record_end();
  void write_summary(uint32_t crc);
  void write_trace();

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
  std::vector<double> control_, control_sum_;
  std::vector<float> averaged_stats_;
  float loss_scale_ = 0;  // 1 / global batch: gradients are of the mean loss
  double weight_ = 0;     // this rank's share of the global batch
  Clock::time_point launch_start_ = Clock::now();  // this process's run, start-up included
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
  double ema_step_ = 0;     // seconds per step, smoothed for the progress line
  bool stop_ = false;
  bool evaluated_epoch_ = false;
  TrainResult result_;
};

Trainer::Trainer(const TrainOptions& options, MPI_Comm world)
    : o_(options),
      comm_(world),
      rank_(comm_.rank()),
      size_(comm_.size()),
      local_(mpi::SplitShared(comm_)),
      host_(mpi::Hostname()) {
  SetThreads(o_, local_.size());
}

TrainResult Trainer::run() {
  start_trace();
  {
    TraceSpan span(tracer_.get(), TraceLane::Compute, "load inputs", -1);
    load_inputs();
  }
  {
    TraceSpan span(tracer_.get(), TraceLane::Compute, "start engine", -1);
    start_engine();
  }
  {
    TraceSpan span(tracer_.get(), TraceLane::Compute, "resume", -1);
    resume();
  }
  announce();
  open_loop();
  while (keep_training()) {
    StepTimes times;
    times.start = Clock::now();
    trace_step_ = step_ + 1;
    const StepSums sums = compute_step(&times);
    const StepControl control = sync_control(sums, &times);
    const double lr = advance();
    rebalance(times);
    times.checkpoint = maybe_checkpoint(control);
    handle_signal(control.signal);
    record(control, lr, times);
    evaluate_epoch();
    if (tracer_) tracer_->slice(TraceLane::Step, "step", times.start, Clock::now(), trace_step_);
  }
  finish();
  const uint32_t crc = check_ranks_agree();
  record_end();
  write_summary(crc);
  write_trace();
  return result_;
}

// With --trace, a file that cannot be written fails every rank before anything else happens;
// the origin comes right after a barrier, so every rank's times count from (nearly) the same
// moment.
void Trainer::start_trace() {
  if (o_.trace_path.empty()) return;
  RunCollectively(comm_.get(), [&] {
    if (rank_ == 0) CheckTracePath(o_.trace_path);
  });
  MPI_CHECK(MPI_Barrier(comm_.get()));
  tracer_ = std::make_unique<Tracer>(Clock::now());
  trace_origin_unix_ = UnixSeconds();
}

// Every rank reads the spec, plan and data itself, so any failure (a typo in the spec, a
// data set of the wrong shape) fails all ranks alike instead of leaving some waiting.
void Trainer::load_inputs() {
  RunCollectively(comm_.get(), [&] {
    binding_ = BindRank([](const char* name) { return std::getenv(name); }, local_.rank());
  });
  RunCollectively(comm_.get(), [&] {
    spec_ = LoadSpec(o_.spec_path);
    // Precedence: the spec, then the plan the job was given, then explicit options. The
    // epochs come first because the plan's warm-up is capped at them.
    if (o_.epochs > 0) spec_.epochs = o_.epochs;
    if (!o_.plan_json.empty()) {
      plan_ = ParsePlan(o_.plan_json, o_.plan_origin);
      ApplyPlan(plan_, &spec_);
      if (o_.lr > 0) spec_.optimizer.lr = o_.lr;  // found for the plan (lr_source.hpp)
    }
    if (o_.batch_size > 0) spec_.batch_size = o_.batch_size;
    if (o_.gpu_type_given && o_.gpu_type.empty())
      throw UsageError(o_.gpu_type_origin + ": must not be empty (rank " + std::to_string(rank_) +
                       ")");
    // "%n" is this rank's node: a data set staged to each node's own folder
    // (dlh-data stage --to DIR/%n) is read from there.
    if (!o_.data_path.empty()) spec_.dataset = ExpandStageDir(o_.data_path, mpi::Hostname());
    if (spec_.batch_size < size_)
      throw UsageError(o_.spec_path + ": batch_size: " + std::to_string(spec_.batch_size) +
                       " is smaller than the number of ranks (" + std::to_string(size_) + ")");
  });
  // Before anything is written: a plan whose batches do not fit the ranks leaves no run folder,
  // nor does a bad history to replay.
  choose_split();
  choose_balance();
  RunCollectively(comm_.get(), [&] {
    open_data();
    const Shape3& s = data_.train.shape;
    if (!(s == spec_.input))
      throw DataError(spec_.dataset + ": images are " + std::to_string(s.channels) + "x" +
                      std::to_string(s.height) + "x" + std::to_string(s.width) + " but " +
                      o_.spec_path + " input is " + std::to_string(spec_.input.channels) + "x" +
                      std::to_string(spec_.input.height) + "x" + std::to_string(spec_.input.width));
    if (data_.classes != spec_.classes)
      throw DataError(spec_.dataset + ": has " + std::to_string(data_.classes) + " classes but " +
                      o_.spec_path + " classes is " + std::to_string(spec_.classes));
    if (data_.train.count < spec_.batch_size)
      throw DataError(spec_.dataset + ": " + std::to_string(data_.train.count) +
                      " training samples are fewer than batch_size " +
                      std::to_string(spec_.batch_size));
  });

  run_dir_ = o_.run_dir.empty() ? "runs/" + spec_.name : o_.run_dir;
  ckpt_dir_ = CheckpointDir(run_dir_ + "/checkpoints");
  RunCollectively(comm_.get(), [&] {
    if (rank_ == 0) {
      std::filesystem::create_directories(run_dir_ + "/checkpoints");
      std::filesystem::create_directories(run_dir_ + "/heartbeat");
    }
  });
  start_peer_watch();
}

// From here on a rank that waits --comm-timeout seconds in an MPI call for a stopped peer
// ends the job with a line naming it (peer_watch.hpp). The heartbeats go into the run folder,
// which every host of the job sees; the run id (rank 0's clock and pid) tells this run's
// files from those a previous run on the same folder left.
void Trainer::start_peer_watch() {
  const std::string mine =
      std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "-" +
      std::to_string(getpid());
  PeerWatchOptions w;
  w.timeout_s = o_.comm_timeout;
  w.heartbeat_dir = run_dir_ + "/heartbeat";
  w.run_id = mpi::BroadcastString(comm_.get(), mine);
  run_id_ = w.run_id;
  w.rank = rank_;
  w.size = size_;
  w.host = host_;
  StartPeerWatch(w);
}

// This rank's slice of the global batch, fixed for the whole run (batch_split.hpp): the even
// split, or with a plan on several GPU types its part's per_gpu_batch, placed after the
// slices of the ranks before it. Every rank gathers every batch, so all check the same sum
// and fail alike.
void Trainer::choose_split() {
  plan_split_ = PlanSplitsBatch(plan_, o_.batch_size > 0);
  rank_batches_.assign(size_t(size_), 0);
  rank_parts_.assign(size_t(size_), -1);
  if (!plan_split_) {
    for (int r = 0; r < size_; ++r)
      rank_batches_[size_t(r)] = EvenShare(spec_.batch_size, r, size_).batch;
    const RankShare mine = EvenShare(spec_.batch_size, rank_, size_);
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

// Memory mode loads every image on every rank; stream mode only labels, and reads samples
// from the file as steps need them. "auto" streams when the floats this node's ranks would
// hold exceed half of the memory the node has available.
void Trainer::open_data() {
  streaming_ = o_.data_mode == "stream";
  bool have_metadata = false;
  if (o_.data_mode == "auto") {
    data_ = LoadDataset(spec_.dataset, /*with_images=*/false);
    have_metadata = true;
    const double loaded = 4.0 * double(data_.train.shape.elements()) *
                          double(data_.train.count + data_.test.count) * double(local_.size());
    const double available = AvailableMemoryBytes();
    streaming_ = available > 0 && loaded > 0.5 * available;
  }
  if (streaming_) {
    if (!have_metadata) data_ = LoadDataset(spec_.dataset, /*with_images=*/false);
    train_source_ = std::make_unique<FileSource>(spec_.dataset, "train", data_.train);
    test_source_ = std::make_unique<FileSource>(spec_.dataset, "test", data_.test);
  } else {
    data_ = LoadDataset(spec_.dataset);
    train_source_ = std::make_unique<MemorySource>(data_.train);
    test_source_ = std::make_unique<MemorySource>(data_.test);
  }
}

std::unique_ptr<Loader> Trainer::make_loader() const {
  LoaderOptions lo;
  lo.global_batch = spec_.batch_size;
  lo.rank_offset = rank_offset_;
  lo.rank_batch = rank_batch_;
  lo.seed = spec_.seed;
  // Reading from the file, a batch now and then takes far longer than a step (the disk, or
  // the page cache recycled under a memory limit): a deeper queue (batches of a few hundred
  // KB) absorbs it, where 2 run dry (BENCHMARKS.md "Data larger than memory").
  lo.prefetch = streaming_ ? std::max(o_.prefetch, kStreamPrefetch) : o_.prefetch;
  return std::make_unique<Loader>(*train_source_, lo, epoch_, step_in_epoch_);
}

// The engine holds the model, the optimizer and the gradient allreduce on its device; it is
// sized for the largest batch this rank may get: its shard of the batch when the split is
// fixed, the most balancing may give it otherwise.
void Trainer::start_engine() {
  EngineConfig ec;
  ec.spec = &spec_;
  ec.comm = comm_.get();
  ec.node_of_rank = GatherNodeNames(comm_.get());
  hosts_ = int(std::set<std::string>(ec.node_of_rank.begin(), ec.node_of_rank.end()).size());
  ec.allreduce = o_.allreduce;
  ec.sync = o_.sync;
  ec.local_rank = binding_.local_rank;
  ec.device = binding_.device;
  ec.comm_timeout_s = o_.comm_timeout;
  ec.max_batch = int(
      std::max<int64_t>(balance_ == BalanceMode::Off ? rank_batch_ : max_rank_batch_, kEvalChunk));
  // --trace: forward apart from backward, and each bucket's allreduce (the CPU engine's; the
  // GPU engine reports no buckets).
  if (tracer_) {
    ec.on_forward_done = [this] { forward_done_ = Clock::now(); };
    ec.sync.on_bucket = [this](const BucketTiming& b) {
      tracer_->allreduce(b.launched, b.completed, trace_step_, b.bucket, b.bytes, b.overlapped);
    };
  }
  std::string device_note;
  engine_ = MakeEngine(o_.device, ec, &device_note);
  steps_per_epoch_ = data_.train.count / spec_.batch_size;
  total_steps_ = steps_per_epoch_ * spec_.epochs;

  progress_ = std::make_unique<Progress>(rank_ == 0 ? o_.progress : ProgressMode::None,
                                         total_steps_, steps_per_epoch_, spec_.epochs);
  if (!device_note.empty()) say(device_note);
}

// A requeued or restarted job continues from the newest checkpoint that validates. Rank 0
// picks it (reporting newer files it skips) and every rank loads that same file, so all
// continue from identical state; without one, every rank starts from rank 0's parameters.
void Trainer::resume() {
  if (o_.resume && rank_ == 0) {
    TrainState probe;
    ckpt_dir_.load_newest_valid(&probe, &resume_path_,
                                [this](const std::string& m) { say("warning: " + m); });
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

// Where every rank runs and which device it took, the plan and the run itself, once, from
// rank 0: the first thing to read in a job's log when something looks wrong.
void Trainer::announce() {
  char mine[256];
  std::snprintf(mine, sizeof mine, "%s: %s, %s", host_.c_str(), binding_.describe().c_str(),
                engine_->device_name().c_str());
  std::vector<char> all(rank_ == 0 ? sizeof mine * size_t(size_) : 0);
  MPI_CHECK(
      MPI_Gather(mine, sizeof mine, MPI_CHAR, all.data(), sizeof mine, MPI_CHAR, 0, comm_.get()));
  if (rank_ == 0 && size_ <= 16)
    for (int r = 0; r < size_; ++r)
      say("rank " + std::to_string(r) + " on " + std::string(&all[sizeof mine * size_t(r)]));
  if (plan_.present)
    say("plan: global batch " + std::to_string(spec_.batch_size) + ", lr " +
        std::to_string(spec_.optimizer.lr) + " (" + lr_source() + ")" +
        (plan_.gpus && plan_.gpus != size_ ? " (planned for " + std::to_string(plan_.gpus) +
                                                 " ranks, running on " + std::to_string(size_) + ")"
                                           : ""));
  if (plan_split_) {
    std::string parts;
    for (size_t i = 0; i < plan_.parts.size(); ++i)
      parts +=
          (i ? ", " : "") + plan_.parts[i].gpu + " " + std::to_string(plan_.parts[i].per_gpu_batch);
    say("per-rank batches " + FormatBatches(rank_batches_) + " from the plan's parts (" + parts +
        " per GPU)");
  } else if (plan_.parts.size() >= 2) {
    say("--batch-size overrides the plan: its per-GPU batches are not used, the batch is split "
        "evenly");
  }
  if (balance_ == BalanceMode::Adaptive)
    say("balance: adaptive, every " + std::to_string(o_.balance_every) +
        " steps from rank batches " + FormatBatches(rank_batches_) + ", at most " +
        std::to_string(max_rank_batch_) + " per rank");
  else if (balance_ == BalanceMode::Replay)
    say("balance: replaying " + std::to_string(replay_.size()) + " split(s) from " +
        o_.balance_history);
  if (step_ == 0)
    say("training " + spec_.name + " on " + std::to_string(size_) + " rank(s), " +
        std::to_string(engine_->num_param_values()) + " parameters, global batch " +
        std::to_string(spec_.batch_size) + ", " + std::to_string(spec_.epochs) + " epochs of " +
        std::to_string(steps_per_epoch_) + " steps");
}

// The loader starts at the (possibly resumed) cursor; the signal handlers go in only now,
// so that a signal during setup still stops the job the ordinary way.
void Trainer::open_loop() {
  if (rank_ == 0) {
    log_ = std::make_unique<MetricsLog>(run_dir_ + "/metrics.jsonl",
                                        [this](const std::string& m) { say("warning: " + m); });
    writer_ = std::make_unique<CheckpointWriter>(ckpt_dir_, o_.keep);
  }

  loader_ = make_loader();

  say("allreduce: " + engine_->allreduce_name());

  // Batchnorm statistics travel with the per-step control values in one small allreduce.
  stats_len_ = engine_->batch_stats().size();
  control_.assign(2 + stats_len_, 0);
  control_sum_.assign(control_.size(), 0);
  averaged_stats_.assign(stats_len_, 0);

  InstallSignalHandlers();
  loss_scale_ = 1.0f / float(spec_.batch_size);
  weight_ = double(rank_batch_) / double(spec_.batch_size);
  // The meter starts with the loop: summary.json's energy is the training (evaluations and
  // checkpoints included), not the start-up; the node's packages are read by its first rank.
  energy_ = std::make_unique<RunEnergy>(engine_->gpu_pci_bus_id(), local_.rank() == 0);
  samples_at_start_ = samples_seen_;
  train_start_ = Clock::now();
  cpu_at_start_ = ThisProcessCpu().total();
  last_ckpt_ = Clock::now();
  first_step_ = step_;
  record_start();
}

// metrics.jsonl's first record of each run (also a resumed one): where it starts, on what,
// and the plan it was given, so that a file holding several runs reads on its own.
void Trainer::record_start() {
  if (rank_ != 0) return;
  nlohmann::json rec = {{"event", "start"},
                        {"step", step_},
                        {"resumed_from", nullptr},
                        {"run_id", run_id_},
                        {"world_size", size_},
                        {"hosts", hosts_},
                        {"device", engine_->device_name()},
                        {"rank_batches", rank_batches_},
                        {"spec_name", spec_.name},
                        {"total_steps", total_steps_}};
  if (!resume_path_.empty()) rec["resumed_from"] = resume_path_;
  // The plan was parsed (and checked) by load_inputs; here it is kept as given.
  if (plan_.present) rec["plan"] = nlohmann::json::parse(o_.plan_json, nullptr, false);
  append_metrics(rec);
}

void Trainer::append_metrics(nlohmann::json record) {
  if (!record.contains("t")) record["t"] = UnixSeconds();
  log_->write(record);
}

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
  const StepSums sums =
      engine_->forward_backward(batch, ctx, loss_scale_, [this] { return batch_ahead(); });
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
// checkpoint; kept apart so that metrics.jsonl and the exit code name the one that came) and
// a time-based checkpoint request (rank 0's clock decides). A rank may have been signalled
// alone (a user's kill); the allreduce tells everyone at the same step.
StepControl Trainer::sync_control(const StepSums& sums, StepTimes* times) {
  TraceSpan span(tracer_.get(), TraceLane::Compute, "control allreduce", trace_step_);
  auto t_ctrl = Clock::now();
  const int sig = TakePendingSignal();
  control_[0] = sums.loss;
  control_[1] = double(sums.correct);
  size_t k = 2;
  for (float s : engine_->batch_stats()) control_[k++] = weight_ * double(s);
  MPI_CHECK(MPI_Allreduce(control_.data(), control_sum_.data(), int(control_.size()), MPI_DOUBLE,
                          MPI_SUM, comm_.get()));
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
  int64_t flags[4] = {
      sig == SIGINT    ? 3
      : sig == SIGTERM ? 2
      : sig == SIGUSR1 ? 1
                       : 0,
      rank_ == 0 && o_.checkpoint_seconds > 0 && Since(last_ckpt_) >= o_.checkpoint_seconds,
      written_step, write_failed};
  int64_t flags_max[4];
  MPI_CHECK(MPI_Allreduce(flags, flags_max, 4, MPI_INT64_T, MPI_MAX, comm_.get()));
  if (flags_max[3] > 0)  // rank 0's wait() throws the failure, RunCollectively on every rank
    RunCollectively(comm_.get(), [&] {
      if (writer_) writer_->wait();
    });
  if (flags_max[2] >= 0) {
    result_.last_checkpoint = ckpt_dir_.path_for_step(flags_max[2]);
    SetPeerWatchCheckpoint(result_.last_checkpoint);
  }
  if (stats_len_ > 0) {
    for (size_t i = 0; i < stats_len_; ++i) averaged_stats_[i] = float(control_sum_[2 + i]);
    engine_->commit_batch_stats(averaged_stats_);
  }
  times->allreduce += Since(t_ctrl);
  allreduce_seconds_ += times->allreduce;

  StepControl control;
  control.loss_sum = control_sum_[0];
  control.correct_sum = control_sum_[1];
  control.signal = flags_max[0] == 3   ? SIGINT
                   : flags_max[0] == 2 ? SIGTERM
                   : flags_max[0] == 1 ? SIGUSR1
                                       : 0;
  control.time_due = flags_max[1] > 0;
  return control;
}

// The optimizer step, then the cursor: after this the position is that of a completed step,
// the only place a checkpoint may be taken. Returns the learning rate used.
double Trainer::advance() {
  const double lr = LearningRate(spec_, step_ - step_base_, steps_per_epoch_);
  {
    TraceSpan span(tracer_.get(), TraceLane::Compute, "optimizer", trace_step_);
    engine_->update(lr, step_);
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

// Checkpoints come every N steps, every T seconds, at epoch ends, on a signal and at the
// last step of the run; the decision uses only values every rank shares. Returns the
// seconds the loop was held up (0 when none was due).
double Trainer::maybe_checkpoint(const StepControl& control) {
  const bool last = step_ == total_steps_ || (o_.max_steps > 0 && step_ == o_.max_steps);
  if (control.signal != 0 || last) return write_checkpoint(Durability::Wait);
  const bool due = (o_.checkpoint_steps > 0 && step_ % o_.checkpoint_steps == 0) ||
                   control.time_due || (o_.checkpoint_epochs && step_in_epoch_ == 0);
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
  engine_->export_state(&st->params, &st->buffers, &st->optimizer_state);
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

// One metrics.jsonl record per step and the progress line, on rank 0; the values are the
// global batch's, so the other ranks have nothing to add.
void Trainer::record(const StepControl& control, double lr, const StepTimes& times) {
  const double t_total = Since(times.start);
  ema_step_ = ema_step_ == 0 ? t_total : 0.9 * ema_step_ + 0.1 * t_total;
  energy_->poll();  // every rank: a RAPL counter must be read before it wraps
  if (rank_ != 0) return;
  const double loss = control.loss_sum / double(spec_.batch_size);
  const double acc = control.correct_sum / double(spec_.batch_size);
  nlohmann::json rec = {{"step", step_},
                        {"epoch", epoch_ + (step_in_epoch_ == 0 ? 0 : 1)},
                        {"loss", loss},
                        {"accuracy", acc},
                        {"lr", lr},
                        {"samples_per_s", double(spec_.batch_size) / t_total},
                        {"time",
                         {{"total", t_total},
                          {"compute", times.compute},
                          {"allreduce", times.allreduce},
                          {"data", times.data},
                          {"checkpoint", times.checkpoint}}}};
  // The split the run started (or resumed) with; later changes have "balance" records.
  if (step_ == first_step_ + 1)
    rec["rank_batches"] = history_.empty() ? rank_batches_ : SplitAt(history_, step_ - 1);
  energy_->add_to(&rec);
  append_metrics(rec);
  progress_->step(step_ - step_base_, step_in_epoch_ == 0 ? epoch_ - 1 : epoch_, loss, acc,
                  double(spec_.batch_size) / ema_step_, ema_step_);
}

// Test-set accuracy at the end of every epoch, after its checkpoint, so that a run
// stopped right there has its model saved before the (collective) evaluation starts.
void Trainer::evaluate_epoch() {
  if (!o_.eval || step_in_epoch_ != 0 || evaluated_epoch_) return;
  const EvalResult ev = evaluate();
  evaluated_epoch_ = true;
  result_.test_accuracy = ev.accuracy;
  result_.test_loss = ev.loss;
  if (rank_ != 0) return;
  append_metrics({{"event", "eval"},
                  {"epoch", epoch_},
                  {"step", step_},
                  {"test_loss", ev.loss},
                  {"test_accuracy", ev.accuracy}});
  char text[160];
  std::snprintf(text, sizeof text, "epoch %lld/%d: test accuracy %.2f%%, test loss %.4f",
                (long long)epoch_, spec_.epochs, 100 * ev.accuracy, ev.loss);
  progress_->line(text);
}

// A run resumed after its last step (a requeue that came late) trains nothing: it still
// reports the final accuracy and the checkpoint it holds.
void Trainer::finish() {
  // A background write may still run (after a stop that was not a signal's); its failure
  // fails the run, its file is the run's last checkpoint.
  RunCollectively(comm_.get(), [&] {
    if (writer_) writer_->wait();
  });
  collect_written();
  progress_->finish();
  if (result_.last_checkpoint.empty()) result_.last_checkpoint = resume_path_;
  if (o_.eval && result_.test_accuracy < 0 && step_ >= total_steps_) {
    const EvalResult ev = evaluate();
    result_.test_accuracy = ev.accuracy;
    result_.test_loss = ev.loss;
  }
}

// Every rank must hold the same bits; a mismatch is a bug we want to hear about.
uint32_t Trainer::check_ranks_agree() {
  uint32_t crc =
      Crc(Crc(uint32_t(crc32(0, nullptr, 0)), engine_->export_params()), engine_->export_buffers());
  std::vector<uint32_t> all(size_t(size_), 0);
  MPI_CHECK(MPI_Allgather(&crc, 1, MPI_UINT32_T, all.data(), 1, MPI_UINT32_T, comm_.get()));
  for (int r = 1; r < size_; ++r)
    if (all[size_t(r)] != all[0])
      throw CollectiveError("ranks diverged: parameter checksum of rank " + std::to_string(r) +
                                " differs from rank 0's",
                            kExitFailure);
  return crc;
}

// metrics.jsonl's last record of a run that ends (not one that fails): how far it came and
// why it stopped.
void Trainer::record_end() {
  if (rank_ != 0) return;
  append_metrics(
      {{"event", "end"},
       {"step", step_},
       {"finished", step_ >= total_steps_},
       {"stop_signal", result_.stop_signal ? nlohmann::json(SignalName(result_.stop_signal))
                                           : nlohmann::json(nullptr)},
       {"train_seconds", elapsed_before_ + Since(train_start_)}});
}

// --trace: every rank's timeline into one file, by rank 0, also when a signal or --max-steps
// stopped the run. Collective.
void Trainer::write_trace() {
  if (!tracer_) return;
  const nlohmann::json metadata = {{"run", spec_.name},
                                   {"run_dir", run_dir_},
                                   {"world_size", size_},
                                   {"first_step", first_step_},
                                   {"last_step", step_},
                                   {"steps", step_ - first_step_},
                                   {"device", engine_->device_name()},
                                   {"allreduce", engine_->allreduce_name()},
                                   {"overlap", o_.sync.overlap},
                                   {"bucket_bytes", o_.sync.bucket_bytes},
                                   {"origin_unix_s", trace_origin_unix_},
                                   {"max_events_per_rank", Tracer::kMaxEvents}};
  const uint64_t dropped = WriteTrace(*tracer_, comm_.get(), rank_, host_, o_.trace_path, metadata);
  say("trace: " + o_.trace_path + " (open it in https://ui.perfetto.dev)" +
      (dropped ? "; " + std::to_string(dropped) + " events dropped past " +
                     std::to_string(Tracer::kMaxEvents) + " per rank"
               : ""));
}

// summary.json is what a job monitor or the next job in a chain reads: written atomically,
// so that it is either the previous run's or this one's, never half of one.
void Trainer::write_summary(uint32_t crc) {
  result_.param_crc = crc;
  result_.steps = step_;
  result_.finished = step_ >= total_steps_;
  // Every rank's mean seconds per step in compute and blocked in the allreduces.
  const double steps_here = double(std::max<int64_t>(1, step_ - first_step_));
  // And what each rank's process used: its CPU time over the wall time of this run (2.0: two
  // cores busy all along) and its peak resident memory. On a GPU the host side only.
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  const double wall_here = std::max(1e-9, Since(train_start_));
  constexpr int kPerRank = 4;
  const double mine[kPerRank] = {compute_seconds_ / steps_here, allreduce_seconds_ / steps_here,
                                 (ThisProcessCpu().total() - cpu_at_start_) / wall_here,
                                 double(usage.ru_maxrss) / 1024};  // KiB to MiB
  std::vector<double> per_rank(rank_ == 0 ? kPerRank * size_t(size_) : 0);
  MPI_CHECK(MPI_Gather(mine, kPerRank, MPI_DOUBLE, per_rank.data(), kPerRank, MPI_DOUBLE, 0,
                       comm_.get()));
  // Every rank's joules and, where it could not measure, why (fixed size, as in announce()).
  const double my_joules = energy_->final_joules();
  char my_why[200] = {};
  std::snprintf(my_why, sizeof my_why, "%s", energy_->why_not().c_str());
  std::vector<double> rank_joules(rank_ == 0 ? size_t(size_) : 0);
  std::vector<char> rank_why(rank_ == 0 ? sizeof my_why * size_t(size_) : 0);
  MPI_CHECK(
      MPI_Gather(&my_joules, 1, MPI_DOUBLE, rank_joules.data(), 1, MPI_DOUBLE, 0, comm_.get()));
  MPI_CHECK(MPI_Gather(my_why, sizeof my_why, MPI_CHAR, rank_why.data(), sizeof my_why, MPI_CHAR, 0,
                       comm_.get()));
  if (rank_ != 0) return;
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", crc);
  nlohmann::json summary = {{"spec", o_.spec_path},
                            {"name", spec_.name},
                            {"ranks", size_},
                            {"device", engine_->device_name()},
                            {"steps", step_},
                            {"total_steps", total_steps_},
                            {"finished", result_.finished},
                            {"stop_signal", result_.stop_signal},
                            {"param_crc32", hex},
                            {"lr", spec_.optimizer.lr},
                            {"lr_source", lr_source()},
                            {"batch_split", plan_split_ ? "plan" : "even"},
                            {"rank_batches", rank_batches_},
                            {"last_checkpoint", result_.last_checkpoint},
                            {"train_seconds", elapsed_before_ + Since(train_start_)}};
  if (plan_split_) {
    std::vector<std::string> types;
    for (int p : rank_parts_) types.push_back(plan_.parts[size_t(p)].gpu);
    summary["rank_gpu_types"] = types;
  }
  std::vector<double> compute_s, allreduce_s, cpu_use, peak_mib;
  for (int r = 0; r < size_; ++r) {
    compute_s.push_back(per_rank[kPerRank * size_t(r)]);
    allreduce_s.push_back(per_rank[kPerRank * size_t(r) + 1]);
    cpu_use.push_back(per_rank[kPerRank * size_t(r) + 2]);
    peak_mib.push_back(per_rank[kPerRank * size_t(r) + 3]);
  }
  summary["rank_step_seconds"] = {{"compute", compute_s}, {"allreduce", allreduce_s}};
  summary["rank_process"] = {{"cpu_cores_busy", cpu_use}, {"peak_rss_mib", peak_mib}};
  std::vector<std::string> whys;
  for (int r = 0; r < size_; ++r) whys.emplace_back(&rank_why[sizeof my_why * size_t(r)]);
  summary["energy"] = EnergySummary(rank_joules, whys, energy_->source(),
                                    samples_seen_ - samples_at_start_, Since(train_start_));
  // The loop's time held up by checkpoints against the writer's time: what the background
  // saved.
  summary["checkpoints"] = {{"mode", o_.checkpoint_sync ? "sync" : "background"},
                            {"written", checkpoints_written_},
                            {"blocked_s", checkpoint_seconds_},
                            {"write_s", checkpoint_write_seconds_},
                            {"write_cpu_s", checkpoint_write_cpu_.total()}};
  if (balance_ != BalanceMode::Off || !history_.empty()) {
    summary["balance"] = {{"mode", BalanceModeName(balance_)},
                          {"history", SplitHistoryJson(history_)}};
    if (balance_ == BalanceMode::Adaptive) summary["balance"]["every"] = o_.balance_every;
    if (balance_ == BalanceMode::Replay) summary["balance"]["replayed"] = o_.balance_history;
  }
  if (result_.test_accuracy >= 0) {
    summary["test_accuracy"] = result_.test_accuracy;
    summary["test_loss"] = result_.test_loss;
  }
  // Predicted against measured: the estimator's whole-job time (start-up included) and its
  // step time, against this run's wall time and mean step. Only a run that did every step
  // from the start compares whole jobs; a resumed or shortened one compares steps.
  const double wall_s = Since(launch_start_);
  const int64_t steps_run = step_ - first_step_;
  // Steps only: evaluations and checkpoints happen inside the loop but are phases of their own.
  const double step_s =
      steps_run > 0
          ? (Since(train_start_) - eval_seconds_ - checkpoint_seconds_) / double(steps_run)
          : 0;
  const bool whole_job = result_.finished && first_step_ == 0;
  std::string versus;
  if (plan_.present && plan_.predicted_step_s > 0 && steps_run > 0) {
    summary["prediction"] = {{"origin", o_.plan_origin},
                             {"total_s", plan_.predicted_total_s},
                             {"step_s", plan_.predicted_step_s},
                             {"steps", plan_.predicted_steps},
                             {"time_limit_s", plan_.time_limit_s}};
    summary["measured"] = {{"total_s", wall_s}, {"step_s", step_s}, {"whole_job", whole_job}};
    const double loop_s = Since(train_start_);
    summary["measured"]["phases"] = {
        {"startup_s", std::chrono::duration<double>(train_start_ - launch_start_).count()},
        {"steps_s", loop_s - eval_seconds_ - checkpoint_seconds_},
        {"eval_s", eval_seconds_},
        {"checkpoint_s", checkpoint_seconds_}};
    if (plan_.predicted_steps_s > 0)
      summary["prediction"]["phases"] = {{"startup_s", plan_.predicted_startup_s},
                                         {"steps_s", plan_.predicted_steps_s},
                                         {"eval_s", plan_.predicted_eval_s},
                                         {"checkpoint_s", plan_.predicted_checkpoint_s}};
    const double step_error = ErrorPercent(plan_.predicted_step_s, step_s);
    versus = "; step " + Printf("%.1f ms predicted, %.1f ms measured (%+.0f%%)",
                                plan_.predicted_step_s * 1e3, step_s * 1e3, step_error);
    if (whole_job && plan_.predicted_total_s > 0) {
      const double total_error = ErrorPercent(plan_.predicted_total_s, wall_s);
      versus = "; predicted " + HumanDuration(plan_.predicted_total_s) + ", took " +
               HumanDuration(wall_s) + Printf(" (%+.0f%%)", total_error) + versus;
      summary["measured"]["total_error_pct"] = total_error;
    }
    summary["measured"]["step_error_pct"] = step_error;
  }
  WriteFileAtomically(run_dir_ + "/summary.json", summary.dump(2) + "\n");
  if (result_.finished) {
    char accuracy[64];
    std::snprintf(accuracy, sizeof accuracy, "%.2f%%", 100 * result_.test_accuracy);
    const nlohmann::json& energy = summary["energy"];
    const std::string joules = energy["measured"].get<bool>()
                                   ? ", energy " +
                                         DescribeJoules(energy["joules_total"].get<double>()) +
                                         " (" + energy["source"].get<std::string>() + ")"
                                   : "";
    say("done: " + std::to_string(step_) + " steps, final test accuracy " + accuracy +
        ", checkpoint " + result_.last_checkpoint + joules + versus);
  }
}

// Each rank evaluates a contiguous slice of the test set; the sums are combined.
// Collective.
EvalResult Trainer::evaluate() {
  TraceSpan span(tracer_.get(), TraceLane::Compute, "evaluation", trace_step_);
  const DataSplit& test = data_.test;
  const int64_t first = test.count * rank_ / size_, last = test.count * (rank_ + 1) / size_;
  const int64_t per = test.shape.elements();
  const auto started = Clock::now();
  double sums[2] = {0, 0};  // loss, correct
  std::vector<int64_t> indices;
  std::vector<float> chunk;  // a chunk read from the file (stream mode)
  for (int64_t i = first; i < last; i += kEvalChunk) {
    const int n = int(std::min(kEvalChunk, last - i));
    ForwardContext ctx;
    ctx.training = false;
    ctx.seed = spec_.seed;
    const float* images = test.images.data() + i * per;
    if (streaming_) {
      indices.resize(size_t(n));
      for (int k = 0; k < n; ++k) indices[size_t(k)] = i + k;
      chunk.resize(size_t(n) * size_t(per));
      test_source_->read(indices.data(), size_t(n), chunk.data());
      images = chunk.data();
    }
    StepSums s = engine_->evaluate(images, test.labels.data() + i, n, ctx);
    sums[0] += s.loss;
    sums[1] += double(s.correct);
  }
  double total[2];
  MPI_CHECK(MPI_Allreduce(sums, total, 2, MPI_DOUBLE, MPI_SUM, comm_.get()));
  eval_seconds_ += Since(started);
  return {total[0] / double(test.count), total[1] / double(test.count)};
}

// A message for the job's log, from rank 0 only.
void Trainer::say(const std::string& text) {
  if (rank_ == 0) progress_->line("dlh-launch: " + text);
}

}  // namespace

TrainResult Train(const TrainOptions& options, MPI_Comm comm) {
  Trainer trainer(options, comm);
  return trainer.run();
}

}  // namespace dlh
