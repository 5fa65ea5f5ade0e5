// DLH — the Trainer's start: inputs (spec, plan, data), the peer watch, the engine, the
// announcement and the loop's start (trainer_impl.hpp).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "launcher/comm/collective.hpp"
#include "launcher/comm/tcp_eager.hpp"
#include "launcher/comm/topology.hpp"
#include "launcher/data/file_source.hpp"
#include "launcher/data/stage.hpp"
#include "launcher/engine/device.hpp"
#include "launcher/probe/blas_kernels.hpp"
#include "launcher/train/batch_split.hpp"
#include "launcher/train/signals.hpp"
#include "launcher/train/trainer_impl.hpp"
#include "launcher/watch/rank_guard.hpp"

namespace dlh {
namespace trainer_detail {
namespace {

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

}  // namespace

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
      CheckPlannedSpec(plan_, o_.spec_path, o_.plan_origin);
      ApplyPlan(plan_, &spec_);
      if (o_.lr > 0) spec_.optimizer.lr = o_.lr;  // found for the plan (lr_source.hpp)
    }
    if (o_.batch_size > 0) spec_.batch_size = o_.batch_size;
    // Where the global batch came from, for a message about it: the option, else the plan,
    // else the spec.
    const std::string batch_origin = o_.batch_size > 0       ? std::string("--batch-size")
                                     : !o_.plan_json.empty() ? o_.plan_origin + ": global_batch"
                                                             : o_.spec_path + ": batch_size";
    if (o_.gpu_type_given && o_.gpu_type.empty())
      throw UsageError(o_.gpu_type_origin + ": must not be empty (rank " + std::to_string(rank_) +
                       ")");
    // "%n" is this rank's node: a data set staged to each node's own folder
    // (dlh-data stage --to DIR/%n) is read from there.
    if (!o_.data_path.empty()) spec_.dataset = ExpandStageDir(o_.data_path, mpi::Hostname());
    // A pipeline's ranks are replicas of P stages; each replica cuts its batch into
    // micro-batches (ParallelSpec).
    const ParallelSpec& par = spec_.parallel;
    if (size_ % par.pipeline_stages != 0)
      throw UsageError(o_.spec_path +
                       ": parallel.pipeline_stages: " + std::to_string(par.pipeline_stages) +
                       " does not divide the " + std::to_string(size_) + " ranks");
    dp_size_ = size_ / par.pipeline_stages;
    dp_rank_ = rank_ / par.pipeline_stages;
    if (spec_.batch_size < int64_t(dp_size_) * par.micro_batches)
      throw UsageError(batch_origin + ": " + std::to_string(spec_.batch_size) +
                       " is smaller than the number of " +
                       (par.pipelined() ? std::to_string(dp_size_) + " pipeline replica(s) x " +
                                              std::to_string(par.micro_batches) + " micro-batches"
                                        : "ranks (" + std::to_string(size_) + ")"));
  });
  // Before anything is written: a plan whose batches do not fit the ranks leaves no run folder,
  // nor does a bad history to replay.
  choose_split();
  choose_balance();
  // And the device: a GPU refused (--device cuda, a plan for GPUs, on a node without one)
  // used to be found after the run folder was made, and left it behind (2026-12-07).
  choose_device();
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
    if (rank_ != 0) return;
    // One line naming the option, before any step: a run folder that is a file (or holds
    // one where a folder goes, or a folder where summary.json goes) once failed with the
    // library's "filesystem error", or only at the end of the whole run.
    const std::string folder =
        "run folder " + run_dir_ +
        (o_.run_dir.empty() ? " (the default; --run-dir names another)" : " (--run-dir)");
    for (const char* sub : {"/checkpoints", "/heartbeat"}) {
      std::error_code ec;
      std::filesystem::create_directories(run_dir_ + sub, ec);
      if (ec) throw UsageError(folder + ": cannot make " + run_dir_ + sub + ": " + ec.message());
    }
    for (const char* file : {"/summary.json", "/metrics.jsonl"}) {
      std::error_code ec;
      if (std::filesystem::is_directory(run_dir_ + file, ec))
        throw UsageError(folder + ": " + run_dir_ + file +
                         " is a folder, where the run writes a file");
    }
  });
  // --trace: from here on each rank's events go to its own part, in the run folder (made on
  // every rank: a folder local to each host serves as well), memory bounded (trace.hpp).
  if (tracer_) {
    RunCollectively(comm_.get(), [&] {
      std::filesystem::create_directories(run_dir_ + "/trace");
      tracer_->spill_to(run_dir_ + "/trace/rank-" + std::to_string(rank_) + ".part", rank_);
    });
  }
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
  const char* node = std::getenv("SLURMD_NODENAME");
  w.node = node && *node ? node : host_;
  StartPeerWatch(w);
  // A rank killed outright cannot write its verdict; its guard does, where the job script
  // looks for the nodes to leave out of a requeued job.
  SetGuardedReport(
      w.heartbeat_dir + "/died-" + w.run_id + "-rank-" + std::to_string(rank_) + ".json", w.node);
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
  lo.augment = spec_.augment;
  // Reading from the file, a batch now and then takes far longer than a step (the disk, or
  // the page cache recycled under a memory limit): a deeper queue (batches of a few hundred
  // KB) absorbs it, where 2 run dry (BENCHMARKS.md "Data larger than memory").
  lo.prefetch = streaming_ ? std::max(o_.prefetch, kStreamPrefetch) : o_.prefetch;
  return std::make_unique<Loader>(*train_source_, lo, epoch_, step_in_epoch_);
}

