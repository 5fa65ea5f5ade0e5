// DLH NCCL stand-in — the ranks of one communicator meeting in a POSIX shared-memory segment.
//
// The stand-in exists to run several ranks on one machine (and one GPU): every rank of a
// communicator maps the same segment, named from the communicator's unique id, which holds a
// phase counter per rank and one slot of kSlotBytes per rank. A collective is a series of
// rounds: each rank writes its part into its slot, all meet at a barrier, each reads what it
// needs from every slot, all meet again (so a slot is never overwritten while read).
//
// Point-to-point (ncclSend, ncclRecv) goes through a mailbox per ordered pair of ranks, one
// chunk of kMailBytes deep: the sender waits until the box is empty, fills it and counts it
// written; the receiver waits until it is written, empties it and counts it read. Only the
// two ranks of a pair take part, so a pipeline's stages pass activations without the others.
//
// Waits never block for good: every barrier and mailbox wait polls a stop flag (the
// communicator's abort), and returns false when it is raised, so that an aborted
// communicator's calls end.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace dlh::nccl_standin {

constexpr int kMaxRanks = 64;
constexpr size_t kSlotBytes = size_t(1) << 20;
constexpr size_t kMailBytes = size_t(1) << 18;

class ShmGroup {
 public:
  // Maps (creating if needed) the segment `name` ("/dlh-nccl-..."), shared by `nranks`
  // ranks of which this is `rank`. Throws std::runtime_error with the reason.
  ShmGroup(const std::string& name, int nranks, int rank);
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  // Every rank has arrived (true), or `stop` was raised first (false). Each rank calls it the
  // same number of times; the segment's name is removed after the first one, so nothing is
  // left in /dev/shm once all ranks have mapped it, whatever happens later.
  bool barrier(const std::atomic<bool>& stop);
  // The ranks that have not reached this rank's latest barrier (for the stall's message).
  std::string missing_ranks() const;

  unsigned char* slot(int r) const;

  // `bytes` from `data` to rank `to`, or into `data` from rank `from`, chunk by chunk through
  // their mailbox; both sides must name the same length. The send returns once its last chunk
  // is in the box (the box holds a copy), not when it was read. False when `stop` was raised.
  bool send(int to, const void* data, size_t bytes, const std::atomic<bool>& stop);
  bool recv(int from, void* data, size_t bytes, const std::atomic<bool>& stop);
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 private:
  struct Header;
  struct Mailbox;
  Mailbox* mailbox(int from, int to) const;
  std::string name_;
  int nranks_, rank_;
  size_t bytes_ = 0;
  void* map_ = nullptr;
  Header* header_ = nullptr;
  uint64_t phase_ = 0;
  bool unlinked_ = false;
};

}  // namespace dlh::nccl_standin
