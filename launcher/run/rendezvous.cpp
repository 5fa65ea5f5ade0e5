// DLH — rank 0's choices for the program's rendezvous (see rendezvous.hpp).
#include "launcher/run/rendezvous.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "common/error.hpp"

namespace dlh {

std::string MachineHostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0 || !name[0]) return "localhost";
  return name;
}

int FreeTcpPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(std::string("run: a free port: socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int e = errno;
    close(fd);
    throw Error(std::string("run: a free port: ") + std::strerror(e) +
                " (give one with --master-port)");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::string RandomRunId() {
  std::random_device device;
  const unsigned long long value = (static_cast<unsigned long long>(device()) << 32) ^ device();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", value);
  return text;
}

}  // namespace dlh
