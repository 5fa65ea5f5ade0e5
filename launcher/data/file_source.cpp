// DLH — samples read from the data set file as needed (see file_source.hpp).
#include "launcher/data/file_source.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>

#include "common/error.hpp"
#include "launcher/storage/h5.hpp"

namespace dlh {

FileSource::FileSource(const std::string& path, const std::string& split_name, DataSplit split)
    : path_(path), images_path_("/" + split_name + "/images"), split_(std::move(split)) {
  sample_bytes_ = size_t(split_.shape.elements()) * (split_.stored_bytes ? 1 : 4);
  try {
    const auto hdf5 = h5::LockLibrary();  // a checkpoint may be written in the background
    h5::File file(path, h5::Mode::ReadOnly);
    h5::Handle dset(H5_CHECK(H5Dopen2(file.id(), images_path_.c_str(), H5P_DEFAULT)));
    h5::Handle type(H5_CHECK(H5Dget_type(dset.id())));
    const bool u8 = H5_CHECK(H5Tequal(type.id(), H5T_STD_U8LE)) > 0;
    const bool f32 = H5_CHECK(H5Tequal(type.id(), H5T_IEEE_F32LE)) > 0;
    if (!(u8 && split_.stored_bytes) && !(f32 && !split_.stored_bytes))
      throw DataError(path + ": " + images_path_ +
                      " is neither uint8 nor little-endian float32, which reading samples from "
                      "the file needs (--data-mode memory loads any number type)");
    const haddr_t offset = H5Dget_offset(dset.id());
    if (offset == HADDR_UNDEF)
      throw DataError(path + ": " + images_path_ +
                      " is not stored contiguously (chunked or compressed), which reading "
                      "samples from the file needs: rewrite it with h5repack -l CONTI, or use "
                      "--data-mode memory");
    offset_ = uint64_t(offset);
  } catch (const H5Error& e) {
    throw DataError(path + ": " + images_path_ + ": " + e.what());
  }
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw DataError(path + ": cannot open: " + std::strerror(errno));
  // Steps ask for samples in a random order: read-ahead would only fill the page cache.
  (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_RANDOM);
}

FileSource::~FileSource() {
  if (fd_ >= 0) ::close(fd_);
}

void FileSource::read(const int64_t* indices, size_t n, float* images) {
  // Sorted, so that neighbours in the file become one read and the disk moves one way.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return indices[a] < indices[b]; });
  const size_t e = size_t(split_.shape.elements());
  const float* a = split_.load.a.data();
  const float* b = split_.load.b.data();
  // Ask the kernel for every sample first: it queues all the reads at once (the disk serves
  // many at a time), where preads one by one would wait for each in turn.
  for (size_t k = 0; k < n; ++k) {
    const int64_t i = indices[order[k]];
    if (i >= 0 && i < split_.count)
      (void)::posix_fadvise(fd_, off_t(offset_ + uint64_t(i) * sample_bytes_), off_t(sample_bytes_),
                            POSIX_FADV_WILLNEED);
  }
  std::vector<uint8_t> staging;
  size_t k = 0;
  while (k < n) {
    const int64_t first = indices[order[k]];
    if (first < 0 || first >= split_.count)
      throw DataError(path_ + ": " + images_path_ + ": sample " + std::to_string(first) +
                      " is outside its " + std::to_string(split_.count));
    // The run: this sample and the next ones in the file (a repeated index ends it).
    size_t run = 1;
    while (k + run < n && indices[order[k + run]] == first + int64_t(run)) ++run;
    staging.resize(run * sample_bytes_);
    size_t done = 0;
    const off_t at = off_t(offset_ + uint64_t(first) * sample_bytes_);
    while (done < staging.size()) {
      const ssize_t got = ::pread(fd_, staging.data() + done, staging.size() - done, at + done);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0)
        throw DataError(path_ + ": cannot read " + images_path_ + " sample " +
                        std::to_string(first) + ": " + std::strerror(errno));
      if (got == 0)
        throw DataError(path_ + ": truncated: " + images_path_ + " sample " +
                        std::to_string(first + int64_t(done / sample_bytes_)) +
                        " lies past the end of the file");
      done += size_t(got);
    }
    bytes_read_ += staging.size();
    for (size_t r = 0; r < run; ++r) {
      float* out = images + order[k + r] * e;
      const uint8_t* in = staging.data() + r * sample_bytes_;
      if (split_.stored_bytes) {
        for (size_t j = 0; j < e; ++j) out[j] = float(in[j]) * a[j] + b[j];
      } else {
        std::memcpy(out, in, e * sizeof(float));
        for (size_t j = 0; j < e; ++j)
          if (!std::isfinite(out[j]))
            throw DataError(path_ + ": " + images_path_ + " sample " +
                            std::to_string(first + int64_t(r)) +
                            " holds a non-finite value at element " + std::to_string(j));
        if (!split_.load.identity)
          for (size_t j = 0; j < e; ++j) out[j] = out[j] * a[j] + b[j];
      }
    }
    k += run;
  }
}

}  // namespace dlh
