// DLH — the CPU engine's threads: one small pool that runs every parallel pass of a
// training step (GEMM blocks, im2col, element-wise layers, the optimizer).
//
// Why a pool of our own instead of OpenBLAS's threads: OpenBLAS parallelises only its
// GEMMs, so every non-GEMM pass ran on one core; and its idle workers spin on
// sched_yield between GEMMs, stealing the core that other work would need. The engine
// therefore runs OpenBLAS single-threaded inside these threads (OpenBLAS supports
// concurrent calls), and nothing else competes for the cores.
//
// Determinism: callers cut their work into blocks by the problem shape alone; threads only
// choose WHICH block they compute next. Every result is therefore bit-identical whatever
// the thread count and timing, as long as blocks write disjoint memory and any reduction
// over blocks is combined by the caller in block order.
#pragma once

#include <cstddef>
#include <utility>

namespace dlh {

// Threads the engine uses (>= 1). Until SetCpuThreads is called, the engine adopts the
// count given to OpenBLAS (openblas_set_num_threads, OPENBLAS_NUM_THREADS), which is how
// the trainer's --threads reaches it, and sets OpenBLAS itself to one thread.
int CpuThreads();
void SetCpuThreads(int threads);

namespace detail {
using BlockFn = void (*)(void* ctx, int block, int thread);
void RunBlocks(int blocks, BlockFn fn, void* ctx);
}  // namespace detail

// Calls fn(block, thread) once for every block in [0, blocks), spread over the engine's
// threads; returns when all are done. `thread` in [0, CpuThreads()) indexes per-thread
// scratch. Nested calls (from inside a block) run inline on the calling thread. The
// first exception thrown by a block is rethrown here after all blocks have finished.
template <class Fn>
void ParallelFor(int blocks, Fn&& fn) {
  auto call = [](void* ctx, int block, int thread) { (*static_cast<Fn*>(ctx))(block, thread); };
  detail::RunBlocks(blocks, call, &fn);
}

// Splits [0, n) into contiguous ranges of at least `grain` elements (at most 64 ranges;
// the split depends on n and grain only) and calls fn(begin, end) for each.
template <class Fn>
void ParallelRange(size_t n, size_t grain, Fn&& fn) {
  if (grain == 0) grain = 1;
  size_t blocks = n / grain;
  if (blocks > 64) blocks = 64;
  if (blocks <= 1) {
    if (n > 0) fn(size_t(0), n);
    return;
  }
  ParallelFor(int(blocks),
              [&](int b, int) { fn(n * size_t(b) / blocks, n * size_t(b + 1) / blocks); });
}

}  // namespace dlh
