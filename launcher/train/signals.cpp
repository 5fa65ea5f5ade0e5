// DLH — signal recording (see signals.hpp).
#include "launcher/train/signals.hpp"

#include <csignal>
#include <initializer_list>

namespace dlh {
namespace {
volatile std::sig_atomic_t g_pending = 0;
extern "C" void RecordSignal(int sig) { g_pending = sig; }
}  // namespace

void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = RecordSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) sigaction(sig, &sa, nullptr);
}

int TakePendingSignal() {
  int sig = g_pending;
  g_pending = 0;
  return sig;
}

}  // namespace dlh
