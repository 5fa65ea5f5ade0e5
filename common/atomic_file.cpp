// DLH — atomic file writes: temporary file, fsync, rename, folder fsync.
#include "common/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dlh {
namespace {

[[noreturn]] void Fail(const std::string& path, int err) {
  throw IoError(path, std::strerror(err));
}

// write(2) until everything is out; EINTR is retried. Returns 0 or the errno.
int WriteAll(int fd, std::string_view text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += size_t(n);
  }
  return 0;
}

}  // namespace

std::string TemporaryPathFor(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
}

void SyncFolderOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

void CommitAtomically(const std::string& path,
                      const std::function<void(const std::string& tmp)>& write) {
  const std::string tmp = TemporaryPathFor(path);
  try {
    write(tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    Fail(path, err);
  }
  SyncFolderOf(path);
}

void WriteFileAtomically(const std::string& path, std::string_view text) {
  CommitAtomically(path, [&](const std::string& tmp) {
    // O_EXCL: the name is ours alone; a leftover of another process, or a link planted
    // under it, is never reused or followed (O_NOFOLLOW says so twice).
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) Fail(path, errno);
    int err = WriteAll(fd, text);
    if (err == 0 && ::fsync(fd) != 0) err = errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) Fail(path, err);
  });
}

}  // namespace dlh