// Which engine, and every rank's GPU when it is the GPU's (device.hpp, ChooseDevice).
void Trainer::choose_device() {
  EngineConfig ec;
  ec.spec = &spec_;
  ec.comm = comm_.get();
  node_of_rank_ = GatherNodeNames(comm_.get());
  hosts_ = int(std::set<std::string>(node_of_rank_.begin(), node_of_rank_.end()).size());
  ec.node_of_rank = node_of_rank_;
  ec.allreduce = o_.allreduce;
  ec.local_rank = binding_.local_rank;
  ec.device = binding_.device;
  device_choice_ = ChooseDevice(o_.device, ec, PlanGpuRequirement(plan_, o_.plan_origin));
}

// The engine holds the model, the optimizer and the gradient allreduce on its device; it is
// sized for the largest batch this rank may get: its shard of the batch when the split is
// fixed, the most balancing may give it otherwise.
void Trainer::start_engine() {
  EngineConfig ec;
  ec.spec = &spec_;
  ec.comm = comm_.get();
  ec.node_of_rank = node_of_rank_;
  ec.allreduce = o_.allreduce;
  ec.sync = o_.sync;
  ec.local_rank = binding_.local_rank;
  ec.device = binding_.device;
  ec.comm_timeout_s = o_.comm_timeout;
  ec.max_batch = int(
      std::max<int64_t>(balance_ == BalanceMode::Off ? rank_batch_ : max_rank_batch_, kEvalChunk));
  // --trace: forward apart from backward, and each bucket's allreduce (the CPU engine's; the
  // GPU engine reports no buckets).
  // Stale-synchronous training's sums move on only inside MPI calls: one after forward.
  if (tracer_ || spec_.sync.stale_sync())
    ec.on_forward_done = [this] {
      forward_done_ = Clock::now();
      if (delayed_) delayed_->poke();
    };
  if (tracer_) {
    ec.sync.on_bucket = [this](const BucketTiming& b) {
      tracer_->allreduce(b.launched, b.completed, trace_step_, b.bucket, b.bytes, b.overlapped);
    };
  }
  const std::string& device_note = device_choice_.note;
  const bool gpu_found = device_choice_.gpu_found;
  // A pipeline's stages too (parallel.pipeline_stages): BuildEngine makes the CPU's or the
  // GPU's pipeline engine.
  engine_ = BuildEngine(device_choice_, ec);
  steps_per_epoch_ = data_.train.count / spec_.batch_size;
  total_steps_ = steps_per_epoch_ * spec_.epochs;

  progress_ = std::make_unique<Progress>(rank_ == 0 ? o_.progress : ProgressMode::None,
                                         total_steps_, steps_per_epoch_, spec_.epochs);
  // Training on the CPU is news only where a GPU was expected.
  if (!device_note.empty() &&
      DeviceNoteWanted(comm_.get(), o_.verbose || o_.device_given || PlanHasGpus(plan_) ||
                                        !binding_.gpus_given.empty() || gpu_found))
    say(device_note);
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
  // Rank 0's own: every rank of a job on one kind of node makes the same choice.
  if (const std::string note = BlasKernelsNote(); !note.empty() && !device_choice_.gpu) say(note);
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
    // Read before the loader's thread starts (HDF5 is serial). A checkpoint then names the
    // classes wherever it goes (predict on loose images, export); bad names cost a line.
    try {
      writer_->set_class_names(ReadClassNames(spec_.dataset, spec_.classes));
    } catch (const DataError& e) {
      say(std::string("warning: ") + e.what() + ": the checkpoints record no class names");
    }
  }

  loader_ = make_loader();

  if (hosts_ > 1 && TcpEagerLimitRaised() > 0) {
    const size_t taken = TcpEagerLimitInEffect();  // what Open MPI read, where it can say
    say(
        Printf("Open MPI's TCP eager limit: %.2f MiB (OMPI_MCA_btl_tcp_eager_limit set by "
               "dlh-launch to a bucket and its header; set it yourself to choose): a gradient "
               "bucket between hosts goes without a rendezvous, whose answer would wait behind "
               "the data coming the other way",
               double(taken ? taken : TcpEagerLimitRaised()) / (1 << 20)));
  }
  say("allreduce: " + engine_->allreduce_name());
  if (spec_.parallel.pipelined())
    say("pipeline: " + std::to_string(spec_.parallel.pipeline_stages) + " stages x " +
        std::to_string(dp_size_) + " replica(s), " + std::to_string(spec_.parallel.micro_batches) +
        " micro-batches a step (GPipe: all forward, then all backward, activations recomputed)");
  if (spec_.sync.local_sgd())
    say("local SGD: every rank steps on its own batch; the models are averaged every " +
        std::to_string(spec_.sync.period) + " step(s), at each epoch's end and at the last step" +
        (spec_.sync.warmup_steps > 0
             ? ", after " + std::to_string(spec_.sync.warmup_steps) + " synchronous step(s)"
             : std::string()));

  // Batchnorm statistics travel with the per-step control values in one small allreduce.
  stats_len_ = engine_->batch_stats().size();
  control_reduce_ = std::make_unique<SumMaxAllreduce>(2 + stats_len_, kControlFlags);
  control_.assign(control_reduce_->size(), 0);
  control_sum_.assign(control_.size(), 0);
  averaged_stats_.assign(stats_len_, 0);
  loss_scale_ = 1.0f / float(spec_.batch_size);
  weight_ = double(rank_batch_) / double(spec_.batch_size);
  start_stale();  // with weight_ set: a resume's own steps scale by it

  InstallSignalHandlers();
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
  if (spec_.sync.local_sgd())
    rec["sync"] = {{"mode", "local_sgd"},
                   {"period", spec_.sync.period},
                   {"warmup_steps", spec_.sync.warmup_steps}};
  if (spec_.sync.stale_sync())
    rec["sync"] = {{"mode", "stale_sync"}, {"staleness", spec_.sync.staleness}};
  if (spec_.parallel.pipelined())
    rec["parallel"] = {{"pipeline_stages", spec_.parallel.pipeline_stages},
                       {"micro_batches", spec_.parallel.micro_batches},
                       {"replicas", dp_size_}};
  // The plan was parsed (and checked) by load_inputs; here it is kept as given.
  if (plan_.present) rec["plan"] = nlohmann::json::parse(o_.plan_json, nullptr, false);
  append_metrics(rec);
}
}  // namespace trainer_detail
}  // namespace dlh
