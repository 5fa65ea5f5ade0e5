// DLH — `dlh-launch lr-find`: the learning-rate range test's run (see lr_find.hpp).
//
// The run reuses train's pieces, not its loop: the spec and data checks, the engine, the
// loader (the first epoch's data order, from the spec's seed) and the per-step control
// allreduce (loss, hits and batchnorm statistics). What it leaves out is what makes a
// training run: the schedule, checkpoints, resume, metrics, signals and evaluation.
#include "launcher/train/lr_find.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/exit_codes.hpp"
#include "common/spec.hpp"
#include "launcher/comm/allreduce.hpp"
#include "launcher/comm/binding.hpp"
#include "launcher/comm/collective.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/comm/topology.hpp"
#include "launcher/data/dataset.hpp"
#include "launcher/data/loader.hpp"
#include "launcher/engine/device.hpp"
#include "launcher/engine/engine.hpp"
#include "launcher/nn/thread_pool.hpp"
#include "launcher/train/batch_split.hpp"
#include "launcher/train/lr_plot.hpp"
#include "launcher/train/lr_store.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

std::string Num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2g", v);
  return text;
}

// train's rule (trainer.cpp, SetThreads): --threads, else OPENBLAS_NUM_THREADS, else the
// node's cores shared among its ranks.
void SetThreads(int requested, int local_size) {
  int threads = requested;
  if (threads <= 0) {
    const char* env = std::getenv("OPENBLAS_NUM_THREADS");
    threads = env ? std::atoi(env) : 0;
    if (threads <= 0)
      threads = std::max(1, int(std::thread::hardware_concurrency()) / std::max(1, local_size));
  }
  SetCpuThreads(threads);
}

std::string DefaultPlotPath(const std::string& out) {
  const std::string ext = ".json";
  if (out.size() > ext.size() && out.compare(out.size() - ext.size(), ext.size(), ext) == 0)
    return out.substr(0, out.size() - ext.size()) + ".svg";
  return out + ".svg";
}

const char* StatusName(LrSuggestion::Status s) {
  return s == LrSuggestion::Status::kOk ? "ok" : "no_clear_minimum";
}

nlohmann::json NumberOrNull(double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; }

// The JSON record of a finished sweep; see docs/reference/lr-find.md for the fields.
nlohmann::json Report(const LrFindOptions& o, const TrainSpec& spec, int ranks,
                      const std::string& device, double initial_loss, const LrSweep& sweep,
                      const LrSuggestion& s, const LrFitOptions& fit) {
  nlohmann::json points = nlohmann::json::array();
  int step = 0;
  for (const LrPoint& p : sweep.points())
    points.push_back({{"step", step++},
                      {"lr", p.lr},
                      {"loss", NumberOrNull(p.loss)},
                      {"accuracy", p.accuracy},
                      {"smoothed", NumberOrNull(p.smoothed)}});
  nlohmann::json suggestion = {
      {"status", StatusName(s.status)},
      {"rule",
       "upper edge of the valley floor: the largest rate above the fitted minimum whose "
       "fitted loss is within " +
           Num(fit.floor * 100) + "% of its fall"},
      {"note", s.note}};
  if (s.status == LrSuggestion::Status::kOk) {
    suggestion["lr"] = s.lr;
    suggestion["interval"] = {s.lr_low, s.lr_high};
    suggestion["interval_rule"] = "the valley floor: the rates whose fitted loss is within " +
                                  Num(fit.floor * 100) + "% of its fall above its minimum";
    suggestion["lr_steepest"] = s.lr_steepest;
  } else {
    suggestion["lr"] = nullptr;
    suggestion["interval"] = nullptr;
  }
  if (s.points_fitted > 0 && !s.poly.coef.empty()) {
    suggestion["lr_at_minimum"] = s.lr_min;
    suggestion["minimum_over_10"] = s.lr_min_over_10;
    suggestion["fitted_drop"] = s.drop;
  }
  nlohmann::json fits = nullptr;
  if (!s.poly.coef.empty())
    fits = {{"input", "raw losses up to the divergence"},
            {"points", s.points_fitted},
            {"polynomial",
             {{"degree", fit.degree},
              {"variable", "t = (log10(lr) - center) / scale"},
              {"center", s.poly.center},
              {"scale", s.poly.scale},
              {"coefficients", s.poly.coef},
              {"rms", s.poly.rms}}},
            {"logarithmic",
             {{"form", "loss = a + b * log10(lr)"},
              {"a", s.log.a},
              {"b", s.log.b},
              {"r2", s.log.r2},
              {"from_lr", s.log.from_lr},
              {"to_lr", s.log.to_lr}}}};
  return {{"spec", o.spec_path},
          {"key", LrFindKeyOfSpecFile(o.spec_path, spec.batch_size)},
          {"name", spec.name},
          {"data", spec.dataset},
          {"batch", spec.batch_size},
          {"seed", spec.seed},
          {"optimizer", spec.optimizer.kind == OptimizerSpec::Kind::Sgd ? "sgd" : "adam"},
          {"ranks", ranks},
          {"device", device},
          {"sweep",
           {{"min_lr", o.sweep.min_lr},
            {"max_lr", o.sweep.max_lr},
            {"steps", o.sweep.steps},
            {"smoothing", o.sweep.smoothing},
            {"diverge_factor", o.sweep.diverge_factor},
            {"steps_run", sweep.points().size()},
            {"stopped", sweep.stop_reason().empty() ? nlohmann::json(nullptr)
                                                    : nlohmann::json(sweep.stop_reason())}}},
          {"initial_loss", initial_loss},
          {"points", points},
          {"fit", fits},
          {"suggestion", suggestion},
          {"plot", o.plot.empty() ? DefaultPlotPath(o.out) : o.plot}};
}

}  // namespace

