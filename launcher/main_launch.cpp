// DLH — dlh-launch: the MPI launcher. Run one process per rank under
// `srun --mpi=pmix` or `mpirun -np N`:
//   dlh-launch train SPEC [options]
//   dlh-launch lr-find SPEC [options]
//   dlh-launch run [options] -- CMD ARGS...
#include <boost/program_options.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <utility>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/exit_codes.hpp"
#include "common/file_text.hpp"
#include "launcher/bench/bench_allreduce.hpp"
#include "launcher/bench/bench_checkpoint.hpp"
#include "launcher/bench/bench_loader.hpp"
#include "launcher/bench/time_steps.hpp"
#include "launcher/comm/allreduce.hpp"
#include "launcher/comm/collective.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/comm/tcp_eager.hpp"
#include "launcher/engine/device.hpp"
#include "launcher/export/export_command.hpp"
#include "launcher/predict/predict_command.hpp"
#include "launcher/probe/blas_kernels.hpp"
#include "launcher/probe/probe_cli.hpp"
#include "launcher/run/run_command.hpp"
#include "launcher/train/balancer.hpp"
#include "launcher/train/lr_find.hpp"
#include "launcher/train/lr_source.hpp"
#include "launcher/train/plan.hpp"
#include "launcher/train/trainer.hpp"
#include "launcher/watch/core_yield.hpp"
#include "launcher/watch/peer_watch.hpp"
#include "launcher/watch/rank_guard.hpp"
#include "launcher/watch/rank_threads.hpp"

namespace po = boost::program_options;

namespace {

constexpr const char* kUsage =
    "usage: dlh-launch train SPEC [options]   (one process per rank: srun or mpirun)\n"
    "       dlh-launch lr-find SPEC [--batch B] [options]   (learning-rate range test)\n"
    "       dlh-launch run [options] -- CMD ARGS...   (your own program, one per rank, with\n"
    "                                                  torchrun's environment)\n"
    "       dlh-launch bench-allreduce [options]\n"
    "       dlh-launch bench-checkpoint --dir DIR [options]\n"
    "       dlh-launch bench-loader --data FILE [options]\n"
    "       dlh-launch time-steps --device cpu|cuda[:N] --in REQUEST --out RESULT   (one\n"
    "                                        process: dlh-estimate calibrate's step timer)\n"
    "       dlh-launch probe [--device cpu|cuda[:N]] [--threads N]   (this node's device\n"
    "                                        measured in a few seconds, as JSON)\n"
    "       dlh-launch predict CHECKPOINT --data FILE [--out P.csv] [--results R.json]\n"
    "                                        (a trained model applied to a data set; one process)\n"
    "       dlh-launch export SOURCE --pytorch OUT.py | --torch OUT.pt | --onnx OUT.onnx\n"
    "                                        (a spec as a PyTorch program; a checkpoint's model\n"
    "                                        as a PyTorch state dict or ONNX)\n"
    "       dlh-launch --help | --version\n"
    "'dlh-launch COMMAND --help' documents each command's options.\n";

// "4096", "4K", "64M", "1G" (binary multiples).
size_t ParseBytes(const std::string& text, const std::string& what) {
  size_t pos = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &pos);
  } catch (const std::exception&) {
    throw dlh::UsageError(what + ": expected a size like 4096, 4K, 64M, got '" + text + "'");
  }
  std::string unit = text.substr(pos);
  if (unit == "K" || unit == "k")
    value <<= 10;
  else if (unit == "M")
    value <<= 20;
  else if (unit == "G")
    value <<= 30;
  else if (!unit.empty())
    throw dlh::UsageError(what + ": expected a size like 4096, 4K, 64M, got '" + text + "'");
  if (value < 4) throw dlh::UsageError(what + ": must be at least 4 bytes, got '" + text + "'");
  return size_t(value);
}

