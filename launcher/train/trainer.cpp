// DLH — the data-parallel training loop.
//
// Why ranks stay bit-identical: parameters start as rank 0's (broadcast); every rank
// applies the same summed gradient (MPI allreduce gives every rank the same bits) with
// the same optimizer arithmetic; batchnorm running statistics are averaged across ranks
// each step before they are folded in. Why a resumed run matches an uninterrupted one:
// everything random is a pure function of the seed and counters stored in the
// checkpoint (data order of (seed, epoch), dropout masks of (seed, rank, step, layer)),
// and a checkpoint is taken only between steps.
#include "launcher/train/trainer.hpp"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/spec.hpp"
#include "launcher/comm/allreduce.hpp"
#include "launcher/comm/binding.hpp"
#include "launcher/storage/checkpoint.hpp"
#include "launcher/comm/collective.hpp"
#include "launcher/data/dataset.hpp"
#include "launcher/engine/device.hpp"
#include "launcher/engine/engine.hpp"
#include "launcher/data/loader.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/nn/thread_pool.hpp"
#include "launcher/train/plan.hpp"
#include "launcher/train/signals.hpp"
#include "launcher/comm/topology.hpp"

namespace dlh {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// This rank's share of a global batch: the first (B mod n) ranks take one more sample.
void SplitBatch(int64_t global, int rank, int size, int64_t* offset, int64_t* count) {
  int64_t base = global / size, extra = global % size;
  *count = base + (rank < extra ? 1 : 0);
  *offset = rank * base + std::min<int64_t>(rank, extra);
}

uint32_t Crc(uint32_t crc, const std::vector<NamedArray>& arrays) {
  for (const auto& a : arrays)
    crc = uint32_t(crc32(crc, reinterpret_cast<const Bytef*>(a.data.data()),
                         uInt(a.data.size() * sizeof(float))));
  return crc;
}

struct EvalResult {
  double loss = 0, accuracy = 0;
};

// Each rank evaluates a contiguous slice of the test set; sums are combined.
constexpr int64_t kEvalChunk = 256;

EvalResult Evaluate(Engine& engine, const DataSplit& test, const TrainSpec& spec, int rank,
                    int size, MPI_Comm comm) {
  const int64_t first = test.count * rank / size, last = test.count * (rank + 1) / size;
  const int64_t per = test.shape.elements();
  double sums[2] = {0, 0};  // loss, correct
  for (int64_t i = first; i < last; i += kEvalChunk) {
    const int n = int(std::min(kEvalChunk, last - i));
    ForwardContext ctx;
    ctx.training = false;
    ctx.seed = spec.seed;
    StepSums s = engine.evaluate(test.images.data() + i * per, test.labels.data() + i, n, ctx);
    sums[0] += s.loss;
    sums[1] += double(s.correct);
  }
  double total[2];
  MPI_CHECK(MPI_Allreduce(sums, total, 2, MPI_DOUBLE, MPI_SUM, comm));
  return {total[0] / double(test.count), total[1] / double(test.count)};
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

}  // namespace

TrainResult Train(const TrainOptions& o, MPI_Comm world) {
  mpi::Comm comm(world);
  const int rank = comm.rank(), size = comm.size();
  mpi::Comm local = mpi::SplitShared(comm);
  SetThreads(o, local.size());
  const std::string host = mpi::Hostname();

  // --- spec and data: every rank reads them; any failure fails all ranks alike.
  TrainSpec spec;
  Dataset data;
  LaunchPlan plan;
  Binding binding;
  RunCollectively(comm.get(), [&] {
    binding = BindRank([](const char* name) { return std::getenv(name); }, local.rank());
  });
  RunCollectively(comm.get(), [&] {
    spec = LoadSpec(o.spec_path);
    // Precedence: the spec, then the plan the job was given, then explicit options. The
    // epochs come first because the plan's warm-up is capped at them.
    if (o.epochs > 0) spec.epochs = o.epochs;
    if (!o.plan_json.empty()) {
      plan = ParsePlan(o.plan_json, o.plan_origin);
      ApplyPlan(plan, &spec);
    }
    if (o.batch_size > 0) spec.batch_size = o.batch_size;
    if (!o.data_path.empty()) spec.dataset = o.data_path;
    if (spec.batch_size < size)
      throw UsageError(o.spec_path + ": batch_size: " + std::to_string(spec.batch_size) +
                       " is smaller than the number of ranks (" + std::to_string(size) + ")");
  });
  RunCollectively(comm.get(), [&] {
    data = LoadDataset(spec.dataset);
    const Shape3& s = data.train.shape;
    if (!(s == spec.input))
      throw DataError(spec.dataset + ": images are " + std::to_string(s.channels) + "x" +
                      std::to_string(s.height) + "x" + std::to_string(s.width) + " but " +
                      o.spec_path + " input is " + std::to_string(spec.input.channels) + "x" +
                      std::to_string(spec.input.height) + "x" + std::to_string(spec.input.width));
    if (data.classes != spec.classes)
      throw DataError(spec.dataset + ": has " + std::to_string(data.classes) + " classes but " +
                      o.spec_path + " classes is " + std::to_string(spec.classes));
    if (data.train.count < spec.batch_size)
      throw DataError(spec.dataset + ": " + std::to_string(data.train.count) +
                      " training samples are fewer than batch_size " +
                      std::to_string(spec.batch_size));
  });

  const std::string run_dir = o.run_dir.empty() ? "runs/" + spec.name : o.run_dir;
  CheckpointDir ckpt_dir(run_dir + "/checkpoints");
  RunCollectively(comm.get(), [&] {
    if (rank == 0) std::filesystem::create_directories(run_dir + "/checkpoints");
  });

  // --- shard, then the engine: model, optimizer and gradient allreduce on the device
  int64_t rank_offset = 0, rank_batch = 0;
  SplitBatch(spec.batch_size, rank, size, &rank_offset, &rank_batch);
  EngineConfig ec;
  ec.spec = &spec;
  ec.comm = comm.get();
  ec.node_of_rank = GatherNodeNames(comm.get());
  ec.allreduce = o.allreduce;
  ec.sync = o.sync;
  ec.local_rank = binding.local_rank;
  ec.device = binding.device;
  ec.comm_timeout_s = o.comm_timeout;
  ec.max_batch = int(std::max<int64_t>(rank_batch, kEvalChunk));
  std::string device_note;
  std::unique_ptr<Engine> engine = MakeEngine(o.device, ec, &device_note);
  const int64_t steps_per_epoch = data.train.count / spec.batch_size;
  const int64_t total_steps = steps_per_epoch * spec.epochs;

  Progress progress(rank == 0 ? o.progress : ProgressMode::None, total_steps, steps_per_epoch,
                    spec.epochs);
  auto say = [&](const std::string& text) {
    if (rank == 0) progress.line("dlh-launch: " + text);
  };
  if (!device_note.empty()) say(device_note);

  // --- resume or start fresh
  int64_t step = 0, epoch = 0, step_in_epoch = 0, samples_seen = 0;
  double elapsed_before = 0;
  std::string resume_path;
  if (o.resume && rank == 0) {
    TrainState probe;
    static Progress* warn_to = nullptr;
    warn_to = &progress;
    ckpt_dir.load_newest_valid(&probe, &resume_path, [](const std::string& m) {
      warn_to->line("dlh-launch: warning: " + m);
    });
  }
  resume_path = mpi::BroadcastString(comm.get(), resume_path);
  if (!resume_path.empty()) {
    RunCollectively(comm.get(), [&] {
      TrainState st = LoadCheckpoint(resume_path);
      try {
        if (st.optimizer != engine->optimizer_name())
          throw CheckpointError("optimizer is " + st.optimizer + " but the spec says " +
                                engine->optimizer_name());
        engine->import_state(st.params, st.buffers, st.optimizer_state);
      } catch (const CheckpointError& e) {
        throw CheckpointError(resume_path + ": does not match " + o.spec_path + ": " + e.what());
      }
      step = st.step;
      epoch = st.epoch;
      step_in_epoch = st.step_in_epoch;
      samples_seen = st.samples_seen;
      elapsed_before = st.elapsed_seconds;
      if (rank == 0 && st.world_size != size)
        progress.line("dlh-launch: warning: checkpoint was written by " +
                      std::to_string(st.world_size) + " ranks, resuming with " +
                      std::to_string(size) + " (training continues, but not bit-identically)");
    });
    say("resumed from " + resume_path + " at step " + std::to_string(step) + " (epoch " +
        std::to_string(epoch + 1) + ")");
  } else {
    // Buffers (batchnorm running statistics) start at constants; parameters are rank 0's.
    engine->broadcast_params();
  }
  // Where every rank runs and which device it took, once, from rank 0.
  {
    char mine[256];
    std::snprintf(mine, sizeof mine, "%s: %s, %s", host.c_str(), binding.describe().c_str(),
                  engine->device_name().c_str());
    std::vector<char> all(rank == 0 ? sizeof mine * size_t(size) : 0);
    MPI_CHECK(
        MPI_Gather(mine, sizeof mine, MPI_CHAR, all.data(), sizeof mine, MPI_CHAR, 0, comm.get()));
    if (rank == 0 && size <= 16)
      for (int r = 0; r < size; ++r)
        say("rank " + std::to_string(r) + " on " + std::string(&all[sizeof mine * size_t(r)]));
    if (plan.present)
      say("plan: global batch " + std::to_string(spec.batch_size) + ", lr " +
          std::to_string(spec.optimizer.lr) +
          (plan.gpus && plan.gpus != size ? " (planned for " + std::to_string(plan.gpus) +
                                                " ranks, running on " + std::to_string(size) + ")"
                                          : ""));
  }
  if (step == 0)
    say("training " + spec.name + " on " + std::to_string(size) + " rank(s), " +
        std::to_string(engine->num_param_values()) + " parameters, global batch " +
        std::to_string(spec.batch_size) + ", " + std::to_string(spec.epochs) + " epochs of " +
        std::to_string(steps_per_epoch) + " steps");

  std::unique_ptr<MetricsLog> log;
  if (rank == 0) log = std::make_unique<MetricsLog>(run_dir + "/metrics.jsonl");

  LoaderOptions lo;
  lo.global_batch = spec.batch_size;
  lo.rank_offset = rank_offset;
  lo.rank_batch = rank_batch;
  lo.seed = spec.seed;
  lo.prefetch = o.prefetch;
  Loader loader(data.train, lo, epoch, step_in_epoch);

  say("allreduce: " + engine->allreduce_name());

  // Batchnorm statistics travel with the per-step control values in one small allreduce.
  const size_t stats_len = engine->batch_stats().size();

  InstallSignalHandlers();
  TrainResult result;
  const float loss_scale = 1.0f / float(spec.batch_size);
  const double weight = double(rank_batch) / double(spec.batch_size);
  auto train_start = Clock::now();
  auto last_ckpt = Clock::now();
  double ema_step = 0;
  bool stop = false;
  bool evaluated_epoch = false;

  auto save_checkpoint = [&]() {
    auto t = Clock::now();
    // Rank 0 writes (every rank holds the same bits); the others wait so that nobody runs
    // ahead, or exits, before the file exists, and a failed write fails every rank.
    RunCollectively(comm.get(), [&] {
      if (rank != 0) return;
      TrainState st;
      st.spec_json = spec.json;
      st.step = step;
      st.epoch = epoch;
      st.step_in_epoch = step_in_epoch;
      st.seed = spec.seed;
      st.world_size = size;
      st.samples_seen = samples_seen;
      st.elapsed_seconds = elapsed_before + Since(train_start);
      st.optimizer = engine->optimizer_name();
      st.params = engine->export_params();
      st.buffers = engine->export_buffers();
      st.optimizer_state = engine->export_optimizer_state();
      result.last_checkpoint = ckpt_dir.save(st, o.keep);
    });
    result.last_checkpoint = mpi::BroadcastString(comm.get(), result.last_checkpoint);
    last_ckpt = Clock::now();
    return Since(t);
  };

  std::vector<double> control(2 + stats_len), control_sum(control.size());
  std::vector<float> averaged_stats(stats_len);
  while (step < total_steps && !stop && (o.max_steps <= 0 || step < o.max_steps)) {
    auto t_step = Clock::now();
    Batch batch = loader.next();
    const double t_data = Since(t_step);
    if (batch.epoch != epoch || batch.step_in_epoch != step_in_epoch)
      throw Error("data loader out of step (internal error)");

    auto t_compute = Clock::now();
    ForwardContext ctx;
    ctx.training = true;
    ctx.seed = spec.seed;
    ctx.step = uint64_t(step);
    ctx.rank = rank;
    const StepSums sums = engine->forward_backward(batch, ctx, loss_scale);
    const double t_compute_s = Since(t_compute);
    double t_allreduce = engine->finish_gradients();

    // Control values, summed: loss, correct, then batchnorm statistics weighted by this
    // rank's share of the batch. Flags, maxed: a pending signal (2: stop, 1: checkpoint)
    // and a time-based checkpoint request (rank 0's clock decides). A rank may have been
    // signalled alone (a user's kill); the allreduce tells everyone at the same step.
    auto t_ctrl = Clock::now();
    const int sig = TakePendingSignal();
    control[0] = sums.loss;
    control[1] = double(sums.correct);
    size_t k = 2;
    for (float s : engine->batch_stats()) control[k++] = weight * double(s);
    MPI_CHECK(MPI_Allreduce(control.data(), control_sum.data(), int(control.size()), MPI_DOUBLE,
                            MPI_SUM, comm.get()));
    int flags[2] = {
        sig == SIGTERM || sig == SIGINT ? 2
        : sig == SIGUSR1                ? 1
                                        : 0,
        rank == 0 && o.checkpoint_seconds > 0 && Since(last_ckpt) >= o.checkpoint_seconds};
    int flags_max[2];
    MPI_CHECK(MPI_Allreduce(flags, flags_max, 2, MPI_INT, MPI_MAX, comm.get()));
    if (stats_len > 0) {
      for (size_t i = 0; i < stats_len; ++i) averaged_stats[i] = float(control_sum[2 + i]);
      engine->commit_batch_stats(averaged_stats);
    }
    t_allreduce += Since(t_ctrl);

    const double lr = LearningRate(spec, step, steps_per_epoch);
    engine->update(lr, step);
    ++step;
    samples_seen += spec.batch_size;
    if (++step_in_epoch == steps_per_epoch) {
      step_in_epoch = 0;
      ++epoch;
      evaluated_epoch = false;
    }

    const int signal = flags_max[0] == 2 ? SIGTERM : flags_max[0] == 1 ? SIGUSR1 : 0;

    double t_ckpt = 0;
    bool want_ckpt = (o.checkpoint_steps > 0 && step % o.checkpoint_steps == 0) ||
                     flags_max[1] > 0 || signal != 0 ||
                     (o.checkpoint_epochs && step_in_epoch == 0) || step == total_steps ||
                     (o.max_steps > 0 && step == o.max_steps);
    if (want_ckpt) t_ckpt = save_checkpoint();
    if (signal != 0) {
      say(std::string(signal == SIGUSR1 ? "SIGUSR1" : "SIGTERM/SIGINT") + " at step " +
          std::to_string(step) + ": checkpoint written to " + result.last_checkpoint);
      if (signal != SIGUSR1 || o.stop_on_usr1) {
        stop = true;
        result.stop_signal = signal;
      }
    }

    const double t_total = Since(t_step);
    ema_step = ema_step == 0 ? t_total : 0.9 * ema_step + 0.1 * t_total;
    const double loss = control_sum[0] / double(spec.batch_size);
    const double acc = control_sum[1] / double(spec.batch_size);
    if (rank == 0) {
      log->write({{"step", step},
                  {"epoch", epoch + (step_in_epoch == 0 ? 0 : 1)},
                  {"loss", loss},
                  {"accuracy", acc},
                  {"lr", lr},
                  {"samples_per_s", double(spec.batch_size) / t_total},
                  {"time",
                   {{"total", t_total},
                    {"compute", t_compute_s},
                    {"allreduce", t_allreduce},
                    {"data", t_data},
                    {"checkpoint", t_ckpt}}}});
      progress.step(step, step_in_epoch == 0 ? epoch - 1 : epoch, loss, acc,
                    double(spec.batch_size) / ema_step, ema_step);
    }

    if (o.eval && step_in_epoch == 0 && !evaluated_epoch) {
      EvalResult ev = Evaluate(*engine, data.test, spec, rank, size, comm.get());
      evaluated_epoch = true;
      result.test_accuracy = ev.accuracy;
      result.test_loss = ev.loss;
      if (rank == 0) {
        log->write({{"event", "eval"},
                    {"epoch", epoch},
                    {"step", step},
                    {"test_loss", ev.loss},
                    {"test_accuracy", ev.accuracy}});
        char text[160];
        std::snprintf(text, sizeof text, "epoch %lld/%d: test accuracy %.2f%%, test loss %.4f",
                      (long long)epoch, spec.epochs, 100 * ev.accuracy, ev.loss);
        progress.line(text);
      }
    }
  }
  progress.finish();
  // A run resumed after its last step (a requeue that came late) trains nothing: it still
  // reports the final accuracy and the checkpoint it holds.
  if (result.last_checkpoint.empty()) result.last_checkpoint = resume_path;
  if (o.eval && result.test_accuracy < 0 && step >= total_steps) {
    EvalResult ev = Evaluate(*engine, data.test, spec, rank, size, comm.get());
    result.test_accuracy = ev.accuracy;
    result.test_loss = ev.loss;
  }

  // Every rank must hold the same bits; a mismatch is a bug we want to hear about.
  uint32_t crc = Crc(Crc(uint32_t(crc32(0, nullptr, 0)), engine->export_params()),
                     engine->export_buffers());
  std::vector<uint32_t> all(size_t(size), 0);
  MPI_CHECK(MPI_Allgather(&crc, 1, MPI_UINT32_T, all.data(), 1, MPI_UINT32_T, comm.get()));
  for (int r = 1; r < size; ++r)
    if (all[size_t(r)] != all[0])
      throw CollectiveError("ranks diverged: parameter checksum of rank " + std::to_string(r) +
                                " differs from rank 0's",
                            kExitFailure);
  result.param_crc = crc;
  result.steps = step;
  result.finished = step >= total_steps;
  if (rank == 0) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%08x", crc);
    nlohmann::json summary = {{"spec", o.spec_path},
                              {"name", spec.name},
                              {"ranks", size},
                              {"device", engine->device_name()},
                              {"steps", step},
                              {"total_steps", total_steps},
                              {"finished", result.finished},
                              {"stop_signal", result.stop_signal},
                              {"param_crc32", hex},
                              {"last_checkpoint", result.last_checkpoint},
                              {"train_seconds", elapsed_before + Since(train_start)}};
    if (result.test_accuracy >= 0) {
      summary["test_accuracy"] = result.test_accuracy;
      summary["test_loss"] = result.test_loss;
    }
    std::string tmp = run_dir + "/summary.json.tmp";
    {
      std::FILE* f = std::fopen(tmp.c_str(), "w");
      if (!f) throw Error(tmp + ": cannot write: " + std::strerror(errno));
      std::string text = summary.dump(2) + "\n";
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
    }
    std::rename(tmp.c_str(), (run_dir + "/summary.json").c_str());
    if (result.finished) {
      char text[200];
      std::snprintf(text, sizeof text,
                    "done: %lld steps, final test accuracy %.2f%%, checkpoint %s", (long long)step,
                    100 * result.test_accuracy, result.last_checkpoint.c_str());
      say(text);
    }
  }
  return result;
}

}  // namespace dlh
