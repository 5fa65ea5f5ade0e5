// DLH — the data loader: one shard per rank, deterministic per-epoch shuffle,
// background prefetch.
//
// Each epoch is a permutation of the training set drawn from (seed, epoch); it is the same
// on every rank. Step s of the epoch consumes the global batch perm[s*B, (s+1)*B), of
// which this rank takes [rank_offset, rank_offset + rank_batch). The last partial global
// batch is dropped, so steps_per_epoch = floor(N / B).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/spec.hpp"
#include "launcher/data/dataset.hpp"
#include "launcher/data/sample_source.hpp"
#include "launcher/nn/tensor.hpp"

namespace dlh {

struct LoaderOptions {
  int64_t global_batch = 0;
  int64_t rank_offset = 0;
  int64_t rank_batch = 0;
  uint64_t seed = 0;
  int prefetch = 2;     // batches prepared ahead by the background thread (0: none)
  AugmentSpec augment;  // applied to every sample of every batch (augment.hpp)
  // Test hook, empty in production: called with the cursor of each batch just before it
  // is prepared, on whichever thread prepares it; an exception it throws reaches next().
  std::function<void(int64_t epoch, int64_t step_in_epoch)> before_batch;
};

struct Batch {
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  // Unique in the process for every batch a loader prepares (NewBatchSerial); 0 for one built
  // elsewhere. An engine that copied a batch to its device ahead of time finds it by this:
  // the cursor alone would match a batch of the same step prepared for an earlier split.
  uint64_t serial = 0;
  Tensor images;                // rank_batch x C x H x W
  std::vector<int32_t> labels;  // rank_batch
};

// A serial no batch has had yet (atomic: loaders prepare batches on their own threads).
uint64_t NewBatchSerial();

class Loader {
 public:
  // Starts at (epoch, step_in_epoch), the cursor of the next batch to hand out
  // (step_in_epoch == steps_per_epoch() is read as the start of epoch + 1). `split` is
  // not copied: it must outlive the loader and stay unchanged. Throws DataError if the
  // split is smaller than one global batch or the rank slice does not fit in it.
  Loader(const DataSplit& split, const LoaderOptions& options, int64_t epoch,
         int64_t step_in_epoch);
  // The same from any source (a split in memory or read from the file: sample_source.hpp),
  // with the same batches bit for bit. `source` must outlive the loader; the loader's thread
  // is its only reader while the loader lives.
  Loader(SampleSource& source, const LoaderOptions& options, int64_t epoch, int64_t step_in_epoch);
  ~Loader();  // stops and joins the prefetch thread
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The batch at the cursor; advances the cursor (wrapping into the next epoch).
  Batch next();
  int64_t steps_per_epoch() const;
  // The permutation of epoch `epoch` (exposed for tests).
  static std::vector<int64_t> permutation(int64_t count, uint64_t seed, int64_t epoch);

 private:
  void start(int64_t epoch, int64_t step_in_epoch);  // checks, positions, starts the thread
  struct Impl;  // prefetch thread, queue and cursor (loader.cpp)
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlh
