// DLH — `dlh-launch run` (see run_command.hpp).
#include "launcher/run/run_command.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/file_text.hpp"
#include "common/program_profile.hpp"
#include "common/temporary_folder.hpp"
#include "launcher/comm/binding.hpp"
#include "launcher/comm/collective.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/comm/topology.hpp"
#include "launcher/data/stage.hpp"
#include "launcher/run/child.hpp"
#include "launcher/run/follow.hpp"
#include "launcher/run/program_energy.hpp"
#include "launcher/run/progress.hpp"
#include "launcher/run/rendezvous.hpp"
#include "launcher/run/run_dir.hpp"
#include "launcher/run/run_env.hpp"
#include "launcher/run/run_observation.hpp"
#include "launcher/run/run_record_writer.hpp"
#include "launcher/train/batch_split.hpp"
#include "launcher/train/plan.hpp"
#include "launcher/watch/rank_threads.hpp"

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
  bool narrow_gpus = false;
  double stall_timeout_s = 600;  // 0: not watched
  double stall_startup_s = 600;  // what the first step may take beyond stall_timeout_s
  bool expect_steps = false;     // --expect-steps
  int64_t profile_steps = 0;     // > 0: --profile
  int64_t profile_warmup = 5;
  std::string profile_out;
  bool profile_join = false;      // --profile-join
  std::string observations;       // --observations DIR, over the plan's store
  bool keep_freed_memory = true;  // --malloc keep (run_env.hpp)
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
  std::vector<int64_t> rank_batches;  // with a plan: every rank's DLH_BATCH
  std::vector<int> rank_parts;        // with a plan on two or more types: every rank's part
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
        "MASTER_PORT (default: a port free on rank 0's machine, found at start below the "
        "ephemeral port range)")
    ("plan", po::value(&o->plan_json), "plan file (JSON, as from dlh-estimate recommend --json) "
        "giving DLH_GLOBAL_BATCH, DLH_BATCH, DLH_LR, DLH_WARMUP_EPOCHS; default: the DLH_PLAN "
        "environment variable the SPANK plugin sets")
    ("no-plan", "ignore DLH_PLAN")
    ("gpu-type", po::value(&o->gpu_type),
        "this rank's GPU type, for a plan on several types (as for train); default: "
        "DLH_GPU_TYPE")
    ("narrow-gpus", "narrow CUDA_VISIBLE_DEVICES to the rank's GPU when it lists several (the "
        "program then uses cuda:0); default: as torchrun, every GPU stays visible and the "
        "program picks cuda:LOCAL_RANK")
    ("stall-timeout", po::value<std::string>()->default_value("10m"),
        "a program that reported a step (DLH_PROGRESS_FD) and then none for this long is "
        "stalled, as is one that did nothing (no CPU time, I/O or wake-ups) for this long "
        "before its first step or without steps: every rank ends with exit code 4 (off: not "
        "watched)")
    ("stall-startup", po::value<std::string>()->default_value("10m"),
        "a program that reports its steps (it wrote on DLH_PROGRESS_FD, its plan is from its "
        "profile, or --expect-steps) and has not reported its first step --stall-timeout plus "
        "this long after its launch is stalled, busy or not")
    ("expect-steps", "the program reports its steps: judge its first step by "
        "--stall-startup even before it has written anything on DLH_PROGRESS_FD")
    ("profile", po::value(&o->profile_steps), "time STEPS steps of the program on one rank "
        "(after --profile-warmup steps), stop it and write a profile for --dlh-auto=profile=FILE")
    ("profile-warmup", po::value(&o->profile_warmup)->default_value(5),
        "steps not timed at the start (at least 1)")
    ("profile-out", po::value(&o->profile_out), "the profile file; a profile there already "
        "gains this run's batch (default: <program name>.profile.json)")
    ("profile-join", po::bool_switch(&o->profile_join), "a batch the profile holds already "
        "gains this run as one more round (its step time the median of the rounds) instead of "
        "being replaced: profile in rounds that take turns with the other batches")
    ("observations", po::value(&o->observations), "observation store (a folder): rank 0 "
        "writes the run's record there when the program ends well, over the plan's store "
        "(docs/reference/observations.md)")
    ("malloc", po::value<std::string>()->default_value("keep"), "keep: the program's glibc "
        "malloc keeps the memory it frees for its next step instead of returning it to the "
        "system and faulting it in again (GLIBC_TUNABLES gains a 1 GiB trim and a 32 MiB mmap "
        "threshold, unless the environment already sets either); system: glibc's defaults");
  // clang-format on
  return d;
}