int RunBenchAllreduce(const std::vector<std::string>& args, int rank) {
  dlh::AllreduceBenchOptions o;
  std::string min_bytes = "4K", max_bytes = "64M", json_path;
  po::options_description d("dlh-launch bench-allreduce: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("min-bytes", po::value(&min_bytes)->default_value(min_bytes), "smallest message")
    ("max-bytes", po::value(&max_bytes)->default_value(max_bytes), "largest message")
    ("factor", po::value(&o.size_factor)->default_value(o.size_factor),
     "each size is FACTOR times the previous (2: twice the points for dlh-estimate comm)")
    ("repeats", po::value(&o.repeats)->default_value(o.repeats), "timed blocks per size; median")
    ("json", po::value(&json_path), "also write the results as JSON to this file (rank 0)");
  // clang-format on
  dlh::SubcommandSyntax syntax;
  syntax.suffix = " (see dlh-launch bench-allreduce --help)";
  syntax.ignore_extra_arguments = true;
  po::variables_map vm;
  if (dlh::ParseSubcommand(args, d, syntax, &vm) == dlh::ParseResult::kStop) {
    if (rank == 0) std::cout << d << "\n";
    return dlh::kExitOk;
  }
  o.min_bytes = ParseBytes(min_bytes, "--min-bytes");
  o.max_bytes = ParseBytes(max_bytes, "--max-bytes");
  if (o.max_bytes < o.min_bytes) throw dlh::UsageError("--max-bytes: smaller than --min-bytes");
  if (o.repeats < 1) throw dlh::UsageError("--repeats: must be at least 1");
  if (o.size_factor < 2 || o.size_factor > 1024)
    throw dlh::UsageError("--factor: must be 2 to 1024, got " + std::to_string(o.size_factor));
  nlohmann::json r = dlh::RunAllreduceBench(MPI_COMM_WORLD, o);
  if (rank != 0) return dlh::kExitOk;
  const int n = r["ranks"];
  // busbw = algbw * 2(n-1)/n, as nccl-tests define it: comparable across rank counts.
  const double bus = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  std::printf("allreduce, float sum, %d ranks (median of %d blocks, slowest rank)\n", n, o.repeats);
  std::printf("%12s %12s %12s %10s %10s %8s %10s\n", "bytes", "MPI us", "DLH us", "MPI busbw",
              "DLH busbw", "DLH/MPI", "best/best");
  for (const auto& s : r["sizes"]) {
    double bytes = s["bytes"], mpi = s["mpi_s"], dlh = s["dlh_s"];
    double best = double(s["mpi_min_s"]) / double(s["dlh_min_s"]);
    std::printf("%12.0f %12.1f %12.1f %8.2f GB/s %6.2f GB/s %8.2f %10.2f\n", bytes, mpi * 1e6,
                dlh * 1e6, bytes / mpi * bus / 1e9, bytes / dlh * bus / 1e9, mpi / dlh, best);
  }
  const auto& sm = r["small"];
  double per = sm["per_tensor_s"], fused = sm["fused_s"];
  std::printf("%d tensors of %d bytes: one MPI_Allreduce each %.1f us, fused %.1f us (%.1fx)\n",
              int(sm["tensors"]), int(sm["bytes_each"]), per * 1e6, fused * 1e6, per / fused);
  if (!json_path.empty()) dlh::WriteFileAtomically(json_path, r.dump(2) + "\n");
  return dlh::kExitOk;
}

po::options_description TrainOptionsDescription(dlh::TrainOptions* o, std::string* progress) {
  po::options_description d("dlh-launch train SPEC: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("run-dir", po::value(&o->run_dir), "run folder: checkpoints/, metrics.jsonl, summary.json "
                                        "(default: runs/<spec name>)")
    ("data", po::value(&o->data_path), "HDF5 data set, overrides the spec's \"dataset\" (%n: "
        "this rank's node name, %u: the user's, %j: the job's id, as dlh-data stage --to names "
        "a copy staged per node)")
    ("data-mode", po::value(&o->data_mode)->default_value("auto"), "memory: every rank loads "
        "the data set; stream: samples are read from the file as steps need them (memory per "
        "rank bounded whatever the data size); auto: stream when this node's ranks would "
        "need more than half of its available memory")
    ("epochs", po::value(&o->epochs), "epochs, overrides the spec")
    ("batch-size", po::value(&o->batch_size), "global batch size, overrides the spec")
    ("max-steps", po::value(&o->max_steps), "stop (with a checkpoint) after this many global steps")
    ("checkpoint-steps", po::value(&o->checkpoint_steps)->default_value(0),
        "checkpoint every N steps (0: off)")
    ("checkpoint-seconds", po::value(&o->checkpoint_seconds)->default_value(1800),
        "checkpoint every T seconds of training (0: off)")
    ("no-epoch-checkpoints", "do not checkpoint at the end of every epoch")
    ("keep", po::value(&o->keep)->default_value(3), "checkpoints to keep (>= 1)")
    ("checkpoint-sync", "write each checkpoint before training goes on (default: in the "
        "background, while the next steps run; on a signal and at the end always waited for)")
    ("no-resume", "start from scratch even if RUN_DIR has checkpoints")
    ("stop-on-usr1", "on SIGUSR1 checkpoint and stop (default: checkpoint and continue)")
    ("no-eval", "skip the test-set evaluation after every epoch")
    ("threads", po::value(&o->threads)->default_value(0),
        "CPU engine threads per rank (0: OPENBLAS_NUM_THREADS, else the plan's, else the CPUs of "
        "the rank's affinity mask over the node's ranks that share it)")
    ("prefetch", po::value(&o->prefetch)->default_value(2), "batches loaded ahead in the background")
    ("bucket-mb", po::value<double>()->default_value(4.0), "gradient fusion bucket size in MiB")
    ("no-overlap", "start gradient allreduces after backward instead of during it")
    ("allreduce", po::value(&o->allreduce)->default_value("auto"),
        "gradient allreduce: flat (one MPI_Allreduce per bucket, overlapped with backward), "
        "hierarchical (reduce-scatter in the node, allreduce across nodes, all-gather in the "
        "node, after backward), auto (hierarchical on several nodes with several ranks, else flat)")
    ("device", po::value(&o->device)->default_value("auto"),
        "auto (a GPU when every rank has one, else the CPU), cpu, or cuda (fail without a GPU)")
    ("comm-timeout", po::value(&o->comm_timeout)->default_value(dlh::kDefaultCommTimeoutS),
        "seconds a rank may wait in one collective for a peer that stopped answering before "
        "every live rank says which one and the job is aborted (exit code 4); also how long a "
        "rank may do nothing (no CPU time, no I/O) outside MPI before it says it hangs, and how "
        "long MPI_Init may wait for the other ranks")
    ("plan", po::value(&o->plan_json), "plan file (JSON, as from dlh-estimate recommend --json); "
        "default: the DLH_PLAN environment variable the SPANK plugin sets")
    ("no-plan", "ignore DLH_PLAN")
    ("gpu-type", po::value(&o->gpu_type),
        "this rank's GPU type (a plan part's gpu or node_type): picks its per-GPU batch from a "
        "plan on several types; default: DLH_GPU_TYPE, else the rank's position (parts in order)")
    ("balance", po::value(&o->balance),
        "per-rank batches: off (fixed: the even split or the plan's parts), adaptive (time "
        "each rank's work, all but its wait in the allreduces, and move samples from slow to "
        "fast ranks), replay (the splits recorded in --balance-history); default: the plan's "
        "\"balance\", else off")
    ("balance-every", po::value(&o->balance_every)->default_value(o->balance_every),
        "adaptive: steps measured (median) for each decision")
    ("balance-history", po::value(&o->balance_history),
        "replay: the summary.json or a checkpoint (.h5) of the run whose splits to replay")
    ("progress", po::value(progress)->default_value("auto"),
        "progress display on rank 0: auto (bar on a terminal, else plain lines), bar, plain, none")
    ("verbose", "also report what is as expected: that --device auto trains on the CPU, and "
        "why, where no GPU was asked for (by --device, a plan for GPUs, or GPUs that Slurm or "
        "CUDA_VISIBLE_DEVICES give the job), which is said anyway where one was")
    ("observations", po::value(&o->observations),
        "observation store (a folder): the run's record goes there at its end, over the "
        "plan's store (docs/reference/observations.md)")
    ("trace", po::value(&o->trace_path),
        "write a timeline of every rank (data wait, forward, backward, each gradient bucket's "
        "allreduce, optimizer, checkpoints, evaluation) to FILE at the end of the run, in the "
        "Chrome trace format: open it in https://ui.perfetto.dev or chrome://tracing");
  // clang-format on
  return d;
}

int RunTrain(const std::vector<std::string>& args, int rank) {
  dlh::TrainOptions o;
  std::string progress;
  po::options_description desc = TrainOptionsDescription(&o, &progress);
  dlh::SubcommandSyntax syntax;
  syntax.positional = {{"spec", ""}};  // checked below: an empty SPEC is missing too
  syntax.suffix = " (see dlh-launch train --help)";
  po::variables_map vm;
  if (dlh::ParseSubcommand(args, desc, syntax, &vm) == dlh::ParseResult::kStop) {
    if (rank == 0) std::cout << kUsage << "\n" << desc << "\n";
    return dlh::kExitOk;
  }
  if (vm.count("spec")) o.spec_path = vm["spec"].as<std::string>();
  if (o.spec_path.empty())
    throw dlh::UsageError("train: missing SPEC (see dlh-launch train --help)");
  if (o.keep < 1)
    throw dlh::UsageError("--keep: must be at least 1, got " + std::to_string(o.keep));
  // Given, each must be at least 1: 0 was taken as "not given" (the spec's epochs and batch,
  // no step limit), so a typo trained a whole run of another length.
  for (const auto& [name, value] : {std::pair<const char*, int64_t>{"epochs", o.epochs},
                                    {"batch-size", o.batch_size},
                                    {"max-steps", o.max_steps}})
    if (vm.count(name) && value < 1)
      throw dlh::UsageError(std::string("--") + name + ": must be at least 1, got " +
                            std::to_string(value));
  if (o.checkpoint_steps < 0 || !(o.checkpoint_seconds >= 0) ||
      !std::isfinite(o.checkpoint_seconds))
    throw dlh::UsageError(
        "--checkpoint-steps/--checkpoint-seconds: must be a number, not negative (0: off)");
  if (o.threads < 0) throw dlh::UsageError("--threads: must not be negative");
  if (o.data_mode != "auto" && o.data_mode != "memory" && o.data_mode != "stream")
    throw dlh::UsageError("--data-mode: expected auto, memory or stream, got '" + o.data_mode +
                          "'");
  if (o.prefetch < 0) throw dlh::UsageError("--prefetch: must not be negative");
  double bucket_mb = vm["bucket-mb"].as<double>();
  if (!(bucket_mb > 0)) throw dlh::UsageError("--bucket-mb: must be positive");
  o.sync.bucket_bytes = size_t(bucket_mb * 1024 * 1024);
  o.sync.overlap = !vm.count("no-overlap");
  if (vm.count("balance")) dlh::ParseBalanceMode(o.balance, "--balance");
  if (o.balance_every < 3 || o.balance_every > 1000000)
    throw dlh::UsageError(
        "--balance-every: must be 3 to 1000000 steps (the median of fewer is "
        "noise), got " +
        std::to_string(o.balance_every));
  if (o.balance == "replay" && o.balance_history.empty())
    throw dlh::UsageError(
        "--balance replay: needs --balance-history FILE (the recorded run's "
        "summary.json or checkpoint)");
  if (vm.count("balance-history") && o.balance != "replay")
    throw dlh::UsageError("--balance-history: only with --balance replay");
  dlh::CheckAllreduceKind(o.allreduce);
  dlh::CheckDeviceKind(o.device);
  o.device_given = !vm["device"].defaulted();
  o.verbose = vm.count("verbose") > 0;
  if (!(o.comm_timeout > 0)) throw dlh::UsageError("--comm-timeout: must be positive");
  if (vm.count("observations") && o.observations.empty())
    throw dlh::UsageError("--observations: needs a folder");
  if (vm.count("trace") && o.trace_path.empty())
    throw dlh::UsageError("--trace: needs a file name");
  o.checkpoint_epochs = !vm.count("no-epoch-checkpoints");
  o.resume = !vm.count("no-resume");
  o.stop_on_usr1 = vm.count("stop-on-usr1") > 0;
  o.checkpoint_sync = vm.count("checkpoint-sync") > 0;
  o.eval = !vm.count("no-eval");
  o.progress = dlh::ParseProgressMode(progress);
  dlh::ResolvePlanSource(vm.count("no-plan") > 0, vm.count("plan") > 0, &o.plan_json,
                         &o.plan_origin);
  if (o.threads <= 0) {  // a plan may say how many; say so where the run logs
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string why = dlh::ApplyPlannedThreads(o.plan_json, o.plan_origin, size, &o.threads);
    if (!why.empty() && rank == 0)
      std::printf("dlh-launch: %d CPU engine threads per rank: %s\n", o.threads, why.c_str());
  }
  // Nothing said how many: the rank's own CPUs, unless OPENBLAS_NUM_THREADS says (the trainer
  // reads it itself). Collective, so every rank takes part whatever its environment.
  if (o.threads <= 0) {
    const dlh::RankThreads threads = dlh::DefaultRankThreads(MPI_COMM_WORLD);
    if (!std::getenv("OPENBLAS_NUM_THREADS")) {
      o.threads = threads.threads;
      if (rank == 0 && threads.cpus < threads.online)
        std::printf("dlh-launch: %s\n", dlh::RankThreadsText(threads).c_str());
    }
  }
  dlh::ResolveGpuType(vm.count("gpu-type") > 0, &o.gpu_type, &o.gpu_type_origin, &o.gpu_type_given);
  // slurmd sets it in every task: a plan with node_names finds the rank's part by it.
  if (const char* node = std::getenv("SLURMD_NODENAME")) o.node_name = node;

  dlh::ResolvePlanLr(&o, MPI_COMM_WORLD);  // a plan with "lr_source": "find"
  dlh::TrainResult r = dlh::Train(o, MPI_COMM_WORLD);
  return r.stop_signal ? dlh::kExitSignalBase + r.stop_signal : dlh::kExitOk;
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
  if (args[0] != "train" && args[0] != "lr-find" && args[0] != "run" &&
      args[0] != "bench-allreduce" && args[0] != "bench-checkpoint" && args[0] != "bench-loader" &&
      args[0] != "time-steps" && args[0] != "probe" && args[0] != "predict" &&
      args[0] != "export") {
    std::fprintf(stderr, "dlh-launch: unknown command '%s'\n%s", args[0].c_str(), kUsage);
    return dlh::kExitBadInput;
  }
  // Before anything else runs: OpenBLAS's kernels for this CPU, where it took generic ones.
  dlh::UseBlasKernelsTheCpuSupports(argv);
  const std::string command = args[0];
  args.erase(args.begin());
  // One process, no MPI: the probe measures this node's device as a job records it; predict
  // applies a trained model on this CPU; export writes a spec or a model for PyTorch.
  if (command == "probe" || command == "predict" || command == "export") {
    try {
      if (command == "predict") return dlh::RunPredictCommand(args);
      if (command == "export") return dlh::RunExportCommand(args);
      return dlh::ProbeCommand(args, "dlh-launch");
    } catch (const dlh::UsageError& e) {
      std::fprintf(stderr, "dlh-launch: %s\n", e.what());
      return dlh::kExitBadInput;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dlh-launch: error: %s\n", e.what());
      return dlh::kExitFailure;
    }
  }

  // A training rank runs under a guard process that reports it if it is killed or crashes.
  // Not `run`'s ranks: their program is the process that may die, and the rank reports it.
  if (command == "train") dlh::GuardRank();
  // MPI_Init waits for every rank of the job: one that never comes would hold the others
  // there for good. Training goes on under the same watch, which the trainer then gives its
  // heartbeats; the other commands were never watched (`run`'s ranks wait for their program).
  dlh::StartPeerWatchBeforeMpi(dlh::CommTimeoutFromArguments(argc, argv));
  // Before MPI_Init, which reads Open MPI's settings from the environment; said once a node.
  if (const std::string yield = dlh::YieldCoresWhenOversubscribed(argc, argv); !yield.empty()) {
    const char* local = std::getenv("SLURM_LOCALID");
    if (!local) local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!local || std::string(local) == "0")
      std::fprintf(stderr, "dlh-launch: %s\n", yield.c_str());
  }
  // Also before MPI_Init: gradient buckets between hosts without a rendezvous (tcp_eager.hpp).
  if (command == "train" || command == "bench-allreduce")
    dlh::RaiseTcpEagerLimit(dlh::BucketBytesFromArguments(argc, argv));
  dlh::SetGuardedPhase("in MPI_Init");
  dlh::mpi::Env env(&argc, &argv, command == "train" ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED);
  if (command != "train") dlh::StopPeerWatch();
  dlh::SetGuardedPhase("reading its options");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  try {
    if (command == "bench-checkpoint") return dlh::RunBenchCheckpointCommand(args, rank);
    if (command == "bench-loader") return dlh::RunBenchLoaderCommand(args, rank);
    if (command == "time-steps") return dlh::RunTimeStepsCommand(args, rank, size);
    if (command == "lr-find") return dlh::RunLrFindCommand(args, rank);
    if (command == "run") return dlh::RunProgramCommand(args, rank, size);
    return command == "train" ? RunTrain(args, rank) : RunBenchAllreduce(args, rank);
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
