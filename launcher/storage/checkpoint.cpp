// DLH — HDF5 checkpoints: atomic writes, validation, rotation (see checkpoint.hpp).
//
// Checkpoint layout, format_version 1
// ===================================
// One HDF5 file per checkpoint, DIR/ckpt-<step, zero-padded to 9 digits>.h5.
//
// Root attributes (all scalar):
//   format_version   int64    1 (kCheckpointFormatVersion); other values are refused
//   producer         string   "dlh"; other values are refused
//   step             int64    global optimizer steps completed
//   epoch            int64    loader cursor: epoch of the next batch
//   step_in_epoch    int64    loader cursor: step within that epoch of the next batch
//   seed             string   the uint64 seed in decimal ("18446744073709551615"): a
//                             string rather than an int64 so that h5dump shows the value the
//                             user gave, and all 64 bits round-trip without a sign flip
//   world_size       int64
//   samples_seen     int64
//   elapsed_seconds  double   training wall time before this checkpoint
//   optimizer        string   "sgd" or "adam"
//   rank_batches     string   optional: each rank's samples per step in rank order, as
//                             comma-separated runs "B" or "BxN" (N ranks of batch B):
//                             "96x2,32" is 96, 96, 32; world_size batches in all, each
//                             positive; written only when a plan on several GPU types set the split
//                             (absent: the even split). Builds before it refuse such a file
//                             (the checksum below covers it and they do not know it)
//   global_batch     int64    optional: the global batch (samples per step) the run trained
//                             with; written by every build since elastic resume (absent:
//                             written before; a resume then takes samples_seen / step)
//   lr               double   optional, written with global_batch: the peak learning rate
//                             (the schedule's lr) the run trained with at that batch
//   input_scale      double   optional, with input_mean and input_std: the model's inputs were
//   input_mean       double   (x * input_scale - input_mean) / input_std for the data set's
//   input_std        double   stored values x (input_scale 1/255 for uint8 images, else 1), so
//                             the file is usable on its own (absent: written before they were)
//   created_unix     int64    seconds since 1970 when written; informational, not checksummed
//                             and not required when reading
//   checksum         string   "crc32:<8 lowercase hex digits>" (see below)
//
// Datasets:
//   /spec                 scalar fixed-length UTF-8 string: the spec JSON the run started with
//   /params/<name>        float32 (IEEE, little-endian), the array's shape; contiguous layout,
//   /buffers/<name>       no chunking or compression. A name like "03.conv2d/weight" is a path:
//   /optimizer/<name>     /params/03.conv2d/weight (group 03.conv2d, dataset weight). An empty
//                         shape is a scalar dataset holding one value.
//   /order/params         scalar fixed-length strings: the names of the arrays of each group,
//   /order/buffers        in the order of TrainState's vectors, joined by "\n" ("" when empty).
//   /order/optimizer      HDF5 lists links alphabetically, so this is what keeps the order.
//                         (Datasets rather than attributes: attributes are capped at 64 KiB.)
//   /split_history        optional scalar fixed-length string: every split the run trained
//                         with (launcher/train/balancer.hpp), one line "STEP:BATCHES" per
//                         change, oldest first, BATCHES written like rank_batches:
//                         "0:64x2\n20:76,52" (from step 0 two ranks of 64, from step 20 76
//                         and 52). Steps increase, every line has world_size positive
//                         batches with one sum, the last is rank_batches (then required)
//                         and its step is at most `step`. Written only by runs that balance
//                         or replay a split (absent: files as before); a dataset, since a
//                         long run's history may outgrow an attribute.
//   /params, /buffers and /optimizer always exist, even when empty.
//
// Array names: non-empty, '/'-separated components that are neither empty, "." nor "..",
// no "\n" or NUL, unique within their group, and no name is the group of another ("a" and
// "a/b"). SaveCheckpoint refuses others.
//
// Checksum: zlib crc32 (initial value 0) over this byte stream, integers little-endian:
//   int64 format_version
//   uint64 byte length of the spec, the spec bytes
//   int64 step, int64 epoch, int64 step_in_epoch, uint64 seed, int64 world_size,
//   int64 samples_seen, the 8 bytes of elapsed_seconds (IEEE-754 double, little-endian)
//   uint64 byte length of optimizer, the optimizer bytes
//   only when rank_batches is present: uint64 "rank_batches" as text (its byte length, then
//     the 12 bytes), uint64 number of ranks, int64 each rank's batch
//   only when global_batch is present: "global_batch" as text, int64 global_batch, "lr" as
//     text, the 8 bytes of lr (so files written before it keep their checksum; builds before
//     it refuse a file that has it)
//   only when input_scale is present: "input" as text, then the 8 bytes each of input_scale,
//     input_mean and input_std
//   only when split_history is present: "split_history" as text, uint64 number of changes,
//     then per change int64 step, uint64 number of ranks, int64 each rank's batch
//   then for params, buffers and optimizer state, in that order:
//     uint64 number of arrays, then for each array in order:
//       uint64 byte length of the name, the name bytes, int32 rank, int32 dims[rank],
//       the float32 values (little-endian) in C order
// LoadCheckpoint recomputes it from what it read and refuses the file on a mismatch.
//
// Writing (through CommitAtomically, common/atomic_file.hpp): the file is written as
// "<path>.tmp.<pid>.<n>" beside its final name, flushed and fsync'ed, closed (and fsync'ed
// again), renamed over <path>, and the folder is fsync'ed. A crash leaves either the old
// file or the new one, and possibly a stale *.tmp.* file, which readers ignore and
// CheckpointDir::save removes when its writer's pid is gone (or is ours).
// CheckpointDir::save(state, keep) then deletes all but the `keep` newest ckpt-*.h5 files,
// always keeping the one just written.
#include "launcher/storage/checkpoint.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <future>
#include <memory>
#include <new>
#include <set>
#include <system_error>

