// DLH — the few random-number primitives DLH specifies itself. The standard library's
// distributions (uniform_int, shuffle) are implementation-defined; data order and dropout
// masks must be the same on every rank and after a resume whatever library built them,
// so they are built from these on top of std::mt19937_64, whose output the standard fixes.
#pragma once

#include <cstdint>
#include <random>

// The hash also runs in the CUDA backend's dropout kernel, so that a GPU draws the very
// masks the CPU draws.
#ifdef __CUDACC__
#define DLH_HOST_DEVICE __host__ __device__
#else
#define DLH_HOST_DEVICE
#endif

namespace dlh {

constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;  // splitmix64's stream increment

// The splitmix64 finaliser: bijective, full avalanche, so nearby counters give unrelated
// outputs.
DLH_HOST_DEVICE inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One splitmix64 step: Mix64 of x advanced by the golden gamma.
inline uint64_t SplitMix64(uint64_t x) { return Mix64(x + kGoldenGamma); }

// Dropout: the key of one layer's masks at one step of one rank. Chaining through the
// mixer keeps the fields from cancelling each other (rank 1 step 0 vs rank 0 step 1).
inline uint64_t DropoutKey(uint64_t seed, int rank, uint64_t step, int layer_index) {
  uint64_t key = Mix64(seed + kGoldenGamma);
  key = Mix64(key ^ (uint64_t(uint32_t(rank)) + kGoldenGamma));
  key = Mix64(key ^ (step + kGoldenGamma));
  return Mix64(key ^ (uint64_t(uint32_t(layer_index)) + kGoldenGamma));
}

// The layer_index of layer j of a residual block's path (branch 0: its main path, 1: its
// shortcut) whose block has index `parent`: negative (the top bit set), so never a top-level
// index, and a hash of the three, so blocks nested in blocks get indices of their own.
DLH_HOST_DEVICE inline int NestedLayerIndex(int parent, int branch, uint64_t j) {
  const uint64_t h =
      Mix64((uint64_t(uint32_t(parent)) << 32 | uint64_t(branch) << 24 | j) + kGoldenGamma);
  return int(uint32_t(h) | 0x80000000u);
}

// Element i of a mask keeps when its 53-bit uniform u in [0, 1) is >= the layer's
// threshold (rate * 2^53), so P(keep) = 1 - rate. u comes from element i's counter,
// key + (i + 1) gamma: a loop over elements may step the counter by gamma instead.
DLH_HOST_DEVICE inline uint64_t DropoutCounter(uint64_t key, uint64_t i) {
  return key + (i + 1) * kGoldenGamma;
}
DLH_HOST_DEVICE inline bool DropoutKeepsCounter(uint64_t counter, uint64_t threshold) {
  return (Mix64(counter) >> 11) >= threshold;
}
DLH_HOST_DEVICE inline bool DropoutKeeps(uint64_t key, uint64_t i, uint64_t threshold) {
  return DropoutKeepsCounter(DropoutCounter(key, i), threshold);
}
inline uint64_t DropoutThreshold(double rate) { return uint64_t(rate * 9007199254740992.0); }

// Uniform in [0, bound) without modulo bias (bound > 0).
inline uint64_t UniformBelow(std::mt19937_64& gen, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  for (;;) {
    uint64_t r = gen();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace dlh
