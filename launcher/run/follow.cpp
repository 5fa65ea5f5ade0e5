// DLH — how each rank of `dlh-launch run` follows its program (see follow.hpp).
#include "launcher/run/follow.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/error.hpp"
#include "launcher/run/child.hpp"
#include "launcher/watch/activity.hpp"

namespace dlh {

ProgressPipe::ProgressPipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("run: pipe: ") + std::strerror(errno));
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  fcntl(read_fd_, F_SETFL, fcntl(read_fd_, F_GETFL) | O_NONBLOCK);
}

ProgressPipe::~ProgressPipe() {
  CloseWriteEnd();
  CloseReadEnd();
}

void ProgressPipe::CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ProgramStallVerdict JudgeProgramStall(const ProgramStallRule& rule, const ProgramStallState& s) {
  if (!(rule.timeout_s > 0)) return {};
  if (s.steps > 0)
    return s.since_step_s >= rule.timeout_s
               ? ProgramStallVerdict{ProgramStall::kNoStep, s.since_step_s}
               : ProgramStallVerdict{};
  // Before the first step: doing nothing says more than being late, so it is judged first.
  if (s.idle_s >= rule.timeout_s) return {ProgramStall::kIdle, s.idle_s};
  const bool reports = s.heard || rule.expected != StepsExpected::kNo;
  if (reports && s.since_launch_s >= rule.timeout_s + rule.startup_s)
    return {ProgramStall::kNoFirstStep, s.since_launch_s};
  return {};
}

Followed FollowProgram(pid_t pid, ProgressPipe* progress, const ProgramStallRule& rule,
                       double launched_s, int64_t profile_end, const std::string& who,
                       const std::function<void(ProgressLog*)>& after_read) {
  Followed f;
  double stop_asked_at = -1;
  IdleClock idle;
  double next_look = 0;
  char buffer[4096];
  // What the pipe holds now, waiting up to `wait_ms` for it.
  auto read_pipe = [&](int wait_ms) {
    if (progress->read_fd() < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      return;
    }
    pollfd p{progress->read_fd(), POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) return;
    for (;;) {
      const ssize_t got = read(progress->read_fd(), buffer, sizeof buffer);
      if (got > 0) {
        f.heard = true;
        for (const std::string& w : f.log.Feed({buffer, size_t(got)}, SteadySeconds()))
          std::fprintf(stderr, "%s: warning: %s\n", who.c_str(), w.c_str());
        continue;
      }
      if (got == 0) {  // every writer closed it: an unfinished last line is the last line
        progress->CloseReadEnd();
        for (const std::string& w : f.log.Finish(SteadySeconds()))
          std::fprintf(stderr, "%s: warning: %s\n", who.c_str(), w.c_str());
      }
      if (got < 0 && errno == EINTR) continue;
      break;  // closed, or all there is read (EAGAIN)
    }
  };
  for (;;) {
    read_pipe(100);
    after_read(&f.log);
    if (WaitChild(pid, 0, &f.status)) {
      // Its last lines (an evaluation, a checkpoint) may have come after the read above, the
      // very last perhaps without a newline.
      read_pipe(0);
      for (const std::string& w : f.log.Finish(SteadySeconds()))
        std::fprintf(stderr, "%s: warning: %s\n", who.c_str(), w.c_str());
      after_read(&f.log);
      return f;
    }
    const double now = SteadySeconds();
    if (profile_end > 0 && f.log.steps() >= profile_end) {
      if (stop_asked_at < 0) {
        kill(pid, SIGTERM);
        stop_asked_at = now;
      } else if (now - stop_asked_at > 30) {
        kill(pid, SIGKILL);
      }
      continue;
    }
    if (!(rule.timeout_s > 0)) continue;
    // The processes' activity is read once a second, and only before the first step.
    if (f.log.steps() == 0 && now >= next_look) {
      idle.Observe(now, ReadProcessTreeActivity(pid), 0);
      next_look = now + 1;
    }
    ProgramStallState s;
    s.since_launch_s = now - launched_s;
    s.heard = f.heard;
    s.steps = f.log.steps();
    if (s.steps > 0) s.since_step_s = now - f.log.step_times().back();
    s.idle_s = idle.idle_s(now);
    f.stall = JudgeProgramStall(rule, s);
    if (f.stall.kind != ProgramStall::kNone) return f;
  }
}

}  // namespace dlh
