// DLH — the guard process of an MPI rank (see rank_guard.hpp).
#include "launcher/watch/rank_guard.hpp"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/exit_codes.hpp"

namespace dlh {
namespace {

// Shared between the rank (writer) and its guard (reader, only once the rank is dead, so
// there is no race but a rank dying mid-write: `writing` says the path may be torn).
struct Shared {
  std::atomic<int64_t> step{-1};
  // What the rank was doing before its first step: a string literal, whose address is the
  // same in the guard (a fork of the same image).
  std::atomic<const char*> phase{nullptr};
  std::atomic<int> writing{0};
  char checkpoint[4096] = {0};
  std::atomic<int> report_set{0};  // report_path and node are written once, before this
  char report_path[4096] = {0};
  char node[256] = {0};
};

Shared* g_shared = nullptr;
pid_t g_rank_pid = 0;

void Forward(int signal) {
  if (g_rank_pid > 0) kill(g_rank_pid, signal);
}

int EnvInt(const char* const names[], int fallback) {
  for (int i = 0; names[i]; ++i)
    if (const char* v = std::getenv(names[i]); v && *v) return std::atoi(v);
  return fallback;
}

std::string HostName() {
  if (const char* node = std::getenv("SLURMD_NODENAME"); node && *node) return node;
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  return name;
}

const char* SignalName(int signal) {
  switch (signal) {
    case SIGKILL:
      return "SIGKILL";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    default:
      return nullptr;
  }
}

[[noreturn]] void Guard(pid_t rank_pid) {
  g_rank_pid = rank_pid;
  struct sigaction sa {};
  sa.sa_handler = Forward;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP}) sigaction(s, &sa, nullptr);
  int status = 0;
  while (waitpid(rank_pid, &status, 0) < 0) {
    if (errno != EINTR) std::_Exit(kExitFailure);
  }
  if (WIFEXITED(status)) std::_Exit(WEXITSTATUS(status));
  const int signal = WTERMSIG(status);
  // A stop the launcher or the user asked for is no news; a kill or a crash is.
  if (signal != SIGTERM && signal != SIGINT && signal != SIGHUP) {
    const int64_t step = g_shared->step.load();
    const char* phase = g_shared->phase.load();
    std::string checkpoint;
    if (!g_shared->writing.load())
      checkpoint.assign(g_shared->checkpoint,
                        strnlen(g_shared->checkpoint, sizeof g_shared->checkpoint));
    static const char* const kRank[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID",
                                        nullptr};
    static const char* const kSize[] = {"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", nullptr};
    const std::string line =
        RankDeathLine(EnvInt(kRank, 0), EnvInt(kSize, 1), HostName(), long(rank_pid), signal,
                      WCOREDUMP(status), step, checkpoint, phase ? phase : "");
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    if (g_shared->report_set.load()) {
      const std::string node(g_shared->node, strnlen(g_shared->node, sizeof g_shared->node));
      const char* name = SignalName(signal);
      const nlohmann::json report = {{"rank", EnvInt(kRank, 0)},
                                     {"signal", name ? name : std::to_string(signal)},
                                     {"culprit_nodes", {node}}};
      try {
        WriteFileAtomically(
            std::string(g_shared->report_path,
                        strnlen(g_shared->report_path, sizeof g_shared->report_path)),
            report.dump() + "\n");
      } catch (const std::exception&) {
        // the line above said it; a requeue then keeps the node
      }
    }
  }
  std::_Exit(kExitSignalBase + signal);
}

}  // namespace

std::string RankDeathLine(int rank, int size, const std::string& host, long pid, int signal,
                          bool core_dumped, int64_t step, const std::string& checkpoint,
                          const std::string& phase) {
  const char* name = SignalName(signal);
  const std::string sig = name ? name : "signal " + std::to_string(signal);
  const bool crash = signal == SIGSEGV || signal == SIGBUS || signal == SIGFPE ||
                     signal == SIGILL || signal == SIGABRT;
  std::string line = "dlh-launch [rank " + std::to_string(rank) + "/" + std::to_string(size) + " " +
                     host + "]: error: rank " + std::to_string(rank) + " (pid " +
                     std::to_string(pid) + ") " + (crash ? "crashed with " : "was killed by ") +
                     sig + (core_dumped ? " (core dumped)" : "");
  if (step >= 0)
    line += " at step " + std::to_string(step);
  else
    line += " before training started" + (phase.empty() ? "" : " (" + phase + ")");
  if (signal == SIGKILL) line += " (by hand, or by the kernel's out-of-memory killer)";
  line += checkpoint.empty() ? "; no checkpoint yet" : "; last good checkpoint " + checkpoint;
  return line + "; its peers cannot go on without it: the job ends";
}

void GuardRank() {
  if (g_shared) return;
  const char* off = std::getenv("DLH_RANK_GUARD");
  if (off && std::strcmp(off, "0") == 0) return;
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMIX_RANK")) return;
  void* block =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) return;  // no guard: the rank runs as before
  g_shared = new (block) Shared;
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t guard = getpid();
  const pid_t child = fork();
  if (child < 0) return;  // no guard, as above
  if (child > 0) Guard(child);
  // The rank: it must not outlive its guard (mpirun and srun signal and kill the guard).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != guard) std::_Exit(kExitFailure);  // the guard died before prctl
}

void SetGuardedStep(int64_t step) {
  if (g_shared) g_shared->step.store(step, std::memory_order_relaxed);
}

void SetGuardedPhase(const char* phase) {
  if (g_shared) g_shared->phase.store(phase, std::memory_order_relaxed);
}

void SetGuardedCheckpoint(const std::string& path) {
  if (!g_shared) return;
  g_shared->writing.store(1);
  const size_t n = std::min(path.size(), sizeof g_shared->checkpoint - 1);
  std::memcpy(g_shared->checkpoint, path.data(), n);
  g_shared->checkpoint[n] = '\0';
  g_shared->writing.store(0);
}

void SetGuardedReport(const std::string& path, const std::string& node) {
  if (!g_shared || g_shared->report_set.load() || path.size() >= sizeof g_shared->report_path)
    return;
  std::memcpy(g_shared->report_path, path.c_str(), path.size() + 1);
  const size_t n = std::min(node.size(), sizeof g_shared->node - 1);
  std::memcpy(g_shared->node, node.data(), n);
  g_shared->node[n] = '\0';
  g_shared->report_set.store(1);
}

}  // namespace dlh
