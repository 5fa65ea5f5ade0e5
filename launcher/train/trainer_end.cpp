// DLH — the end of the Trainer's run: the last checkpoint and evaluation, the ranks'
// agreement, and what the run leaves behind: metrics.jsonl's end, summary.json, the trace.
#include <sys/resource.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common/atomic_file.hpp"
#include "common/duration.hpp"
#include "launcher/comm/collective.hpp"
#include "launcher/nn/thread_pool.hpp"
#include "launcher/train/trainer_impl.hpp"

namespace dlh {
namespace trainer_detail {
namespace {

// (predicted - measured) / measured, in percent.
double ErrorPercent(double predicted, double measured) {
  return 100 * (predicted - measured) / measured;
}

uint32_t Crc(uint32_t crc, const std::vector<NamedArray>& arrays) {
  for (const auto& a : arrays)
    crc = uint32_t(crc32(crc, reinterpret_cast<const Bytef*>(a.data.data()),
                         uInt(a.data.size() * sizeof(float))));
  return crc;
}

}  // namespace

// A run resumed after its last step (a requeue that came late) trains nothing: it still
// reports the final accuracy and the checkpoint it holds.
void Trainer::finish() {
  // A background write may still run (after a stop that was not a signal's); its failure
  // fails the run, its file is the run's last checkpoint.
  // The run writes no more checkpoints: the writer's kept snapshot (a copy of the parameters
  // and optimizer state) goes before check_ranks_agree takes its own copy, which would
  // otherwise be the run's peak of memory (make bench's memory part measures it).
  RunCollectively(comm_.get(), [&] {
    if (writer_) writer_->release_spare();
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

// Every rank must hold the same bits of its part of the model (the whole, or a pipeline stage
// that its replicas share); a mismatch is a bug we want to hear about. Returns the whole
// model's crc32 (parameters, then buffers), a pipeline's combined from its stages' in order.
uint32_t Trainer::check_ranks_agree() {
  const std::vector<NamedArray> params = engine_->export_params(),
                                buffers = engine_->export_buffers();
  const uint32_t zero = uint32_t(crc32(0, nullptr, 0));
  auto bytes = [](const std::vector<NamedArray>& arrays) {
    uint64_t n = 0;
    for (const NamedArray& a : arrays) n += a.data.size() * sizeof(float);
    return n;
  };
  const uint32_t crc_params = Crc(zero, params), crc_buffers = Crc(zero, buffers);
  // The same as one pass over parameters then buffers, without a second pass over the model.
  const uint32_t crc =
      uint32_t(crc32_combine(uLong(crc_params), uLong(crc_buffers), z_off_t(bytes(buffers))));
  const ModelPart part = engine_->model_part();
  MPI_Comm peers = part.peers == MPI_COMM_NULL ? comm_.get() : part.peers;
  int peer_count = 0;
  MPI_CHECK(MPI_Comm_size(peers, &peer_count));
  std::vector<uint32_t> all(size_t(peer_count), 0);
  MPI_CHECK(MPI_Allgather(&crc, 1, MPI_UINT32_T, all.data(), 1, MPI_UINT32_T, peers));
  for (int r = 1; r < peer_count; ++r)
    if (all[size_t(r)] != all[0])
      throw CollectiveError(
          "ranks diverged: parameter checksum of rank " + std::to_string(r) +
              (part.parts > 1 ? " of pipeline stage " + std::to_string(part.index + 1)
                              : std::string()) +
              " differs from rank 0's",
          kExitFailure);
  if (part.parts == 1) return crc;
  // Each stage's lead: its two checksums and byte counts, combined in stage order as if one
  // rank had run over all parameters, then all buffers.
  const uint64_t mine[5] = {uint64_t(part.lead ? part.index : -1), crc_params, bytes(params),
                            crc_buffers, bytes(buffers)};
  std::vector<uint64_t> every(5 * size_t(size_), 0);
  MPI_CHECK(MPI_Allgather(mine, 5, MPI_UINT64_T, every.data(), 5, MPI_UINT64_T, comm_.get()));
  std::vector<const uint64_t*> stage(size_t(part.parts), nullptr);
  for (int r = 0; r < size_; ++r) {
    const uint64_t* m = &every[5 * size_t(r)];
    if (m[0] < uint64_t(part.parts)) stage[size_t(m[0])] = m;
  }
  uLong total = zero;
  for (int field : {1, 3})
    for (const uint64_t* m : stage)
      total = crc32_combine(total, uLong(m[field]), z_off_t(m[field + 1]));
  return uint32_t(total);
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
  std::error_code ignored;  // the parts' folder, once empty (another host's may not be yet)
  std::filesystem::remove(run_dir_ + "/trace", ignored);
  say("trace: " + o_.trace_path + " (open it in https://ui.perfetto.dev)" +
      (dropped ? "; " + std::to_string(dropped) + " events dropped past " +
                     std::to_string(Tracer::kMaxEvents) + " per rank"
               : ""));
}

// A pipeline's bubble: the stages' seconds passing and waiting for activations and gradients
// over their compute (forward_backward) seconds, against GPipe's (P - 1) / (M + P - 1); and each
// stage's own work a step (compute less waiting, the mean of its replicas), where a bubble
// larger than GPipe's comes from: stages of uneven work. PER_RANK: write_summary's gather,
// FIELDS values a rank, compute first and the pipeline's wait last.
nlohmann::json Trainer::pipeline_summary(const std::vector<double>& per_rank, int fields) const {
  const int p = spec_.parallel.pipeline_stages, m = spec_.parallel.micro_batches;
  double waiting = 0, computing = 0;
  std::vector<double> stage_busy(size_t(p), 0.0);
  for (int r = 0; r < size_; ++r) {
    const double compute = per_rank[size_t(fields) * size_t(r)];
    const double wait = per_rank[size_t(fields) * size_t(r) + size_t(fields) - 1];
    waiting += wait;
    computing += compute;
    stage_busy[size_t(r % p)] += (compute - wait) / double(dp_size_);
  }
  return {{"pipeline_stages", p},
          {"micro_batches", m},
          {"replicas", dp_size_},
          {"wait_s_per_step", waiting / size_},
          {"stage_busy_s_per_step", stage_busy},
          {"bubble_measured", computing > 0 ? waiting / computing : 0.0},
          {"bubble_predicted", double(p - 1) / double(m + p - 1)}};
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
  // A pipeline stage's seconds in Send and Recv, inside its compute seconds: what is left is
  // the stage's own work, the figure the estimator's stage times are judged against.
  constexpr int kPerRank = 5;
  const double mine[kPerRank] = {compute_seconds_ / steps_here, allreduce_seconds_ / steps_here,
                                 (ThisProcessCpu().total() - cpu_at_start_) / wall_here,
                                 double(usage.ru_maxrss) / 1024,  // KiB to MiB
                                 engine_->pipeline_wait_seconds() / steps_here};
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
  // The run's loop (steps, evaluations, checkpoints) ends here; the record's probe after it
  // belongs to the whole job's time, not to its steps.
  const double loop_s = Since(train_start_);
  const double startup_s = std::chrono::duration<double>(train_start_ - launch_start_).count();
  const nlohmann::json node_probe = probe_for_observation();
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", crc);
  nlohmann::json summary = {{"spec", o_.spec_path},
                            {"name", spec_.name},
                            {"ranks", size_},
                            {"threads_per_rank", CpuThreads()},
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
                            {"train_seconds", elapsed_before_ + loop_s}};
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
  if (spec_.parallel.pipelined()) summary["parallel"] = pipeline_summary(per_rank, kPerRank);
  summary["rank_process"] = {{"cpu_cores_busy", cpu_use}, {"peak_rss_mib", peak_mib}};
  std::vector<std::string> whys;
  for (int r = 0; r < size_; ++r) whys.emplace_back(&rank_why[sizeof my_why * size_t(r)]);
  summary["energy"] = EnergySummary(rank_joules, whys, energy_->source(),
                                    samples_seen_ - samples_at_start_, loop_s);
  // The loop's time held up by checkpoints against the writer's time: what the background
  // saved.
  summary["checkpoints"] = {{"mode", o_.checkpoint_sync ? "sync" : "background"},
                            {"written", checkpoints_written_},
                            {"blocked_s", checkpoint_seconds_},
                            {"write_s", checkpoint_write_seconds_},
                            {"write_cpu_s", checkpoint_write_cpu_.total()}};
  if (spec_.sync.local_sgd()) summary["sync"] = local_sgd_summary();
  if (spec_.sync.stale_sync()) summary["sync"] = stale_summary();
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
  // This process's time from its start (the record's probe included) to this summary.
  const double wall_s = Since(launch_start_);
  summary["wall_seconds"] = wall_s;
  const int64_t steps_run = step_ - first_step_;
  // Steps only: evaluations and checkpoints happen inside the loop but are phases of their own.
  const double step_s =
      steps_run > 0 ? (loop_s - eval_seconds_ - checkpoint_seconds_) / double(steps_run) : 0;
  const bool whole_job = result_.finished && first_step_ == 0;
  std::string versus;
  if (plan_.present && plan_.predicted_step_s > 0 && steps_run > 0) {
    summary["prediction"] = {{"origin", o_.plan_origin},
                             {"total_s", plan_.predicted_total_s},
                             {"step_s", plan_.predicted_step_s},
                             {"steps", plan_.predicted_steps},
                             {"time_limit_s", plan_.time_limit_s}};
    if (plan_.predicted_upper_s > 0) summary["prediction"]["upper_s"] = plan_.predicted_upper_s;
    summary["measured"] = {{"total_s", wall_s}, {"step_s", step_s}, {"whole_job", whole_job}};
    summary["measured"]["phases"] = {{"startup_s", startup_s},
                                     {"steps_s", loop_s - eval_seconds_ - checkpoint_seconds_},
                                     {"eval_s", eval_seconds_},
                                     {"checkpoint_s", checkpoint_seconds_},
                                     {"end_s", wall_s - loop_s - startup_s}};
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
      // The band's upper end: whether the job stayed under it says whether the band held.
      std::string band;
      if (plan_.predicted_upper_s > 0) {
        const bool inside = wall_s <= plan_.predicted_upper_s;
        band = std::string(inside ? ", inside" : ", outside") +
               " the 90% band: <= " + HumanDuration(plan_.predicted_upper_s);
        summary["measured"]["inside_band"] = inside;
      }
      versus = "; predicted " + HumanDuration(plan_.predicted_total_s) + ", took " +
               HumanDuration(wall_s) + Printf(" (%+.0f%%", total_error) + band + ")" + versus;
      summary["measured"]["total_error_pct"] = total_error;
    }
    summary["measured"]["step_error_pct"] = step_error;
  }
  WriteFileAtomically(run_dir_ + "/summary.json", summary.dump(2) + "\n");
  write_observation(summary, wall_s, startup_s, node_probe);
  if (result_.finished) {
    // A run without evaluations (--no-eval) has no accuracy to give (test_accuracy < 0).
    char accuracy[64] = "not measured (no evaluation)";
    if (result_.test_accuracy >= 0)
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
}  // namespace trainer_detail
}  // namespace dlh