// Options alone, identically on every rank: no communication.
RunOptions ParseRunOptions(const std::vector<std::string>& args, bool* help, int rank, int size) {
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
  if (vm.count("observations") && o.observations.empty())
    throw UsageError("--observations: needs a folder");
  o.narrow_gpus = vm.count("narrow-gpus") > 0;
  const std::string malloc_mode = vm["malloc"].as<std::string>();
  if (malloc_mode != "keep" && malloc_mode != "system")
    throw UsageError("--malloc: must be keep or system, got '" + malloc_mode + "'");
  o.keep_freed_memory = malloc_mode == "keep";
  const std::string stall = vm["stall-timeout"].as<std::string>();
  o.stall_timeout_s = stall == "off" ? 0 : ParseDuration(stall, "--stall-timeout");
  const std::string startup = vm["stall-startup"].as<std::string>();
  o.stall_startup_s = startup == "0" ? 0 : ParseDuration(startup, "--stall-startup");
  o.expect_steps = vm.count("expect-steps") > 0;
  if (vm.count("profile")) {
    if (o.profile_steps < 1 || o.profile_steps > 1000000)
      throw UsageError("--profile: must be 1 to 1000000 steps, got " +
                       std::to_string(o.profile_steps));
    if (o.profile_warmup < 1 || o.profile_warmup > 1000000)
      throw UsageError("--profile-warmup: must be 1 to 1000000 steps, got " +
                       std::to_string(o.profile_warmup));
    if (o.profile_out.empty()) o.profile_out = DefaultRunName(o.command) + ".profile.json";
    if (size != 1)
      throw UsageError(
          "--profile: times the program on one device: start it as one task "
          "(srun -n 1, mpirun -np 1), not " +
          std::to_string(size));
    if (const fs::path folder = fs::path(o.profile_out).parent_path();
        !folder.empty() && !fs::is_directory(folder))
      throw UsageError("--profile-out: " + o.profile_out + ": the folder " + folder.string() +
                       " does not exist");
  } else if (vm.count("profile-out") || !vm["profile-warmup"].defaulted() || o.profile_join) {
    throw UsageError(std::string(vm.count("profile-out") ? "--profile-out"
                                 : o.profile_join        ? "--profile-join"
                                                         : "--profile-warmup") +
                     ": only with --profile STEPS");
  }
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
  if (!a->plan.present) return;
  // Every rank's batch (DLH_RANK_BATCHES, the run's records) and part; on several GPU types
  // the parts' batches must add up to the global batch.
  int64_t mine[2] = {PlanRankBatch(a->plan, o.plan_origin, a->plan_part, rank, size), a->plan_part};
  std::vector<int64_t> all(2 * size_t(size), 0);
  MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, comm));
  for (size_t r = 0; r < size_t(size); ++r) {
    a->rank_batches.push_back(all[2 * r]);
    a->rank_parts.push_back(int(all[2 * r + 1]));
  }
  if (!PlanSplitsBatch(a->plan, false)) return;
  RunCollectively(comm, [&] {
    SplitOffsets(a->rank_batches, a->rank_parts, a->plan, o.plan_origin, a->plan.global_batch);
  });
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
// watchdog does, launcher/watch/peer_watch.cpp).
// The line saying why goes first, and a moment with it: srun tears the step's output down with
// the step, and a line still on its way to it was lost (make check, 2026-12-07: 2 runs in 11
// of run_torch_test.sh's crash showed the program's last line and not the rank's after it).
[[noreturn]] void AbortEveryRank(int code) {
  std::fflush(nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::thread([code] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::_Exit(code);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return when;
}

// Whether the plan was made from the program's profile, which only step lines give.
bool PlanIsFromProfile(const std::string& plan_json) {
  const nlohmann::json j = nlohmann::json::parse(plan_json, nullptr, false);
  return j.is_object() && j.contains("profile") && j["profile"].is_string() &&
         !j["profile"].get<std::string>().empty();
}

// The line of a stalled program (JudgeProgramStall), on stderr.
void SayStalled(const Followed& f, const ProgramStallRule& rule, const std::string& who, pid_t pid,
                double started_s) {
  const std::string timeout = HumanDuration(rule.timeout_s);
  const double silent_s = f.stall.silent_s;
  if (f.stall.kind == ProgramStall::kIdle) {
    std::fprintf(stderr,
                 "%s: error: the program (pid %ld) reported no step and used no CPU time or I/O "
                 "for %s (from %s after its start; --stall-timeout %s): stalled, ending every "
                 "rank\n",
                 who.c_str(), long(pid), HumanDuration(silent_s).c_str(),
                 HumanDuration(SteadySeconds() - started_s - silent_s).c_str(), timeout.c_str());
  } else if (f.stall.kind == ProgramStall::kNoFirstStep) {
    const char* why = f.heard                                   ? "it wrote on DLH_PROGRESS_FD"
                      : rule.expected == StepsExpected::kOption ? "--expect-steps"
                                                                : "its plan is from its profile";
    std::fprintf(stderr,
                 "%s: error: the program (pid %ld) reported no step in the %s since its launch "
                 "(--stall-timeout %s + --stall-startup %s; it reports steps: %s): stalled, "
                 "ending every rank\n",
                 who.c_str(), long(pid), HumanDuration(silent_s).c_str(), timeout.c_str(),
                 HumanDuration(rule.startup_s).c_str(), why);
  } else {
    std::fprintf(stderr,
                 "%s: error: the program (pid %ld) reported no step for %s (its last, step %lld, "
                 "ended %s ago; --stall-timeout %s): stalled, ending every rank\n",
                 who.c_str(), long(pid), timeout.c_str(), static_cast<long long>(f.log.steps()),
                 HumanDuration(silent_s).c_str(), timeout.c_str());
  }
}

// The profile of this run (one point), added to `earlier` when there is one, written
// atomically to --profile-out.
void WriteProfile(const RunOptions& o, const Agreement& a, const ProgressLog& log,
                  const ProgramProfile* earlier, int threads_offered) {
  const ProfilePoint point = TimeSteps(log, o.profile_warmup, o.profile_steps);
  if (point.batch == 0)
    throw UsageError(
        "--profile: the program's step lines give no sample count: it writes 'step SAMPLES' "
        "(the samples it trained in that step) to DLH_PROGRESS_FD");
  ProgramProfile p = log.described();
  p.program = DefaultRunName(o.command);
  p.command = o.command;
  p.created = UtcNow();
  p.host = MachineHostName();
  p.gpu_type = o.gpu_type;
  if (p.gpu_type.empty() && a.plan.present && a.plan.parts.size() == 1)
    p.gpu_type = a.plan.parts[0].gpu;
  if (p.device.rfind("cuda", 0) == 0) p.cpu_threads = 0;  // a GPU's speed, not the CPU's
  if (p.cpu_threads > 0) p.threads_offered = threads_offered;
  p.points = {point};
  if (earlier) p = MergeProfiles(*earlier, p, o.profile_join);
  WriteFileAtomically(o.profile_out, ProgramProfileToJson(p).dump(2) + "\n");
  std::string batches, joined;
  for (const ProfilePoint& q : p.points) {
    batches += (batches.empty() ? "" : ", ") + std::to_string(q.batch);
    if (q.batch == point.batch && q.rounds.size() > 1) {
      char text[128];
      std::snprintf(text, sizeof text, "; batch %lld in %zu rounds, %.4g s per step (their median)",
                    static_cast<long long>(q.batch), q.rounds.size(), q.step_s);
      joined = text;
    }
  }
  std::fprintf(stderr,
               "dlh-launch: run: profile: %d steps of %lld samples, %.4g s per step (mean; "
               "%.4g to %.4g) on %s; %s now holds %zu batch%s (%s)%s; plan with "
               "--dlh-auto=...,profile=%s\n",
               point.steps, static_cast<long long>(point.batch), point.step_s, point.step_s_min,
               point.step_s_max, p.gpu_type.empty() ? "an unnamed GPU type" : p.gpu_type.c_str(),
               o.profile_out.c_str(), p.points.size(), p.points.size() == 1 ? "" : "es",
               batches.c_str(), joined.c_str(), o.profile_out.c_str());
}

// What the run's records say of it (run_records.hpp).
RunContext MakeRunContext(const RunOptions& o, const Agreement& a, int size, double launch_unix) {
  RunContext c;
  c.program = DefaultRunName(o.command);
  c.command = o.command;
  c.run_id = a.run_id;
  c.world_size = size;
  c.hosts = a.node_names;
  std::sort(c.hosts.begin(), c.hosts.end());
  c.hosts.erase(std::unique(c.hosts.begin(), c.hosts.end()), c.hosts.end());
  c.rank_batches = a.rank_batches;
  c.global_batch = a.plan.present ? a.plan.global_batch : 0;
  c.total_steps = a.plan.predicted_steps;
  c.checkpoint = a.checkpoint;
  if (a.plan.present) c.plan = nlohmann::json::parse(o.plan_json, nullptr, false);
  c.launch_unix = launch_unix;
  c.file_bytes = [](const std::string& path) -> int64_t {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? int64_t(st.st_size) : -1;
  };
  return c;
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
  const double started_s = SteadySeconds();
  const double unix_offset =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
      started_s;
  bool help = false;
  RunOptions o = ParseRunOptions(args, &help, rank, size);
  if (help) return kExitOk;
  // A profile adds to the file there, which must be one before the program runs for minutes.
  ProgramProfile earlier;
  const bool add_to_earlier = o.profile_steps > 0 && fs::exists(o.profile_out);
  if (add_to_earlier) {
    earlier = LoadProgramProfile(o.profile_out);
    ProgramProfile this_run;  // the mismatches MergeProfiles refuses, before a run is wasted
    this_run.gpu_type = o.gpu_type;
    this_run.points = earlier.points;
    MergeProfiles(earlier, this_run);
  }
  // A profile run starts afresh and leaves no checkpoint that a real run would resume from.
  std::optional<TemporaryFolder> profile_dir;
  if (o.profile_steps > 0) {
    profile_dir.emplace("dlh-profile-");
    o.run_dir = profile_dir->path();
  }

  mpi::Comm comm(MPI_COMM_WORLD);
  Agreement a;
  AgreeOnRanks(o, comm.get(), rank, size, &a);
  AgreeOnRun(o, comm.get(), rank, &a);
  const RankThreads rank_threads = DefaultRankThreads(comm.get());  // collective
  int threads_offered = 0;
  ProgressPipe progress;
  std::vector<std::string> env;
  // The run's records and energy; none for a profile, whose run folder is a temporary one.
  std::optional<ProgramEnergy> energy;
  std::optional<RunRecordWriter> records;
  RunCollectively(comm.get(), [&] {
    if (o.profile_steps == 0) {
      std::string gpu_why;
      const std::string gpu = ProgramGpuBusId(a.binding.device, a.topo.local_rank, &gpu_why);
      energy.emplace(gpu, gpu_why, a.topo.local_rank == 0);
      records.emplace(MakeRunContext(o, a, size, started_s + unix_offset), rank, a.run_dir,
                      unix_offset, &*energy);
    }
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
    in.rank_batches = a.rank_batches;
    in.binding = a.binding;
    in.bind_gpu = o.narrow_gpus;
    in.progress_fd = progress.write_fd();
    in.keep_freed_memory = o.keep_freed_memory;
    in.omp_threads = rank_threads.threads;
    threads_offered = OfferedThreads(in);
    // A data set staged to each node's own folder (DLH_STAGE_DIR/%n, train.sbatch).
    if (const char* data = std::getenv("DLH_DATA"); data && *data)
      in.data = ExpandStageDir(data, CurrentStageNames(mpi::Hostname()), "DLH_DATA");
    env = BuildRunEnv(in, o.plan_origin);
  });

  const Spawned child = SpawnChild(o.command, env, progress.write_fd());
  const double launched_s = SteadySeconds();
  progress.CloseWriteEnd();  // the program's now: end of file once it (and its children) close it
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
  const std::string who =
      "dlh-launch [rank " + std::to_string(rank) + "/" + std::to_string(size) + " " + host + "]";
  if (rank == 0) {
    const std::string resume =
        a.checkpoint.empty() ? "no checkpoint" : "DLH_CHECKPOINT=" + a.checkpoint;
    // The tunables --malloc keep added, so that a user who sees the program's memory held
    // knows why.
    const std::string key = "GLIBC_TUNABLES=";
    const char* own = std::getenv("GLIBC_TUNABLES");
    std::string tunables;
    for (const std::string& e : env)
      if (e.rfind(key, 0) == 0 && (!own || e.substr(key.size()) != own)) tunables = ", " + e;
    // Likewise the thread count it offered where the environment had none (rank 0's).
    if (!std::getenv("OMP_NUM_THREADS") && threads_offered > 0)
      tunables += ", OMP_NUM_THREADS=" + std::to_string(threads_offered);
    std::fprintf(stderr,
                 "dlh-launch: run: %s on %d ranks (%s), MASTER_ADDR=%s MASTER_PORT=%d, "
                 "TORCHELASTIC_RUN_ID=%s, DLH_RUN_DIR=%s, %s%s%s\n",
                 o.command[0].c_str(), size, DescribeTopology(a.topo).c_str(),
                 a.master_addr.c_str(), a.master_port, a.run_id.c_str(), a.run_dir.c_str(),
                 resume.c_str(), tunables.c_str(),
                 o.profile_steps > 0 ? (", profiling " + std::to_string(o.profile_steps) +
                                        " steps after " + std::to_string(o.profile_warmup))
                                           .c_str()
                                     : "");
  }

  const int64_t profile_end = o.profile_steps > 0 ? o.profile_warmup + o.profile_steps : 0;
  ProgramStallRule rule;
  rule.timeout_s = o.stall_timeout_s;
  rule.startup_s = o.stall_startup_s;
  rule.expected = o.expect_steps                   ? StepsExpected::kOption
                  : PlanIsFromProfile(o.plan_json) ? StepsExpected::kProfile
                                                   : StepsExpected::kNo;
  const Followed f = FollowProgram(child.pid, &progress, rule, launched_s, profile_end, who,
                                   [&](ProgressLog* log) {
                                     if (energy) energy->Poll();
                                     if (records) records->Follow(log);
                                   });
  if (f.stall.kind != ProgramStall::kNone) {
    SayStalled(f, rule, who, child.pid, started_s);
    KillChild(child.pid);
    AbortEveryRank(kExitStalled);
  }
  const int status = f.status;
  if (o.profile_steps > 0) {
    // One rank, nothing to abort: a failure is one line and the exit code, as at the edge.
    try {
      if (f.log.steps() < profile_end)
        throw Error("run: --profile " + std::to_string(o.profile_steps) + ": the program " +
                    DescribeEnd(status) + " after " + std::to_string(f.log.steps()) + " steps, " +
                    std::to_string(profile_end) + " needed (--profile-warmup " +
                    std::to_string(o.profile_warmup) +
                    " + the steps timed); it reports each step with a 'step SAMPLES' line to "
                    "DLH_PROGRESS_FD (docs/reference/run.md, \"The progress channel\")");
      WriteProfile(o, a, f.log, add_to_earlier ? &earlier : nullptr, threads_offered);
    } catch (const UsageError& e) {
      std::fprintf(stderr, "dlh-launch: %s\n", e.what());
      return kExitBadInput;
    } catch (const Error& e) {
      std::fprintf(stderr, "dlh-launch: error: %s\n", e.what());
      return kExitFailure;
    }
    return kExitOk;
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
  // A stop this rank was not sent, which the program says it obeyed: the ranks agreed on a
  // signal another rank got (dlh.should_stop(agree=True)). Taken as this rank's own, or its
  // exit after SIGTERM (143) read as a crash and ended every rank, and a SIGUSR1 stop was
  // recorded as a finished run (2026-12-07).
  if (stop == 0) stop = f.log.stop_signal();
  const bool obeyed_stop =
      stop != 0 && (WIFEXITED(status) || (WIFSIGNALED(status) && WTERMSIG(status) == stop));
  const bool success = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!success && !obeyed_stop) {
    std::fprintf(stderr, "%s: error: the program (pid %ld) %s: ending every rank\n", who.c_str(),
                 long(child.pid), DescribeEnd(status).c_str());
    AbortEveryRank(ExitCodeOfEnd(status));
  }
  WaitForEveryRank(comm.get());
  double energy_j = -1;  // rank 0: the run's, when measured
  if (records) {
    RunSummaryInputs in;
    in.finished = success;
    in.stop_signal = obeyed_stop ? stop : 0;
    in.lr = a.plan.present ? a.plan.lr : 0;
    for (size_t r = 0; PlanSplitsBatch(a.plan, false) && r < a.rank_parts.size(); ++r)
      in.rank_types.push_back(a.plan.parts[size_t(a.rank_parts[r])].gpu);
    in.plan_origin = o.plan_origin;
    in.predicted_total_s = a.plan.predicted_total_s;
    in.predicted_step_s = a.plan.predicted_step_s;
    in.predicted_steps = a.plan.predicted_steps;
    in.time_limit_s = a.plan.time_limit_s;
    const nlohmann::json measured = records->Finish(comm.get(), in, f.log);
    if (measured.is_object() && measured.value("measured", false))
      energy_j = measured.value("joules_total", -1.0);
  }
  if (rank == 0 && success) {
    RunObservationInputs in;
    in.store = !o.observations.empty() ? o.observations : a.plan.observations_store;
    in.command = o.command;
    in.plan = &a.plan;
    in.gpu_type = o.gpu_type;
    in.log = &f.log;
    in.started_s = started_s;
    in.ended_s = SteadySeconds();
    in.energy_j = energy_j;
    in.ranks = size;
    in.ranks_per_node = a.topo.local_size;
    in.hosts = a.node_names;
    std::sort(in.hosts.begin(), in.hosts.end());
    in.hosts.erase(std::unique(in.hosts.begin(), in.hosts.end()), in.hosts.end());
    WriteRunObservation(in);
  }
  return ExitCodeOfEnd(status);
}

}  // namespace dlh
