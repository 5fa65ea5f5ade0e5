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
// then per step: compute, control sync (stale-synchronous: the exchange of delayed sums),
// advance, model average (local SGD), rebalance, checkpoint, record, evaluate; at the end
// finish, agreement and summary. Each phase is one member
// function; the state that crosses phases (spec, engine, the loader cursor, the result) is a
// member. The class is declared in trainer_impl.hpp; this file holds the run in order, the phases
// live in trainer_start, _resume, _balance, _step, _local_sgd, _stale, _checkpoint, _eval and
// _end.cpp.
#include "launcher/train/trainer.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "launcher/comm/collective.hpp"
#include "launcher/nn/thread_pool.hpp"
#include "launcher/train/trainer_impl.hpp"
#include "launcher/watch/rank_guard.hpp"

namespace dlh {
namespace trainer_detail {

std::string Printf(const char* fmt, ...) {
  char text[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  return text;
}

namespace {

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
    SetGuardedPhase("loading the data");
    load_inputs();
  }
  {
    TraceSpan span(tracer_.get(), TraceLane::Compute, "start engine", -1);
    SetGuardedPhase("starting the engine");
    start_engine();
  }
  {
    TraceSpan span(tracer_.get(), TraceLane::Compute, "resume", -1);
    SetGuardedPhase("resuming");
    resume();
  }
  announce();
  open_loop();
  SetGuardedPhase("in its first step");
  while (keep_training()) {
    StepTimes times;
    times.start = Clock::now();
    trace_step_ = step_ + 1;
    const StepSums sums = compute_step(&times);
    StepControl control =
        spec_.sync.stale_sync() ? stale_exchange(sums, &times) : sync_control(sums, &times);
    const double lr = advance();
    times.allreduce += end_step_sync();
    rebalance(times);
    times.checkpoint = maybe_checkpoint(&control);
    handle_signal(control.signal);
    record(control, lr, times);
    evaluate_epoch();
    if (tracer_) tracer_->slice(TraceLane::Step, "step", times.start, Clock::now(), trace_step_);
  }
  finish_stale();
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

void Trainer::append_metrics(nlohmann::json record) {
  if (!record.contains("t")) record["t"] = UnixSeconds();
  log_->write(record);
}

// A message for the job's log, from rank 0 only.
void Trainer::say(const std::string& text) {
  if (rank_ == 0) progress_->line("dlh-launch: " + text);
}
}  // namespace trainer_detail

TrainResult Train(const TrainOptions& options, MPI_Comm comm) {
  trainer_detail::Trainer trainer(options, comm);
  return trainer.run();
}

}  // namespace dlh
