// DLH — the few random-number primitives DLH specifies itself. The standard library's
// distributions (uniform_int, shuffle) are implementation-defined; data order and dropout
// masks must be the same on every rank and after a resume whatever library built them,
// so they are built from these on top of std::mt19937_64, whose output the standard fixes.
#pragma once

#include <cstdint>
#include <random>

namespace dlh {

constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;  // splitmix64's stream increment

// The splitmix64 finaliser: bijective, full avalanche, so nearby counters give unrelated
// outputs.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One splitmix64 step: Mix64 of x advanced by the golden gamma.
inline uint64_t SplitMix64(uint64_t x) { return Mix64(x + kGoldenGamma); }

// Uniform in [0, bound) without modulo bias (bound > 0).
inline uint64_t UniformBelow(std::mt19937_64& gen, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  for (;;) {
    uint64_t r = gen();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace dlh
