// DLH — reading a checkpoint: every attribute and dataset checked, sizes bounded by the
// file's before anything is allocated for them, the checksum recomputed (the layout:
// checkpoint_format.hpp).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>

#include "launcher/storage/checkpoint.hpp"
#include "launcher/storage/checkpoint_format.hpp"
#include "launcher/storage/h5.hpp"

namespace dlh {
namespace {

using checkpoint_format::Checksum;
using checkpoint_format::Errno;
using checkpoint_format::FormatChecksum;
using checkpoint_format::kProducer;
using checkpoint_format::kSections;
using checkpoint_format::ParseChecksum;
using checkpoint_format::ParseRankBatches;
using checkpoint_format::ParseSplitHistory;
using checkpoint_format::ParseU64;
using checkpoint_format::Quote;
using checkpoint_format::Section;
using checkpoint_format::SplitHistoryProblem;
using checkpoint_format::SplitNames;
using checkpoint_format::WithPath;

// "0.5" or "[0.5, 0.25, 1]": an attribute's values for a message.
std::string ValuesText(const std::vector<double>& values) {
  std::string out;
  for (size_t i = 0; i < values.size() && i < 8; ++i)
    out += (i ? ", " : "") + std::to_string(values[i]);
  if (values.size() > 8) out += ", ...";
  return values.size() == 1 ? out : "[" + out + "]";
}

struct Reader {
  const std::string& path;
  hid_t f;
  uint64_t file_size;
  // Values of the arrays read so far. A file stores each array once, so all of them together
  // fit in it; checking each array alone let an order list that names one dataset 500,000
  // times (or as many hard links to it) allocate its size 500,000 times.
  uint64_t values_read = 0;

  void RequireAttr(const char* name) const {
    if (!h5::HasAttr(f, ".", name)) throw CheckpointError(path + ": missing attribute " + name);
  }
  int64_t Int(const char* name) const {
    RequireAttr(name);
    return h5::GetIntAttr(f, ".", name);
  }
  double Double(const char* name) const {
    RequireAttr(name);
    return h5::GetDoubleAttr(f, ".", name);
  }
  // One number or more (a 1-D array); as many as the file can hold at most.
  std::vector<double> Doubles(const char* name) const {
    RequireAttr(name);
    return h5::GetDoublesAttr(f, ".", name, size_t(file_size / sizeof(double)) + 1);
  }
  std::string String(const char* name) const {
    RequireAttr(name);
    return h5::GetStringAttr(f, ".", name);
  }
  void RequireDataset(const std::string& name) const {
    if (!h5::Exists(f, name)) throw CheckpointError(path + ": missing dataset /" + name);
  }

