// DLH — writing a checkpoint: validation, the HDF5 contents with the checksum computed
// beside them, and the atomic commit (the layout: checkpoint_format.hpp).
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "common/atomic_file.hpp"
#include "launcher/storage/checkpoint.hpp"
#include "launcher/storage/checkpoint_format.hpp"
#include "launcher/storage/h5.hpp"

namespace dlh {
namespace {

using checkpoint_format::Checksum;
using checkpoint_format::Errno;
using checkpoint_format::FormatChecksum;
using checkpoint_format::FormatRankBatches;
using checkpoint_format::FormatSplitHistory;
using checkpoint_format::JoinNames;
using checkpoint_format::kProducer;
using checkpoint_format::kSections;
using checkpoint_format::Quote;
using checkpoint_format::Section;
using checkpoint_format::SplitHistoryProblem;
using checkpoint_format::WithPath;
namespace fs = std::filesystem;

// ---- validation before writing ----------------------------------------------------------

void ValidateName(const std::string& path, const std::string& where, const std::string& name) {
  auto bad = [&](const std::string& why) {
    throw CheckpointError(path + ": " + where + " name " + Quote(name) + " " + why);
  };
  if (name.empty()) bad("is empty");
  if (name.find('\n') != std::string::npos || name.find('\0') != std::string::npos)
    bad("contains a newline or NUL");
  size_t start = 0;
  while (true) {
    size_t slash = name.find('/', start);
    std::string part = name.substr(start, slash == std::string::npos ? slash : slash - start);
    if (part.empty() || part == "." || part == "..")
      bad("has an empty, '.' or '..' path component");
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
}

void Validate(const std::string& path, const TrainState& s) {
  if (!s.rank_batches.empty()) {
    // What LoadOpened accepts back: world_size batches in [1, 2^31).
    bool ok = int64_t(s.rank_batches.size()) == s.world_size;
    for (int64_t b : s.rank_batches) ok = ok && b > 0 && b <= INT32_MAX;
    if (!ok) throw CheckpointError(path + ": rank_batches must hold world_size positive batches");
  }
  const std::string history = SplitHistoryProblem(s);
  if (!history.empty()) throw CheckpointError(path + ": split_history: " + history);
  // What LoadOpened accepts back: no batch recorded, or a positive one with a positive rate.
  if (s.global_batch < 0 || (s.global_batch > 0 && !(s.lr > 0 && std::isfinite(s.lr))))
    throw CheckpointError(path + ": global_batch and lr must be positive (or both unset)");
  if (s.spec_json.find('\0') != std::string::npos)
    throw CheckpointError(path + ": spec text contains a NUL byte");
  if (s.optimizer.find('\0') != std::string::npos)
    throw CheckpointError(path + ": optimizer name contains a NUL byte");
  for (const Section& sec : kSections) {
    const std::vector<NamedArray>& arrays = s.*sec.arrays;
    std::set<std::string> names;
    for (size_t i = 0; i < arrays.size(); ++i) {
      const NamedArray& a = arrays[i];
      std::string where = std::string(sec.what) + "[" + std::to_string(i) + "]";
      ValidateName(path, where, a.name);
      if (!names.insert(a.name).second)
        throw CheckpointError(path + ": " + where + " name " + Quote(a.name) + " is repeated");
      size_t count = 1;
      for (int d : a.shape) {
        if (d < 0)
          throw CheckpointError(path + ": " + where + " " + Quote(a.name) +
                                " has a negative dimension");
        if (d != 0 && count > SIZE_MAX / size_t(d))
          throw CheckpointError(path + ": " + where + " " + Quote(a.name) + " is too large");
        count *= size_t(d);
      }
      if (count != a.data.size())
        throw CheckpointError(path + ": " + where + " " + Quote(a.name) + ": its shape holds " +
                              std::to_string(count) + " values but it has " +
                              std::to_string(a.data.size()));
    }
    // HDF5 cannot hold both a dataset "a" and a dataset "a/b" (a would be a group).
    for (const std::string& n : names) {
      auto next = names.lower_bound(n + "/");
      if (next != names.end() && next->compare(0, n.size() + 1, n + "/") == 0)
        throw CheckpointError(path + ": " + sec.what + " names " + Quote(n) + " and " +
                              Quote(*next) + " clash (the first would be the group of the second)");
    }
  }
}

// ---- file-system helpers ----------------------------------------------------------------

std::string ParentDir(const std::string& path) {
  std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// Makes a rename or unlink in `dir` durable. Some file systems (and FUSE mounts) do not
// support fsync on a folder and say EINVAL; there is nothing better to do there.
void FsyncDir(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError(dir + ": cannot open folder for fsync (" + Errno() + ")");
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0 && err != EINVAL && err != ENOTSUP)
    throw CheckpointError(dir + ": fsync of folder failed (" + std::strerror(err) + ")");
}

// CommitAtomically reports a failed rename as IoError; checkpoints have always said which
// rename failed.
std::string RenameFailure(const std::string& path, const std::string& tmp, const IoError& e) {
  return path + ": cannot rename " + tmp + " to it (" + e.reason + ")";
}

// fsync by name: catches whatever H5Fclose wrote after flush_and_sync (it may rewrite the
// superblock and truncate the file to its allocated end).
void FsyncFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError(path + ": cannot reopen for fsync (" + Errno() + ")");
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0) throw CheckpointError(path + ": fsync failed (" + std::strerror(err) + ")");
}

// The wrapper has no group creation; groups are made here so that empty ones exist too.
void CreateGroup(hid_t loc, const std::string& name) {
  h5::Handle g(H5_CHECK(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
}

// The checksum and the CPU time of the thread that computed it.
struct TimedChecksum {
  uint32_t crc = 0;
  CpuSeconds cpu;
};

void WriteContents(hid_t f, const TrainState& s, CpuSeconds* checksum_cpu) {
  // The crc32 (zlib's, about 7 GB/s here) runs beside the writes, which alone call HDF5,
  // and its attribute is written last. The future's destructor waits for it should a write
  // throw, so `s` outlives it.
  auto timed = [&s] {
    const CpuSeconds before = ThisThreadCpu();
    TimedChecksum out;
    out.crc = Checksum(s);
    out.cpu = ThisThreadCpu() - before;
    return out;
  };
  std::future<TimedChecksum> crc;
  bool crc_thread = true;
  try {
    crc = std::async(std::launch::async, timed);
  } catch (const std::system_error&) {  // no thread to be had: compute it in get()
    crc = std::async(std::launch::deferred, timed);
    crc_thread = false;
  }
  h5::SetAttr(f, ".", "format_version", int64_t{kCheckpointFormatVersion});
  h5::SetAttr(f, ".", "producer", std::string(kProducer));
  h5::SetAttr(f, ".", "step", int64_t{s.step});
  h5::SetAttr(f, ".", "epoch", int64_t{s.epoch});
  h5::SetAttr(f, ".", "step_in_epoch", int64_t{s.step_in_epoch});
  h5::SetAttr(f, ".", "seed", std::to_string(s.seed));
  h5::SetAttr(f, ".", "world_size", int64_t{s.world_size});
  h5::SetAttr(f, ".", "samples_seen", int64_t{s.samples_seen});
  h5::SetAttr(f, ".", "elapsed_seconds", double{s.elapsed_seconds});
  h5::SetAttr(f, ".", "optimizer", s.optimizer);
  if (!s.rank_batches.empty())
    h5::SetAttr(f, ".", "rank_batches", FormatRankBatches(s.rank_batches));
  if (s.global_batch > 0) {
    h5::SetAttr(f, ".", "global_batch", int64_t{s.global_batch});
    h5::SetAttr(f, ".", "lr", double{s.lr});
  }
  if (s.input_scale > 0) {
    h5::SetAttr(f, ".", "input_scale", double{s.input_scale});
    h5::SetDoublesAttr(f, ".", "input_mean", s.input_mean);
    h5::SetDoublesAttr(f, ".", "input_std", s.input_std);
  }
  h5::SetAttr(f, ".", "created_unix", int64_t{std::time(nullptr)});
  h5::WriteString(f, "spec", s.spec_json);
  if (!s.split_history.empty())
    h5::WriteString(f, "split_history", FormatSplitHistory(s.split_history));
  if (!s.class_names.empty())
    h5::WriteString(f, "class_names", nlohmann::json(s.class_names).dump());
  CreateGroup(f, "order");
  for (const Section& sec : kSections) {
    const std::vector<NamedArray>& arrays = s.*sec.arrays;
    if (sec.optional && arrays.empty()) continue;
    h5::WriteString(f, std::string("order/") + sec.group, JoinNames(arrays));
    CreateGroup(f, sec.group);
    for (const NamedArray& a : arrays) {
      std::vector<hsize_t> dims(a.shape.begin(), a.shape.end());
      h5::WriteFloats(f, std::string(sec.group) + "/" + a.name, dims, a.data.data());
    }
  }
  const TimedChecksum sum = crc.get();
  // Deferred, it ran on this thread, which the caller measures already.
  if (checksum_cpu && crc_thread) *checksum_cpu += sum.cpu;
  h5::SetAttr(f, ".", "checksum", FormatChecksum(sum.crc));
}

// About the bytes the file will take: its arrays, its texts, and HDF5's headers (a few KiB
// an object, measured well under that on the example spec's files).
double EstimatedBytes(const TrainState& s) {
  double bytes = 65536 + double(s.spec_json.size()) + 64.0 * double(s.split_history.size());
  for (const Section& sec : kSections)
    for (const NamedArray& a : s.*sec.arrays) bytes += 4.0 * double(a.data.size()) + 4096;
  return bytes;
}

// A file system that cannot hold the checkpoint is found before HDF5 writes into it: HDF5
// 1.10, its write failed for want of space (ENOSPC), could not close the file, and crashed in
// MPI_Finalize (SIGSEGV in H5F__close_cb): a full disk ended the job as a crash, exit 139,
// which the job script requeues, not as the checkpoint failure it was (exit 3; 2026-12-07).
// The usual case is a disk filled by the run's own checkpoints; and the file's blocks are
// reserved before HDF5 writes (h5::File::reserve), in case another writer fills the disk
// meanwhile.
void CheckSpace(const std::string& path, const std::string& dir, const TrainState& s) {
  struct statvfs fsinfo {};
  if (statvfs(dir.c_str(), &fsinfo) != 0) return;  // the write itself reports what is wrong
  const double free_bytes = double(fsinfo.f_bavail) * double(fsinfo.f_frsize);
  const double needed = EstimatedBytes(s);
  if (free_bytes >= needed) return;
  char sizes[96];
  std::snprintf(sizes, sizeof sizes, "%.1f MiB free, it needs about %.1f MiB",
                free_bytes / 1048576.0, needed / 1048576.0);
  throw CheckpointError(path + ": no space for it in " + dir + ": " + sizes);
}

}  // namespace

void SaveCheckpoint(const std::string& path, const TrainState& state, CpuSeconds* checksum_cpu) {
  if (path.empty() || fs::path(path).filename().empty())
    throw CheckpointError(Quote(path) + ": not a checkpoint file name");
  Validate(path, state);
  std::string dir = ParentDir(path);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw CheckpointError(path + ": cannot create folder " + dir + " (" + ec.message() + ")");
  CheckSpace(path, dir, state);

  std::string written;  // the temporary file, named should its rename fail
  const auto hdf5 = h5::LockLibrary();
  try {
    CommitAtomically(path, [&](const std::string& tmp) {
      written = tmp;
      // Every failure in here becomes a CheckpointError, so that an IoError after the
      // call can only be CommitAtomically's own: the rename.
      try {
        {
          h5::File file(tmp, h5::Mode::Create);
          // The blocks the file will take, taken before HDF5 writes: another writer that
          // fills the disk meanwhile then fails its own writes, not ours (CheckSpace).
          const int reserved = file.reserve(EstimatedBytes(state));
          if (reserved == ENOSPC)
            throw CheckpointError(path + ": no space for it in " + dir + " (taken meanwhile)");
          // A file size limit (EFBIG) or a quota (EDQUOT) refuses the blocks as it would the
          // writes; a file system that cannot reserve (EOPNOTSUPP) is written as before.
          if (reserved == EFBIG || reserved == EDQUOT)
            throw CheckpointError(path + ": cannot write it in " + dir + " (" +
                                  std::strerror(reserved) + ")");
          WriteContents(file.id(), state, checksum_cpu);
          file.flush_and_sync();
          const uint64_t end = file.end_of_allocation();
          file.close();
          // The file is HDF5's bytes, not the reservation's zeros after them.
          if (reserved == 0 && truncate(tmp.c_str(), off_t(end)) != 0)
            throw CheckpointError(tmp + ": cannot truncate to " + std::to_string(end) + " bytes (" +
                                  Errno() + ")");
        }
        FsyncFile(tmp);
      } catch (const CheckpointError&) {
        throw;
      } catch (const std::exception& e) {
        throw CheckpointError(WithPath(path, e.what()));
      }
    });
  } catch (const CheckpointError&) {
    throw;
  } catch (const IoError& e) {
    throw CheckpointError(RenameFailure(path, written, e));
  } catch (const std::exception& e) {
    throw CheckpointError(WithPath(path, e.what()));
  }
  // After the rename the new file is in place; only the durability of the rename is left.
  // CommitAtomically syncs the folder at best effort; a checkpoint is what a crashed run
  // comes back from, so here a folder that cannot be synced is an error.
  FsyncDir(dir);
}

}  // namespace dlh
