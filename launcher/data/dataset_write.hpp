// DLH — writing a data set file (layout: dataset.hpp), shared by every producer: the
// Fashion-MNIST import, synthetic data and the importers of users' own data (import.hpp).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <string>

namespace dlh {

constexpr int64_t kDatasetFormatVersion = 1;

// Creates out_path atomically (common/atomic_file.hpp): `body` writes into a temporary file
// beside it, which is flushed, fsynced and closed before rename(2) puts it in place, so a
// crash or a concurrent reader never sees a half-written data set. The temporary file is
// removed on failure. Every failure is a DataError naming out_path.
void WriteDatasetAtomically(const std::string& out_path, const std::function<void(hid_t)>& body);

// The root attributes: format_version, classes, source, mean and std (one value each, or
// one per channel or per element: input_stats.hpp).
void WriteDatasetRootAttrs(hid_t file, int classes, const std::string& source,
                           const std::vector<double>& mean, const std::vector<double>& stddev);

}  // namespace dlh
