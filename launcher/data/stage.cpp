// DLH — staging a data set onto node-local storage (see stage.hpp).
#include "launcher/data/stage.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/json_parse.hpp"
#include "launcher/data/owned_folder.hpp"

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

// The record of a staged copy, or none where there is none or it cannot be trusted (then
// the file is staged again: the record is a cache, not an input). Read without following a
// link or blocking on a FIFO, at most kMaxRecordBytes, strictly parsed, and only when it is
// a regular file of the user's own. *note says why a record that is there was not taken.
constexpr size_t kMaxRecordBytes = 64 << 10;
std::optional<StageRecord> ReadRecord(const std::string& path, std::string* note) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) *note = path + ": not read (" + Why(errno) + "): staged again";
    return std::nullopt;
  }
  Fd owner(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *note = path + ": not a regular file: staged again";
    return std::nullopt;
  }
  if (st.st_uid != geteuid()) {
    *note = path + ": owned by user '" + UserName(st.st_uid) + "', not by you: staged again";
    return std::nullopt;
  }
  if (size_t(st.st_size) > kMaxRecordBytes) {
    *note = path + ": larger than " + std::to_string(kMaxRecordBytes >> 10) + " KiB: staged again";
    return std::nullopt;
  }
  std::string text(size_t(st.st_size) + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd, &text[got], text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  text.resize(got);
  StageRecord record;
  if (got > kMaxRecordBytes || !ParseStageRecord(text, &record)) {
    *note = path + ": not a stage record: staged again";
    return std::nullopt;
  }
  return record;
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

bool ParseStageRecord(const std::string& text, StageRecord* out) {
  nlohmann::json j;
  JsonProblem problem;
  if (!ParseJsonStrict(text, &j, &problem) || !j.is_object()) return false;
  const auto source = j.find("source"), size = j.find("size"), mtime = j.find("mtime_ns"),
             crc = j.find("crc32");
  if (source == j.end() || !source->is_string() || size == j.end() || !size->is_number_integer() ||
      mtime == j.end() || !mtime->is_number_integer() || crc == j.end() ||
      !crc->is_number_unsigned())
    return false;
  // Integers only: a value beyond int64 arrives as unsigned, which is_number_integer admits.
  if (size->is_number_unsigned() && size->get<uint64_t>() > uint64_t(INT64_MAX)) return false;
  if (mtime->is_number_unsigned() && mtime->get<uint64_t>() > uint64_t(INT64_MAX)) return false;
  StageRecord r;
  r.source = source->get<std::string>();
  r.size = size->get<int64_t>();
  r.mtime_ns = mtime->get<int64_t>();
  if (r.size < 0 || r.mtime_ns < 0 || crc->get<uint64_t>() > UINT32_MAX) return false;
  r.crc32 = uint32_t(crc->get<uint64_t>());
  *out = r;
  return true;
}

StageNames CurrentStageNames(const std::string& node) {
  StageNames n;
  n.node = node;
  n.user = UserName(geteuid());
  if (const char* j = std::getenv("SLURM_JOB_ID"); j && *j) n.job = j;
  return n;
}

std::string ExpandStageDir(const std::string& dir, const StageNames& names,
                           const std::string& origin) {
  std::string out;
  for (size_t i = 0; i < dir.size(); ++i) {
    const char next = i + 1 < dir.size() ? dir[i + 1] : '\0';
    if (dir[i] != '%' || (next != 'n' && next != 'u' && next != 'j' && next != '%')) {
      out += dir[i];
      continue;
    }
    ++i;
    if (next == 'j' && names.job.empty())
      throw UsageError(origin + ": " + dir + ": %j is the Slurm job's id, and SLURM_JOB_ID is " +
                       "not set (not inside a job)");
    out += next == 'n' ? names.node : next == 'u' ? names.user : next == 'j' ? names.job : "%";
  }
  return out;
}

std::string ExpandStageDir(const std::string& dir, const std::string& node) {
  return ExpandStageDir(dir, CurrentStageNames(node), "--data");
}

std::string DefaultStageDir(const StageNames& names) {
  return ExpandStageDir(names.job.empty() ? "/tmp/dlh-%u/stage" : "/tmp/dlh-%u/job-%j", names);
}

StageResult StageFile(const std::string& source, const std::string& dir_given,
                      const StageOptions& options) {
  const std::string from = fs::absolute(source).lexically_normal().string();
  struct stat st {};
  if (stat(from.c_str(), &st) != 0) throw DataError(source + ": cannot read: " + Why(errno));
  if (!S_ISREG(st.st_mode)) throw DataError(source + ": cannot stage: not a regular file");
  const FileState before = StateOf(st);

  // Nothing is read from or written to a folder that is not the user's alone.
  const std::string dir = OwnedFolder(dir_given, "staging folder");
  const std::string name = fs::path(from).filename().string();
  StageResult r;
  r.path = (fs::path(dir) / name).string();
  const std::string record_path = (fs::path(dir) / ("." + name + ".stage.json")).string();
  r.bytes = before.size;

  // Already staged, and unchanged since? The copy counts only as a regular file of the
  // user's (lstat: a link is not followed).
  const std::optional<StageRecord> record = ReadRecord(record_path, &r.note);
  struct stat copy_st {};
  const bool copy_exists = lstat(r.path.c_str(), &copy_st) == 0;
  const bool copy_there = copy_exists && S_ISREG(copy_st.st_mode) && copy_st.st_uid == geteuid() &&
                          int64_t(copy_st.st_size) == before.size;
  if (copy_exists && copy_st.st_uid != geteuid() && r.note.empty())
    r.note =
        r.path + ": owned by user '" + UserName(copy_st.st_uid) + "', not by you: staged again";
  if (!options.force && copy_there && record && record->source == from &&
      record->size == before.size && record->mtime_ns == before.mtime_ns) {
    r.crc32 = record->crc32;
    if (!options.verify) return r;
    Fd copy(open(r.path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (copy.get() < 0) throw DataError(r.path + ": cannot read: " + Why(errno));
    int64_t done = 0;
    const uint32_t crc = SumAndCopy(copy.get(), r.path, -1, "", before.size, {}, &done);
    if (crc == r.crc32 && done == before.size) return r;
    // A damaged copy is staged afresh below.
  }

  const auto start = std::chrono::steady_clock::now();
  // mkostemp: a name no one can guess, created with O_EXCL (never an existing file or
  // link), mode 0600 while it is incomplete.
  std::string temporary = (fs::path(dir) / ("." + name + ".XXXXXX")).string();
  Fd out(mkostemp(temporary.data(), O_CLOEXEC));
  if (out.get() < 0) throw DataError(dir + ": cannot create a file to copy into: " + Why(errno));
  try {
    Fd in(open(from.c_str(), O_RDONLY | O_CLOEXEC));
    if (in.get() < 0) throw DataError(source + ": cannot read: " + Why(errno));
    posix_fadvise(in.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    int64_t done = 0;
    r.crc32 = SumAndCopy(in.get(), source, out.get(), r.path, before.size, options, &done);
    if (fsync(out.get()) != 0) {
      const int e = errno;
      throw DataError(r.path + ": " + (e == ENOSPC ? "the disk is full" : Why(e)) +
                      " while flushing the copy");
    }
    // The source must not have changed under the copy: a file being rewritten while a job
    // starts would give each node another data set.
    struct stat after {};
    if (fstat(in.get(), &after) != 0 || StateOf(after).size != before.size ||
        StateOf(after).mtime_ns != before.mtime_ns || done != before.size)
      throw DataError(source + ": changed while it was copied (" + std::to_string(done) + " of " +
                      std::to_string(before.size) + " bytes read): nothing staged");
    // Read the copy back: what the disk returns is what training will read.
    if (lseek(out.get(), 0, SEEK_SET) != 0)
      throw DataError(temporary + ": cannot read back: " + Why(errno));
    int64_t back_done = 0;
    const uint32_t back_crc = SumAndCopy(out.get(), r.path, -1, "", before.size, {}, &back_done);
    if (back_crc != r.crc32 || back_done != before.size)
      throw DataError(r.path + ": the copy read back differs from " + source +
                      " (checksum or size): nothing staged");
    // The source's mode: a data set only its owner may read stays so.
    if (fchmod(out.get(), st.st_mode & 0777) != 0)
      throw DataError(r.path + ": cannot set the copy's mode: " + Why(errno));
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
