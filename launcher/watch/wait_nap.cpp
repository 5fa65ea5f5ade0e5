// DLH — the long wait's nap (see wait_nap.hpp for why).
#include "launcher/watch/wait_nap.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "launcher/watch/peer_watch.hpp"

namespace {
std::atomic<int64_t> g_naps{0};
}  // namespace

// Every sched_yield of dlh-launch's process, its MPI libraries' included. Not the engine's
// thread pool on x86 (it spins on the pause instruction), nor a step's ordinary waits.
extern "C" int sched_yield() noexcept {
  if (dlh::SecondsInPeerWait() < dlh::kNapAfterWaitS) return int(syscall(SYS_sched_yield));
  g_naps.fetch_add(1, std::memory_order_relaxed);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(dlh::kWaitNap).count();
  const timespec nap{ns / 1000000000, ns % 1000000000};
  nanosleep(&nap, nullptr);
  return 0;
}

namespace dlh {

int64_t WaitNapsTaken() { return g_naps.load(std::memory_order_relaxed); }

}  // namespace dlh
