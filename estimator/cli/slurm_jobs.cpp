// DLH — one short exclusive Slurm job per GPU type, watched to its end (see slurm_jobs.hpp).
#include "estimator/cli/slurm_jobs.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/duration.hpp"
#include "common/error.hpp"
#include "estimator/cluster/cluster_from_slurm.hpp"

extern char** environ;

namespace fs = std::filesystem;

namespace dlh {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kPollS = 2;  // between two looks at the jobs
constexpr size_t kMaxOutputBytes = 16u << 20;
constexpr int kLogTailLines = 3;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

std::string FirstLine(const std::string& text) {
  size_t a = text.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  size_t b = text.find('\n', a);
  std::string line = text.substr(a, b == std::string::npos ? std::string::npos : b - a);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

// ---------------------------------------------------------------- Slurm's commands

// The environment of every Slurm command run here, and so of the calibration jobs (sbatch
// exports it): the caller's, less the variables that would change a submission or the
// output parsed here: SBATCH_* (partition, time, ...), the SLURM_* of an enclosing job or of
// the plugin (SLURM_SPANK__SLURM_SPANK_OPTION_dlh_dlh_auto would plan the job with
// --dlh-auto), SINFO_*/SQUEUE_*/SCONTROL_* formats, and DLH_*. SLURM_CONF names the cluster
// and stays.
std::vector<std::string> SlurmEnvironment() {
  static const char* const kDropped[] = {"SLURM_", "SBATCH_",   "SALLOC_", "SRUN_",
                                         "SINFO_", "SCONTROL_", "SQUEUE_", "DLH_"};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    bool drop = false;
    for (const char* prefix : kDropped) drop = drop || var.rfind(prefix, 0) == 0;
    if (!drop || var.rfind("SLURM_CONF=", 0) == 0) env.push_back(var);
  }
  return env;
}

// Runs argv[0] (found in PATH) with `env`, stdin from /dev/null, and collects its stdout
// and stderr; killed after timeout_s. No shell is involved, so no word needs quoting.
ProgramResult RunProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         double timeout_s) {
  ProgramResult r;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw Error("pipe: " + std::string(std::strerror(errno)));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    close(out_pipe[0]), close(out_pipe[1]);
    throw Error("pipe: " + std::string(std::strerror(e)));
  }
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]), close(err_pipe[1]);
  if (spawned != 0) {
    close(out_pipe[0]), close(err_pipe[0]);
    r.failure = spawned == ENOENT ? "not found" : std::strerror(spawned);
    return r;
  }
  const Clock::time_point t0 = Clock::now();
  bool killed = false;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    const double left = timeout_s - Since(t0);
    if (left <= 0 && !killed) {
      kill(pid, SIGKILL);
      killed = true;
    }
    const int n = poll(fds, 2, killed ? 1000 : int(left * 1000) + 1);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[8192];
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        if (sinks[i]->size() < kMaxOutputBytes) sinks[i]->append(buf, size_t(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
    if (killed && n == 0) break;  // a grandchild holds the pipe open: give up on it
  }
  for (pollfd& f : fds)
    if (f.fd >= 0) close(f.fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (killed)
    r.failure = "no answer in " + std::to_string(int(timeout_s)) + " s";
  else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    r.failure = "exit status " + std::to_string(WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    r.failure = "killed by signal " + std::to_string(WTERMSIG(status));
  return r;
}

// "sbatch failed (exit status 1): sbatch: error: Batch job submission failed: ..."
std::string Failed(const std::string& what, const ProgramResult& r) {
  std::string first = FirstLine(r.err);
  if (first.empty()) first = FirstLine(r.out);
  return what + " failed (" + r.failure + ")" + (first.empty() ? "" : ": " + first);
}

// ---------------------------------------------------------------- interruption

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void OnInterrupt(int sig) { g_interrupted = sig; }

constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

}  // namespace

struct InterruptGuard::Saved {
  struct sigaction old[3];
};

InterruptGuard::InterruptGuard() : saved_(new Saved) {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &saved_->old[i]);
}

InterruptGuard::~InterruptGuard() {
  for (size_t i = 0; i < 3; ++i) sigaction(kSignals[i], &saved_->old[i], nullptr);
  delete saved_;
}

int JobsInterrupted() { return int(g_interrupted); }

// ---------------------------------------------------------------- one type's job

FileStamp Stamp(const std::string& path) {
  FileStamp s;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) s = {true, st.st_ino, st.st_mtim};
  return s;
}

namespace {

// The last `n` non-empty lines of `path` (the job's output), at most 200 characters each.
std::vector<std::string> LastLines(const std::string& path, int n) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> lines;
  if (!in) return lines;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - 64 * 1024));
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    // A progress bar's carriage returns: the last state is what the user would have seen.
    if (size_t cr = line.rfind('\r'); cr != std::string::npos) line = line.substr(cr + 1);
    lines.push_back(line.substr(0, 200));
  }
  if (lines.size() > size_t(n)) lines.erase(lines.begin(), lines.end() - n);
  return lines;
}

