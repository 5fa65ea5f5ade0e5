// DLH — where the loader and the evaluation get their samples: from memory (the whole split
// loaded at start) or from the file (file_source.hpp: only the samples asked for are read, so
// a rank's memory does not grow with the data set).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/data/dataset.hpp"

namespace dlh {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int64_t count() const = 0;
  virtual const Shape3& shape() const = 0;
  virtual const std::vector<int32_t>& labels() const = 0;  // all of them (4 bytes a sample)
  // Writes samples indices[0..n) (any order, repeats allowed), loaded as LoadDataset loads
  // them, one after another into `images` (n x shape().elements()). Safe to call from one
  // thread at a time unless the source says more. Throws DataError naming the file and the sample.
  virtual void read(const int64_t* indices, size_t n, float* images) = 0;
};

// A split in memory, not copied: it must outlive the source and stay unchanged.
class MemorySource : public SampleSource {
 public:
  explicit MemorySource(const DataSplit& split) : split_(split) {}
  int64_t count() const override { return split_.count; }
  const Shape3& shape() const override { return split_.shape; }
  const std::vector<int32_t>& labels() const override { return split_.labels; }
  void read(const int64_t* indices, size_t n, float* images) override;

 private:
  const DataSplit& split_;
};

}  // namespace dlh
