// DLH — samples read from the data set file as they are needed, for data sets larger than a
// rank's memory. The labels are loaded (4 bytes a sample); images are read with pread(2)
// straight from the dataset's contiguous storage: the samples a call asks for are sorted, runs
// of neighbours become one read, and the bytes are converted exactly as LoadDataset converts
// them, so training reads the same floats either way. Memory per rank: the labels and the
// batches in flight, whatever the data set's size. The kernel's page cache keeps what was
// read recently (and is given back under memory pressure); POSIX_FADV_RANDOM stops read-ahead
// from filling it with neighbours no step will ask for.
#pragma once

#include <atomic>
#include <string>

#include "launcher/data/sample_source.hpp"

namespace dlh {

class FileSource : public SampleSource {
 public:
  // `split` is LoadDataset(path, false)'s split "train" or "test" (labels, shape, conversion).
  // Throws DataError when the images are not stored contiguously (chunked or compressed: HDF5
  // would have to decode whole chunks) or not as uint8 or little-endian float32.
  FileSource(const std::string& path, const std::string& split_name, DataSplit split);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  int64_t count() const override { return split_.count; }
  const Shape3& shape() const override { return split_.shape; }
  const std::vector<int32_t>& labels() const override { return split_.labels; }
  // Safe from several threads at once (pread; nothing shared is written but a counter).
  void read(const int64_t* indices, size_t n, float* images) override;

  // Bytes read from the file so far (for the loader's statistics).
  uint64_t bytes_read() const { return bytes_read_.load(); }

 private:
  std::string path_, images_path_;
  DataSplit split_;  // labels and conversion; no images
  int fd_ = -1;
  uint64_t offset_ = 0;      // file offset of sample 0
  size_t sample_bytes_ = 0;  // stored bytes per sample
  std::atomic<uint64_t> bytes_read_{0};
};

}  // namespace dlh
