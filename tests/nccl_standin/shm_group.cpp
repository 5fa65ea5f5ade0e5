// DLH NCCL stand-in — the shared-memory meeting place (see shm_group.hpp).
#include "tests/nccl_standin/shm_group.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace dlh::nccl_standin {

struct ShmGroup::Header {
  // Each rank's latest barrier; lock-free 64-bit atomics work across processes.
  std::atomic<uint64_t> phase[kMaxRanks];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// One ordered pair's box: chunks written and read so far (equal: empty), then the chunk.
struct ShmGroup::Mailbox {
  std::atomic<uint64_t> written, read;
  unsigned char pad[64 - 2 * sizeof(std::atomic<uint64_t>)];  // the chunk starts a cache line
  unsigned char chunk[kMailBytes];
};

namespace {
constexpr size_t kHeaderBytes = 4096;  // keeps the slots page-aligned
static_assert(kHeaderBytes >= sizeof(std::atomic<uint64_t>) * kMaxRanks);

[[noreturn]] void Fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

// Polls `ready` until it holds or `stop` is raised (false): a short wait is spun, then
// yielded, then slept in growing steps, so that a rank waiting for a slow or stopped peer does
// not take a core.
template <class Ready>
bool WaitUntil(const Ready& ready, const std::atomic<bool>& stop) {
  auto pause = std::chrono::microseconds(0);
  while (!ready()) {
    if (stop.load(std::memory_order_relaxed)) return false;
    if (pause.count() == 0) {
      std::this_thread::yield();
      pause = std::chrono::microseconds(1);
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(200));
    }
  }
  return true;
}
}  // namespace

ShmGroup::ShmGroup(const std::string& name, int nranks, int rank)
    : name_(name), nranks_(nranks), rank_(rank) {
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks)
    throw std::runtime_error("rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                             ": the stand-in takes 1 to " + std::to_string(kMaxRanks) + " ranks");
  // The mailboxes after the slots: a segment on tmpfs takes memory only where it is written.
  bytes_ = kHeaderBytes + size_t(nranks) * kSlotBytes +
           size_t(nranks) * size_t(nranks) * sizeof(Mailbox);
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) Fail("shm_open " + name);
  // Every rank sizes it alike; a fresh segment reads as zeros, every phase 0.
  if (ftruncate(fd, off_t(bytes_)) != 0) {
    close(fd);
    Fail("ftruncate " + name);
  }
  map_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    Fail("mmap " + name);
  }
  header_ = static_cast<Header*>(map_);
}

ShmGroup::~ShmGroup() {
  if (!unlinked_) shm_unlink(name_.c_str());
  if (map_) munmap(map_, bytes_);
}

unsigned char* ShmGroup::slot(int r) const {
  return static_cast<unsigned char*>(map_) + kHeaderBytes + size_t(r) * kSlotBytes;
}

ShmGroup::Mailbox* ShmGroup::mailbox(int from, int to) const {
  auto* first = reinterpret_cast<Mailbox*>(static_cast<unsigned char*>(map_) + kHeaderBytes +
                                           size_t(nranks_) * kSlotBytes);
  return first + size_t(from) * size_t(nranks_) + size_t(to);
}

namespace {
// Chunks of a message: an empty one is one empty chunk, so that every send meets its receive.
size_t Chunks(size_t bytes) { return std::max<size_t>(1, (bytes + kMailBytes - 1) / kMailBytes); }
}  // namespace

bool ShmGroup::send(int to, const void* data, size_t bytes, const std::atomic<bool>& stop) {
  Mailbox* box = mailbox(rank_, to);
  const auto* in = static_cast<const unsigned char*>(data);
  for (size_t k = 0; k < Chunks(bytes); ++k) {
    const uint64_t written = box->written.load(std::memory_order_relaxed);
    if (!WaitUntil([&] { return box->read.load(std::memory_order_acquire) == written; }, stop))
      return false;
    const size_t at = k * kMailBytes, n = std::min(kMailBytes, bytes - std::min(bytes, at));
    if (n > 0) std::memcpy(box->chunk, in + at, n);
    box->written.store(written + 1, std::memory_order_release);
  }
  return true;
}

bool ShmGroup::recv(int from, void* data, size_t bytes, const std::atomic<bool>& stop) {
  Mailbox* box = mailbox(from, rank_);
  auto* out = static_cast<unsigned char*>(data);
  for (size_t k = 0; k < Chunks(bytes); ++k) {
    const uint64_t read = box->read.load(std::memory_order_relaxed);
    if (!WaitUntil([&] { return box->written.load(std::memory_order_acquire) > read; }, stop))
      return false;
    const size_t at = k * kMailBytes, n = std::min(kMailBytes, bytes - std::min(bytes, at));
    if (n > 0) std::memcpy(out + at, box->chunk, n);
    box->read.store(read + 1, std::memory_order_release);
  }
  return true;
}

bool ShmGroup::barrier(const std::atomic<bool>& stop) {
  ++phase_;
  header_->phase[rank_].store(phase_, std::memory_order_release);
  // A collective's round is short when every rank is there (WaitUntil spins a little first).
  for (int r = 0; r < nranks_; ++r)
    if (!WaitUntil([&] { return header_->phase[r].load(std::memory_order_acquire) >= phase_; },
                   stop))
      return false;
  if (!unlinked_) {
    // Every rank has mapped it: the name can go (ENOENT: a peer removed it first).
    shm_unlink(name_.c_str());
    unlinked_ = true;
  }
  return true;
}

std::string ShmGroup::missing_ranks() const {
  std::string out;
  for (int r = 0; r < nranks_; ++r)
    if (header_->phase[r].load(std::memory_order_acquire) < phase_)
      out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace dlh::nccl_standin
