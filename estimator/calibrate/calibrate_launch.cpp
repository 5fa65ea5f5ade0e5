// DLH estimator — timing through `dlh-launch time-steps` (see calibrate_launch.hpp).
#include "estimator/calibrate/calibrate_launch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/temporary_folder.hpp"
#include "common/time_steps_file.hpp"
#include "estimator/model/features.hpp"

extern char** environ;

namespace dlh {
namespace {

namespace fs = std::filesystem;

// The child: killed and reaped if the estimator leaves before it has finished.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  ~Child() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // Exit code, or 128 + signal.
  int wait() {
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    if (r < 0) return 1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
  }

 private:
  pid_t pid_;
};

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

// "dlh-launch: no usable GPU on vm: ..." -> "no usable GPU on vm: ...".
std::string WithoutPrefix(std::string line) {
  for (const char* prefix : {"dlh-launch: error: ", "dlh-launch: "})
    if (line.rfind(prefix, 0) == 0) return line.substr(std::strlen(prefix));
  return line;
}

}  // namespace

std::string LaunchPath() {
  if (const char* env = std::getenv("DLH_LAUNCH"); env && *env) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("dlh-launch") : (exe.parent_path() / "dlh-launch").string();
}

namespace {

struct ChildRun {
  int code = 0;                    // exit code, or 128 + signal
  std::vector<std::string> other;  // its lines that are not progress
};

// Runs `argv` with stdout and stderr both into one pipe: lines "[i/n] ..." go to
// `on_progress(i, n, line)` as they arrive, the header "time-steps: N entries on DEVICE" to
// `on_header(DEVICE)`, the rest is kept.
ChildRun RunChild(std::vector<std::string> args,
                  const std::function<void(size_t, size_t, const std::string&)>& on_progress,
                  const std::function<void(const std::string&)>& on_header) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child is an MPI singleton that starts no other process: Open MPI 4.1 would still
  // look for ssh or rsh and abort where there is none (most GPU images) unless told so.
  std::vector<std::string> env_text;
  bool plm = false;
  for (char** e = environ; *e != nullptr; ++e) {
    env_text.emplace_back(*e);
    plm = plm || env_text.back().rfind("OMPI_MCA_plm=", 0) == 0;
  }
  if (!plm) env_text.emplace_back("OMPI_MCA_plm=isolated");
  std::vector<char*> env;
  for (std::string& e : env_text) env.push_back(e.data());
  env.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawned != 0) {
    close(fds[0]);
    throw Error("cannot run " + args[0] + ": " + std::strerror(spawned));
  }
  Child child(pid);
  std::unique_ptr<FILE, FileCloser> out(fdopen(fds[0], "r"));
  if (!out) {
    close(fds[0]);
    throw Error(std::string("fdopen: ") + std::strerror(errno));
  }
  ChildRun run;
  const std::string header = "time-steps: ";  // "time-steps: 96 entries on NVIDIA ..."
  char* line = nullptr;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, out.get())) >= 0) {
    std::string text(line, size_t(n));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    size_t done = 0, total = 0;
    const size_t on = text.find(" on ");
    if (std::sscanf(text.c_str(), "[%zu/%zu]", &done, &total) == 2)
      on_progress(done, total, text);
    else if (text.rfind(header, 0) == 0 && on != std::string::npos)
      on_header(text.substr(on + 4));
    else if (!text.empty())
      run.other.push_back(text);
  }
  std::free(line);
  run.code = child.wait();
  return run;
}

}  // namespace

