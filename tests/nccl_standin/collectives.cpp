// DLH NCCL stand-in — host collectives in rounds through shared memory (see collectives.hpp).
#include "tests/nccl_standin/collectives.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace dlh::nccl_standin {
namespace {

template <class T>
void SumSlots(const ShmGroup& g, size_t from, size_t n, void* out) {
  T* o = static_cast<T*>(out);
  const T* first = reinterpret_cast<const T*>(g.slot(0)) + from;
  std::copy(first, first + n, o);
  for (int r = 1; r < g.nranks(); ++r) {
    const T* in = reinterpret_cast<const T*>(g.slot(r)) + from;
    for (size_t i = 0; i < n; ++i) o[i] += in[i];
  }
}

// out[0, n) = the sum over ranks of their slots' elements [from, from + n), in rank order.
void SumSlots(const ShmGroup& g, Element e, size_t from, size_t n, void* out) {
  switch (e) {
    case Element::Float32:
      return SumSlots<float>(g, from, n, out);
    case Element::Float64:
      return SumSlots<double>(g, from, n, out);
    case Element::Int32:
      return SumSlots<int32_t>(g, from, n, out);
    case Element::Bytes:
      break;  // not reducible: the ABI refuses it before
  }
}

const unsigned char* Bytes(const void* p) { return static_cast<const unsigned char*>(p); }
unsigned char* Bytes(void* p) { return static_cast<unsigned char*>(p); }

}  // namespace

size_t ElementSize(Element e) {
  switch (e) {
    case Element::Float32:
      return 4;
    case Element::Float64:
      return 8;
    case Element::Int32:
      return 4;
    case Element::Bytes:
      return 1;
  }
  return 1;
}

size_t SendBytes(const Collective& c, int nranks) {
  const size_t es = ElementSize(c.element);
  if (c.kind == Collective::Recv) return 0;
  return c.kind == Collective::ReduceScatter ? c.count * size_t(nranks) * es : c.count * es;
}

size_t RecvBytes(const Collective& c, int nranks) {
  const size_t es = ElementSize(c.element);
  if (c.kind == Collective::Send) return 0;
  return c.kind == Collective::AllGather ? c.count * size_t(nranks) * es : c.count * es;
}

bool RunCollective(ShmGroup& g, const Collective& c, const std::atomic<bool>& stop) {
  const int me = g.rank(), n = g.nranks();
  const size_t es = ElementSize(c.element);
  if (c.kind == Collective::Send) return g.send(c.peer, c.send, c.count * es, stop);
  if (c.kind == Collective::Recv) return g.recv(c.peer, c.recv, c.count * es, stop);
  const size_t per_round = kSlotBytes / es;
  // The elements of `send` the rounds go through.
  const size_t total = c.kind == Collective::ReduceScatter ? c.count * size_t(n) : c.count;
  for (size_t base = 0; base < total; base += per_round) {
    const size_t m = std::min(per_round, total - base);
    if (c.kind != Collective::Broadcast || me == c.root)
      std::memcpy(g.slot(me), Bytes(c.send) + base * es, m * es);
    if (!g.barrier(stop)) return false;
    switch (c.kind) {
      case Collective::AllReduce:
        SumSlots(g, c.element, 0, m, Bytes(c.recv) + base * es);
        break;
      case Collective::Reduce:
        if (me == c.root) SumSlots(g, c.element, 0, m, Bytes(c.recv) + base * es);
        break;
      case Collective::Broadcast:
        std::memcpy(Bytes(c.recv) + base * es, g.slot(c.root), m * es);
        break;
      case Collective::ReduceScatter: {
        // This rank's shard is [me * count, (me + 1) * count) of the whole.
        const size_t lo = std::max(base, size_t(me) * c.count);
        const size_t hi = std::min(base + m, size_t(me + 1) * c.count);
        if (lo < hi)
          SumSlots(g, c.element, lo - base, hi - lo,
                   Bytes(c.recv) + (lo - size_t(me) * c.count) * es);
        break;
      }
      case Collective::AllGather:
        for (int r = 0; r < n; ++r)
          std::memcpy(Bytes(c.recv) + (size_t(r) * c.count + base) * es, g.slot(r), m * es);
        break;
      case Collective::Send:
      case Collective::Recv:
        break;  // point to point: above
    }
    if (!g.barrier(stop)) return false;
  }
  return true;
}

}  // namespace dlh::nccl_standin
