// DLH — NumPy .npy/.npz reader (see numpy_file.hpp). The format: "\x93NUMPY", a version
// byte pair, the header's length (2 bytes in 1.0, 4 bytes in 2.0 and 3.0), a Python dict
// literal naming the dtype, the order and the shape, then the raw array.
#include "launcher/data/numpy_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <string_view>

#include "common/error.hpp"

namespace dlh {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "NumpyArray::data is little-endian and is read in place: a little-endian host only");

int64_t NumpyArray::count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // ParseHeader checked that this cannot overflow
  return n;
}

namespace {

const char kMagic[] = "\x93NUMPY";
const size_t kMagicBytes = 6;
// No real header comes near this; a corrupt length must not make us allocate gigabytes.
const uint32_t kMaxHeaderBytes = 1 << 20;

// Where the bytes of one .npy come from: a file or an archive member. Read returns fewer
// than n bytes only at the end of the data, and throws on a read error.
class NpyInput {
 public:
  virtual ~NpyInput() = default;
  virtual size_t Read(void* out, size_t n) = 0;
  virtual uint64_t Size() const = 0;  // all bytes, header included
};

// Owns a file descriptor opened for reading.
class FileInput : public NpyInput {
 public:
  explicit FileInput(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw DataError(path + ": cannot open: " + std::strerror(errno));
    struct stat st;
    std::string why;
    if (::fstat(fd_, &st) != 0)
      why = std::string("cannot open: ") + std::strerror(errno);
    else if (!S_ISREG(st.st_mode))
      why = "not a regular file";
    if (!why.empty()) {
      ::close(fd_);  // the destructor does not run for a constructor that throws
      throw DataError(path + ": " + why);
    }
    size_ = uint64_t(st.st_size);
  }
  ~FileInput() override { ::close(fd_); }
  FileInput(const FileInput&) = delete;
  FileInput& operator=(const FileInput&) = delete;

  size_t Read(void* out, size_t n) override {
    size_t done = 0;
    while (done < n) {
      ssize_t got =
          ::read(fd_, static_cast<char*>(out) + done, std::min<size_t>(n - done, 1 << 30));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) Fail();
      if (got == 0) break;
      done += size_t(got);
    }
    return done;
  }
  uint64_t Size() const override { return size_; }

 private:
  [[noreturn]] void Fail() { throw DataError(path_ + ": read error: " + std::strerror(errno)); }

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// libzip's one way of reporting: a call that failed leaves its reason in a zip_error_t.
// Throws "<where>: <doing>: <libzip's reason>" unless `ok`.
void CheckZip(bool ok, zip_error_t* error, const std::string& where, const std::string& doing) {
  if (ok) return;
  throw DataError(where + ": " + doing + ": " + zip_error_strerror(error));
}

// Owns an archive opened read-only.
class ZipArchive {
 public:
  explicit ZipArchive(const std::string& path) {
    int code = 0;
    // ZIP_CHECKCONS: compare the central directory with the local headers, so that a damaged
    // archive fails here, naming the archive, rather than as an odd member later.
    zip_ = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
    if (!zip_) {
      zip_error_t error;
      zip_error_init_with_code(&error, code);
      std::string why = zip_error_strerror(&error);
      zip_error_fini(&error);
      bool missing = code == ZIP_ER_NOENT || code == ZIP_ER_OPEN;
      throw DataError(path + (missing ? ": cannot open: " : ": not a readable zip archive: ") +
                      why);
    }
  }
  ~ZipArchive() { zip_discard(zip_); }  // read-only: nothing to write back
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;
  zip_t* get() const { return zip_; }

