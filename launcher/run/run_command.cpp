// DLH — `dlh-launch run` (see run_command.hpp).
#include "launcher/run/run_command.hpp"

#include <sys/wait.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>

#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/file_text.hpp"
#include "launcher/comm/binding.hpp"
#include "launcher/comm/collective.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/comm/topology.hpp"
#include "launcher/run/child.hpp"
#include "launcher/run/rendezvous.hpp"
#include "launcher/run/run_dir.hpp"
#include "launcher/run/run_env.hpp"
#include "launcher/train/batch_split.hpp"
#include "launcher/train/plan.hpp"

extern char** environ;

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace dlh {
namespace {

// The shell's code for a command that cannot be run ("command not found").
constexpr int kExitCannotExecute = 127;

constexpr const char* kMissingProgram =
    "run: missing the program: dlh-launch run [options] -- CMD ARGS...";

struct RunOptions {
  std::vector<std::string> command;  // CMD ARGS...
  std::string run_dir;               // "": runs/<DefaultRunName>
  std::string master_addr;           // "": rank 0's host name
  int master_port = 0;               // 0: a free port on rank 0's host
  std::string plan_json, plan_origin = "DLH_PLAN";
  std::string gpu_type, gpu_type_origin = "--gpu-type";
  bool gpu_type_given = false;
  bool bind_gpu = true;
};

// What every rank agrees on before the programs start.
struct Agreement {
  Topology topo;
  std::vector<std::string> node_names;
  Binding binding;
  LaunchPlan plan;
  int plan_part = -1;
  std::string master_addr, run_id, run_dir, checkpoint;
  int master_port = 0;
};

po::options_description RunOptionsDescription(RunOptions* o) {
  po::options_description d("dlh-launch run [options] -- CMD ARGS...: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("run-dir", po::value(&o->run_dir), "the program's run folder, DLH_RUN_DIR, created by rank "
        "0; DLH_CHECKPOINT is the newest file of its checkpoints/ (default: runs/<program "
        "name>, the script's name when CMD is an interpreter)")
    ("master-addr", po::value(&o->master_addr),
        "MASTER_ADDR (default: the host name of rank 0's machine)")
    ("master-port", po::value(&o->master_port),
        "MASTER_PORT (default: a port free on rank 0's machine, found at start)")
    ("plan", po::value(&o->plan_json), "plan file (JSON, as from dlh-estimate recommend --json) "
        "giving DLH_GLOBAL_BATCH, DLH_BATCH, DLH_LR, DLH_WARMUP_EPOCHS; default: the DLH_PLAN "
        "environment variable the SPANK plugin sets")
    ("no-plan", "ignore DLH_PLAN")
    ("gpu-type", po::value(&o->gpu_type),
        "this rank's GPU type, for a plan on several types (as for train); default: "
        "DLH_GPU_TYPE")
    ("no-gpu-binding", "leave CUDA_VISIBLE_DEVICES as it is (default: narrowed to the rank's "
        "GPU when it lists several)");
  // clang-format on
  return d;
}

// Options alone, identically on every rank: no communication.
RunOptions ParseRunOptions(const std::vector<std::string>& args, bool* help, int rank) {
  RunOptions o;
  std::vector<std::string> options;
  SplitRunArguments(args, &options, &o.command);
  po::options_description desc = RunOptionsDescription(&o);
  SubcommandSyntax syntax;
  syntax.prefix = "run: ";
  syntax.suffix = " (see dlh-launch run --help)";
  po::variables_map vm;
  *help = ParseSubcommand(options, desc, syntax, &vm) == ParseResult::kStop;
  if (*help) {
    if (rank == 0) std::cout << desc << "\n";
    return o;
  }
  if (o.command.empty() || o.command[0].empty()) throw UsageError(kMissingProgram);
  if (vm.count("run-dir") && o.run_dir.empty()) throw UsageError("--run-dir: must not be empty");
  if (vm.count("master-addr") && o.master_addr.empty())
    throw UsageError("--master-addr: must not be empty");
  if (vm.count("master-port") && (o.master_port < 1 || o.master_port > 65535))
    throw UsageError("--master-port: must be 1 to 65535, got " + std::to_string(o.master_port));
  o.bind_gpu = !vm.count("no-gpu-binding");
  // The plan and the GPU type from the same sources as train's.
  ResolvePlanSource(vm.count("no-plan") > 0, vm.count("plan") > 0, &o.plan_json, &o.plan_origin);
  ResolveGpuType(vm.count("gpu-type") > 0, &o.gpu_type, &o.gpu_type_origin, &o.gpu_type_given);
  return o;
}

// Topology, GPU binding and the plan: every rank reads its own and all fail alike.
void AgreeOnRanks(const RunOptions& o, MPI_Comm comm, int rank, int size, Agreement* a) {
  a->node_names = GatherNodeNames(comm);
  a->topo = MakeTopology(a->node_names, rank);
  RunCollectively(comm, [&] {
    a->binding = BindRank([](const char* name) { return std::getenv(name); }, a->topo.local_rank);
    if (o.gpu_type_given && o.gpu_type.empty())
      throw UsageError("--gpu-type: must not be empty (rank " + std::to_string(rank) + ")");
    if (o.plan_json.empty()) return;
    a->plan = ParsePlan(o.plan_json, o.plan_origin);
    if (PlanSplitsBatch(a->plan, false)) {
      const char* node = std::getenv("SLURMD_NODENAME");
      a->plan_part = PartOfRank(a->plan, o.plan_origin, o.gpu_type, o.gpu_type_origin,
                                node ? node : "", rank, size);
    }
    PlanRankBatch(a->plan, o.plan_origin, a->plan_part, rank, size);  // throws if it cannot
  });
  if (!PlanSplitsBatch(a->plan, false)) return;
  // A plan on several GPU types: the parts' batches must add up to the global batch.
  int64_t mine[2] = {a->plan.parts[size_t(a->plan_part)].per_gpu_batch, a->plan_part};
  std::vector<int64_t> all(2 * size_t(size), 0);
  MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, comm));
  std::vector<int64_t> batches;
  std::vector<int> parts;
  for (size_t r = 0; r < size_t(size); ++r) {
    batches.push_back(all[2 * r]);
    parts.push_back(int(all[2 * r + 1]));
  }
  RunCollectively(
      comm, [&] { SplitOffsets(batches, parts, a->plan, o.plan_origin, a->plan.global_batch); });
}

