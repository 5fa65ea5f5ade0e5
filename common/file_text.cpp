// DLH — whole-file reads (see file_text.hpp).
#include "common/file_text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dlh {

bool ReadFileText(const std::string& path, size_t max_bytes, std::string* text, std::string* why) {
  // A user names these paths, and a FIFO, a terminal or a device would block the reader
  // forever (inside sbatch, or a daemon that runs the estimator). O_NONBLOCK makes open()
  // return at once whatever the file is (it changes nothing for a regular file), O_NOCTTY
  // keeps a terminal from becoming ours, and fstat() then refuses anything but a regular
  // file before a single byte is read.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    *why = std::strerror(errno);
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    *why = std::strerror(errno);
    ::close(fd);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = S_ISDIR(st.st_mode) ? std::strerror(EISDIR) : "not a regular file";
    ::close(fd);
    return false;
  }
  text->clear();
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      *why = std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    text->append(buf, size_t(n));
    if (text->size() > max_bytes) {
      *why = "larger than " + std::to_string(max_bytes >> 20) + " MiB";
      ::close(fd);
      return false;
    }
  }
  ::close(fd);
  return true;
}

}  // namespace dlh
