// DLH — reading a run folder for dlh-report (see run_data.hpp).
#include "launcher/report/run_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "common/error.hpp"
#include "common/file_text.hpp"

namespace dlh::report {
namespace fs = std::filesystem;
namespace {

// summary.json and heartbeats are small; a larger one is not DLH's.
constexpr size_t kMaxSmallFile = 16 << 20;
// Problems of one kind beyond this many are counted, not listed.
constexpr int kMaxListedProblems = 5;

// A JSON object from a small file, or null with the reason added to `problems`.
nlohmann::json ReadObject(const fs::path& path, const std::string& shown,
                          std::vector<std::string>* problems) {
  std::string text, why;
  if (!ReadFileText(path.string(), kMaxSmallFile, &text, &why)) {
    problems->push_back(shown + ": cannot read: " + why);
    return nullptr;
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    problems->push_back(shown + ": not a JSON object (damaged, or still being written): not used");
    return nullptr;
  }
  return j;
}

void ReadMetrics(const fs::path& path, RunData* run) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    run->problems.push_back("metrics.jsonl: cannot read");
    return;
  }
  std::string line;
  int64_t number = 0, bad = 0, last_step = -1;
  int attempt = -1;
  bool pending_start = false;  // a "start" event opened an attempt its first step belongs to
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const bool torn = in.eof();  // no newline: a line still being written (or cut by a kill)
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      if (++bad <= kMaxListedProblems)
        run->problems.push_back("metrics.jsonl line " + std::to_string(number) +
                                (torn ? ": an incomplete last line (the run is writing it, or "
                                        "was killed while it did), skipped"
                                      : ": not a JSON object, skipped (a damaged file?)"));
      continue;
    }
    if (j.contains("event")) {
      EventRecord e;
      e.event = j["event"].is_string() ? j["event"].get<std::string>() : "?";
      e.step = IntField(j, "step", -1);
      e.t = NumberField(j, "t", 0);
      if (e.event == "start") {
        ++attempt;
        pending_start = true;
        last_step = -1;
      }
      e.attempt = std::max(attempt, 0);
      e.data = std::move(j);
      run->events.push_back(std::move(e));
      continue;
    }
    const auto time = j.find("time");
    if (!j.contains("step") || !j.contains("loss") || time == j.end() || !time->is_object()) {
      if (++bad <= kMaxListedProblems)
        run->problems.push_back("metrics.jsonl line " + std::to_string(number) +
                                ": neither a step nor an event record, skipped");
      continue;
    }
    StepRecord s;
    s.step = IntField(j, "step", 0);
    // Runs that predate the "start" event: a step that does not follow the last one, or
    // the record that names the split a run starts with, begins a new attempt.
    if (!pending_start && (attempt < 0 || s.step <= last_step || j.contains("rank_batches")))
      ++attempt;
    pending_start = false;
    last_step = s.step;
    s.attempt = attempt;
    s.epoch = IntField(j, "epoch", 0);
    s.t = NumberField(j, "t", 0);
    s.loss = NumberField(j, "loss", std::nan(""));
    s.accuracy = NumberField(j, "accuracy", std::nan(""));
    s.lr = NumberField(j, "lr", std::nan(""));
    s.samples_per_s = NumberField(j, "samples_per_s", std::nan(""));
    s.total_s = NumberField(*time, "total", std::nan(""));
    s.compute_s = NumberField(*time, "compute", std::nan(""));
    s.allreduce_s = NumberField(*time, "allreduce", std::nan(""));
    s.data_s = NumberField(*time, "data", std::nan(""));
    s.checkpoint_s = NumberField(*time, "checkpoint", std::nan(""));
    s.energy_j = NumberField(j, "energy_j", std::nan(""));
    s.gpu_power_w = NumberField(j, "gpu_power_w", std::nan(""));
    s.gpu_util = NumberField(j, "gpu_util", std::nan(""));
    s.gpu_mem_gib = NumberField(j, "gpu_mem_gib", std::nan(""));
    run->steps.push_back(s);
  }
  if (bad > kMaxListedProblems)
    run->problems.push_back("metrics.jsonl: " + std::to_string(bad - kMaxListedProblems) +
                            " more lines skipped");
  run->attempts = attempt + 1;
}