nlohmann::json RunLrFind(const LrFindOptions& options, MPI_Comm world) {
  LrFindOptions o = options;
  CheckLrSweepOptions(o.sweep);
  const std::string plot_path = o.plot.empty() ? DefaultPlotPath(o.out) : o.plot;
  CheckOutputFolder(o.out, "--out");
  CheckOutputFolder(plot_path, "--plot");

  mpi::Comm comm(world);
  const int rank = comm.rank(), size = comm.size();
  mpi::Comm local = mpi::SplitShared(comm);
  SetThreads(o.threads, local.size());

  // Inputs, checked on every rank alike (train's checks, plus the sweep's length).
  TrainSpec spec;
  Dataset data;
  Binding binding;
  RunCollectively(comm.get(), [&] {
    binding = BindRank([](const char* name) { return std::getenv(name); }, local.rank());
  });
  RunCollectively(comm.get(), [&] {
    spec = LoadSpec(o.spec_path);
    if (o.batch > 0) spec.batch_size = o.batch;
    if (!o.data_path.empty()) spec.dataset = o.data_path;
    if (spec.batch_size < size)
      throw UsageError("--batch: " + std::to_string(spec.batch_size) +
                       " is smaller than the number of ranks (" + std::to_string(size) + ")");
  });
  RunCollectively(comm.get(), [&] {
    data = LoadDataset(spec.dataset);
    if (!(data.train.shape == spec.input) || data.classes != spec.classes)
      throw DataError(spec.dataset + ": its images or classes do not match " + o.spec_path);
    // One rate per step, plus the loss before the first update: at most one epoch, so that
    // no sample is seen twice while the rate sweeps.
    const int64_t per_epoch = data.train.count / spec.batch_size;
    if (o.fit_steps_to_epoch && per_epoch - 1 >= 10 && o.sweep.steps + 1 > per_epoch)
      o.sweep.steps = int(per_epoch - 1);
    if (o.fit_steps_to_epoch && o.sweep.steps + 1 > per_epoch)
      throw UsageError("lr_source find: the range test needs 11 batches of " +
                       std::to_string(spec.batch_size) + " in one epoch, " + spec.dataset +
                       " has " + std::to_string(data.train.count) + " training samples");
    if (o.sweep.steps + 1 > per_epoch)
      throw UsageError("--steps: " + std::to_string(o.sweep.steps) + " steps of batch " +
                       std::to_string(spec.batch_size) + " need " +
                       std::to_string(int64_t(o.sweep.steps + 1) * spec.batch_size) +
                       " training samples, " + spec.dataset + " has " +
                       std::to_string(data.train.count) + " (one epoch at most)");
  });

  // This rank's slice of the global batch, as train splits it.
  const RankShare share = EvenShare(spec.batch_size, rank, size);
  const int64_t rank_batch = share.batch, rank_offset = share.offset;
  EngineConfig ec;
  ec.spec = &spec;
  ec.comm = comm.get();
  ec.node_of_rank = GatherNodeNames(comm.get());
  ec.allreduce = o.allreduce;
  ec.sync = o.sync;
  ec.local_rank = binding.local_rank;
  ec.device = binding.device;
  ec.max_batch = int(rank_batch);
  std::string note;
  bool gpu_found = false;
  std::unique_ptr<Engine> engine = MakeEngine(o.device, ec, &note, &gpu_found);
  if (!note.empty() &&
      DeviceNoteWanted(comm.get(), o.device_asked || !binding.gpus_given.empty() || gpu_found) &&
      rank == 0)
    std::printf("dlh-launch: %s\n", note.c_str());
  engine->broadcast_params();  // the spec's initial weights, rank 0's like train

  LoaderOptions lo;
  lo.global_batch = spec.batch_size;
  lo.rank_offset = rank_offset;
  lo.rank_batch = rank_batch;
  lo.seed = spec.seed;
  lo.augment = spec.augment;
  lo.prefetch = o.prefetch;
  Loader loader(data.train, lo, 0, 0);
  if (rank == 0)
    std::printf("dlh-launch: lr-find %s on %d rank(s), %s: batch %d, lr %s to %s over %d steps\n",
                spec.name.c_str(), size, engine->device_name().c_str(), spec.batch_size,
                Num(o.sweep.min_lr).c_str(), Num(o.sweep.max_lr).c_str(), o.sweep.steps);
  std::fflush(stdout);

  // Step i measures the loss of the weights after the updates with rates 0..i-1 and then
  // applies rate i; so the loss measured at step i+1 is paired with rate i, the rate that
  // produced it (steps + 1 passes; the last one's gradient is not used).
  const size_t stats_len = engine->batch_stats().size();
  std::vector<double> control(2 + stats_len), summed(control.size());
  std::vector<float> averaged(stats_len);
  const float loss_scale = 1.0f / float(spec.batch_size);
  const double weight = double(rank_batch) / double(spec.batch_size);
  LrSweep sweep(o.sweep);
  double initial_loss = 0;
  for (int i = 0; i <= o.sweep.steps; ++i) {
    Batch batch = loader.next();
    ForwardContext ctx;
    ctx.training = true;
    ctx.seed = spec.seed;
    ctx.step = uint64_t(i);
    ctx.rank = rank;
    const StepSums sums = engine->forward_backward(batch, ctx, loss_scale);
    engine->finish_gradients();
    control[0] = sums.loss;
    control[1] = double(sums.correct);
    size_t k = 2;
    for (float v : engine->batch_stats()) control[k++] = weight * double(v);
    MPI_CHECK(MPI_Allreduce(control.data(), summed.data(), int(control.size()), MPI_DOUBLE, MPI_SUM,
                            comm.get()));
    for (size_t j = 0; j < stats_len; ++j) averaged[j] = float(summed[2 + j]);
    if (stats_len > 0) engine->commit_batch_stats(averaged);
    const double loss = summed[0] / spec.batch_size, accuracy = summed[1] / spec.batch_size;
    // Every rank has the same sums, so every rank stops at the same step.
    if (i == 0)
      initial_loss = loss;
    else if (!sweep.add(SweepLr(o.sweep, i - 1), loss, accuracy))
      break;
    if (i < o.sweep.steps) engine->update(SweepLr(o.sweep, i), i);
  }

  nlohmann::json report;
  RunCollectively(comm.get(), [&] {
    if (rank != 0) return;
    LrFitOptions fit;
    fit.diverge_factor = o.sweep.diverge_factor;
    const LrSuggestion s = SuggestLr(sweep.points(), fit);
    LrFindOptions named = o;
    named.plot = plot_path;
    report = Report(named, spec, size, engine->device_name(), initial_loss, sweep, s, fit);
    const std::string title =
        spec.name + ", batch " + std::to_string(spec.batch_size) +
        (s.status == LrSuggestion::Status::kOk
             ? ": suggested lr " + Num(s.lr) + " (" + Num(s.lr_low) + "-" + Num(s.lr_high) + ")"
             : ": no clear minimum");
    // The plot first: the JSON names it, so it should exist when the JSON does.
    WriteFileAtomically(plot_path, LrPlotSvg(sweep.points(), s, title));
    WriteFileAtomically(o.out, report.dump(2) + "\n");
  });
  return report;
}