 private:
  zip_t* zip_ = nullptr;
};

// Owns one member opened for reading (decompressed, CRC checked at its end).
class ZipMemberInput : public NpyInput {
 public:
  ZipMemberInput(const ZipArchive& archive, zip_uint64_t index, uint64_t size,
                 const std::string& where)
      : where_(where), size_(size) {
    file_ = zip_fopen_index(archive.get(), index, 0);
    CheckZip(file_ != nullptr, zip_get_error(archive.get()), where, "cannot open");
  }
  ~ZipMemberInput() override { zip_fclose(file_); }
  ZipMemberInput(const ZipMemberInput&) = delete;
  ZipMemberInput& operator=(const ZipMemberInput&) = delete;

  size_t Read(void* out, size_t n) override {
    size_t done = 0;
    while (done < n) {
      zip_int64_t got =
          zip_fread(file_, static_cast<char*>(out) + done, std::min<size_t>(n - done, 1 << 30));
      CheckZip(got >= 0, zip_file_get_error(file_), where_, "read error");
      if (got == 0) break;
      done += size_t(got);
    }
    return done;
  }
  uint64_t Size() const override { return size_; }

 private:
  std::string where_;
  uint64_t size_;
  zip_file_t* file_ = nullptr;
};

// ---- The header: {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }

struct Header {
  std::string descr;
  bool descr_is_text = false;  // false: a list (a structured dtype), kept as written
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// A recursive-descent reader of exactly the literals NumPy writes: the dict, quoted strings,
// True/False, tuples of integers; a list (a structured dtype) is only skipped over, to be
// named in the message.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& where) : s_(text), where_(where) {}

  Header Parse() {
    Header h;
    bool seen[3] = {false, false, false};
    Expect('{');
    while (!Accept('}')) {
      std::string key = ParseString();
      Expect(':');
      int which;
      if (key == "descr") {
        which = 0;
        SkipSpace();
        if (Peek() == '[') {
          h.descr = SkipList();
        } else {
          h.descr = ParseString();
          h.descr_is_text = true;
        }
      } else if (key == "fortran_order") {
        which = 1;
        h.fortran_order = ParseBool();
      } else if (key == "shape") {
        which = 2;
        h.shape = ParseShape();
      } else {
        Fail("unexpected key '" + key + "'");
      }
      if (seen[which]) Fail("key '" + key + "' appears twice");
      seen[which] = true;
      if (!Accept(',')) {
        Expect('}');
        break;
      }
    }
    const char* names[3] = {"descr", "fortran_order", "shape"};
    for (int i = 0; i < 3; ++i)
      if (!seen[i]) Fail(std::string("no '") + names[i] + "' key");
    // NumPy pads with spaces to an aligned length and ends the header with a newline.
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n')) ++pos_;
    if (pos_ != s_.size()) Fail("unexpected text after the closing '}'");
    return h;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw DataError(where_ + ": malformed .npy header (" + what + "): " + Excerpt());
  }
  // The header as written, trimmed of its padding and cut short when long.
  std::string Excerpt() const {
    std::string t = s_.substr(0, s_.find_last_not_of(" \n") + 1);
    if (t.size() > 120) t = t.substr(0, 117) + "...";
    for (char& c : t)
      if (c == '\n' || c == '\r') c = ' ';  // the message stays one line
    return t;
  }

  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Accept(char c) {
    SkipSpace();
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  void Expect(char c) {
    if (!Accept(c)) Fail(std::string("expected '") + c + "'");
  }

  std::string ParseString() {
    SkipSpace();
    char quote = Peek();
    if (quote != '\'' && quote != '"') Fail("expected a quoted string");
    size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string::npos) Fail("unterminated string");
    std::string out = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return out;
  }

  bool ParseBool() {
    SkipSpace();
    for (const char* word : {"True", "False"}) {
      if (s_.compare(pos_, std::strlen(word), word) == 0) {
        pos_ += std::strlen(word);
        return word[0] == 'T';
      }
    }
    Fail("expected True or False");
  }

  // "()", "(5,)", "(2, 3)"; Python 2 wrote long integers as "3L".
  std::vector<int64_t> ParseShape() {
    std::vector<int64_t> shape;
    Expect('(');
    while (!Accept(')')) {
      SkipSpace();
      int64_t d = 0;
      auto [end, ec] = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), d);
      if (ec != std::errc() || d < 0) Fail("expected a dimension (a non-negative integer)");
      pos_ = size_t(end - s_.data());
      if (Peek() == 'L') ++pos_;
      shape.push_back(d);
      if (!Accept(',')) {
        Expect(')');
        break;
      }
    }
    return shape;
  }

  // Skips a bracketed literal, nested brackets and quoted strings included; returns it.
  std::string SkipList() {
    size_t start = pos_;
    int depth = 0;
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '\'' || c == '"') {
        size_t end = s_.find(c, pos_);
        if (end == std::string::npos) Fail("unterminated string");
        pos_ = end + 1;
      } else if (c == '[' || c == '(') {
        ++depth;
      } else if ((c == ']' || c == ')') && --depth == 0) {
        return s_.substr(start, pos_ - start);
      }
    }
    Fail("unterminated list");
  }

  const std::string& s_;
  const std::string& where_;
  size_t pos_ = 0;
};

// Fills kind and item_bytes from a descr such as "<f4"; returns whether it is big-endian.
bool ParseDescr(const Header& h, const std::string& where, NumpyArray* a) {
  const std::string& d = h.descr;
  if (!h.descr_is_text)
    throw DataError(where + ": structured dtype " + d +
                    " is not supported (only bool, integer and float arrays)");
  static const char* const kSupported[] = {"b1", "u1", "u2", "u4", "u8", "i1",
                                           "i2", "i4", "i8", "f2", "f4", "f8"};
  const bool supported =
      d.size() == 3 && std::string_view("<>|=").find(d[0]) != std::string_view::npos &&
      std::find(std::begin(kSupported), std::end(kSupported), d.substr(1)) !=
          std::end(kSupported) &&
      // '|' (no byte order) is what NumPy writes for single bytes, and only for them.
      !(d[0] == '|' && d[2] != '1');
  if (!supported)
    throw DataError(where + ": dtype '" + d +
                    "' is not supported (only bool, (u)int8-64 and float16/32/64 arrays)");
  a->kind = d[1];
  a->item_bytes = d[2] - '0';
  return d[0] == '>' && a->item_bytes > 1;
}

// The array's size in bytes, or a DataError when the shape's product overflows.
uint64_t DataBytes(const NumpyArray& a, const std::string& where) {
  uint64_t n = uint64_t(a.item_bytes);
  for (int64_t d : a.shape) {
    if (__builtin_mul_overflow(n, uint64_t(d), &n) ||
        n > uint64_t(std::numeric_limits<int64_t>::max()))
      throw DataError(where + ": the header's shape is too large to be real");
  }
  return n;
}

void SwapBytes(std::vector<uint8_t>* data, int item_bytes) {
  for (size_t i = 0; i + size_t(item_bytes) <= data->size(); i += size_t(item_bytes))
    std::reverse(data->begin() + i, data->begin() + i + item_bytes);
}

std::string ReadHeaderText(NpyInput& in, const std::string& where, uint64_t* header_end) {
  unsigned char lead[kMagicBytes + 2];
  size_t got = in.Read(lead, sizeof lead);
  if (got < kMagicBytes || std::memcmp(lead, kMagic, kMagicBytes) != 0)
    throw DataError(where + ": not a NumPy .npy file (no \\x93NUMPY magic at its start)");
  if (got < sizeof lead) throw DataError(where + ": truncated .npy header");
  int major = lead[kMagicBytes], minor = lead[kMagicBytes + 1];
  if (major < 1 || major > 3)
    throw DataError(where + ": unsupported .npy format version " + std::to_string(major) + "." +
                    std::to_string(minor) + " (1.0, 2.0 and 3.0 are supported)");
  // 1.0 gives the header's length in 2 bytes; 2.0 (long headers) and 3.0 (UTF-8) in 4.
  unsigned char len_bytes[4] = {0, 0, 0, 0};
  size_t len_size = major == 1 ? 2 : 4;
  if (in.Read(len_bytes, len_size) != len_size) throw DataError(where + ": truncated .npy header");
  uint32_t len = uint32_t(len_bytes[0]) | uint32_t(len_bytes[1]) << 8 |
                 uint32_t(len_bytes[2]) << 16 | uint32_t(len_bytes[3]) << 24;
  if (len > kMaxHeaderBytes)
    throw DataError(where + ": malformed .npy header (announces " + std::to_string(len) +
                    " header bytes)");
  std::string text(len, '\0');
  if (in.Read(text.data(), len) != len) throw DataError(where + ": truncated .npy header");
  *header_end = sizeof lead + len_size + len;
  return text;
}

