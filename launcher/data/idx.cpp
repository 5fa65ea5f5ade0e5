// DLH — IDX reader (see idx.hpp).
#include "launcher/data/idx.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"

namespace dlh {
namespace {

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Owns a zlib stream. gzread reads plain files transparently, so one path serves both.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path) {
    // Opening the descriptor ourselves gives a reliable errno: gzopen may fail in zlib
    // (allocation) without setting one.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw DataError(path + ": cannot open: " + std::strerror(errno));
    gz_ = gzdopen(fd, "rb");
    if (!gz_) {
      ::close(fd);
      throw DataError(path + ": cannot open: out of memory in zlib");
    }
    // The default 8 KiB buffer makes decompressing 26 MB noticeably slower.
    gzbuffer(gz_, 1 << 20);
  }
  ~GzFile() {
    if (gz_) gzclose(gz_);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Reads up to n bytes; returns how many were read (short only at end of data). A
  // corrupt or truncated compressed stream throws.
  size_t Read(void* out, size_t n) {
    size_t done = 0;
    while (done < n) {
      unsigned chunk = unsigned(std::min<size_t>(n - done, 1u << 30));
      int got = gzread(gz_, static_cast<char*>(out) + done, chunk);
      if (got < 0) Fail();
      if (got == 0) break;
      done += size_t(got);
    }
    // zlib reports a gzip stream cut short as a short read plus Z_BUF_ERROR rather than as
    // a failing call; without this check a truncated .gz would read as a short file.
    int errnum = Z_OK;
    gzerror(gz_, &errnum);
    if (errnum == Z_BUF_ERROR)
      throw DataError(path_ + ": truncated gzip stream (unexpected end of compressed data)");
    if (errnum != Z_OK) Fail();
    return done;
  }

 private:
  [[noreturn]] void Fail() {
    int errnum = Z_OK;
    const char* msg = gzerror(gz_, &errnum);
    std::string why = errnum == Z_ERRNO ? std::strerror(errno) : (msg ? msg : "unknown error");
    if (errnum == Z_BUF_ERROR) why = "truncated gzip stream (unexpected end of compressed data)";
    throw DataError(path_ + ": read error: " + why);
  }

  std::string path_;
  gzFile gz_ = nullptr;
};

uint32_t BigEndian32(const unsigned char* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

}  // namespace

IdxArray ReadIdx(const std::string& path, uint32_t expected_magic) {
  GzFile in(path);
  unsigned char word[4];
  if (in.Read(word, 4) != 4) throw DataError(path + ": truncated IDX header (no magic number)");
  uint32_t magic = BigEndian32(word);
  if (magic != expected_magic)
    throw DataError(path + ": bad IDX magic number " + Hex32(magic) + ", expected " +
                    Hex32(expected_magic) + " (unsigned bytes, " +
                    std::to_string(expected_magic & 0xff) + " dimensions)");

  IdxArray out;
  uint64_t total = 1;
  for (uint32_t i = 0; i < (magic & 0xff); ++i) {
    if (in.Read(word, 4) != 4)
      throw DataError(path + ": truncated IDX header (dimension " + std::to_string(i) +
                      " missing)");
    uint32_t d = BigEndian32(word);
    out.dims.push_back(d);
    total *= d;
    // A corrupt header must not make us allocate terabytes; no IDX data set is near 2^40.
    if (total > (uint64_t(1) << 40))
      throw DataError(path + ": IDX header announces an implausible size");
  }

  // Grow the buffer as data arrives rather than trusting the header for the allocation,
  // so a corrupt header over a small file fails as "truncated" instead of out of memory.
  const size_t chunk = size_t(64) << 20;
  size_t have = 0;
  while (have < total) {
    size_t want = std::min<uint64_t>(chunk, total - have);
    out.data.resize(have + want);
    size_t got = in.Read(out.data.data() + have, want);
    have += got;
    if (got < want) break;
  }
  if (have < total)
    throw DataError(path + ": truncated IDX file: the header announces " + std::to_string(total) +
                    " data bytes, the file has " + std::to_string(have));
  unsigned char extra[4096];
  size_t trailing = 0;
  for (size_t got; (got = in.Read(extra, sizeof extra)) > 0;) trailing += got;
  if (trailing > 0)
    throw DataError(path + ": IDX file has " + std::to_string(trailing) +
                    " bytes after the data its header announces");
  return out;
}

std::string FindIdxFile(const std::string& dir, const std::string& name) {
  std::string base = dir.empty() ? name : dir + (dir.back() == '/' ? "" : "/") + name;
  struct stat st;
  if (::stat(base.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return base;
  if (::stat((base + ".gz").c_str(), &st) == 0 && S_ISREG(st.st_mode)) return base + ".gz";
  throw DataError(dir + ": neither " + name + " nor " + name + ".gz found");
}

}  // namespace dlh