// Rank 0 picks the rendezvous and run id, creates the run folder and finds the checkpoint;
// every rank gets them.
void AgreeOnRun(const RunOptions& o, MPI_Comm comm, int rank, Agreement* a) {
  const std::string run_dir = o.run_dir.empty() ? "runs/" + DefaultRunName(o.command) : o.run_dir;
  std::string checkpoint_name;
  a->master_addr = o.master_addr;
  a->master_port = o.master_port;
  RunCollectively(comm, [&] {
    if (rank != 0) return;
    if (a->master_addr.empty()) a->master_addr = MachineHostName();
    if (a->master_port == 0) a->master_port = FreeTcpPort();
    const char* job = std::getenv("SLURM_JOB_ID");
    a->run_id = job && *job ? job : RandomRunId();
    std::error_code ec;
    fs::create_directories(run_dir, ec);
    if (ec) throw Error(run_dir + ": cannot create the run folder: " + ec.message());
    const std::string newest = NewestCheckpoint(run_dir + "/checkpoints");
    if (!newest.empty()) checkpoint_name = fs::path(newest).filename().string();
  });
  MPI_CHECK(MPI_Bcast(&a->master_port, 1, MPI_INT, 0, comm));
  a->master_addr = mpi::BroadcastString(comm, a->master_addr);
  a->run_id = mpi::BroadcastString(comm, a->run_id);
  checkpoint_name = mpi::BroadcastString(comm, checkpoint_name);
  // Absolute, so that a program that changes folder still finds them; each rank's own
  // working folder (mpirun and srun start every rank in the submitting one).
  a->run_dir = fs::absolute(run_dir).lexically_normal().string();
  if (!checkpoint_name.empty()) a->checkpoint = a->run_dir + "/checkpoints/" + checkpoint_name;
}

std::string ExecFailure(const std::string& program, int error, int rank, const std::string& host) {
  const bool searched = program.find('/') == std::string::npos;
  const std::string why =
      searched && error == ENOENT ? "command not found (PATH)" : std::strerror(error);
  return "run: cannot execute '" + program + "': " + why + " (rank " + std::to_string(rank) +
         " on " + host + ")";
}

