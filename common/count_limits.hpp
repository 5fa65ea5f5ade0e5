// DLH — the counts a plan and a job are made of, in checked 64-bit arithmetic with named
// limits (issue 41).
//
// A sum or product of counts a user chose (samples, eval-samples, epochs, tasks, nodes,
// GPUs) that overflowed used to be undefined behaviour, and in practice a negative time that
// "met" any deadline. Each count is now checked against its limit where it is read, with
// one line naming the field; what is computed from them goes through CheckedAdd and
// CheckedMul, which refuse an overflow instead of wrapping. The limits are far above any
// real job and far below where the arithmetic breaks: 1e12 samples in an epoch, 1e6 epochs,
// 1e15 samples in all (a million years on any GPU), 2^20 nodes of a type, 1024 GPUs on a
// node, 2^24 GPUs or tasks in a job.
#pragma once

#include <cstdint>
#include <string>

#include "common/error.hpp"

namespace dlh {

constexpr int64_t kMaxSamplesPerEpoch = 1000000000000;  // samples, eval-samples
constexpr int64_t kMaxEpochs = 1000000;
constexpr double kMaxTotalSamples = 1e15;  // (samples + eval-samples) x epochs
constexpr int64_t kMaxNodesPerType = int64_t(1) << 20;
constexpr int64_t kMaxGpusPerNode = 1024;
constexpr int64_t kMaxGpus = int64_t(1) << 24;   // in a job, and max-gpus
constexpr int64_t kMaxTasks = int64_t(1) << 24;  // tasks of a job

// a + b and a x b, or EstimateError "<what>: <a> + <b> is more than a 64-bit count holds".
inline int64_t CheckedAdd(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw EstimateError(what + ": " + std::to_string(a) + " + " + std::to_string(b) +
                        " is more than a 64-bit count holds");
  return out;
}
inline int64_t CheckedMul(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw EstimateError(what + ": " + std::to_string(a) + " x " + std::to_string(b) +
                        " is more than a 64-bit count holds");
  return out;
}

// ceil(a / b) for a >= 0, b > 0, without the a + b - 1 that overflows near INT64_MAX.
inline int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace dlh