std::string JobName(const TypeJob& j) { return "job " + std::to_string(j.id); }

// A job's state from scontrol while slurmctld remembers it (MinJobAge after its end), else
// from sacct where accounting is kept; state "" when neither knows it any more.
SlurmJobState QueryJob(const TypeJob& j, const std::vector<std::string>& env,
                       std::string* problem) {
  const std::string id = std::to_string(j.id);
  ProgramResult r = RunProgram({"scontrol", "show", "job", "-o", id}, env, kSlurmCommandTimeoutS);
  if (r.failure.empty()) return ParseScontrolJob(r.out);
  if ((r.err + r.out).find("Invalid job id") == std::string::npos) {
    *problem = Failed("scontrol show job " + id, r);
    return {};
  }
  r = RunProgram({"sacct", "-n", "-P", "-X", "-j", id, "-o", "State,ExitCode,NodeList,Elapsed"},
                 env, kSlurmCommandTimeoutS);
  SlurmJobState s;
  s.finished = true;  // forgotten by slurmctld: it has ended
  if (!r.failure.empty()) return s;
  std::vector<std::string> f;
  std::stringstream ss(FirstLine(r.out));
  for (std::string part; std::getline(ss, part, '|');) f.push_back(part);
  if (f.size() < 4) return s;
  // The same fields as scontrol's, so that one parser reads both.
  SlurmJobState a =
      ParseScontrolJob("JobState=" + f[0].substr(0, f[0].find(' ')) + " ExitCode=" + f[1] +
                       " NodeList=" + f[2] + " RunTime=" + f[3]);
  a.finished = true;
  return a;
}

// Judges a job that has ended: its calibration must be new and load.
void Conclude(TypeJob& j, const SlurmJobState& s, const JobKind& kind) {
  j.done = true;
  const bool exit_ok = s.exit_status <= 0 && s.signal == 0;
  if (s.state.empty() || (s.state == "COMPLETED" && exit_ok)) {
    const std::string ended = s.state.empty() ? JobName(j) + " ended (Slurm no longer knows how)"
                                              : JobName(j) + " COMPLETED (exit code 0)";
    const FileStamp now = Stamp(j.out);
    if (!now.exists) {
      j.why = ended + " but wrote no " + j.shown;
    } else if (now == j.before) {
      j.why = ended + " but did not write " + j.shown + " (it holds an older " + kind.noun + ")";
    } else {
      try {
        kind.load(j.out);
        j.ok = true;
      } catch (const Error& e) {
        j.why = ended + " but its file is not a " + kind.noun + ": " + e.what();
      }
    }
  } else {
    j.why = JobName(j) + " " + s.state;
    if (s.exit_status > 0) j.why += ", exit code " + std::to_string(s.exit_status);
    if (s.signal > 0) j.why += ", signal " + std::to_string(s.signal);
    if (!s.reason.empty()) j.why += " (" + s.reason + ")";
  }
  if (!j.ok) j.tail = LastLines(j.log, kLogTailLines);
}

void ReportFailure(const TypeJob& j, const JobKind& kind) {
  std::fprintf(stderr, "dlh-estimate: %s: %s: %s\n", j.type.c_str(), kind.not_done.c_str(),
               j.why.c_str());
  if (j.tail.empty()) return;
  std::fprintf(stderr, "  last lines of %s:\n", j.log.c_str());
  for (const std::string& line : j.tail) std::fprintf(stderr, "  | %s\n", line.c_str());
}

// One look at a job: prints a line when its state changed; concludes it once it has ended.
void Watch(TypeJob& j, const std::vector<std::string>& env, const JobKind& kind) {
  std::string problem;
  const SlurmJobState s = QueryJob(j, env, &problem);
  std::string phase;  // what follows "job ID " in the progress line
  if (!problem.empty())
    phase = "not seen: " + problem;
  else if (s.state == "PENDING")
    phase = "pending" + (s.reason.empty() ? "" : " (" + s.reason + ")");
  else if (s.state == "RUNNING")
    phase = "running on " + s.nodes;
  else if (!s.finished)
    phase = s.state;
  if (!phase.empty()) {
    if (phase != j.phase)
      std::fprintf(stderr, "%s: %s %s\n", j.type.c_str(), JobName(j).c_str(), phase.c_str());
    j.phase = phase;
    return;
  }
  Conclude(j, s, kind);
  if (j.ok) {
    const double took = s.run_s >= 0 ? s.run_s : Since(j.submitted);
    std::fprintf(stderr, "%s: done in %.0f s -> %s\n", j.type.c_str(), took, j.shown.c_str());
  } else {
    ReportFailure(j, kind);
  }
}

