// DLH — stored range tests and the rate a run trains with, for plans that say
// `"lr_source": "find"` (`--dlh-auto=...,lr=find`). No MPI: unit-tested with files.
//
// A range test's curve depends on the model, the optimizer without its rate, the initial
// weights (the spec's seed) and the global batch, and on nothing else `train` changes. A
// result is stored under a key made of exactly those (LR_CACHE/lr-find-KEY.json), so that
// the next job with that spec and batch, or a user who ran `dlh-launch lr-find --store`
// beforehand, reuses it instead of sweeping again. The run folder records the rate the run
// trains with (RUN_DIR/lr.json), so that a requeued or resumed run keeps it even if the
// cache changed in between.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace dlh {

// "lr-find-3fa0c2b9d41e5a77-b128": FNV-1a (64 bit) of the spec's input, classes, layers,
// optimizer (its lr removed) and seed, written as compact JSON with sorted keys, then the
// global batch. The name, epochs, schedule, data set path and the rate itself do not count.
// Throws SpecError when `spec` is not an object.
std::string LrFindKey(const nlohmann::json& spec, int64_t batch);
// The same for a spec file (read and parsed here). Throws SpecError naming the file.
std::string LrFindKeyOfSpecFile(const std::string& spec_path, int64_t batch);

// Where stored results live: `cache_env` (DLH_LR_CACHE) when set and not empty, else the
// run folder's parent ("runs" for runs/NAME, "." for a bare name).
std::string LrCacheDir(const std::string& run_dir, const char* cache_env);
// DIR/KEY.json
std::string LrCacheFile(const std::string& dir, const std::string& key);

struct StoredLr {
  bool ok = false;   // the test suggested a rate (status "ok")
  double lr = 0;     // the suggestion when ok
  std::string note;  // the test's note (why there is no suggestion)
};

// Reads an lr-find result for `batch`. Returns false when `path` does not exist; throws
// UsageError ("PATH: suggestion.lr: must be a positive number") for a file that exists
// but is not an lr-find result for this batch. The cache may be a folder others can write
// (the runs folder's parent, a shared 1777 one): a file this user does not own, a symbolic
// link, or one writable by its group or others is not used either (false), and `*ignored`
// says why in one line ("PATH: owned by uid 65534, not by this user: ignored ...").
bool ReadStoredLr(const std::string& path, int64_t batch, StoredLr* out,
                  std::string* ignored = nullptr);

// RUN_DIR/lr.json: {"lr": 0.058, "batch": 128, "source": "lr-find runs/lr-find-...json"}.
struct RunLr {
  double lr = 0;
  int64_t batch = 0;
  std::string source;  // where the rate came from, as the start line says it
};
std::string RunLrPath(const std::string& run_dir);
// Returns false when the file does not exist; throws UsageError naming the file and field.
bool ReadRunLr(const std::string& path, RunLr* out);
std::string RunLrJson(const RunLr& record);

}  // namespace dlh
