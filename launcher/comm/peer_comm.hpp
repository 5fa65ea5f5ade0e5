// DLH — the owner of a communicator whose operations wait on peers (an NCCL communicator),
// and how it is closed. Generic over the library so the closing rules are unit-tested on a
// machine without a GPU (tests/unit/peer_comm_test.cpp), with a fake communicator.
//
// Destroying such a communicator (ncclCommDestroy) waits for the peers' matching
// operations. On a clean end that is right. On an error path it is not: when one rank fails
// alone, its peers may be stalled or gone, and a destroy, or a stream synchronisation that
// waits for a queued collective, blocks the rank before it reaches MPI_Abort, so the job
// hangs instead of ending. So a communicator is aborted (ncclCommAbort: queued and running
// operations are killed, nothing waits) whenever
//   - an exception is unwinding the stack as it is closed (any error, on one rank or all),
//   - it reported an asynchronous error (a peer failed), or
//   - it was aborted explicitly (the watchdog's timeout).
// Whoever also waits on the device (a stream synchronisation) closes the communicators
// first, so that the wait ends.
#pragma once

#include <exception>
#include <utility>

namespace dlh {

enum class CommClose { Destroy, Abort };

inline CommClose ChooseCommClose(int uncaught_exceptions, bool async_error) {
  return uncaught_exceptions > 0 || async_error ? CommClose::Abort : CommClose::Destroy;
}

// True while an exception unwinds the stack: destructors on an error path.
inline bool Unwinding() { return std::uncaught_exceptions() > 0; }

// `Ops` provides, for its handle type Ops::Handle (null when empty):
//   static bool async_error(Handle);   the communicator reported a failure
//   static void destroy(Handle);       the clean close (may wait for peers)
//   static void abort(Handle);         the close that never waits
template <class Ops>
class PeerComm {
 public:
  using Handle = typename Ops::Handle;
  PeerComm() = default;
  explicit PeerComm(Handle h) : h_(h) {}
  ~PeerComm() { close(ChooseCommClose(std::uncaught_exceptions(), h_ && Ops::async_error(h_))); }
  PeerComm(PeerComm&& o) noexcept : h_(std::exchange(o.h_, Handle{})) {}
  PeerComm& operator=(PeerComm&& o) noexcept {
    if (this != &o) {
      close(ChooseCommClose(std::uncaught_exceptions(), h_ && Ops::async_error(h_)));
      h_ = std::exchange(o.h_, Handle{});
    }
    return *this;
  }
  PeerComm(const PeerComm&) = delete;
  PeerComm& operator=(const PeerComm&) = delete;

  Handle get() const { return h_; }
  explicit operator bool() const { return h_ != Handle{}; }
  // Kills queued and running operations; the communicator is gone after.
  void abort() { close(CommClose::Abort); }

 private:
  void close(CommClose how) {
    if (!h_) return;
    Handle h = std::exchange(h_, Handle{});
    if (how == CommClose::Abort)
      Ops::abort(h);
    else
      Ops::destroy(h);
  }
  Handle h_{};
};

}  // namespace dlh