#include "common/atomic_file.hpp"
#include "launcher/storage/h5.hpp"

namespace dlh {
namespace {

namespace fs = std::filesystem;

const char kProducer[] = "dlh";

// The three array groups, in checksum order.
struct Section {
  const char* group;  // "params"
  const char* what;   // for messages: "params[3]"
  std::vector<NamedArray> TrainState::*arrays;
};
const Section kSections[] = {
    {"params", "params", &TrainState::params},
    {"buffers", "buffers", &TrainState::buffers},
    {"optimizer", "optimizer_state", &TrainState::optimizer_state},
};

std::string Errno() { return std::strerror(errno); }

// Messages from the h5 wrapper sometimes start with the file name already.
std::string WithPath(const std::string& path, const std::string& message) {
  if (message.compare(0, path.size() + 2, path + ": ") == 0) return message;
  return path + ": " + message;
}

// ---- checksum ---------------------------------------------------------------------------

class Crc {
 public:
  void Bytes(const void* data, size_t n) {
    // zlib treats a null buffer as "return the initial value", which would silently restart
    // the checksum at an empty array (whose data() may be null).
    if (n == 0) return;
    crc_ = crc32_z(crc_, static_cast<const Bytef*>(data), n);
  }
  void U64(uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = uint8_t(v >> (8 * i));
    Bytes(b, sizeof b);
  }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void I32(int32_t v) {
    uint8_t b[4];
    uint32_t u = static_cast<uint32_t>(v);
    for (int i = 0; i < 4; ++i) b[i] = uint8_t(u >> (8 * i));
    Bytes(b, sizeof b);
  }
  void F64(double v) {
    uint64_t u;
    std::memcpy(&u, &v, sizeof u);
    U64(u);
  }
  void Text(const std::string& s) {
    U64(s.size());
    Bytes(s.data(), s.size());
  }
  void Floats(const std::vector<float>& v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    Bytes(v.data(), v.size() * sizeof(float));
#else
    // The checksum is defined on little-endian bytes so that files move between hosts.
    uint8_t block[4096];
    size_t used = 0;
    for (float f : v) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      for (int i = 0; i < 4; ++i) block[used++] = uint8_t(u >> (8 * i));
      if (used == sizeof block) Bytes(block, used), used = 0;
    }
    Bytes(block, used);
#endif
  }
  uint32_t value() const { return static_cast<uint32_t>(crc_); }

