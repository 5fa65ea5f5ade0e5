// DLH — stored range tests and the run folder's rate record (see lr_store.hpp).
#include "launcher/train/lr_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"
#include "common/file_text.hpp"
#include "common/json_parse.hpp"

namespace dlh {
namespace {

// Both files are small; anything larger is not one of ours.
constexpr size_t kMaxBytes = 4 << 20;

// Parses `text`, read from `path`. Throws UsageError naming the file.
void ParseJsonFile(const std::string& path, const std::string& text, nlohmann::json* out) {
  JsonProblem problem;
  if (!ParseJsonStrict(text, out, &problem))
    throw UsageError(path + ": " + (problem.path.empty() ? "" : problem.path + ": ") +
                     problem.message);
  if (!out->is_object()) throw UsageError(path + ": must be a JSON object");
}

// Reads and parses `path`; false when it does not exist. Throws UsageError naming the file.
bool ReadJson(const std::string& path, nlohmann::json* out) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return false;
  std::string text, why;
  if (!ReadFileText(path, kMaxBytes, &text, &why)) throw UsageError(path + ": cannot read: " + why);
  ParseJsonFile(path, text, out);
  return true;
}

// Reads `path` if this user wrote it (see ReadStoredLr): false when it does not exist, or
// with `*ignored` set when it is another's, a link, or writable by others. From the file it
// checked (O_NOFOLLOW, fstat), so that it cannot be swapped between the check and the read.
bool ReadOwnJson(const std::string& path, nlohmann::json* out, std::string* ignored) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    if (errno == ELOOP) {
      *ignored = path + ": a symbolic link: ignored";
      return false;
    }
    throw UsageError(path + ": cannot read: " + std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw UsageError(path + ": cannot read: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    *ignored = path + ": not a regular file: ignored";
  else if (st.st_uid != ::geteuid())
    *ignored = path + ": owned by uid " + std::to_string(st.st_uid) +
               ", not by this user: ignored (another user may have written it)";
  else if (st.st_mode & (S_IWGRP | S_IWOTH))
    *ignored = path + ": writable by its group or others: ignored";
  if (!ignored->empty()) return false;
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UsageError(path + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, size_t(n));
    if (text.size() > kMaxBytes) throw UsageError(path + ": cannot read: larger than 4 MiB");
  }
  ParseJsonFile(path, text, out);
  return true;
}

double PositiveNumber(const nlohmann::json& j, const char* key, const std::string& at) {
  const auto& v = j.value(key, nlohmann::json());
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0))
    throw UsageError(at + key + ": must be a positive number, got " + v.dump());
  return v.get<double>();
}

int64_t Batch(const nlohmann::json& j, const std::string& path, int64_t expected) {
  const auto& v = j.value("batch", nlohmann::json());
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    throw UsageError(path + ": batch: must be a positive integer, got " + v.dump());
  if (expected > 0 && v.get<int64_t>() != expected)
    throw UsageError(path + ": batch: is " + v.dump() + ", not the run's global batch " +
                     std::to_string(expected));
  return v.get<int64_t>();
}

}  // namespace

std::string LrFindKey(const nlohmann::json& spec, int64_t batch) {
  if (!spec.is_object()) throw SpecError("spec: must be a JSON object");
  nlohmann::json keyed = nlohmann::json::object();
  for (const char* k : {"input", "classes", "layers", "optimizer", "seed"})
    if (spec.contains(k)) keyed[k] = spec[k];
  if (keyed.contains("optimizer") && keyed["optimizer"].is_object()) keyed["optimizer"].erase("lr");
  // nlohmann keeps object keys sorted, so dump() is the same for the same content however
  // the spec orders or spaces it.
  uint64_t h = 14695981039346656037ull;  // FNV-1a offset basis
  for (unsigned char c : keyed.dump()) {
    h ^= c;
    h *= 1099511628211ull;  // FNV prime
  }
  char text[64];
  std::snprintf(text, sizeof text, "lr-find-%016llx-b%lld", static_cast<unsigned long long>(h),
                static_cast<long long>(batch));
  return text;
}

std::string LrFindKeyOfSpecFile(const std::string& spec_path, int64_t batch) {
  std::string text, why;
  if (!ReadFileText(spec_path, 1 << 20, &text, &why))
    throw SpecError(spec_path + ": cannot read: " + why);
  nlohmann::json j;
  JsonProblem problem;
  if (!ParseJsonStrict(text, &j, &problem)) throw SpecError(spec_path + ": " + problem.message);
  if (!j.is_object()) throw SpecError(spec_path + ": must be a JSON object");
  return LrFindKey(j, batch);
}

std::string LrCacheDir(const std::string& run_dir, const char* cache_env) {
  if (cache_env && *cache_env) return cache_env;
  std::filesystem::path dir = std::filesystem::path(run_dir).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "runs/tiny/" is runs/tiny
  const std::string parent = dir.parent_path();
  return parent.empty() ? "." : parent;
}

std::string LrCacheFile(const std::string& dir, const std::string& key) {
  return (std::filesystem::path(dir) / (key + ".json")).string();
}

bool ReadStoredLr(const std::string& path, int64_t batch, StoredLr* out, std::string* ignored) {
  nlohmann::json j;
  std::string why;
  const bool read = ReadOwnJson(path, &j, &why);
  if (ignored) *ignored = why;
  if (!read) return false;
  Batch(j, path, batch);
  const auto& s = j.value("suggestion", nlohmann::json());
  if (!s.is_object()) throw UsageError(path + ": suggestion: missing (not an lr-find result)");
  const auto& status = s.value("status", nlohmann::json());
  if (status != "ok" && status != "no_clear_minimum")
    throw UsageError(path + ": suggestion.status: must be \"ok\" or \"no_clear_minimum\", got " +
                     status.dump());
  *out = StoredLr();
  out->ok = status == "ok";
  if (out->ok) out->lr = PositiveNumber(s, "lr", path + ": suggestion.");
  if (s.contains("note") && s["note"].is_string()) out->note = s["note"].get<std::string>();
  return true;
}

std::string RunLrPath(const std::string& run_dir) {
  return (std::filesystem::path(run_dir) / "lr.json").string();
}

bool ReadRunLr(const std::string& path, RunLr* out) {
  nlohmann::json j;
  if (!ReadJson(path, &j)) return false;
  out->lr = PositiveNumber(j, "lr", path + ": ");
  out->batch = Batch(j, path, 0);
  const auto& source = j.value("source", nlohmann::json());
  if (!source.is_string()) throw UsageError(path + ": source: must be a string");
  out->source = source.get<std::string>();
  return true;
}

std::string RunLrJson(const RunLr& r) {
  return nlohmann::json{{"lr", r.lr}, {"batch", r.batch}, {"source", r.source}}.dump(2) + "\n";
}

}  // namespace dlh
