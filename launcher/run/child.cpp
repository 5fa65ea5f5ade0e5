// DLH — starting and following the program of `dlh-launch run` (see child.hpp).
#include "launcher/run/child.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.hpp"

namespace dlh {
namespace {

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP};

// Shared with the signal handler, which may run on any thread of the rank (the MPI library
// has its own): lock-free atomics only.
std::atomic<pid_t> g_child{0};           // the program while it runs; 0 before and after
std::atomic<int> g_stop{0};              // the first SIGTERM, SIGINT or SIGHUP received
std::atomic<unsigned> g_pending{0};      // bit s: signal s arrived while no program ran
std::atomic<unsigned> g_received{0};     // bit s: signal s arrived, not taken yet
struct sigaction g_previous[NSIG] = {};  // the rank's dispositions before ours
bool g_installed = false;

static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free &&
                  std::atomic<unsigned>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

extern "C" void ForwardSignal(int signal) {
  const int saved_errno = errno;
  if (signal == SIGTERM || signal == SIGINT || signal == SIGHUP) {
    int none = 0;
    g_stop.compare_exchange_strong(none, signal);
  }
  g_received.fetch_or(1u << signal);
  const pid_t child = g_child.load();
  if (child > 0)
    kill(child, signal);
  else
    g_pending.fetch_or(1u << signal);
  errno = saved_errno;
}

// Signals that arrived between the handlers' start and the program's pid being known.
void ForwardPending() {
  const unsigned pending = g_pending.exchange(0);
  const pid_t child = g_child.load();
  if (pending == 0 || child <= 0) return;
  for (int s : kForwarded)
    if (pending & (1u << s)) kill(child, s);
}

void InstallForwarding() {
  if (g_installed) return;
  struct sigaction sa {};
  sa.sa_handler = ForwardSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : kForwarded) sigaction(s, &sa, &g_previous[s]);
  g_installed = true;
}

// Between fork and exec: async-signal-safe calls only, on data prepared before the fork.
[[noreturn]] void ExecChild(pid_t rank, int error_fd, int inherit_fd, const sigset_t& mask,
                            const std::vector<const char*>& candidates, char* const* argv,
                            char** sh_argv, char* const* envp) {
  // Dies with its rank; if the rank died before this line, the parent is already someone else.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != rank) _exit(127);
  // The program gets the dispositions the rank was given (an ignored SIGHUP under nohup stays
  // ignored), not the rank's forwarding handlers, and the rank's signal mask.
  for (int s : kForwarded) {
    struct sigaction sa {};
    sa.sa_handler = g_previous[s].sa_handler == SIG_IGN ? SIG_IGN : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(s, &sa, nullptr);
  }
  // Descriptors the MPI library opened (its PMIx connection, shared-memory segments) are not
  // the program's: they close at exec. stdin, stdout and stderr stay. Kernels older than
  // 5.11 refuse the flag; then they are inherited, which is harmless.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (inherit_fd >= 0) fcntl(inherit_fd, F_SETFD, 0);  // the one the program is given
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  // execvp's search, written out because execvp may allocate: every candidate in turn; a
  // file without #! runs under /bin/sh; EACCES from any candidate is the answer if none runs.
  int error = ENOENT;
  bool denied = false;
  for (const char* path : candidates) {
    execve(path, argv, envp);
    int e = errno;
    if (e == ENOEXEC) {
      sh_argv[1] = const_cast<char*>(path);
      execve("/bin/sh", sh_argv, envp);
      e = errno;
    }
    error = e;
    if (e == EACCES) {
      denied = true;
    } else if (e != ENOENT && e != ENOTDIR && e != ESTALE && e != ENODEV && e != ETIMEDOUT) {
      denied = false;
      break;  // a real failure (ENOMEM, E2BIG, ELOOP, ...): as execvp, stop searching
    }
  }
  if (denied) error = EACCES;
  ssize_t ignored = write(error_fd, &error, sizeof error);
  (void)ignored;
  _exit(127);
}

}  // namespace

std::vector<std::string> ExecCandidates(const std::string& file, const char* path) {
  if (file.empty()) return {};
  if (file.find('/') != std::string::npos) return {file};
  const std::string dirs = path ? path : "/bin:/usr/bin";
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t end = dirs.find(':', start);
    const std::string dir = dirs.substr(start, end == std::string::npos ? end : end - start);
    out.push_back(dir.empty() ? file : dir + "/" + file);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

Spawned SpawnChild(const std::vector<std::string>& command, const std::vector<std::string>& env,
                   int inherit_fd) {
  if (command.empty()) throw Error("run: no program to start");
  // Everything the child touches, built while malloc may still be called.
  std::vector<char*> argv, sh_argv, envp;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  sh_argv.push_back(const_cast<char*>("/bin/sh"));
  sh_argv.push_back(nullptr);  // the script's path, filled in by the child
  for (size_t i = 1; i < argv.size(); ++i) sh_argv.push_back(argv[i]);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::vector<std::string> paths = ExecCandidates(command[0], std::getenv("PATH"));
  std::vector<const char*> candidates;
  for (const std::string& p : paths) candidates.push_back(p.c_str());

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("run: pipe: ") + std::strerror(errno));
  // Blocked across the fork: the child must not run the rank's handler, and the rank learns
  // the pid before any signal is forwarded.
  sigset_t block, mask;
  sigemptyset(&block);
  for (int s : kForwarded) sigaddset(&block, s);
  pthread_sigmask(SIG_BLOCK, &block, &mask);
  InstallForwarding();
  const pid_t rank = getpid();
  const pid_t pid = fork();
  if (pid == 0)
    ExecChild(rank, fds[1], inherit_fd, mask, candidates, argv.data(), sh_argv.data(), envp.data());
  const int fork_errno = errno;
  if (pid > 0) g_child.store(pid);
  pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    throw Error(std::string("run: fork: ") + std::strerror(fork_errno));
  }
  ForwardPending();
  int error = 0;
  ssize_t n = 0;
  do {
    n = read(fds[0], &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  close(fds[0]);
  Spawned s;
  if (n != ssize_t(sizeof error)) {  // closed empty by a successful exec
    s.pid = pid;
    return s;
  }
  g_child.store(0);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  s.exec_error = error;
  return s;
}

bool WaitChild(pid_t pid, int wait_ms, int* wait_status) {
  for (bool slept = false;; slept = true) {
    ForwardPending();
    // Seen without reaping first: the pid cannot be reused while the handler may still
    // forward to it.
    siginfo_t info{};
    if (waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) < 0) {
      if (errno == EINTR) continue;
      throw Error("run: lost track of the program (pid " + std::to_string(pid) +
                  "): " + std::strerror(errno));
    }
    if (info.si_pid == pid) {
      g_child.store(0);
      while (waitpid(pid, wait_status, 0) < 0) {
        if (errno != EINTR)
          throw Error("run: lost track of the program (pid " + std::to_string(pid) +
                      "): " + std::strerror(errno));
      }
      return true;
    }
    if (slept) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  }
}

void KillChild(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child.store(0);
}

int StopSignalReceived() { return g_stop.load(); }

std::vector<int> TakeReceivedSignals() {
  const unsigned received = g_received.exchange(0);
  std::vector<int> out;
  for (int s : kForwarded)
    if (received & (1u << s)) out.push_back(s);
  return out;
}

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

std::string DescribeEnd(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status))
    return "was killed by " + SignalName(WTERMSIG(wait_status)) +
           (WCOREDUMP(wait_status) ? " (core dumped)" : "");
  return "ended with wait status " + std::to_string(wait_status);
}

int ExitCodeOfEnd(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace dlh
