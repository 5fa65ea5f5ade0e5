// DLH — what a process is doing, from /proc (see activity.hpp).
#include "launcher/watch/activity.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

namespace dlh {
namespace {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// utime and stime (fields 14 and 15 of /proc/.../stat), in seconds. The command name
// (field 2) may hold spaces and parentheses, so fields are counted after its last ')'.
double ThreadCpuSeconds(const std::string& stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(stat.substr(close + 1));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && (in >> field); ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  static const double ticks = double(sysconf(_SC_CLK_TCK));
  return double(utime + stime) / (ticks > 0 ? ticks : 100);
}

uint64_t ThreadIoBytes(const std::string& io) {
  uint64_t total = 0;
  std::istringstream in(io);
  std::string key;
  unsigned long long value = 0;
  while (in >> key >> value)
    if (key == "rchar:" || key == "wchar:") total += value;
  return total;
}

uint64_t ThreadWakeups(const std::string& status) {
  uint64_t total = 0;
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long n = 0;
    if (std::sscanf(line.c_str(), "voluntary_ctxt_switches: %llu", &n) == 1 ||
        std::sscanf(line.c_str(), "nonvoluntary_ctxt_switches: %llu", &n) == 1)
      total += n;
  }
  return total;
}

ProcessActivity ReadTasks(const std::string& process, pid_t skip_tid) {
  ProcessActivity a;
  DIR* dir = opendir((process + "/task").c_str());
  if (!dir) return a;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    if (std::atol(e->d_name) == long(skip_tid)) continue;
    const std::string task = process + "/task/" + e->d_name;
    a.cpu_s += ThreadCpuSeconds(ReadSmallFile(task + "/stat"));
    a.io_bytes += ThreadIoBytes(ReadSmallFile(task + "/io"));
    a.wakeups += ThreadWakeups(ReadSmallFile(task + "/status"));
  }
  closedir(dir);
  return a;
}

}  // namespace

ProcessActivity ReadProcessActivity(pid_t skip_tid) { return ReadTasks("/proc/self", skip_tid); }

ProcessActivity ReadProcessTreeActivity(pid_t pid) {
  // Parent of every process (field 4 of /proc/PID/stat, after the command name).
  std::map<long, std::vector<long>> children;
  if (DIR* proc = opendir("/proc")) {
    while (const dirent* e = readdir(proc)) {
      char* end = nullptr;
      const long p = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0') continue;
      const std::string stat = ReadSmallFile(std::string("/proc/") + e->d_name + "/stat");
      const size_t close = stat.rfind(')');
      long parent = 0;
      char state = 0;
      if (close != std::string::npos &&
          std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &parent) == 2)
        children[parent].push_back(p);
    }
    closedir(proc);
  }
  ProcessActivity total;
  std::vector<long> tree = {long(pid)};  // the program, then each process found below it
  for (size_t i = 0; i < tree.size() && i < 100000; ++i) {
    const ProcessActivity a = ReadTasks("/proc/" + std::to_string(tree[i]), 0);
    total.cpu_s += a.cpu_s;
    total.io_bytes += a.io_bytes;
    total.wakeups += a.wakeups;
    const auto c = children.find(tree[i]);
    if (c != children.end()) tree.insert(tree.end(), c->second.begin(), c->second.end());
  }
  return total;
}

std::string DescribeThreadState(pid_t tid) {
  const std::string task = "/proc/self/task/" + std::to_string(long(tid));
  const std::string stat = ReadSmallFile(task + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return "";
  std::string state;
  switch (stat[close + 2]) {
    case 'R':
      state = "running";
      break;
    case 'S':
      state = "sleeping";
      break;
    case 'D':
      state = "in disk sleep";
      break;
    case 't':
      state = "stopped (traced)";
      break;
    case 'T':
      state = "stopped";
      break;
    default:
      state = std::string("state ") + stat[close + 2];
  }
  std::string wchan = ReadSmallFile(task + "/wchan");
  if (!wchan.empty() && wchan != "0") state += " in " + wchan;
  return state;
}

void IdleClock::Observe(double now, const ProcessActivity& activity, int64_t progress) {
  if (!seen_) {
    seen_ = true;
    active_since_ = now;
  } else {
    const double dt = now - last_now_;
    const bool cpu = activity.cpu_s - last_.cpu_s >= kMinCpuShare * dt;
    // Unsigned differences: a thread that ended lowers a sum, and the wrap reads as activity.
    const bool io = activity.io_bytes - last_.io_bytes >= kMinIoBytes;
    const bool woke = double(activity.wakeups - last_.wakeups) >= kMinWakeupsPerS * dt;
    if (cpu || io || woke || progress != last_progress_) active_since_ = now;
  }
  last_now_ = now;
  last_ = activity;
  last_progress_ = progress;
}

}  // namespace dlh