 private:
  uLong crc_ = crc32(0L, Z_NULL, 0);
};

uint32_t Checksum(const TrainState& s) {
  Crc c;
  c.I64(kCheckpointFormatVersion);
  c.Text(s.spec_json);
  c.I64(s.step);
  c.I64(s.epoch);
  c.I64(s.step_in_epoch);
  c.U64(s.seed);
  c.I64(s.world_size);
  c.I64(s.samples_seen);
  c.F64(s.elapsed_seconds);
  c.Text(s.optimizer);
  if (!s.rank_batches.empty()) {
    c.Text("rank_batches");
    c.U64(s.rank_batches.size());
    for (int64_t b : s.rank_batches) c.I64(b);
  }
  if (s.global_batch > 0) {
    c.Text("global_batch");
    c.I64(s.global_batch);
    c.Text("lr");
    c.F64(s.lr);
  }
  if (s.input_scale > 0) {
    c.Text("input");
    c.F64(s.input_scale);
    c.F64(s.input_mean);
    c.F64(s.input_std);
  }
  if (!s.split_history.empty()) {
    c.Text("split_history");
    c.U64(s.split_history.size());
    for (const SplitChange& change : s.split_history) {
      c.I64(change.step);
      c.U64(change.batches.size());
      for (int64_t b : change.batches) c.I64(b);
    }
  }
  for (const Section& sec : kSections) {
    const std::vector<NamedArray>& arrays = s.*sec.arrays;
    c.U64(arrays.size());
    for (const NamedArray& a : arrays) {
      c.Text(a.name);
      c.I32(static_cast<int32_t>(a.shape.size()));
      for (int d : a.shape) c.I32(d);
      c.Floats(a.data);
    }
  }
  return c.value();
}

std::string FormatChecksum(uint32_t crc) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "crc32:%08" PRIx32, crc);
  return buf;
}

bool ParseChecksum(const std::string& text, uint32_t* crc) {
  const std::string prefix = "crc32:";
  if (text.size() != prefix.size() + 8 || text.compare(0, prefix.size(), prefix) != 0) return false;
  uint32_t v = 0;
  for (size_t i = prefix.size(); i < text.size(); ++i) {
    char ch = text[i];
    int digit = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
    if (digit < 0) return false;
    v = v << 4 | uint32_t(digit);
  }
  *crc = v;
  return true;
}

