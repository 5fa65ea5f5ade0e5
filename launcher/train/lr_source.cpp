// DLH — finding the plan's learning rate in the job (see lr_source.hpp).
#include "launcher/train/lr_source.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/spec.hpp"
#include "launcher/comm/collective.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/train/lr_find.hpp"
#include "launcher/train/lr_store.hpp"
#include "launcher/train/plan.hpp"

namespace dlh {
namespace {

std::string Num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

void Say(int rank, const std::string& line) {
  if (rank != 0) return;
  // stderr, as train's other start lines (progress.hpp), so that they stay in order.
  std::fprintf(stderr, "dlh-launch: %s\n", line.c_str());
}

// What rank 0 decided, sent to every rank as JSON text: the rate (0: run the test) and where
// it came from.
struct Decision {
  double lr = 0;
  std::string source;
  bool kept = false;  // from the run folder's record, which stays as it is
  // Where the range test stores its result when the shared cache's file is another user's
  // (ignored): the run folder, so that the test's write does not fail on their file.
  std::string sweep_out{};
};

Decision Broadcast(MPI_Comm comm, int rank, const Decision& d) {
  const std::string text =
      mpi::BroadcastString(comm, rank == 0 ? nlohmann::json{{"lr", d.lr},
                                                            {"source", d.source},
                                                            {"kept", d.kept},
                                                            {"sweep_out", d.sweep_out}}
                                                 .dump()
                                           : std::string());
  const nlohmann::json j = nlohmann::json::parse(text);
  return {j["lr"].get<double>(), j["source"].get<std::string>(), j["kept"].get<bool>(),
          j["sweep_out"].get<std::string>()};
}

// The job's inputs to the decision, fixed before it.
struct Context {
  int rank = 0;
  LaunchPlan plan;
  int64_t batch = 0;       // the global batch train will use
  std::string run_dir;     // as train will name it
  std::string record;      // RUN_DIR/lr.json
  std::string cache_file;  // LR_CACHE/lr-find-KEY.json
};

Decision NoMinimum(const Context& c, const std::string& note) {
  return {c.plan.lr, "plan, linear scaling: lr-find " + c.cache_file + " found no clear minimum (" +
                         note + ")"};
}

// On rank 0: the run folder's record, else a stored result; lr 0 when neither is there.
Decision LookUp(const TrainOptions& o, const Context& c) {
  RunLr kept;
  if (o.resume && ReadRunLr(c.record, &kept)) {
    if (kept.batch == c.batch) return {kept.lr, kept.source, true};
    Say(c.rank, "warning: " + c.record + " is for batch " + std::to_string(kept.batch) +
                    ", this run's is " + std::to_string(c.batch) + ": finding the rate again");
  }
  StoredLr stored;
  std::string ignored;
  const bool found = ReadStoredLr(c.cache_file, c.batch, &stored, &ignored);
  if (!ignored.empty()) {
    Decision d;
    d.sweep_out =
        (std::filesystem::path(c.run_dir) / std::filesystem::path(c.cache_file).filename())
            .string();
    Say(c.rank, "warning: " + ignored + "; the range test's result goes to " + d.sweep_out);
    return d;
  }
  if (!found) return {};
  if (!stored.ok) return NoMinimum(c, stored.note);
  if (!stored.note.empty()) Say(c.rank, "note: " + c.cache_file + ": " + stored.note);
  return {stored.lr, "lr-find " + c.cache_file + " (stored)"};
}

// On every rank: the range test at the job's batch, stored in the cache; rank 0's decision.
// No line before it: its own start line follows the input checks, so a data set too small
// for it gives one error line only.
Decision Sweep(const TrainOptions& o, const Context& c, MPI_Comm comm) {
  RunCollectively(comm, [&] {
    if (c.rank == 0)
      std::filesystem::create_directories(std::filesystem::path(c.cache_file).parent_path());
  });
  LrFindOptions f;
  f.spec_path = o.spec_path;
  f.data_path = o.data_path;
  f.batch = int(c.batch);
  f.out = c.cache_file;
  f.threads = o.threads;
  f.prefetch = o.prefetch;
  f.device = o.device;
  f.device_asked = o.device_given || o.verbose || PlanHasGpus(c.plan);
  f.allreduce = o.allreduce;
  f.sync = o.sync;
  f.fit_steps_to_epoch = true;
  const nlohmann::json r = RunLrFind(f, comm);
  if (c.rank != 0) return {};
  const auto& s = r["suggestion"];
  const std::string note = s["note"].get<std::string>();
  if (s["status"] != "ok") return NoMinimum(c, note);
  if (!note.empty()) Say(c.rank, "note: " + c.cache_file + ": " + note);
  return {s["lr"].get<double>(), "lr-find " + c.cache_file};
}

// Written before the first step: a job killed at any point after this resumes with the rate.
void Record(const Context& c, const Decision& d, MPI_Comm comm) {
  RunCollectively(comm, [&] {
    if (c.rank != 0) return;
    std::filesystem::create_directories(c.run_dir);
    RunLr r;
    r.lr = d.lr;
    r.batch = c.batch;
    r.source = d.source;
    WriteFileAtomically(c.record, RunLrJson(r));
  });
}

}  // namespace

void ResolvePlanLr(TrainOptions* o, MPI_Comm comm) {
  if (o->plan_json.empty()) return;
  Context c;
  MPI_Comm_rank(comm, &c.rank);
  RunCollectively(comm, [&] { c.plan = ParsePlan(o->plan_json, o->plan_origin); });
  if (c.plan.lr_source != "find") return;
  TrainSpec spec;
  RunCollectively(comm, [&] { spec = LoadSpec(o->spec_path); });
  // As trainer_start.cpp: an explicit --batch-size wins over the plan; the run folder's default.
  c.batch = o->batch_size > 0 ? o->batch_size : c.plan.global_batch;
  c.run_dir = o->run_dir.empty() ? "runs/" + spec.name : o->run_dir;
  c.record = RunLrPath(c.run_dir);

  // Rank 0 reads the files and decides; the others follow, so that a file appearing between
  // two ranks' reads cannot split them.
  Decision d;
  RunCollectively(comm, [&] {
    c.cache_file = LrCacheFile(LrCacheDir(c.run_dir, std::getenv("DLH_LR_CACHE")),
                               LrFindKeyOfSpecFile(o->spec_path, c.batch));
    if (c.rank == 0) d = LookUp(*o, c);
  });
  d = Broadcast(comm, c.rank, d);
  const bool ran = d.lr <= 0;
  if (!d.sweep_out.empty()) c.cache_file = d.sweep_out;
  if (ran) d = Broadcast(comm, c.rank, Sweep(*o, c, comm));

  const std::string batch = std::to_string(c.batch);
  o->lr = d.lr;
  o->lr_source = d.source;
  if (d.kept) {
    Say(c.rank, "lr " + Num(d.lr) + " for batch " + batch + " kept from " + c.record + " (" +
                    d.source + "), not searched again");
    o->lr_source += ", kept from " + c.record;
    return;
  }
  if (d.source.rfind("plan, linear scaling", 0) == 0)
    Say(c.rank, "warning: lr " + Num(d.lr) + " from the " + d.source);
  else
    Say(c.rank,
        "lr " + Num(d.lr) + " for batch " + batch + " from " + d.source +
            (ran ? ": no stored range test, so it ran now and is stored for the next run" : ""));
  Record(c, d, comm);
}

}  // namespace dlh
