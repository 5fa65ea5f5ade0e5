// DLH NCCL stand-in — NCCL's collectives on host memory, through a ShmGroup's slots.
//
// Each collective goes through its data in rounds of one slot (ShmGroup::kSlotBytes per rank).
// Sums add the ranks' values in rank order, so every rank computes bit-identical results (as
// DLH requires of its ranks' parameters). In-place calls are safe in the layouts NCCL allows
// (recv == send; a rank's shard inside the gathered or scattered array): a round reads only
// from the slots, and writes only positions whose input is already published.
//
// Each returns false when `stop` was raised before the collective ended (the output is then
// partly written).
#pragma once

#include <atomic>
#include <cstddef>

#include "tests/nccl_standin/shm_group.hpp"

namespace dlh::nccl_standin {

enum class Element { Float32, Float64, Int32, Bytes };
size_t ElementSize(Element e);

// A collective, or one side of a point-to-point transfer (Send: `send` to rank `peer`; Recv:
// into `recv` from rank `peer`), which only the two ranks take part in (ShmGroup's mailboxes).
struct Collective {
  enum Kind { AllReduce, Reduce, Broadcast, ReduceScatter, AllGather, Send, Recv } kind = AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // NCCL's count: of recv for ReduceScatter, of send for AllGather
  Element element = Element::Float32;
  int root = 0;  // Reduce, Broadcast
  int peer = 0;  // Send, Recv
};

// Bytes a rank reads from `send` and writes to `recv` (for staging device buffers).
size_t SendBytes(const Collective& c, int nranks);
size_t RecvBytes(const Collective& c, int nranks);

bool RunCollective(ShmGroup& group, const Collective& c, const std::atomic<bool>& stop);

}  // namespace dlh::nccl_standin