void ReadHeartbeats(const fs::path& dir, RunData* run) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".json") != 0) continue;
    const std::string shown = "heartbeat/" + name;
    if (name.rfind("stalled-", 0) == 0) {
      nlohmann::json j = ReadObject(entry.path(), shown, &run->problems);
      // One per attempt that stalled; the newest (highest step) is the one that matters.
      if (!j.is_null() &&
          (run->stall.is_null() || IntField(j, "step", 0) >= IntField(run->stall, "step", 0)))
        run->stall = std::move(j);
      continue;
    }
    if (name.rfind("rank-", 0) != 0) continue;
    // A heartbeat is rewritten whole (atomically) every second or so; a damaged one is
    // reported and left out.
    nlohmann::json j = ReadObject(entry.path(), shown, &run->problems);
    if (j.is_null()) continue;
    Heartbeat h;
    h.rank = int(IntField(j, "rank", -1));
    h.host = TextField(j, "host", "");
    h.step = IntField(j, "step", 0);
    h.time = NumberField(j, "time", 0);
    h.finished = FlagField(j, "finished", false);
    if (const auto w = j.find("waiting"); w != j.end() && w->is_object()) {
      h.waiting_in = w->value("in", std::string());
      h.waiting_s = NumberField(*w, "seconds", 0);
    }
    run->heartbeats.push_back(h);
  }
  std::sort(run->heartbeats.begin(), run->heartbeats.end(),
            [](const Heartbeat& a, const Heartbeat& b) { return a.rank < b.rank; });
}

// results.json's sample images go into the page as data: URLs; one that is not base64 (a
// quote would end the attribute and add markup: onerror="...") is left out, with one line.
void DropImagesNotBase64(RunData* run) {
  nlohmann::json& results = run->results;
  if (!results.is_object() || !results.contains("misclassified") ||
      !results["misclassified"].is_array())
    return;
  int dropped = 0;
  std::string first;
  nlohmann::json& samples = results["misclassified"];
  for (size_t i = 0; i < samples.size(); ++i) {
    nlohmann::json& m = samples[i];
    if (!m.is_object() || !m.contains("image_bmp_base64")) continue;
    const nlohmann::json& image = m["image_bmp_base64"];
    if (image.is_string() && IsBase64Text(image.get<std::string>())) continue;
    if (dropped++ == 0) first = "misclassified[" + std::to_string(i) + "].image_bmp_base64";
    m.erase("image_bmp_base64");
  }
  if (dropped > 0)
    run->problems.push_back(
        "results.json: " + first + ": not base64: " +
        (dropped == 1 ? std::string("that image is") : std::to_string(dropped) + " images are") +
        " left out");
}

}  // namespace

bool IsBase64Text(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/' || c == '=';
  });
}