bool ParseU64(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return false;
    uint64_t digit = uint64_t(ch - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

// "96x2,32": runs of equal batches in rank order, as the rank_batches attribute holds them.
// Runs keep the text short (attributes are capped at 64 KiB; a mix of thousands of GPUs is
// two runs when its ranks come part by part).
std::string FormatRankBatches(const std::vector<int64_t>& batches) {
  std::string out;
  for (size_t i = 0; i < batches.size();) {
    size_t j = i;
    while (j < batches.size() && batches[j] == batches[i]) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(batches[i]) +
           (j - i > 1 ? "x" + std::to_string(j - i) : "");
    i = j;
  }
  return out;
}

// The reverse, strictly: runs "B" or "BxN" with B and N positive decimal integers below
// 2^31, no signs, spaces or empty items, at most `max_ranks` batches in all.
bool ParseRankBatches(const std::string& text, int64_t max_ranks, std::vector<int64_t>* out) {
  out->clear();
  auto positive = [](const std::string& t, int64_t* v) {
    uint64_t u = 0;
    if (t.size() > 10 || !ParseU64(t, &u) || u == 0 || u > uint64_t(INT32_MAX)) return false;
    *v = int64_t(u);
    return true;
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    const size_t x = item.find('x');
    int64_t batch = 0, count = 1;
    if (!positive(item.substr(0, x), &batch)) return false;
    if (x != std::string::npos && !positive(item.substr(x + 1), &count)) return false;
    if (count > max_ranks - int64_t(out->size())) return false;
    out->insert(out->end(), size_t(count), batch);
    start = comma + 1;
  }
  return true;
}

// "0:64x2\n20:76,52": the /split_history dataset's text.
std::string FormatSplitHistory(const std::vector<SplitChange>& history) {
  std::string out;
  for (const SplitChange& c : history)
    out += (out.empty() ? "" : "\n") + std::to_string(c.step) + ":" + FormatRankBatches(c.batches);
  return out;
}

// The reverse: one "STEP:BATCHES" per line, at most `max_ranks` batches each. On failure
// `why` says which line.
bool ParseSplitHistory(const std::string& text, int64_t max_ranks, std::vector<SplitChange>* out,
                       std::string* why) {
  out->clear();
  size_t start = 0;
  for (int line = 1; start <= text.size(); ++line) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    const std::string item = text.substr(start, nl - start);
    const size_t colon = item.find(':');
    SplitChange c;
    uint64_t step = 0;
    if (colon == std::string::npos || !ParseU64(item.substr(0, colon), &step) ||
        step > uint64_t(INT64_MAX) ||
        !ParseRankBatches(item.substr(colon + 1), max_ranks, &c.batches)) {
      *why = "line " + std::to_string(line) + " '" + item.substr(0, 64) +
             "' is not STEP:BATCHES (\"20:96x2,32\")";
      return false;
    }
    c.step = int64_t(step);
    out->push_back(std::move(c));
    start = nl + 1;
  }
  return true;
}

// What a history must be to belong to `s` (see the layout above); empty when it is.
std::string SplitHistoryProblem(const TrainState& s) {
  const std::vector<SplitChange>& h = s.split_history;
  if (h.empty()) return "";
  int64_t sum = 0;
  for (int64_t b : h.front().batches) sum += b;
  for (size_t i = 0; i < h.size(); ++i) {
    const std::string at =
        "entry " + std::to_string(i + 1) + " (step " + std::to_string(h[i].step) + ")";
    if (int64_t(h[i].batches.size()) != s.world_size)
      return at + " has " + std::to_string(h[i].batches.size()) + " batches, not world_size " +
             std::to_string(s.world_size);
    int64_t entry_sum = 0;
    for (int64_t b : h[i].batches) {
      if (b <= 0 || b > INT32_MAX) return at + " has a batch outside [1, 2^31)";
      entry_sum += b;
    }
    if (entry_sum != sum)
      return at + " sums to " + std::to_string(entry_sum) + ", not " + std::to_string(sum) +
             " as the first entry";
    if (h[i].step < 0 || (i > 0 && h[i].step <= h[i - 1].step))
      return at + ": steps must increase from 0 on";
  }
  if (h.back().step > s.step)
    return "the last entry's step " + std::to_string(h.back().step) + " is after step " +
           std::to_string(s.step);
  if (h.back().batches != s.rank_batches) return "the last entry is not rank_batches";
  return "";
}

// ---- validation before writing ----------------------------------------------------------

std::string Quote(const std::string& s) { return "'" + s + "'"; }

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

std::string JoinNames(const std::vector<NamedArray>& arrays) {
  std::string out;
  for (size_t i = 0; i < arrays.size(); ++i) out += (i ? "\n" : "") + arrays[i].name;
  return out;
}

std::vector<std::string> SplitNames(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t nl = text.find('\n', start);
    out.push_back(text.substr(start, nl == std::string::npos ? nl : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
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
    h5::SetAttr(f, ".", "input_mean", double{s.input_mean});
    h5::SetAttr(f, ".", "input_std", double{s.input_std});
  }
  h5::SetAttr(f, ".", "created_unix", int64_t{std::time(nullptr)});
  h5::WriteString(f, "spec", s.spec_json);
  if (!s.split_history.empty())
    h5::WriteString(f, "split_history", FormatSplitHistory(s.split_history));
  CreateGroup(f, "order");
  for (const Section& sec : kSections) {
    const std::vector<NamedArray>& arrays = s.*sec.arrays;
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

// ---- reading ----------------------------------------------------------------------------

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
    s.input_mean = r.Double("input_mean");
    s.input_std = r.Double("input_std");
    if (!(s.input_scale > 0 && std::isfinite(s.input_scale) && std::isfinite(s.input_mean) &&
          s.input_std > 0 && std::isfinite(s.input_std)))
      throw CheckpointError(path + ": attributes input_scale, input_mean, input_std (" +
                            std::to_string(s.input_scale) + ", " + std::to_string(s.input_mean) +
                            ", " + std::to_string(s.input_std) +
                            ") must be finite, the scale and std positive");
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
  for (const Section& sec : kSections) {
    std::string order = std::string("order/") + sec.group;
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

// ---- checkpoint folders -----------------------------------------------------------------

const char kPrefix[] = "ckpt-";
const char kSuffix[] = ".h5";
const char kTmp[] = ".tmp.";

std::string FileNameForStep(int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%09" PRId64 "%s", kPrefix, step, kSuffix);
  return buf;
}

// "ckpt-000000120.h5" -> 120. Only the exact spelling path_for_step makes counts, so that
// two names can never map to one step.
bool ParseFileName(const std::string& name, int64_t* step) {
  const size_t pre = std::strlen(kPrefix), suf = std::strlen(kSuffix);
  if (name.size() <= pre + suf || name.compare(0, pre, kPrefix) != 0 ||
      name.compare(name.size() - suf, suf, kSuffix) != 0)
    return false;
  uint64_t v = 0;
  if (!ParseU64(name.substr(pre, name.size() - pre - suf), &v) || v > uint64_t(INT64_MAX))
    return false;
  if (FileNameForStep(int64_t(v)) != name) return false;
  *step = int64_t(v);
  return true;
}

// "ckpt-000000120.h5.tmp.4711.3" (TemporaryPathFor: pid, then a per-process count) -> 4711.
// Also "ckpt-000000120.h5.tmp.4711", the name earlier versions wrote.
bool ParseTmpName(const std::string& name, pid_t* pid) {
  size_t at = name.rfind(kTmp);
  int64_t step = 0;
  if (at == std::string::npos || !ParseFileName(name.substr(0, at), &step)) return false;
  std::string rest = name.substr(at + std::strlen(kTmp));
  const size_t dot = rest.find('.');
  uint64_t v = 0, n = 0;
  if (dot != std::string::npos) {
    if (!ParseU64(rest.substr(dot + 1), &n)) return false;
    rest.erase(dot);
  }
  if (!ParseU64(rest, &v) || v == 0 || v > uint64_t(INT_MAX)) return false;
  *pid = pid_t(v);
  return true;
}

// A temporary file is stale when its writer is gone. Our own pid counts as gone: saving is
// synchronous, so a tmp file with our pid that exists before we write is left over from an
// earlier process that had the same pid (common in containers, where pids repeat).
bool WriterGone(pid_t pid) {
  if (pid == getpid()) return true;
  return kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

// ---- public API -------------------------------------------------------------------------

void SaveCheckpoint(const std::string& path, const TrainState& state, CpuSeconds* checksum_cpu) {
  if (path.empty() || fs::path(path).filename().empty())
    throw CheckpointError(Quote(path) + ": not a checkpoint file name");
  Validate(path, state);
  std::string dir = ParentDir(path);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw CheckpointError(path + ": cannot create folder " + dir + " (" + ec.message() + ")");

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
          WriteContents(file.id(), state, checksum_cpu);
          file.flush_and_sync();
          file.close();
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

CheckpointDir::CheckpointDir(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) dir_ = ".";
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

std::string CheckpointDir::path_for_step(int64_t step) const {
  if (step < 0) throw CheckpointError(dir_ + ": negative step " + std::to_string(step));
  return (dir_ == "/" ? "" : dir_) + "/" + FileNameForStep(step);
}

std::vector<std::string> CheckpointDir::list_newest_first() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::exists(dir_, ec)) return {};  // no run yet
  fs::directory_iterator it(dir_, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    int64_t step = 0;
    std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (ParseFileName(name, &step) && it->is_regular_file(type_ec))
      found.emplace_back(step, it->path().string());
  }
  if (ec) throw CheckpointError(dir_ + ": cannot list checkpoints (" + ec.message() + ")");
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::string CheckpointDir::save(const TrainState& state, int keep, CpuSeconds* checksum_cpu) {
  if (keep < 1)
    throw CheckpointError(dir_ + ": keep must be at least 1, not " + std::to_string(keep));
  std::string path = path_for_step(state.step);

  // Stale temporary files first, so that their space is free for this write. Errors here
  // are not worth failing a checkpoint for.
  std::error_code ec;
  if (fs::is_directory(dir_, ec)) {
    std::vector<std::string> stale;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      pid_t pid = 0;
      if (ParseTmpName(it->path().filename().string(), &pid) && WriterGone(pid))
        stale.push_back(it->path().string());
    }
    for (const std::string& s : stale) unlink(s.c_str());
  }

  SaveCheckpoint(path, state, checksum_cpu);

  // Rotation: the file just written always stays and counts towards `keep`; of the others
  // the newest stay. (It is not always the newest: a run resumed from an older checkpoint.)
  int kept = 1;
  for (const std::string& old : list_newest_first()) {
    if (old == path) continue;
    if (kept < keep) {
      ++kept;
      continue;
    }
    if (unlink(old.c_str()) != 0 && errno != ENOENT)
      throw CheckpointError(old + ": cannot delete old checkpoint (" + Errno() + "); " + path +
                            " was saved");
  }
  return path;
}

bool CheckpointDir::load_newest_valid(
    TrainState* state, std::string* path,
    const std::function<void(const std::string& message)>& warn) const {
  for (const std::string& candidate : list_newest_first()) {
    try {
      TrainState loaded = LoadCheckpoint(candidate);
      if (state) *state = std::move(loaded);
      if (path) *path = candidate;
      return true;
    } catch (const CheckpointError& e) {
      std::string reason = e.what();
      if (reason.compare(0, candidate.size() + 2, candidate + ": ") == 0)
        reason.erase(0, candidate.size() + 2);
      if (warn) warn(candidate + ": skipped: " + reason);
    }
  }
  return false;
}

}  // namespace dlh