// scancel of every job still unfinished; each is concluded as failed with `why`.
void CancelRemaining(std::vector<TypeJob>& jobs, const std::vector<std::string>& env,
                     const std::string& why, const JobKind& kind) {
  std::vector<std::string> argv = {"scancel"};
  for (const TypeJob& j : jobs)
    if (!j.done) argv.push_back(std::to_string(j.id));
  if (argv.size() == 1) return;
  const ProgramResult r = RunProgram(argv, env, kSlurmCommandTimeoutS);
  const std::string cancelled =
      r.failure.empty() ? "cancelled" : "cancelling it failed: " + Failed("scancel", r);
  for (TypeJob& j : jobs) {
    if (j.done) continue;
    j.done = true;
    j.why = why + " (" + JobName(j) + " " + j.phase + "); " + cancelled;
    j.tail = LastLines(j.log, kLogTailLines);
    ReportFailure(j, kind);
  }
}

}  // namespace

TypeJob NewTypeJob(const std::string& type, const std::string& out, const std::string& log,
                   const std::string& shown) {
  TypeJob j;
  j.type = type;
  j.out = out;
  j.log = log;
  j.shown = shown;
  j.before = Stamp(out);
  return j;
}

void SubmitJob(TypeJob& j, const std::vector<std::string>& sbatch_args,
               const std::vector<std::string>& env, const JobKind& kind) {
  // A log of an earlier run would be shown as this job's if it never starts.
  std::error_code ec;
  fs::remove(j.log, ec);
  ProgramResult r = RunProgram(sbatch_args, env, kSlurmCommandTimeoutS);
  j.submitted = Clock::now();
  if (!r.failure.empty()) {
    j.done = true;
    j.why = Failed("sbatch", r);
    ReportFailure(j, kind);
    return;
  }
  // --parsable: "ID" or "ID;CLUSTER"
  const std::string first = FirstLine(r.out);
  const std::string id = first.substr(0, first.find(';'));
  char* end = nullptr;
  const long n = std::strtol(id.c_str(), &end, 10);
  if (id.empty() || *end != '\0' || n <= 0) {
    j.done = true;
    j.why = "sbatch printed no job id: " + (first.empty() ? "(nothing)" : first);
    ReportFailure(j, kind);
    return;
  }
  j.id = n;
  j.phase = "submitted";
  std::fprintf(stderr, "%s: %s submitted\n", j.type.c_str(), JobName(j).c_str());
}

int WaitForJobs(std::vector<TypeJob>& jobs, const std::vector<std::string>& env, double wait_s,
                const JobKind& kind) {
  const Clock::time_point t0 = Clock::now();
  auto unfinished = [&] {
    int n = 0;
    for (const TypeJob& j : jobs) n += !j.done;
    return n;
  };
  while (unfinished() > 0) {
    for (TypeJob& j : jobs)
      if (!j.done && !g_interrupted) Watch(j, env, kind);
    if (unfinished() == 0) break;
    if (g_interrupted) {
      std::fprintf(stderr, "dlh-estimate: interrupted (signal %d): cancelling the jobs\n",
                   int(g_interrupted));
      CancelRemaining(jobs, env, "interrupted", kind);
      return kExitInterrupted;
    }
    if (Since(t0) >= wait_s) {
      CancelRemaining(jobs, env, "no result within --wait " + HumanDuration(wait_s), kind);
      break;
    }
    for (double slept = 0; slept < kPollS && !g_interrupted; slept += 0.1)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}

CalibrationTypes PickSlurmTypes(const std::vector<std::string>& wanted,
                                const std::string& partition, const std::vector<std::string>& env,
                                const JobKind& kind) {
  const ProgramResult sinfo =
      RunProgram({"sinfo", "-h", "-N", "-O", kSinfoNodeFormat}, env, kSlurmCommandTimeoutS);
  if (!sinfo.failure.empty()) throw Error(Failed("sinfo", sinfo));
  CalibrationTypes picked = PickCalibrationTypes(NodesFromSinfo(sinfo.out), wanted, partition);
  for (const auto& [type, why] : picked.failed)
    std::fprintf(stderr, "dlh-estimate: %s: %s: %s\n", type.c_str(), kind.not_done.c_str(),
                 why.c_str());
  if (picked.types.empty() && picked.failed.empty())
    throw Error("sinfo shows no node with typed GPUs (GRES gpu:TYPE:N)" +
                (partition.empty() ? "" : " in partition " + partition));
  return picked;
}

std::vector<std::string> SplitTypes(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    const size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
  }
  return out;
}

std::string SelfPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    throw Error("cannot find this program's path (/proc/self/exe): " +
                std::string(std::strerror(errno)));
  return std::string(buf, size_t(n));
}

}  // namespace dlh
