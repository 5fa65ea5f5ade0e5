// DLH — writing a record into the observation store (see store.hpp).
#include "launcher/observe/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "common/atomic_file.hpp"

namespace dlh {
namespace {

std::string Errno() { return std::strerror(errno); }

// Characters safe in a file name; the rest become '_'.
std::string Safe(const std::string& s) {
  std::string out;
  for (char c : s)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  if (out.size() > 40) out.resize(40);
  return out.empty() ? "x" : out;
}

// "20261128T093000-node1-12345-0.json": sorts by time, unique per process and call.
std::string RecordName(const Observation& o) {
  static std::atomic<int> counter{0};
  char stamp[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &tm);
  const std::string host = o.hosts.empty() ? "host" : o.hosts.front();
  return std::string(stamp) + "-" + Safe(host) + "-" + std::to_string(getpid()) + "-" +
         std::to_string(counter++) + ".json";
}

// Every byte of `text` to `fd`.
bool WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// rename(2) would silently replace a record of the same name: this never does.
bool RenameNoReplace(const std::string& from, const std::string& to) {
  if (renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno != EINVAL && errno != ENOSYS) return false;
  // A file system without RENAME_NOREPLACE: link() fails on an existing name as well.
  if (::link(from.c_str(), to.c_str()) != 0) return false;
  ::unlink(from.c_str());
  return true;
}

}  // namespace

StoreCheck CheckStore(const std::string& dir) {
  StoreCheck c;
  struct stat st {};
  if (dir.empty() || ::stat(dir.c_str(), &st) != 0) {
    c.state = StoreState::kMissing;
    c.message = "observation store " + dir + " does not exist (the site creates it: mkdir -m " +
                "1777 " + dir + ")";
    return c;
  }
  if (!S_ISDIR(st.st_mode)) {
    c.state = StoreState::kNotFolder;
    c.message = "observation store " + dir + " is not a folder";
    return c;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
    c.state = StoreState::kUnsafe;
    c.message = "observation store " + dir +
                ": group or others can write it without the sticky bit: others could replace "
                "a user's records; chmod +t " +
                dir;
  }
  return c;
}

bool IsRecordName(const std::string& name) {
  return name.size() > 5 && name[0] != '.' && name.compare(name.size() - 5, 5, ".json") == 0;
}

int64_t CountRecords(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int64_t n = 0;
  while (const dirent* e = ::readdir(d))
    if (IsRecordName(e->d_name)) ++n;
  ::closedir(d);
  return n;
}

int64_t CountRecordsOf(const std::string& dir, uid_t owner) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int64_t n = 0;
  struct stat st {};
  while (const dirent* e = ::readdir(d))
    if (IsRecordName(e->d_name) &&
        ::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid == owner)
      ++n;
  ::closedir(d);
  return n;
}

StoreWrite WriteObservation(const std::string& dir, const Observation& o, int64_t limit) {
  StoreWrite w;
  const StoreCheck check = CheckStore(dir);
  if (check.state != StoreState::kOk) {
    w.warning = check.message + ": this job's record is not written";
    return w;
  }
  if (limit <= 0) limit = kDefaultObservationLimit;
  const int64_t held = CountRecordsOf(dir, ::geteuid());
  if (held >= limit) {
    w.warning = "observation store " + dir + " holds " + std::to_string(held) +
                " records of yours, its limit: this job's record is not written (dlh-estimate " +
                "observations prune)";
    return w;
  }
  const std::string text = ObservationToJson(o).dump(1) + "\n";
  if (text.size() > kMaxObservationBytes) {
    w.warning = "observation record of " + std::to_string(text.size()) + " bytes, more than " +
                std::to_string(kMaxObservationBytes) + ": not written to " + dir;
    return w;
  }
  const std::string base = dir + (dir.back() == '/' ? "" : "/");
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string name = RecordName(o);
    const std::string final_path = base + name, tmp = base + "." + name + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
      w.warning = "observation store " + dir + ": cannot write a record: " + Errno();
      return w;
    }
    // The umask may have taken read from others; every user's estimator reads the store.
    const bool ok = ::fchmod(fd, 0644) == 0 && WriteAll(fd, text) && ::fsync(fd) == 0;
    const std::string why = ok ? "" : Errno();
    ::close(fd);
    if (!ok) {
      ::unlink(tmp.c_str());
      w.warning = "observation store " + dir + ": cannot write a record: " + why;
      return w;
    }
    if (RenameNoReplace(tmp, final_path)) {
      SyncFolderOf(final_path);
      w.written = true;
      w.path = final_path;
      return w;
    }
    const int rename_errno = errno;
    ::unlink(tmp.c_str());
    if (rename_errno != EEXIST) {
      w.warning =
          "observation store " + dir + ": cannot write a record: " + std::strerror(rename_errno);
      return w;
    }
  }
  w.warning = "observation store " + dir + ": cannot write a record: names taken";
  return w;
}

}  // namespace dlh