  NamedArray Array(const std::string& dataset, const std::string& name) {
    RequireDataset(dataset);
    NamedArray a;
    a.name = name;
    uint64_t count = 1;
    for (hsize_t d : h5::Dims(f, dataset)) {
      if (d > uint64_t(INT_MAX))
        throw CheckpointError(path + ": dataset /" + dataset + " has a dimension too large");
      a.shape.push_back(int(d));
      count = d == 0 ? 0 : (count > UINT64_MAX / d ? UINT64_MAX : count * d);
    }
    // A corrupt header could claim any size; refuse before allocating for it.
    if (count > file_size / sizeof(float) - values_read)
      throw CheckpointError(path + ": dataset /" + dataset + " claims " + std::to_string(count) +
                            " values, more than the file holds" +
                            (values_read ? " besides the arrays before it" : ""));
    values_read += count;
    a.data = h5::ReadFloats(f, dataset);
    if (a.data.size() != count)
      throw CheckpointError(path + ": dataset /" + dataset + " has an unexpected size");
    return a;
  }
};

// Why HDF5 cannot open `path`: not HDF5 at all, or HDF5's most specific reason ("truncated
// file: eof = ...", "file signature not found").
std::string OpenFailureReason(const std::string& path, const H5Error& e) {
  htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  H5Eclear2(H5E_DEFAULT);
  if (is_hdf5 == 0) return "not an HDF5 file";
  std::string reason = e.innermost;
  if (reason.empty()) {
    reason = e.what();
    if (reason.compare(0, path.size() + 2, path + ": ") == 0) reason.erase(0, path.size() + 2);
  }
  return "not a valid HDF5 file, truncated or corrupt (" + reason + ")";
}

TrainState LoadOpened(const std::string& path, uint64_t file_size) {
  std::unique_ptr<h5::File> file;
  try {
    file = std::make_unique<h5::File>(path, h5::Mode::ReadOnly);
  } catch (const H5Error& e) {
    throw CheckpointError(path + ": " + OpenFailureReason(path, e));
  }
  Reader r{path, file->id(), file_size};

  int64_t version = r.Int("format_version");
  if (version != kCheckpointFormatVersion)
    throw CheckpointError(path + ": format_version " + std::to_string(version) +
                          " is not supported (this build reads " +
                          std::to_string(kCheckpointFormatVersion) + ")");
  std::string producer = r.String("producer");
  if (producer != kProducer)
    throw CheckpointError(path + ": producer is " + Quote(producer) + ", not " + Quote(kProducer));

  TrainState s;
  s.step = r.Int("step");
  s.epoch = r.Int("epoch");
  s.step_in_epoch = r.Int("step_in_epoch");
  std::string seed = r.String("seed");
  if (!ParseU64(seed, &s.seed))
    throw CheckpointError(path + ": attribute seed " + Quote(seed) +
                          " is not an unsigned 64-bit decimal number");
  s.world_size = r.Int("world_size");
  s.samples_seen = r.Int("samples_seen");
  s.elapsed_seconds = r.Double("elapsed_seconds");
  s.optimizer = r.String("optimizer");
  if (h5::HasAttr(r.f, ".", "rank_batches")) {
    const std::string text = r.String("rank_batches");
    if (!ParseRankBatches(text, s.world_size, &s.rank_batches) ||
        int64_t(s.rank_batches.size()) != s.world_size)
      throw CheckpointError(path + ": attribute rank_batches " + Quote(text.substr(0, 64)) +
                            " is not " + std::to_string(s.world_size) +
                            " positive batches, one per rank (\"96x2,32\")");
  }
  if (h5::HasAttr(r.f, ".", "global_batch")) {
    s.global_batch = r.Int("global_batch");
    s.lr = r.Double("lr");
    if (s.global_batch <= 0 || !(s.lr > 0 && std::isfinite(s.lr)))
      throw CheckpointError(path + ": attributes global_batch " + std::to_string(s.global_batch) +
                            " and lr " + std::to_string(s.lr) + " must be positive");
  }
  if (h5::HasAttr(r.f, ".", "input_scale")) {
    s.input_scale = r.Double("input_scale");
    s.input_mean = r.Doubles("input_mean");
    s.input_std = r.Doubles("input_std");
    bool valid = s.input_scale > 0 && std::isfinite(s.input_scale) &&
                 s.input_mean.size() == s.input_std.size();
    for (size_t i = 0; valid && i < s.input_mean.size(); ++i)
      valid = std::isfinite(s.input_mean[i]) && s.input_std[i] > 0 && std::isfinite(s.input_std[i]);
    if (!valid)
      throw CheckpointError(path + ": attributes input_scale, input_mean, input_std (" +
                            std::to_string(s.input_scale) + ", " + ValuesText(s.input_mean) + ", " +
                            ValuesText(s.input_std) +
                            ") must be finite, the scale and std positive, as many stds as means");
  }
  std::string stored = r.String("checksum");
  uint32_t stored_crc = 0;
  if (!ParseChecksum(stored, &stored_crc))
    throw CheckpointError(path + ": attribute checksum " + Quote(stored) +
                          " is not of the form crc32:<8 hex digits>");

  r.RequireDataset("spec");
  s.spec_json = h5::ReadString(r.f, "spec");
  if (h5::Exists(r.f, "split_history")) {
    std::string why;
    if (!ParseSplitHistory(h5::ReadString(r.f, "split_history"), s.world_size, &s.split_history,
                           &why))
      throw CheckpointError(path + ": dataset /split_history: " + why);
    why = SplitHistoryProblem(s);
    if (!why.empty()) throw CheckpointError(path + ": dataset /split_history: " + why);
  }
  if (h5::Exists(r.f, "class_names")) {
    const nlohmann::json names =
        nlohmann::json::parse(h5::ReadString(r.f, "class_names"), nullptr, false);
    if (!names.is_array() || names.empty())
      throw CheckpointError(path + ": dataset /class_names: not a JSON array of names");
    for (size_t i = 0; i < names.size(); ++i) {
      if (!names[i].is_string())
        throw CheckpointError(path + ": dataset /class_names: [" + std::to_string(i) +
                              "] is not a name");
      s.class_names.push_back(names[i].get<std::string>());
    }
  }
  for (const Section& sec : kSections) {
    std::string order = std::string("order/") + sec.group;
    if (sec.optional && !h5::Exists(r.f, order)) continue;
    r.RequireDataset(order);
    std::vector<NamedArray>& arrays = s.*sec.arrays;
    for (const std::string& name : SplitNames(h5::ReadString(r.f, order)))
      arrays.push_back(r.Array(std::string(sec.group) + "/" + name, name));
  }
  file->close();

  uint32_t computed = Checksum(s);
  if (computed != stored_crc)
    throw CheckpointError(path + ": checksum mismatch (stored " + FormatChecksum(stored_crc) +
                          ", computed " + FormatChecksum(computed) + ")");
  return s;
}

}  // namespace

TrainState LoadCheckpoint(const std::string& path) {
  // Checked by hand first: HDF5's message for a missing file is "unable to open file".
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError(path + ": cannot open (" + Errno() + ")");
  struct stat st {};
  int rc = fstat(fd, &st);
  close(fd);
  if (rc != 0) throw CheckpointError(path + ": cannot open (" + Errno() + ")");
  if (!S_ISREG(st.st_mode)) throw CheckpointError(path + ": cannot open (not a regular file)");
  try {
    const auto hdf5 = h5::LockLibrary();
    return LoadOpened(path, uint64_t(st.st_size));
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw CheckpointError(path + ": out of memory while reading");
  } catch (const std::exception& e) {
    throw CheckpointError(WithPath(path, e.what()));
  }
}

}  // namespace dlh
