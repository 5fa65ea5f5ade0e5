// DLH — the checkpoint format's shared pieces (checkpoint_format.hpp).
#include "launcher/storage/checkpoint_format.hpp"

#include <zlib.h>

#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>

namespace dlh {
namespace checkpoint_format {
namespace {

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

}  // namespace

std::string Errno() { return std::strerror(errno); }

std::string Quote(const std::string& s) { return "'" + s + "'"; }

std::string WithPath(const std::string& path, const std::string& message) {
  if (message.compare(0, path.size() + 2, path + ": ") == 0) return message;
  return path + ": " + message;
}

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
    // One mean and std as files before per-channel statistics (their checksums still hold);
    // more with their count first.
    if (s.input_mean.size() != 1 || s.input_std.size() != 1) {
      c.Text("per_value");
      c.U64(s.input_mean.size());
      c.U64(s.input_std.size());
    }
    for (double v : s.input_mean) c.F64(v);
    for (double v : s.input_std) c.F64(v);
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
  if (!s.class_names.empty()) {
    c.Text("class_names");
    c.U64(s.class_names.size());
    for (const std::string& name : s.class_names) c.Text(name);
  }
  for (const Section& sec : kSections) {
    const std::vector<NamedArray>& arrays = s.*sec.arrays;
    if (sec.optional && arrays.empty()) continue;
    if (sec.optional) c.Text(sec.group);
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

std::string FormatSplitHistory(const std::vector<SplitChange>& history) {
  std::string out;
  for (const SplitChange& c : history)
    out += (out.empty() ? "" : "\n") + std::to_string(c.step) + ":" + FormatRankBatches(c.batches);
  return out;
}

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

}  // namespace checkpoint_format
}  // namespace dlh
