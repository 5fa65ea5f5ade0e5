// DLH — what a run folder says about its run, read for dlh-report: metrics.jsonl (every
// step and event, across every attempt of a requeued job), summary.json (the end of the last
// attempt) and the heartbeats (a run still going, or one that stalled).
//
// The folder may belong to a run still writing, one killed mid-line, or one whose files
// were damaged: nothing here throws for its content. A torn or foreign line is skipped and
// named in `problems` ("metrics.jsonl line 812: not JSON, skipped (a line still being
// written, or a damaged file)"), and the report says what it could not show. Only a folder
// that holds no run at all is an error (LoadRun throws).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlh::report {

struct StepRecord {
  int64_t step = 0;
  int64_t epoch = 0;
  double t = 0;  // Unix seconds; 0: not recorded (runs from before the field existed)
  double loss = 0, accuracy = 0, lr = 0, samples_per_s = 0;
  double total_s = 0, compute_s = 0, allreduce_s = 0, data_s = 0, checkpoint_s = 0;
  // Rank 0's meter and GPU as dlh-launch last read them (at most once a second); NaN where
  // nothing was measured (a CPU run without RAPL, a GPU without NVML, an older dlh-launch).
  double energy_j = __builtin_nan(""), gpu_power_w = __builtin_nan(""),
         gpu_util = __builtin_nan(""), gpu_mem_gib = __builtin_nan("");
  int attempt = 0;  // 0 for the first start, +1 at each resume or restart
};

// Every record with an "event": eval, checkpoint, balance, start, signal, end, and any an
// older or newer dlh-launch wrote (kept as JSON).
struct EventRecord {
  std::string event;
  int64_t step = -1;
  double t = 0;
  int attempt = 0;
  nlohmann::json data;
};

struct Heartbeat {
  int rank = -1;
  std::string host;
  int64_t step = 0;
  double time = 0;  // Unix seconds
  bool finished = false;
  std::string waiting_in;  // non-empty: blocked in this MPI call
  double waiting_s = 0;
};

struct RunData {
  std::string dir;
  std::vector<StepRecord> steps;  // in file order
  std::vector<EventRecord> events;
  int attempts = 0;        // starts seen (1 for a run never resumed; 0: no step yet)
  nlohmann::json summary;  // null: no summary.json (a run still going, or killed)
  // results.json (launcher/predict/results.hpp): a classifier's results on the test split,
  // written after training by `dlh-launch predict --results`; null: none.
  nlohmann::json results;
  std::vector<Heartbeat> heartbeats;
  nlohmann::json stall;  // the verdict of a run that stalled (heartbeat/stalled-*.json)
  std::vector<std::string> checkpoints;  // checkpoints/ckpt-*.h5, oldest first
  std::vector<std::string> problems;     // what could not be read, one line each
  double modified = 0;                   // Unix seconds of metrics.jsonl's last change (0: none)

  // The step record with the highest step (nullptr: none).
  const StepRecord* last_step() const;
  // Events named `name`, in file order.
  std::vector<const EventRecord*> events_named(const std::string& name) const;
};

// Fields of a record another program wrote, or a damaged one: a field that is missing, of
// the wrong type, or of a record that is not an object gives the fallback, never an
// exception (nlohmann's value() throws on a wrong type).
double NumberField(const nlohmann::json& record, const char* key, double fallback);
std::string TextField(const nlohmann::json& record, const char* key, const std::string& fallback);
bool FlagField(const nlohmann::json& record, const char* key, bool fallback);
// A whole number: a fraction is cut, one beyond +-2^62 is clamped.
int64_t IntField(const nlohmann::json& record, const char* key, int64_t fallback);

// Reads RUN_DIR. Throws dlh::Error "<dir>: not a run folder (no metrics.jsonl, summary.json
// or heartbeat/)" when it holds none of a run's files, or cannot be read as a folder.
RunData LoadRun(const std::string& dir);

// Whether `text` is base64 (A-Z a-z 0-9 + / =, nothing else): what results.json's
// misclassified[i].image_bmp_base64 must be to go into the report's <img src>.
bool IsBase64Text(const std::string& text);

// Whether the run looks finished (summary.json says so, or the last attempt logged an
// "end" event), still running (a heartbeat or metrics.jsonl younger than `fresh_s` seconds),
// or neither (stopped: killed, stalled, requeued and waiting).
enum class RunState { Finished, Stopped, Running, Unknown };
RunState StateOf(const RunData& run, double now, double fresh_s = 60);
const char* RunStateName(RunState state);

}  // namespace dlh::report
