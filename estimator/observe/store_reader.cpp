// DLH estimator — reading the observation store (see store_reader.hpp).
#include "estimator/observe/store_reader.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "common/json_parse.hpp"
#include "common/spec.hpp"
#include "estimator/model/features.hpp"
#include "estimator/observe/model_key.hpp"

namespace dlh {
namespace {

// One record file: read without following a link, at most kMaxObservationBytes + 1 bytes.
// Returns "" or the problem.
std::string ReadRecordFile(const std::string& path, std::string* text, struct stat* st) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return errno == ELOOP ? "a symbolic link, not a record" : std::string(std::strerror(errno));
  std::string why;
  if (::fstat(fd, st) != 0) {
    why = std::strerror(errno);
  } else if (!S_ISREG(st->st_mode)) {
    why = "not a regular file";
  } else if (size_t(st->st_size) > kMaxObservationBytes) {
    why = "larger than " + std::to_string(kMaxObservationBytes / 1024) +
          " KiB: not an observation record";
  } else {
    text->resize(kMaxObservationBytes + 1);
    size_t got = 0;
    while (got < text->size()) {
      const ssize_t n = ::read(fd, &(*text)[got], text->size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += size_t(n);
    }
    text->resize(got);
    if (got > kMaxObservationBytes)
      why = "larger than " + std::to_string(kMaxObservationBytes / 1024) +
            " KiB: not an observation record";
  }
  ::close(fd);
  return why;
}

// Features and key from the record's spec when its writer had no plan to take them from;
// the key from the features otherwise, so that a record cannot claim another model's key.
void CompleteModel(Observation* o, const std::string& origin) {
  if (o->features.is_null() && o->spec.is_object()) {
    TrainSpec spec;
    try {
      spec = ParseSpec(o->spec.dump(), origin + ": model.spec", "");
    } catch (const Error& e) {
      throw RecordError(e.what());
    }
    o->features = FeaturesRecordJson(ComputeFeatures(spec));
  }
  if (o->features.is_object()) {
    o->model_key = FeaturesJsonModelKey(o->features);
    if (SpecJsonTrainsWithAdam(o->spec)) o->model_key = AdamModelKey(o->model_key);
  }
}

// The names to read, sorted: every record `me` owns, then each other owner's newest
// kMaxRecordsPerOtherUser, newest first across owners, kMaxRecordsRead in all. A name that
// cannot be looked at stays in, for its read to report.
std::vector<std::string> ChooseRecords(const std::string& base,
                                       const std::vector<std::string>& names, uid_t me) {
  struct Candidate {
    const std::string* name;
    uid_t owner;
    bool mine;
    double mtime;
  };
  std::vector<Candidate> all;
  all.reserve(names.size());
  for (const std::string& name : names) {
    struct stat st {};
    const bool seen = ::lstat((base + name).c_str(), &st) == 0;
    all.push_back({&name, st.st_uid, !seen || st.st_uid == me,
                   double(st.st_mtim.tv_sec) + 1e-9 * double(st.st_mtim.tv_nsec)});
  }
  std::sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.mine != b.mine) return a.mine;
    if (a.mtime != b.mtime) return a.mtime > b.mtime;
    return *a.name > *b.name;
  });
  std::map<uid_t, size_t> taken;
  std::vector<std::string> out;
  for (const Candidate& c : all) {
    if (out.size() >= kMaxRecordsRead) break;
    if (!c.mine && taken[c.owner]++ >= kMaxRecordsPerOtherUser) continue;
    out.push_back(*c.name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

StoreContents ReadStore(const std::string& dir, StoreReading how) {
  StoreContents out;
  out.check = CheckStore(dir);
  if (out.check.state != StoreState::kOk) return out;
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (IsRecordName(e->d_name)) names.emplace_back(e->d_name);
    ::closedir(d);
  } else {
    out.problems.push_back("observation store " + dir + ": cannot read: " + std::strerror(errno));
    return out;
  }
  // Planning inside sbatch stays bounded whatever a store holds (writers stop at their
  // limit; files put there by hand do not).
  const std::string base = dir + (dir.back() == '/' ? "" : "/");
  const size_t found = names.size();
  if (how == StoreReading::kEveryRecord) {
    std::sort(names.begin(), names.end());
    if (names.size() > kMaxRecordsRead) {
      out.problems.push_back("observation store " + dir + ": holds " +
                             std::to_string(names.size()) + " records: only the newest " +
                             std::to_string(kMaxRecordsRead) + " (by name) are read");
      names.erase(names.begin(), names.end() - long(kMaxRecordsRead));
    }
  } else {
    names = ChooseRecords(base, names, ::geteuid());
  }
  if (how == StoreReading::kForPlanning && names.size() < found)
    out.problems.push_back(
        "observation store " + dir + ": holds " + std::to_string(found) +
        " records: " + std::to_string(found - names.size()) +
        " of other users left out (the newest " + std::to_string(kMaxRecordsPerOtherUser) +
        " of each other user are read, " + std::to_string(kMaxRecordsRead) + " in all)");
  for (const std::string& name : names) {
    const std::string path = base + name;
    std::string text;
    struct stat st {};
    if (const std::string why = ReadRecordFile(path, &text, &st); !why.empty()) {
      out.problems.push_back(path + ": " + why);
      continue;
    }
    nlohmann::json j;
    JsonProblem problem;
    if (!ParseJsonStrict(text, &j, &problem)) {
      out.problems.push_back(path + ": " + (problem.path.empty() ? "" : problem.path + ": ") +
                             problem.message);
      continue;
    }
    try {
      StoredObservation s;
      s.record = ObservationFromJson(j, path);
      CompleteModel(&s.record, path);
      s.path = path;
      s.owner = st.st_uid;
      s.mtime = double(st.st_mtim.tv_sec) + 1e-9 * double(st.st_mtim.tv_nsec);
      out.records.push_back(std::move(s));
    } catch (const Error& e) {
      out.problems.push_back(e.what());
    }
  }
  return out;
}

const StoreContents& ReadStoreCached(const std::string& dir) {
  struct Entry {
    struct timespec mtime {
    }, ctime{};  // a record added or removed; a chmod of the folder
    StoreContents contents;
  };
  static std::mutex mutex;
  static std::map<std::string, Entry> cache;
  std::lock_guard<std::mutex> lock(mutex);
  struct stat st {};
  const bool found = ::stat(dir.c_str(), &st) == 0;
  auto it = cache.find(dir);
  auto same = [](const timespec& a, const timespec& b) {
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
  };
  if (it != cache.end() && found && same(it->second.mtime, st.st_mtim) &&
      same(it->second.ctime, st.st_ctim))
    return it->second.contents;
  Entry e;
  if (found) e.mtime = st.st_mtim, e.ctime = st.st_ctim;
  e.contents = ReadStore(dir, StoreReading::kForPlanning);
  Entry& slot = cache[dir];
  slot = std::move(e);
  return slot.contents;
}

}  // namespace dlh