NumpyArray ReadNpyFrom(NpyInput& in, const std::string& where) {
  uint64_t header_end = 0;
  std::string text = ReadHeaderText(in, where, &header_end);
  Header h = HeaderParser(text, where).Parse();
  NumpyArray a;
  bool big_endian = ParseDescr(h, where, &a);
  if (h.fortran_order)
    throw DataError(where +
                    ": Fortran-order arrays are not supported; save with np.ascontiguousarray");
  a.descr = h.descr;
  a.shape = h.shape;
  uint64_t want = DataBytes(a, where);
  uint64_t holds = in.Size() > header_end ? in.Size() - header_end : 0;
  if (holds < want)
    throw DataError(where + ": truncated: holds " + std::to_string(holds) +
                    " bytes of data, the header announces " + std::to_string(want));
  if (holds > want)
    throw DataError(where + ": " + std::to_string(holds - want) + " trailing bytes after the " +
                    std::to_string(want) + " bytes of data the header announces");
  a.data.resize(want);
  size_t got = in.Read(a.data.data(), want);
  // The size was known beforehand, so a short read means the file changed under us or an
  // archive's member is not as long as its directory says.
  if (got < want)
    throw DataError(where + ": truncated: holds " + std::to_string(got) +
                    " bytes of data, the header announces " + std::to_string(want));
  unsigned char extra;
  if (in.Read(&extra, 1) != 0)  // also lets libzip check the member's CRC at its end
    throw DataError(where + ": trailing bytes after the data the header announces");
  if (big_endian) SwapBytes(&a.data, a.item_bytes);
  return a;
}

// ---- Conversions

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// IEEE 754 binary16 to binary32: every half value is exactly a float.
float HalfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | mantissa << 13;  // infinity, or NaN keeping its payload
  } else if (exponent != 0) {
    bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  } else {
    // Zero or subnormal: mantissa * 2^-24, exact in a float.
    float v = std::ldexp(float(mantissa), -24);
    return sign ? -v : v;
  }
  return Load<float>(reinterpret_cast<const uint8_t*>(&bits));
}

// Element i as a double (exact for every kind but the 64-bit integers beyond 2^53).
double ElementAsDouble(const NumpyArray& a, int64_t i) {
  const uint8_t* p = a.data.data() + size_t(i) * size_t(a.item_bytes);
  switch (a.kind) {
    case 'b':
      return *p != 0;
    case 'u':
      switch (a.item_bytes) {
        case 1:
          return *p;
        case 2:
          return Load<uint16_t>(p);
        case 4:
          return Load<uint32_t>(p);
        default:
          return double(Load<uint64_t>(p));
      }
    case 'i':
      switch (a.item_bytes) {
        case 1:
          return Load<int8_t>(p);
        case 2:
          return Load<int16_t>(p);
        case 4:
          return Load<int32_t>(p);
        default:
          return double(Load<int64_t>(p));
      }
    default:
      switch (a.item_bytes) {
        case 2:
          return HalfToFloat(Load<uint16_t>(p));
        case 4:
          return Load<float>(p);
        default:
          return Load<double>(p);
      }
  }
}

