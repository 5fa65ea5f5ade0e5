// DLH — dlh-launch: the MPI launcher. Run one process per rank under
// `srun --mpi=pmix` or `mpirun -np N`:
//   dlh-launch train SPEC [options]
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "launcher/collective.hpp"
#include "launcher/mpi.hpp"
#include "launcher/trainer.hpp"

namespace po = boost::program_options;

namespace {

constexpr const char* kUsage =
    "usage: dlh-launch train SPEC [options]   (one process per rank: srun or mpirun)\n"
    "       dlh-launch --help | --version\n";

po::options_description TrainOptionsDescription(dlh::TrainOptions* o, std::string* progress) {
  po::options_description d("dlh-launch train SPEC: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("run-dir", po::value(&o->run_dir), "run folder: checkpoints/, metrics.jsonl, summary.json "
                                        "(default: runs/<spec name>)")
    ("data", po::value(&o->data_path), "HDF5 data set, overrides the spec's \"dataset\"")
    ("epochs", po::value(&o->epochs), "epochs, overrides the spec")
    ("batch-size", po::value(&o->batch_size), "global batch size, overrides the spec")
    ("max-steps", po::value(&o->max_steps), "stop (with a checkpoint) after this many global steps")
    ("checkpoint-steps", po::value(&o->checkpoint_steps)->default_value(0),
        "checkpoint every N steps (0: off)")
    ("checkpoint-seconds", po::value(&o->checkpoint_seconds)->default_value(1800),
        "checkpoint every T seconds of training (0: off)")
    ("no-epoch-checkpoints", "do not checkpoint at the end of every epoch")
    ("keep", po::value(&o->keep)->default_value(3), "checkpoints to keep (>= 1)")
    ("no-resume", "start from scratch even if RUN_DIR has checkpoints")
    ("stop-on-usr1", "on SIGUSR1 checkpoint and stop (default: checkpoint and continue)")
    ("no-eval", "skip the test-set evaluation after every epoch")
    ("threads", po::value(&o->threads)->default_value(0),
        "OpenBLAS threads per rank (0: OPENBLAS_NUM_THREADS, else cores / ranks per node)")
    ("prefetch", po::value(&o->prefetch)->default_value(2), "batches loaded ahead in the background")
    ("bucket-mb", po::value<double>()->default_value(4.0), "gradient fusion bucket size in MiB")
    ("no-overlap", "start gradient allreduces after backward instead of during it")
    ("progress", po::value(progress)->default_value("auto"),
        "progress display on rank 0: auto (bar on a terminal, else plain lines), bar, plain, none");
  // clang-format on
  return d;
}

int RunTrain(const std::vector<std::string>& args, int rank) {
  dlh::TrainOptions o;
  std::string progress;
  po::options_description desc = TrainOptionsDescription(&o, &progress);
  po::options_description hidden;
  hidden.add_options()("spec", po::value(&o.spec_path));
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description pos;
  pos.add("spec", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw dlh::UsageError(std::string(e.what()) + " (see dlh-launch train --help)");
  }
  if (vm.count("help")) {
    if (rank == 0) std::cout << kUsage << "\n" << desc << "\n";
    return dlh::kExitOk;
  }
  if (o.spec_path.empty())
    throw dlh::UsageError("train: missing SPEC (see dlh-launch train --help)");
  if (o.keep < 1)
    throw dlh::UsageError("--keep: must be at least 1, got " + std::to_string(o.keep));
  if (o.epochs < 0) throw dlh::UsageError("--epochs: must be positive");
  if (o.batch_size < 0) throw dlh::UsageError("--batch-size: must be positive");
  if (o.max_steps < 0) throw dlh::UsageError("--max-steps: must not be negative");
  if (o.checkpoint_steps < 0 || o.checkpoint_seconds < 0)
    throw dlh::UsageError("--checkpoint-steps/--checkpoint-seconds: must not be negative");
  if (o.threads < 0) throw dlh::UsageError("--threads: must not be negative");
  if (o.prefetch < 0) throw dlh::UsageError("--prefetch: must not be negative");
  double bucket_mb = vm["bucket-mb"].as<double>();
  if (!(bucket_mb > 0)) throw dlh::UsageError("--bucket-mb: must be positive");
  o.sync.bucket_bytes = size_t(bucket_mb * 1024 * 1024);
  o.sync.overlap = !vm.count("no-overlap");
  o.checkpoint_epochs = !vm.count("no-epoch-checkpoints");
  o.resume = !vm.count("no-resume");
  o.stop_on_usr1 = vm.count("stop-on-usr1") > 0;
  o.eval = !vm.count("no-eval");
  o.progress = dlh::ParseProgressMode(progress);

  dlh::TrainResult r = dlh::Train(o, MPI_COMM_WORLD);
  return r.stop_signal ? 128 + r.stop_signal : dlh::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? dlh::kExitBadInput : dlh::kExitOk;
  }
  if (args[0] == "--version") {
    std::puts("dlh-launch " DLH_VERSION);
    return dlh::kExitOk;
  }
  if (args[0] != "train") {
    std::fprintf(stderr, "dlh-launch: unknown command '%s'\n%s", args[0].c_str(), kUsage);
    return dlh::kExitBadInput;
  }
  args.erase(args.begin());

  dlh::mpi::Env env(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  try {
    return RunTrain(args, rank);
  } catch (const dlh::CollectiveError& e) {
    // Every rank has the same error: one message, a clean exit everywhere.
    if (rank == 0) std::fprintf(stderr, "dlh-launch: error: %s\n", e.what());
    return e.exit_code;
  } catch (const dlh::UsageError& e) {
    // Options are parsed identically on every rank before any communication.
    if (rank == 0) std::fprintf(stderr, "dlh-launch: %s\n", e.what());
    return dlh::kExitBadInput;
  } catch (const std::exception& e) {
    // One rank failed alone: say which, and take the job down rather than let the
    // others hang in their next collective call.
    std::fprintf(stderr, "dlh-launch [rank %d/%d %s]: error: %s\n", rank, size,
                 dlh::mpi::Hostname().c_str(), e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, dlh::ExitCodeOf(e));
    return dlh::ExitCodeOf(e);
  }
}
