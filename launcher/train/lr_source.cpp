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
};

Decision Broadcast(MPI_Comm comm, int rank, const Decision& d) {
  const std::string text = mpi::BroadcastString(
      comm, rank == 0 ? nlohmann::json{{"lr", d.lr}, {"source", d.source}, {"kept", d.kept}}.dump()
                      : std::string());
  const nlohmann::json j = nlohmann::json::parse(text);
  return {j["lr"].get<double>(), j["source"].get<std::string>(), j["kept"].get<bool>()};
}

}  // namespace

void ResolvePlanLr(TrainOptions* o, MPI_Comm comm) {
  if (o->plan_json.empty()) return;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  LaunchPlan plan;
  TrainSpec spec;
  RunCollectively(comm, [&] { plan = ParsePlan(o->plan_json, o->plan_origin); });
  if (plan.lr_source != "find") return;
  RunCollectively(comm, [&] { spec = LoadSpec(o->spec_path); });
  // The batch train will use: an explicit --batch-size wins over the plan, as in trainer.cpp.
  const int64_t batch = o->batch_size > 0 ? o->batch_size : plan.global_batch;
  const std::string run_dir = o->run_dir.empty() ? "runs/" + spec.name : o->run_dir;
  const std::string record = RunLrPath(run_dir);
  std::string cache_file;

  // Rank 0 reads the files and decides; the others follow, so that a file appearing between
  // two ranks' reads cannot split them.
  Decision d;
  RunCollectively(comm, [&] {
    cache_file = LrCacheFile(LrCacheDir(run_dir, std::getenv("DLH_LR_CACHE")),
                             LrFindKeyOfSpecFile(o->spec_path, batch));
    if (rank != 0) return;
    RunLr kept;
    if (o->resume && ReadRunLr(record, &kept)) {
      if (kept.batch == batch) {
        d = {kept.lr, kept.source, true};
        return;
      }
      Say(rank, "warning: " + record + " is for batch " + std::to_string(kept.batch) +
                    ", this run's is " + std::to_string(batch) + ": finding the rate again");
    }
    StoredLr stored;
    if (ReadStoredLr(cache_file, batch, &stored)) {
      if (stored.ok && !stored.note.empty()) Say(rank, "note: " + cache_file + ": " + stored.note);
      d = stored.ok ? Decision{stored.lr, "lr-find " + cache_file + " (stored)"}
                    : Decision{plan.lr, "plan, linear scaling: lr-find " + cache_file +
                                            " found no clear minimum (" + stored.note + ")"};
    }
  });
  d = Broadcast(comm, rank, d);

  const bool ran = d.lr <= 0;
  if (ran) {
    // No line before the sweep: its own start line follows the input checks, so a data set
    // too small for it gives one error line only.
    RunCollectively(comm, [&] {
      if (rank == 0)
        std::filesystem::create_directories(std::filesystem::path(cache_file).parent_path());
    });
    LrFindOptions f;
    f.spec_path = o->spec_path;
    f.data_path = o->data_path;
    f.batch = int(batch);
    f.out = cache_file;
    f.threads = o->threads;
    f.prefetch = o->prefetch;
    f.device = o->device;
    f.allreduce = o->allreduce;
    f.sync = o->sync;
    f.fit_steps_to_epoch = true;
    const nlohmann::json r = RunLrFind(f, comm);
    if (rank == 0) {
      const auto& s = r["suggestion"];
      if (s["status"] == "ok" && !s["note"].get<std::string>().empty())
        Say(rank, "note: " + cache_file + ": " + s["note"].get<std::string>());
      d = s["status"] == "ok" ? Decision{s["lr"].get<double>(), "lr-find " + cache_file}
                              : Decision{plan.lr, "plan, linear scaling: lr-find " + cache_file +
                                                      " found no clear minimum (" +
                                                      s["note"].get<std::string>() + ")"};
    }
    d = Broadcast(comm, rank, d);
  }
  if (d.kept) {
    Say(rank, "lr " + Num(d.lr) + " for batch " + std::to_string(batch) + " kept from " + record +
                  " (" + d.source + "), not searched again");
    o->lr = d.lr;
    o->lr_source = d.source + ", kept from " + record;
    return;
  }
  if (d.source.rfind("plan, linear scaling", 0) == 0)
    Say(rank, "warning: lr " + Num(d.lr) + " from the " + d.source);
  else
    Say(rank,
        "lr " + Num(d.lr) + " for batch " + std::to_string(batch) + " from " + d.source +
            (ran ? ": no stored range test, so it ran now and is stored for the next run" : ""));

  // Recorded before the first step: a job killed at any point after this resumes with it.
  RunCollectively(comm, [&] {
    if (rank != 0) return;
    std::filesystem::create_directories(run_dir);
    RunLr r;
    r.lr = d.lr;
    r.batch = batch;
    r.source = d.source;
    WriteFileAtomically(record, RunLrJson(r));
  });
  o->lr = d.lr;
  o->lr_source = d.source;
}

}  // namespace dlh