// Waits for every rank to be done without blocking in MPI: a peer's MPI_Abort still ends this
// rank through its launcher, and signals are still handled.
void WaitForEveryRank(MPI_Comm comm) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibarrier(comm, &request));
  for (int done = 0;;) {
    MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// MPI_Abort asks the launcher to kill every rank and blocks until it does; when the launcher
// cannot be reached it blocks for good, so the rank ends itself 10 s later (as the stall
// watchdog does, launcher/comm/peer_watch.cpp).
[[noreturn]] void AbortEveryRank(int code) {
  std::fflush(nullptr);
  std::thread([code] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::_Exit(code);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace

void SplitRunArguments(const std::vector<std::string>& args, std::vector<std::string>* options,
                       std::vector<std::string>* command) {
  options->clear();
  command->clear();
  size_t i = 0;
  for (; i < args.size() && args[i] != "--"; ++i) options->push_back(args[i]);
  if (i < args.size()) command->assign(args.begin() + long(i) + 1, args.end());
}

int RunProgramCommand(const std::vector<std::string>& args, int rank, int size) {
  bool help = false;
  const RunOptions o = ParseRunOptions(args, &help, rank);
  if (help) return kExitOk;

  mpi::Comm comm(MPI_COMM_WORLD);
  Agreement a;
  AgreeOnRanks(o, comm.get(), rank, size, &a);
  AgreeOnRun(o, comm.get(), rank, &a);
  std::vector<std::string> env;
  RunCollectively(comm.get(), [&] {
    RunEnvInputs in;
    for (char** e = environ; *e; ++e) in.parent.emplace_back(*e);
    in.rank = rank;
    in.world_size = size;
    in.local_rank = a.topo.local_rank;
    in.local_world_size = a.topo.local_size;
    in.node = a.topo.node;
    in.num_nodes = a.topo.num_nodes;
    in.master_addr = a.master_addr;
    in.master_port = a.master_port;
    in.run_id = a.run_id;
    in.run_dir = a.run_dir;
    in.checkpoint = a.checkpoint;
    in.plan = a.plan;
    in.plan_part = a.plan_part;
    in.binding = a.binding;
    in.bind_gpu = o.bind_gpu;
    env = BuildRunEnv(in, o.plan_origin);
  });

  const Spawned child = SpawnChild(o.command, env);
  try {
    RunCollectively(comm.get(), [&] {
      if (child.exec_error)
        throw CollectiveError(
            ExecFailure(o.command[0], child.exec_error, rank, a.node_names[size_t(rank)]),
            kExitCannotExecute);
    });
  } catch (...) {
    KillChild(child.pid);  // started on this rank but not on another: the job cannot run
    throw;
  }
  const std::string host = a.node_names[size_t(rank)];
  if (rank == 0) {
    const std::string resume =
        a.checkpoint.empty() ? "no checkpoint" : "DLH_CHECKPOINT=" + a.checkpoint;
    std::fprintf(stderr,
                 "dlh-launch: run: %s on %d ranks (%s), MASTER_ADDR=%s MASTER_PORT=%d, "
                 "TORCHELASTIC_RUN_ID=%s, DLH_RUN_DIR=%s, %s\n",
                 o.command[0].c_str(), size, DescribeTopology(a.topo).c_str(),
                 a.master_addr.c_str(), a.master_port, a.run_id.c_str(), a.run_dir.c_str(),
                 resume.c_str());
  }

  int status = 0;
  while (!WaitChild(child.pid, 100, &status)) {
  }
  // A stop the launcher or the user asked for, which the program obeyed (it exited, or died of
  // that signal), is no failure: its status is the rank's, once every rank is done.
  int stop = StopSignalReceived();
  if (stop == 0 && WIFSIGNALED(status) &&
      (WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGHUP)) {
    // mpirun signals the rank's whole process group, the program included, and the rank's
    // handler may run on another thread (the MPI library's) a moment after the program died:
    // give it that moment before calling the death a failure.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    stop = StopSignalReceived();
  }
  const bool obeyed_stop =
      stop != 0 && (WIFEXITED(status) || (WIFSIGNALED(status) && WTERMSIG(status) == stop));
  const bool success = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!success && !obeyed_stop) {
    std::fprintf(stderr,
                 "dlh-launch [rank %d/%d %s]: error: the program (pid %ld) %s: ending every rank\n",
                 rank, size, host.c_str(), long(child.pid), DescribeEnd(status).c_str());
    AbortEveryRank(ExitCodeOfEnd(status));
  }
  WaitForEveryRank(comm.get());
  return ExitCodeOfEnd(status);
}

}  // namespace dlh