LaunchedTiming TimeThroughLaunch(
    const std::vector<SweepEntry>& entries, const std::string& device, const TimingOptions& options,
    const std::function<void(size_t, size_t, const std::string&)>& progress) {
  const std::string launch = LaunchPath();
  if (access(launch.c_str(), X_OK) != 0)
    throw Error("cannot run " + launch + ": " + std::strerror(errno) +
                " (set DLH_LAUNCH to dlh-launch)");
  TemporaryFolder dir("dlh-calibrate-");
  const std::string request = dir.path() + "/request.json", result = dir.path() + "/result.json";
  std::vector<TimeStepsSample> samples;  // one per entry, in order
  nlohmann::json description, child_options;
  // A child that dies (a segfault in a GPU library, the OOM killer) leaves the entries it
  // finished in its result: keep them, count the entry it died on as failed, and start a
  // new child on the rest. One that dies before timing anything on its first run, or three
  // times in a row so, means the machine cannot time at all.
  int barren_crashes = 0;
  while (samples.size() < entries.size()) {
    const size_t start = samples.size();
    std::vector<TimeStepsEntry> list;
    for (size_t i = start; i < entries.size(); ++i)
      list.push_back({entries[i].spec, entries[i].batch});
    WriteFileAtomically(request, TimeStepsRequestText(list));
    const ChildRun run = RunChild(
        {launch, "time-steps", "--device", device, "--in", request, "--out", result, "--warmup",
         std::to_string(options.warmup), "--repeats", std::to_string(options.repeats),
         "--steps-per-repeat", std::to_string(options.steps_per_repeat), "--threads",
         std::to_string(options.threads), "--profile", std::to_string(options.profile_steps)},
        [&](size_t done, size_t, const std::string& line) {
          if (progress) progress(start + done, entries.size(), line);
        },
        [&](const std::string& name) {
          if (progress && start == 0) progress(0, entries.size(), name);
        });
    // The child's own last word is the reason ("no usable GPU on node7: no CUDA driver").
    const std::string why = run.other.empty() ? "no message" : WithoutPrefix(run.other.back());
    const std::string what = "dlh-launch time-steps --device " + device + " failed (exit " +
                             std::to_string(run.code) + "): " + why;
    if (run.code == 2) throw UsageError(what);  // bad options, no such GPU: nothing to retry
    TimeStepsResult r;
    try {
      r = ReadTimeStepsResult(result);
    } catch (const EstimateError&) {
      if (run.code == 0) throw;
    }
    if (run.code == 0) {
      for (const std::string& text : run.other) std::fprintf(stderr, "%s\n", text.c_str());
      if (!r.complete || r.samples.size() != list.size())
        throw Error(result + ": " + std::to_string(r.samples.size()) + " of " +
                    std::to_string(list.size()) + " entries timed");
    } else {
      if (r.samples.empty() && (start == 0 || ++barren_crashes >= 3)) throw Error(what);
      if (!r.samples.empty()) barren_crashes = 0;
      const size_t died_on = start + std::min(r.samples.size(), list.size() - 1);
      r.samples.resize(died_on - start);
      TimeStepsSample failed;
      failed.model = entries[died_on].spec.name;
      failed.batch = entries[died_on].batch;
      failed.error = what;
      r.samples.push_back(failed);
      std::fprintf(stderr, "dlh-estimate: warning: %s; going on after %s\n", what.c_str(),
                   failed.model.c_str());
    }
    if (description.is_null()) description = r.device;
    if (child_options.is_null()) child_options = r.options;
    samples.insert(samples.end(), r.samples.begin(), r.samples.end());
  }

  LaunchedTiming t;
  t.device = description;
  t.options = child_options;
  t.results = samples;
  for (size_t i = 0; i < entries.size(); ++i) {
    const TimeStepsSample& s = samples[i];
    if (s.model != entries[i].spec.name)
      throw Error(result + ": samples[" + std::to_string(i) + "].model: expected '" +
                  entries[i].spec.name + "', got '" + s.model + "'");
    if (s.seconds < 0) {
      t.failures.push_back(s.model + " b" + std::to_string(s.batch) + ": " + s.error);
      continue;
    }
    TimingSample sample;
    sample.model = s.model;
    sample.features = ComputeFeatures(entries[i].spec);
    sample.batch = s.batch;
    sample.seconds = s.seconds;
    sample.joules = s.joules;
    t.samples.push_back(std::move(sample));
    t.entry_of.push_back(i);
  }
  return t;
}

std::string GpuHostLine(const nlohmann::json& d) {
  auto str = [&](const char* key) {
    const auto it = d.find(key);
    return it != d.end() && it->is_string() ? it->get<std::string>() : std::string("?");
  };
  auto num = [&](const char* key) {
    const auto it = d.find(key);
    return it != d.end() && it->is_number() ? it->get<double>() : -1.0;
  };
  std::string sm = str("compute_capability");  // "9.0": CUDA spells the target sm_90
  sm.erase(std::remove(sm.begin(), sm.end(), '.'), sm.end());
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s (GPU %.0f, sm_%s, %.0f SMs, %.1f GiB, %.0f MHz), driver CUDA %s, runtime %s",
                str("name").c_str(), num("index"), sm.c_str(), num("multiprocessors"),
                num("memory_bytes") / double(1ull << 30), num("max_sm_clock_mhz"),
                str("driver_cuda").c_str(), str("cuda_runtime").c_str());
  return buf;
}

std::string GpuLibrariesLine(const nlohmann::json& d) {
  auto str = [&](const char* key) {
    const auto it = d.find(key);
    return it != d.end() && it->is_string() ? it->get<std::string>() : std::string("?");
  };
  return "cuDNN " + str("cudnn") + ", cuBLAS " + str("cublas") + ", NCCL " + str("nccl");
}

}  // namespace dlh
