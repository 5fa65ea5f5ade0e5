// DLH — running a helper and reading its output (see capture_output.hpp).
#include "common/capture_output.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"

extern char** environ;

namespace dlh {

namespace {

// Both entry points: `out` null leaves the program's standard output as ours.
int Run(const std::vector<std::string>& argv, std::string* out) {
  if (argv.empty()) throw Error("RunProgram: no program");
  int pipe_fds[2] = {-1, -1};
  if (out && ::pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw Error("cannot run " + argv[0] + ": pipe: " + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (out) posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (std::string& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int err = posix_spawnp(&pid, copy[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (out) ::close(pipe_fds[1]);
  if (err != 0) {
    if (out) ::close(pipe_fds[0]);
    throw Error("cannot run " + argv[0] + ": " + std::strerror(err));
  }
  if (out) {
    out->clear();
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
      if (n > 0) {
        out->append(buf, size_t(n));
      } else if (n == 0 || errno != EINTR) {
        break;
      }
    }
    ::close(pipe_fds[0]);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw Error("lost track of " + argv[0] + ": " + std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int RunCapturingOutput(const std::vector<std::string>& argv, std::string* out) {
  return Run(argv, out);
}

int RunProgram(const std::vector<std::string>& argv) { return Run(argv, nullptr); }

std::string ProgramBeside(const std::string& program, const std::string& beside) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = beside.empty() ? fs::read_symlink("/proc/self/exe", ec) : fs::path(beside);
  if (ec) return program;
  const fs::path next = self.parent_path() / program;
  return ::access(next.c_str(), X_OK) == 0 ? next.string() : program;
}

}  // namespace dlh
