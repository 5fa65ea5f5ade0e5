// DLH — whole-file reads (see file_text.hpp).
#include "common/file_text.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dlh {

bool ReadFileText(const std::string& path, size_t max_bytes, std::string* text, std::string* why) {
  // open/read rather than ifstream: a folder opens fine as a stream and reads as empty;
  // read() reports EISDIR.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = std::strerror(errno);
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
