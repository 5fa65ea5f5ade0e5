// DLH — rank 0's choices for the program's rendezvous (see rendezvous.hpp).
#include "launcher/run/rendezvous.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "common/error.hpp"

namespace dlh {

std::string MachineHostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0 || !name[0]) return "localhost";
  return name;
}

PortBand MasterPortBand(int ephemeral_low) {
  constexpr int kLowest = 1024;  // below: privileged ports
  constexpr int kBandSize = 8192;
  const int last = ephemeral_low - 1;
  const int first = std::max(kLowest, ephemeral_low - kBandSize);
  if (last - first + 1 < 256) return {};  // too few to pick from without colliding
  return {first, last};
}

int EphemeralPortLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  if (in >> low && low > 0 && low < 65536) return low;
  return 32768;
}

namespace {

// Binds a TCP socket on every interface (IPv6 with IPv4 mapped where the host has IPv6) to
// `port` (0: the kernel picks) and returns the port bound, or -1 with errno set.
int BindAndClose(int port) {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int bound = -1;
  if (fd >= 0) {
    const int off = 0;  // dual stack: the port must be free for IPv4 too
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    socklen_t len = sizeof addr;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
      bound = ntohs(addr.sin6_port);
  } else if (errno == EAFNOSUPPORT) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    socklen_t len = sizeof addr;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
      bound = ntohs(addr.sin_port);
  } else {
    return -1;
  }
  const int e = errno;
  close(fd);
  errno = e;
  return bound;
}

}  // namespace

int FreeTcpPort() {
  const PortBand band = MasterPortBand(EphemeralPortLow());
  if (band.first > 0) {
    std::random_device device;
    const int size = band.last - band.first + 1;
    const int start = static_cast<int>(device() % static_cast<unsigned>(size));
    for (int i = 0; i < 64; ++i) {
      const int port = band.first + (start + i) % size;
      if (BindAndClose(port) == port) return port;
    }
  }
  const int port = BindAndClose(0);
  if (port <= 0)
    throw Error(std::string("run: a free port: ") + std::strerror(errno) +
                " (give one with --master-port)");
  return port;
}

std::string RandomRunId() {
  std::random_device device;
  const unsigned long long value = (static_cast<unsigned long long>(device()) << 32) ^ device();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", value);
  return text;
}

}  // namespace dlh
