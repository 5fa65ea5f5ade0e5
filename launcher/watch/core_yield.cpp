// DLH — a rank waiting in MPI yields its core on an oversubscribed node (see core_yield.hpp).
#include "launcher/watch/core_yield.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "launcher/probe/host_probe.hpp"
#include "launcher/train/plan.hpp"

namespace dlh {
namespace {

// A whole count in `text`, 0 or more; -1 for anything else (nullptr, empty, trailing
// characters, negative, absurdly large).
int CountIn(const char* text) {
  if (!text || !*text) return -1;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  return (*end == '\0' && v >= 0 && v < (1 << 20)) ? int(v) : -1;
}

// A whole positive count in `text`; 0 for anything else.
int PositiveCount(const char* text) { return std::max(0, CountIn(text)); }

int OnlineCpus() { return std::max(1, int(std::thread::hardware_concurrency())); }

}  // namespace

int TasksOnNode(const std::string& tasks_per_node, int node) {
  if (node < 0) return 0;
  size_t at = 0;
  while (at < tasks_per_node.size()) {
    size_t end = tasks_per_node.find(',', at);
    if (end == std::string::npos) end = tasks_per_node.size();
    const std::string item = tasks_per_node.substr(at, end - at);
    // COUNT or COUNT(xREPEAT)
    const size_t paren = item.find("(x");
    const int count = PositiveCount(item.substr(0, paren).c_str());
    int repeat = 1;
    if (paren != std::string::npos) {
      if (item.back() != ')') return 0;
      repeat = PositiveCount(item.substr(paren + 2, item.size() - paren - 3).c_str());
    }
    if (count == 0 || repeat == 0) return 0;
    if (node < repeat) return count;
    node -= repeat;
    at = end + 1;
  }
  return 0;
}

int LocalRanksFromEnvironment() {
  if (const int n = PositiveCount(std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))) return n;
  const char* per_node = std::getenv("SLURM_STEP_TASKS_PER_NODE");
  const int node = CountIn(std::getenv("SLURM_NODEID"));
  if (per_node && node >= 0)
    if (const int n = TasksOnNode(per_node, node)) return n;
  return 1;
}

NodeLoad NodeLoadOf(int local_ranks, int threads, int cpus, int online, RankWork work) {
  NodeLoad load;
  load.local_ranks = std::max(1, local_ranks);
  load.cpus = std::max(1, cpus);
  const bool narrower = load.cpus < online;
  // Train's rule needs the node's ranks able to hold such masks apart (core_yield.hpp).
  const bool own_mask = work == RankWork::kTrain
                            ? narrower && int64_t(load.cpus) * load.local_ranks <= int64_t(online)
                            : narrower;
  load.sharing_ranks = own_mask ? 1 : load.local_ranks;
  // Beside a program, the node's cores over its ranks, not train's own default: under `run`
  // the rank's core also runs the user's program, and a rank bound to 1 CPU must yield it
  // (2026-12-06: counted as 1 thread there, the launcher's polling took the core from a
  // program of 2 ms in every 5, which its stall watch then judged idle).
  const int by_default =
      work == RankWork::kTrain ? load.cpus / load.sharing_ranks : online / load.local_ranks;
  load.threads = threads > 0 ? threads : std::max(1, by_default);
  return load;
}

int SharedHostCoresFromArguments(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    // The trainer reads a plan given here after MPI_Init; a bad one is its to report.
    if (a == "--no-plan" || a == "--plan" || a.rfind("--plan=", 0) == 0) return 0;
  }
  const char* plan = std::getenv("DLH_PLAN");
  if (!plan) plan = std::getenv("SLURM_SPANK_DLH_PLAN");
  return plan ? SharedHostCoresOfPlan(plan) : 0;
}

int JobRanksFromEnvironment(int fallback) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"})
    if (const int n = PositiveCount(std::getenv(name))) return n;
  return fallback;
}

NodeLoad NodeLoadFromArguments(int argc, char** argv) {
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;  // the user's program's own arguments (dlh-launch run)
    if (a == "--threads" && i + 1 < argc) threads = PositiveCount(argv[i + 1]);
    if (a.rfind("--threads=", 0) == 0) threads = PositiveCount(a.c_str() + 10);
  }
  if (threads == 0) threads = PositiveCount(std::getenv("OPENBLAS_NUM_THREADS"));
  const int local_ranks = LocalRanksFromEnvironment();
  const RankWork work =
      argc > 1 && std::string(argv[1]) == "train" ? RankWork::kTrain : RankWork::kBesideProgram;
  NodeLoad load = NodeLoadOf(local_ranks, threads, AffinityCores(), OnlineCpus(), work);
  if (const int shared = SharedHostCoresFromArguments(argc, argv)) {
    load.sharing_ranks = std::max(load.local_ranks, JobRanksFromEnvironment(local_ranks));
    // The host's cores, not this rank's mask: a rank bound to one core has the others'
    // ranks on the rest.
    load.cpus = std::min(OnlineCpus(), shared);
    // The trainer's rule on such a plan (plan.hpp, ApplyPlannedThreads): the machine's cores
    // over the job's ranks.
    if (threads == 0) load.threads = ThreadsOnSharedHost(shared, load.sharing_ranks);
  }
  return load;
}

std::string YieldCoresWhenOversubscribed(int argc, char** argv) {
  if (std::getenv("OMPI_MCA_mpi_yield_when_idle")) return "";  // the user's choice, either way
  const NodeLoad load = NodeLoadFromArguments(argc, argv);
  if (!load.oversubscribed()) return "";
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
  char line[200];
  std::snprintf(line, sizeof line,
                "%d rank(s) x %d thread(s) on %d CPU(s): a rank waiting in MPI yields its core "
                "(OMPI_MCA_mpi_yield_when_idle=1)",
                load.sharing_ranks, load.threads, load.cpus);
  return line;
}

}  // namespace dlh