int RunLrFindCommand(const std::vector<std::string>& args, int rank) {
  LrFindOptions o;
  po::options_description d("dlh-launch lr-find SPEC: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("batch", po::value(&o.batch), "global batch size to test, overrides the spec's batch_size")
    ("data", po::value(&o.data_path), "HDF5 data set, overrides the spec's \"dataset\"")
    ("min-lr", po::value(&o.sweep.min_lr)->default_value(o.sweep.min_lr, "1e-5"),
        "first learning rate")
    ("max-lr", po::value(&o.sweep.max_lr)->default_value(o.sweep.max_lr, "10"),
        "last learning rate (the sweep stops earlier when the loss diverges)")
    ("steps", po::value(&o.sweep.steps)->default_value(o.sweep.steps),
        "rates tried, geometrically spaced (>= 10; steps + 1 batches must fit in one epoch)")
    ("smoothing", po::value(&o.sweep.smoothing)->default_value(o.sweep.smoothing, "0.9"),
        "weight of the past in the loss's moving average (divergence stop and plot)")
    ("out", po::value(&o.out)->default_value(o.out), "JSON result: points, fits, suggestion")
    ("plot", po::value(&o.plot), "SVG plot (default: OUT with .svg for .json)")
    ("store", po::value<std::string>(), "write the result to DIR/lr-find-KEY.json (and .svg) "
        "instead of --out: where dlh-launch train looks for it when its plan says lr_source find "
        "(DIR: $DLH_LR_CACHE, else the run folder's parent, e.g. runs)")
    ("threads", po::value(&o.threads)->default_value(0),
        "OpenBLAS threads per rank (0: OPENBLAS_NUM_THREADS, else cores / ranks per node)")
    ("prefetch", po::value(&o.prefetch)->default_value(2), "batches loaded ahead in the background")
    ("device", po::value(&o.device)->default_value("auto"), "auto, cpu or cuda, as for train")
    ("verbose", "also report what is as expected, as for train")
    ("allreduce", po::value(&o.allreduce)->default_value("auto"), "flat, hierarchical or auto, "
        "as for train");
  // clang-format on
  SubcommandSyntax syntax;
  syntax.positional = {{"spec", ""}};
  syntax.suffix = " (see dlh-launch lr-find --help)";
  po::variables_map vm;
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    if (rank == 0) std::cout << d << "\n";
    return kExitOk;
  }
  if (vm.count("spec")) o.spec_path = vm["spec"].as<std::string>();
  if (o.spec_path.empty())
    throw UsageError("lr-find: missing SPEC (see dlh-launch lr-find --help)");
  if (vm.count("batch") && o.batch <= 0)
    throw UsageError("--batch: must be positive, got " + std::to_string(o.batch));
  if (o.threads < 0) throw UsageError("--threads: must not be negative");
  if (o.prefetch < 0) throw UsageError("--prefetch: must not be negative");
  if (o.out.empty()) throw UsageError("--out: must not be empty");
  CheckAllreduceKind(o.allreduce);
  CheckDeviceKind(o.device);
  o.device_asked = !vm["device"].defaulted() || vm.count("verbose") > 0;
  CheckLrSweepOptions(o.sweep);
  if (vm.count("store")) {
    const std::string dir = vm["store"].as<std::string>();
    if (dir.empty()) throw UsageError("--store: must not be empty");
    if (!vm["out"].defaulted() || vm.count("plot"))
      throw UsageError("--store: names the files itself, not with --out or --plot");
    RunCollectively(MPI_COMM_WORLD, [&] {
      const int64_t batch = o.batch > 0 ? o.batch : LoadSpec(o.spec_path).batch_size;
      o.out = LrCacheFile(dir, LrFindKeyOfSpecFile(o.spec_path, batch));
      if (rank == 0) std::filesystem::create_directories(dir);
    });
  }
  const nlohmann::json r = RunLrFind(o, MPI_COMM_WORLD);
  if (rank != 0) return kExitOk;
  const auto& s = r["suggestion"];
  if (s["status"] == "ok") {
    const auto& iv = s["interval"];
    std::printf("suggested lr %s (interval %s-%s) for batch %d", Num(s["lr"]).c_str(),
                Num(iv[0]).c_str(), Num(iv[1]).c_str(), int(r["batch"]));
  } else {
    std::printf("no suggestion for batch %d: %s", int(r["batch"]),
                s["note"].get<std::string>().c_str());
  }
  std::printf("; %s, plot %s\n", o.out.c_str(), r["plot"].get<std::string>().c_str());
  if (s["status"] == "ok" && !s["note"].get<std::string>().empty())
    std::printf("note: %s\n", s["note"].get<std::string>().c_str());
  if (!r["sweep"]["stopped"].is_null())
    std::printf("stopped after %d of %d steps: %s\n", int(r["sweep"]["steps_run"]), o.sweep.steps,
                r["sweep"]["stopped"].get<std::string>().c_str());
  return kExitOk;
}

}  // namespace dlh
