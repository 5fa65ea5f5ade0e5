// DLH — a run's folder of checkpoints: DIR/ckpt-<step>.h5 names, stale temporary files,
// rotation, and the newest file that validates (checkpoint.hpp).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "launcher/storage/checkpoint.hpp"
#include "launcher/storage/checkpoint_format.hpp"

namespace dlh {
namespace {

using checkpoint_format::Errno;
using checkpoint_format::ParseU64;
namespace fs = std::filesystem;

const char kPrefix[] = "ckpt-";
const char kSuffix[] = ".h5";
const char kTmp[] = ".tmp.";

std::string FileNameForStep(int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%09" PRId64 "%s", kPrefix, step, kSuffix);
  return buf;
}

// "ckpt-000000120.h5" -> 120. Only the exact spelling path_for_step makes counts, so that
// two names can never map to one step.
bool ParseFileName(const std::string& name, int64_t* step) {
  const size_t pre = std::strlen(kPrefix), suf = std::strlen(kSuffix);
  if (name.size() <= pre + suf || name.compare(0, pre, kPrefix) != 0 ||
      name.compare(name.size() - suf, suf, kSuffix) != 0)
    return false;
  uint64_t v = 0;
  if (!ParseU64(name.substr(pre, name.size() - pre - suf), &v) || v > uint64_t(INT64_MAX))
    return false;
  if (FileNameForStep(int64_t(v)) != name) return false;
  *step = int64_t(v);
  return true;
}

// "ckpt-000000120.h5.tmp.4711.3" (TemporaryPathFor: pid, then a per-process count) -> 4711.
// Also "ckpt-000000120.h5.tmp.4711", the name earlier versions wrote.
bool ParseTmpName(const std::string& name, pid_t* pid) {
  size_t at = name.rfind(kTmp);
  int64_t step = 0;
  if (at == std::string::npos || !ParseFileName(name.substr(0, at), &step)) return false;
  std::string rest = name.substr(at + std::strlen(kTmp));
  const size_t dot = rest.find('.');
  uint64_t v = 0, n = 0;
  if (dot != std::string::npos) {
    if (!ParseU64(rest.substr(dot + 1), &n)) return false;
    rest.erase(dot);
  }
  if (!ParseU64(rest, &v) || v == 0 || v > uint64_t(INT_MAX)) return false;
  *pid = pid_t(v);
  return true;
}

// A temporary file is stale when its writer is gone. Our own pid counts as gone: saving is
// synchronous, so a tmp file with our pid that exists before we write is left over from an
// earlier process that had the same pid (common in containers, where pids repeat).
bool WriterGone(pid_t pid) {
  if (pid == getpid()) return true;
  return kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

CheckpointDir::CheckpointDir(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) dir_ = ".";
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

std::string CheckpointDir::path_for_step(int64_t step) const {
  if (step < 0) throw CheckpointError(dir_ + ": negative step " + std::to_string(step));
  return (dir_ == "/" ? "" : dir_) + "/" + FileNameForStep(step);
}

std::vector<std::string> CheckpointDir::list_newest_first() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::exists(dir_, ec)) return {};  // no run yet
  fs::directory_iterator it(dir_, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    int64_t step = 0;
    std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (ParseFileName(name, &step) && it->is_regular_file(type_ec))
      found.emplace_back(step, it->path().string());
  }
  if (ec) throw CheckpointError(dir_ + ": cannot list checkpoints (" + ec.message() + ")");
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::string CheckpointDir::save(const TrainState& state, int keep, CpuSeconds* checksum_cpu) {
  if (keep < 1)
    throw CheckpointError(dir_ + ": keep must be at least 1, not " + std::to_string(keep));
  std::string path = path_for_step(state.step);

  // Stale temporary files first, so that their space is free for this write. Errors here
  // are not worth failing a checkpoint for.
  std::error_code ec;
  if (fs::is_directory(dir_, ec)) {
    std::vector<std::string> stale;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      pid_t pid = 0;
      if (ParseTmpName(it->path().filename().string(), &pid) && WriterGone(pid))
        stale.push_back(it->path().string());
    }
    for (const std::string& s : stale) unlink(s.c_str());
  }

  SaveCheckpoint(path, state, checksum_cpu);

  // Rotation: the file just written always stays and counts towards `keep`; of the others
  // the newest stay. (It is not always the newest: a run resumed from an older checkpoint.)
  int kept = 1;
  for (const std::string& old : list_newest_first()) {
    if (old == path) continue;
    if (kept < keep) {
      ++kept;
      continue;
    }
    if (unlink(old.c_str()) != 0 && errno != ENOENT)
      throw CheckpointError(old + ": cannot delete old checkpoint (" + Errno() + "); " + path +
                            " was saved");
  }
  return path;
}

bool CheckpointDir::load_newest_valid(
    TrainState* state, std::string* path,
    const std::function<void(const std::string& message)>& warn) const {
  for (const std::string& candidate : list_newest_first()) {
    try {
      TrainState loaded = LoadCheckpoint(candidate);
      if (state) *state = std::move(loaded);
      if (path) *path = candidate;
      return true;
    } catch (const CheckpointError& e) {
      std::string reason = e.what();
      if (reason.compare(0, candidate.size() + 2, candidate + ": ") == 0)
        reason.erase(0, candidate.size() + 2);
      if (warn) warn(candidate + ": skipped: " + reason);
    }
  }
  return false;
}

}  // namespace dlh