double NumberField(const nlohmann::json& record, const char* key, double fallback) {
  if (!record.is_object()) return fallback;
  const auto it = record.find(key);
  return it != record.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string TextField(const nlohmann::json& record, const char* key, const std::string& fallback) {
  if (!record.is_object()) return fallback;
  const auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : fallback;
}

int64_t IntField(const nlohmann::json& record, const char* key, int64_t fallback) {
  const double v = NumberField(record, key, std::nan(""));
  if (!std::isfinite(v)) return fallback;
  constexpr double kLimit = 4611686018427387904.0;  // 2^62: any step count is far below
  return int64_t(std::clamp(v, -kLimit, kLimit));
}

bool FlagField(const nlohmann::json& record, const char* key, bool fallback) {
  if (!record.is_object()) return fallback;
  const auto it = record.find(key);
  return it != record.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

const StepRecord* RunData::last_step() const {
  const StepRecord* best = nullptr;
  for (const StepRecord& s : steps)
    if (!best || s.step >= best->step) best = &s;
  return best;
}

std::vector<const EventRecord*> RunData::events_named(const std::string& name) const {
  std::vector<const EventRecord*> out;
  for (const EventRecord& e : events)
    if (e.event == name) out.push_back(&e);
  return out;
}

RunData LoadRun(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(dir + ": not a run folder (" +
                (fs::exists(dir, ec) ? "not a folder" : "no such folder") + ")");
  const fs::path root(dir);
  const bool has_metrics = fs::exists(root / "metrics.jsonl", ec);
  const bool has_summary = fs::exists(root / "summary.json", ec);
  const bool has_heartbeats = fs::is_directory(root / "heartbeat", ec);
  if (!has_metrics && !has_summary && !has_heartbeats)
    throw Error(dir +
                ": not a run folder (no metrics.jsonl, summary.json or heartbeat/: give "
                "dlh-launch train's --run-dir)");
  RunData run;
  run.dir = dir;
  if (has_metrics) {
    ReadMetrics(root / "metrics.jsonl", &run);
    const auto when = fs::last_write_time(root / "metrics.jsonl", ec);
    if (!ec)  // file_clock to Unix seconds, through the difference of the two clocks' now
      run.modified =
          std::chrono::duration<double>((when - fs::file_time_type::clock::now()) +
                                        std::chrono::system_clock::now().time_since_epoch())
              .count();
  } else {
    run.problems.push_back("metrics.jsonl: missing (the run has not logged a step yet)");
  }
  if (has_summary) run.summary = ReadObject(root / "summary.json", "summary.json", &run.problems);
  if (fs::exists(root / "results.json", ec)) {
    run.results = ReadObject(root / "results.json", "results.json", &run.problems);
    DropImagesNotBase64(&run);
  }
  if (has_heartbeats) ReadHeartbeats(root / "heartbeat", &run);
  for (const fs::directory_entry& entry : fs::directory_iterator(root / "checkpoints", ec)) {
    const std::string name = entry.path().filename().string();
    // The trainer's ckpt-<step>.h5, and a program's ckpt-<step>.pt (share/python/dlh's
    // save_checkpoint names them so).
    auto ends_with = [&name](const char* ext) {
      const size_t n = std::strlen(ext);
      return name.size() > 5 + n && name.compare(name.size() - n, n, ext) == 0;
    };
    if (name.rfind("ckpt-", 0) == 0 && (ends_with(".h5") || ends_with(".pt")))
      run.checkpoints.push_back(name);
  }
  // ckpt-<step>.*: by step, not by name (ckpt-1000 sorts before ckpt-200 as text).
  std::sort(run.checkpoints.begin(), run.checkpoints.end(),
            [](const std::string& a, const std::string& b) {
              return std::atoll(a.c_str() + 5) < std::atoll(b.c_str() + 5);
            });
  return run;
}

RunState StateOf(const RunData& run, double now, double fresh_s) {
  if (run.summary.is_object() && FlagField(run.summary, "finished", false))
    return RunState::Finished;
  // The last attempt said how it ended (a requeued job's next attempt opens with "start").
  const std::vector<const EventRecord*> ends = run.events_named("end");
  if (!ends.empty() && ends.back()->attempt == run.attempts - 1)
    return FlagField(ends.back()->data, "finished", false) ? RunState::Finished : RunState::Stopped;
  // A stall the run did not get past (a resumed attempt that went further did).
  const StepRecord* last = run.last_step();
  if (!run.stall.is_null() && (!last || IntField(run.stall, "step", 0) >= last->step))
    return RunState::Stopped;
  double newest = run.modified;
  bool all_finished = !run.heartbeats.empty();
  for (const Heartbeat& h : run.heartbeats) {
    newest = std::max(newest, h.time);
    all_finished = all_finished && h.finished;
  }
  if (newest > 0 && now - newest < fresh_s && !all_finished) return RunState::Running;
  if (run.summary.is_object() || newest > 0) return RunState::Stopped;
  return RunState::Unknown;
}

const char* RunStateName(RunState state) {
  switch (state) {
    case RunState::Finished:
      return "finished";
    case RunState::Stopped:
      return "stopped";
    case RunState::Running:
      return "running";
    case RunState::Unknown:
      break;
  }
  return "unknown";
}

}  // namespace dlh::report
