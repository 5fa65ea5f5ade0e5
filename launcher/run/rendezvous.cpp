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

// One owner per socket; closing it leaves errno as it was (the caller reports the bind's).
class Socket {
 public:
  explicit Socket(int family) : fd_(socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0)) {}
  ~Socket() {
    const int e = errno;
    if (fd_ >= 0) close(fd_);
    errno = e;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Binds `addr` (an IPv4 or IPv6 address, `size` bytes of it) on a new TCP socket and returns
// the port bound, or -1 with errno set; the socket is closed on return.
int BindPort(sockaddr_storage addr, socklen_t size) {
  Socket s(addr.ss_family);
  if (s.get() < 0) return -1;
  if (addr.ss_family == AF_INET6) {
    const int off = 0;  // dual stack: the port must be free for IPv4 too
    setsockopt(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  }
  auto* raw = reinterpret_cast<sockaddr*>(&addr);
  socklen_t len = sizeof addr;
  if (bind(s.get(), raw, size) != 0 || getsockname(s.get(), raw, &len) != 0) return -1;
  return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

// Binds a TCP socket on every interface to `port` (0: the kernel picks) and returns the port
// bound, or -1 with errno set: IPv6 with IPv4 mapped (as torch's store listens), else IPv4
// alone where the host cannot bind IPv6 (no IPv6, or switched off by sysctl).
int BindAndClose(int port) {
  sockaddr_storage any{};
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&any);
  v6->sin6_family = AF_INET6;
  v6->sin6_addr = in6addr_any;
  v6->sin6_port = htons(static_cast<uint16_t>(port));
  const int bound = BindPort(any, sizeof(sockaddr_in6));
  if (bound >= 0 || errno == EADDRINUSE || errno == EACCES) return bound;
  any = {};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&any);
  v4->sin_family = AF_INET;
  v4->sin_addr.s_addr = htonl(INADDR_ANY);
  v4->sin_port = htons(static_cast<uint16_t>(port));
  return BindPort(any, sizeof(sockaddr_in));
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
