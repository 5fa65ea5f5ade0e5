// DLH — staging a data set onto node-local storage (see stage.hpp).
#include "launcher/data/stage.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace fs = std::filesystem;

namespace dlh {
namespace {

constexpr size_t kChunk = size_t(8) << 20;  // large sequential reads: a parallel file system's

// One owner per descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

struct FileState {
  int64_t size = 0, mtime_ns = 0;
};

FileState StateOf(const struct stat& st) {
  return {int64_t(st.st_size), int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

std::string Why(int error) { return std::strerror(error); }

// The record of a staged copy, or an empty object when there is none or it is unreadable
// (then the file is staged again: the record is a cache, not an input).
nlohmann::json ReadRecord(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

// Reads `fd` to its end in chunks, summing; `copy_to` >= 0 also receives every byte.
uint32_t SumAndCopy(int fd, const std::string& what, int copy_to, const std::string& to_what,
                    int64_t total, const StageOptions& options, int64_t* bytes_done) {
  std::vector<unsigned char> buffer(kChunk);
  uLong crc = crc32(0L, Z_NULL, 0);
  int64_t done = 0;
  auto last_report = std::chrono::steady_clock::now();
  for (;;) {
    const ssize_t got = read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      throw DataError(what + ": cannot read at byte " + std::to_string(done) + ": " + Why(errno));
    }
    if (got == 0) break;
    crc = crc32(crc, buffer.data(), uInt(got));
    for (ssize_t off = 0; copy_to >= 0 && off < got;) {
      const ssize_t put = write(copy_to, buffer.data() + off, size_t(got - off));
      if (put < 0) {
        if (errno == EINTR) continue;
        const int e = errno;
        throw DataError(to_what + ": " + (e == ENOSPC ? "the disk is full" : Why(e)) + " after " +
                        std::to_string(done + off) + " of " + std::to_string(total) + " bytes");
      }
      off += put;
    }
    done += got;
    const auto now = std::chrono::steady_clock::now();
    if (options.progress && now - last_report >= std::chrono::seconds(1)) {
      options.progress(done, total);
      last_report = now;
    }
  }
  *bytes_done = done;
  return uint32_t(crc);
}

}  // namespace

std::string ExpandStageDir(const std::string& dir, const std::string& node) {
  std::string out;
  for (size_t i = 0; i < dir.size(); ++i) {
    if (dir[i] == '%' && i + 1 < dir.size() && dir[i + 1] == 'n') {
      out += node;
      ++i;
    } else if (dir[i] == '%' && i + 1 < dir.size() && dir[i + 1] == '%') {
      out += '%';
      ++i;
    } else {
      out += dir[i];
    }
  }
  return out;
}

StageResult StageFile(const std::string& source, const std::string& dir,
                      const StageOptions& options) {
  const std::string from = fs::absolute(source).lexically_normal().string();
  struct stat st {};
  if (stat(from.c_str(), &st) != 0) throw DataError(source + ": cannot read: " + Why(errno));
  if (!S_ISREG(st.st_mode)) throw DataError(source + ": cannot stage: not a regular file");
  const FileState before = StateOf(st);

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw DataError(dir + ": cannot create the staging folder: " + ec.message());
  const std::string name = fs::path(from).filename().string();
  StageResult r;
  r.path = (fs::path(dir) / name).string();
  const std::string record_path = (fs::path(dir) / ("." + name + ".stage.json")).string();
  r.bytes = before.size;

  // Already staged, and unchanged since?
  const nlohmann::json record = ReadRecord(record_path);
  struct stat copy_st {};
  const bool copy_there = stat(r.path.c_str(), &copy_st) == 0 && S_ISREG(copy_st.st_mode) &&
                          int64_t(copy_st.st_size) == before.size;
  if (!options.force && copy_there && record.value("source", "") == from &&
      record.value("size", int64_t(-1)) == before.size &&
      record.value("mtime_ns", int64_t(-1)) == before.mtime_ns && record.contains("crc32")) {
    r.crc32 = record.value("crc32", uint32_t(0));
    if (!options.verify) return r;
    Fd copy(open(r.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (copy.get() < 0) throw DataError(r.path + ": cannot read: " + Why(errno));
    int64_t done = 0;
    const uint32_t crc = SumAndCopy(copy.get(), r.path, -1, "", before.size, {}, &done);
    if (crc == r.crc32 && done == before.size) return r;
    // A damaged copy is staged afresh below.
  }

  const auto start = std::chrono::steady_clock::now();
  const std::string temporary = TemporaryPathFor((fs::path(dir) / ("." + name)).string());
  try {
    Fd in(open(from.c_str(), O_RDONLY | O_CLOEXEC));
    if (in.get() < 0) throw DataError(source + ": cannot read: " + Why(errno));
    posix_fadvise(in.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    int64_t done = 0;
    {
      Fd out(open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (out.get() < 0) throw DataError(temporary + ": cannot create: " + Why(errno));
      r.crc32 = SumAndCopy(in.get(), source, out.get(), r.path, before.size, options, &done);
      if (fsync(out.get()) != 0) {
        const int e = errno;
        throw DataError(r.path + ": " + (e == ENOSPC ? "the disk is full" : Why(e)) +
                        " while flushing the copy");
      }
    }
    // The source must not have changed under the copy: a file being rewritten while a job
    // starts would give each node another data set.
    struct stat after {};
    if (fstat(in.get(), &after) != 0 || StateOf(after).size != before.size ||
        StateOf(after).mtime_ns != before.mtime_ns || done != before.size)
      throw DataError(source + ": changed while it was copied (" + std::to_string(done) + " of " +
                      std::to_string(before.size) + " bytes read): nothing staged");
    // Read the copy back: what the disk returns is what training will read.
    Fd back(open(temporary.c_str(), O_RDONLY | O_CLOEXEC));
    if (back.get() < 0) throw DataError(temporary + ": cannot read back: " + Why(errno));
    int64_t back_done = 0;
    const uint32_t back_crc = SumAndCopy(back.get(), r.path, -1, "", before.size, {}, &back_done);
    if (back_crc != r.crc32 || back_done != before.size)
      throw DataError(r.path + ": the copy read back differs from " + source +
                      " (checksum or size): nothing staged");
    if (rename(temporary.c_str(), r.path.c_str()) != 0)
      throw DataError(r.path + ": cannot rename the copy into place: " + Why(errno));
  } catch (...) {
    unlink(temporary.c_str());
    throw;
  }
  SyncFolderOf(r.path);
  nlohmann::json j = {
      {"source", from}, {"size", before.size}, {"mtime_ns", before.mtime_ns}, {"crc32", r.crc32}};
  WriteFileAtomically(record_path, j.dump(1) + "\n");
  r.copied = true;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace dlh
