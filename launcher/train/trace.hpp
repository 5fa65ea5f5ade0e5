// DLH — a timeline of every rank (dlh-launch train --trace FILE), in the Chrome Trace Event
// Format that https://ui.perfetto.dev and chrome://tracing open: one process per rank (pid =
// rank), one thread per lane, complete events ("ph": "X") with microsecond times.
//
// Why buffered in memory: writing while training would put file I/O into the very steps
// being timed. Each rank keeps at most `max_events` (88 bytes each, so 2 million is
// about 180 MB at worst) and counts the rest as dropped; at the end of the run rank 0 gathers
// every rank's events as text (about 107 bytes an event, all ranks' at once in its memory)
// and writes one file. Times come from one steady clock, relative to an
// origin every rank takes right after one barrier, so the ranks' lanes line up to within the
// barrier's skew (microseconds on one host, tens of them across a network).
//
// Not thread-safe: the training thread records everything, also the background checkpoint
// write, which it learns of (start and length) from the writer.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlh {

// The lanes of a rank, as the trace's thread ids (their order in the viewer).
enum class TraceLane : int {
  Step = 1,        // one slice per step, from the loader's batch to the end of the step
  Compute = 2,     // the training thread: data wait, forward, backward, waits, optimizer...
  Writer = 3,      // the background checkpoint write (rank 0)
  Allreduce = 10,  // gradient buckets; one that overlaps another goes to Allreduce + 1, ...
};

struct TraceArg {
  const char* name = nullptr;  // a string literal: kept by pointer
  int64_t value = 0;
};

class Tracer {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxEvents = 2000000;

  // Times are kept relative to `origin`.
  explicit Tracer(Clock::time_point origin, size_t max_events = kMaxEvents);

  // A slice [start, end] on `lane` of step `step` (-1: none). `name` must be a string literal
  // (kept by pointer); at most three `args` are kept; `text` (empty: none) becomes the arg
  // `text_name`, e.g. a split "[24, 8]".
  void slice(TraceLane lane, const char* name, Clock::time_point start, Clock::time_point end,
             int64_t step, std::initializer_list<TraceArg> args = {},
             const char* text_name = nullptr, std::string text = {});
  // A gradient bucket's allreduce, on the first allreduce lane free at `start`: buckets in
  // flight together need not nest, and slices on one lane must.
  void allreduce(Clock::time_point start, Clock::time_point end, int64_t step, size_t bucket,
                 size_t bytes, bool overlapped);
  // A moment ("ph": "i") on the whole rank: a signal, a change of split.
  void instant(const char* name, Clock::time_point at, int64_t step,
               const char* text_name = nullptr, std::string text = {});

  size_t size() const { return events_.size(); }
  uint64_t dropped() const { return dropped_; }
  // This rank's events, the metadata events naming the rank ("rank R (host)") and its lanes
  // first, as JSON objects separated by ",\n" (no brackets; empty when there are none).
  std::string events_json(int rank, const std::string& host) const;

 private:
  struct Event {
    int64_t start_ns = 0, dur_ns = -1;  // dur_ns < 0: an instant
    int64_t step = -1;
    const char* name = nullptr;
    TraceArg args[3];
    int32_t text = -1;  // index into texts_
    int lane = 0;
  };
  void add(Event e, const char* text_name, std::string text);  // or count it as dropped
  int64_t since_origin(Clock::time_point t) const;

  Clock::time_point origin_;
  size_t max_events_;
  uint64_t dropped_ = 0;
  std::vector<Event> events_;
  std::vector<std::pair<const char*, std::string>> texts_;
  std::vector<int64_t> allreduce_lane_end_;  // per allreduce lane: where its last slice ends
};

// A slice from construction to destruction, when `tracer` is not null (nothing otherwise:
// no clock is read).
class TraceSpan {
 public:
  TraceSpan(Tracer* tracer, TraceLane lane, const char* name, int64_t step)
      : tracer_(tracer), lane_(lane), name_(name), step_(step) {
    if (tracer_) start_ = Tracer::Clock::now();
  }
  ~TraceSpan() {
    if (!tracer_) return;
    try {
      tracer_->slice(lane_, name_, start_, Tracer::Clock::now(), step_);
    } catch (...) {  // out of memory for one more event: the run matters more than its trace
    }
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Tracer* tracer_;
  TraceLane lane_;
  const char* name_;
  int64_t step_;
  Tracer::Clock::time_point start_;
};

// Throws UsageError naming --trace when `path` cannot be written at the end of the run: its
// folder is missing or not writable, or it names a folder.
void CheckTracePath(const std::string& path);

// Collective over `comm`: every rank's events go to rank 0, which writes `path` atomically as
// {"traceEvents": [...], "displayTimeUnit": "ms", "metadata": METADATA + "dropped_events"}.
// Returns the events dropped on all ranks together (on rank 0; 0 elsewhere).
uint64_t WriteTrace(const Tracer& tracer, MPI_Comm comm, int rank, const std::string& host,
                    const std::string& path, nlohmann::json metadata);

}  // namespace dlh