// The shortest text that reads back as the same value ("2.5", not "2.5000000000").
std::string FormatNumber(const NumpyArray& a, double v) {
  char buf[64];
  auto result = a.item_bytes == 8 ? std::to_chars(buf, buf + sizeof buf, v)
                                  : std::to_chars(buf, buf + sizeof buf, float(v));
  return std::string(buf, result.ptr);
}

}  // namespace

NumpyArray ReadNpy(const std::string& path) {
  FileInput in(path);
  return ReadNpyFrom(in, path);
}

std::map<std::string, NumpyArray> ReadNpz(const std::string& path) {
  ZipArchive archive(path);
  zip_int64_t entries = zip_get_num_entries(archive.get(), 0);
  CheckZip(entries >= 0, zip_get_error(archive.get()), path, "cannot list the members");
  std::map<std::string, NumpyArray> arrays;
  const std::string suffix = ".npy";
  for (zip_uint64_t i = 0; i < zip_uint64_t(entries); ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    CheckZip(zip_stat_index(archive.get(), i, 0, &st) == 0, zip_get_error(archive.get()), path,
             "cannot read member " + std::to_string(i));
    std::string name = st.name ? st.name : "";
    // np.savez writes only "<key>.npy"; anything else (a folder, a note added by hand) is not
    // an array, and np.load would not return it as one either.
    if (name.size() <= suffix.size() || name.compare(name.size() - 4, 4, suffix) != 0) continue;
    std::string where = path + ": member " + name;
    if (!(st.valid & ZIP_STAT_SIZE)) throw DataError(where + ": the archive gives no size");
    ZipMemberInput in(archive, i, st.size, where);
    arrays[name.substr(0, name.size() - suffix.size())] = ReadNpyFrom(in, where);
  }
  return arrays;
}

std::vector<float> ToFloats(const NumpyArray& a) {
  const int64_t n = a.count();
  std::vector<float> out(size_t(n), 0.0f);
  if (a.kind == 'f' && a.item_bytes == 4) {
    // memcpy with an empty array's null pointer is undefined even for 0 bytes (UBSan).
    if (n > 0) std::memcpy(out.data(), a.data.data(), size_t(n) * sizeof(float));
  } else if (a.kind == 'u' && a.item_bytes == 1) {
    std::copy(a.data.begin(), a.data.begin() + n, out.begin());
  } else {
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = float(ElementAsDouble(a, i));
  }
  return out;
}

std::vector<int64_t> ToWholeNumbers(const NumpyArray& a, const std::string& where) {
  const int64_t n = a.count();
  std::vector<int64_t> out(size_t(n), 0);
  auto fail = [&](int64_t i, const std::string& value, const char* why) {
    throw DataError(where + "[" + std::to_string(i) + "] = " + value + " " + why);
  };
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = a.data.data() + size_t(i) * size_t(a.item_bytes);
    if (a.kind == 'i' && a.item_bytes == 8) {
      out[size_t(i)] = Load<int64_t>(p);  // through a double it would lose its low bits
    } else if (a.kind == 'u' && a.item_bytes == 8) {
      uint64_t v = Load<uint64_t>(p);
      if (v > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(i, std::to_string(v), "is too large");
      out[size_t(i)] = int64_t(v);
    } else if (a.kind != 'f') {
      out[size_t(i)] = int64_t(ElementAsDouble(a, i));  // exact: at most 32 bits
    } else {
      double v = ElementAsDouble(a, i);
      if (!std::isfinite(v) || v != std::trunc(v))
        fail(i, FormatNumber(a, v), "is not a whole number");
      // int64 holds [-2^63, 2^63); both bounds are exact doubles.
      if (v >= 9223372036854775808.0 || v < -9223372036854775808.0)
        fail(i, FormatNumber(a, v), "is too large");
      out[size_t(i)] = int64_t(v);
    }
  }
  return out;
}

}  // namespace dlh
