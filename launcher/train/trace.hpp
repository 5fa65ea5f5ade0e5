// DLH — a timeline of every rank (dlh-launch train --trace FILE), in the Chrome Trace Event
// Format that https://ui.perfetto.dev and chrome://tracing open: one process per rank (pid =
// rank), one thread per lane, complete events ("ph": "X") with microsecond times.
//
// Why streamed to a file per rank (issue 41): a run of a million steps records tens of
// millions of events, which no rank should hold in memory, and which rank 0 must not gather
// as one string. Each rank buffers kBufferEvents events (88 bytes each, about 6 MB) and then
// appends them, as text (about 110 bytes an event), to its own part file in the run folder
// (spill_to): one write every few thousand steps, itself a slice on the compute lane, so the
// trace shows what it costs. At the end of the run every rank sends its part to rank 0 in
// pieces of kTracePieceBytes, and rank 0 writes them one after the other into the trace file:
// memory stays bounded on every rank whatever the run's length. A rank records at most
// `max_events` (kMaxEvents: about 11 GB of text) and counts the rest as dropped. Times come
// from one steady clock, relative to an origin every rank takes right after one barrier, so
// the ranks' lanes line up to within the barrier's skew (microseconds on one host, tens of
// them across a network).
//
// Not thread-safe: the training thread records everything, also the background checkpoint
// write, which it learns of (start and length) from the writer.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
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
  static constexpr uint64_t kMaxEvents = 100000000;
  static constexpr size_t kBufferEvents = 65536;

  // Times are kept relative to `origin`. Until spill_to, events stay in memory (up to
  // max_events); after it, at most buffer_events of them.
  explicit Tracer(Clock::time_point origin, uint64_t max_events = kMaxEvents,
                  size_t buffer_events = kBufferEvents);
  ~Tracer();

  // From now on the events go to `path` (created or emptied), buffer_events at a time, with
  // `rank` as their pid. A write that fails (a full disk) drops the events from then on,
  // counted, and never the run: the part keeps whole events only.
  void spill_to(const std::string& path, int rank);
  bool spilling() const { return spill_ != nullptr; }
  // Writes what is buffered and the metadata naming the rank ("rank R (host)") and its
  // lanes, then closes the part: its size in bytes (0 when it holds nothing). Only after
  // spill_to.
  int64_t finish_spill(const std::string& host);
  const std::string& spill_path() const { return spill_path_; }
  // Why the part stopped growing, empty when it did not.
  const std::string& spill_error() const { return spill_error_; }

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

  // Events recorded: in memory and written to the part.
  uint64_t size() const { return recorded_; }
  // Events in memory now: at most buffer_events once spilling.
  size_t buffered() const { return events_.size(); }
  uint64_t dropped() const { return dropped_; }
  // This rank's events in memory, the metadata events naming the rank ("rank R (host)") and
  // its lanes first, as JSON objects separated by ",\n" (no brackets).
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
  std::string metadata_json(int rank, const std::string& host) const;
  std::string event_json(const Event& e, int rank) const;
  // Appends `text` to the part; on a failure, cuts the part back to its last whole event.
  bool append_to_spill(const std::string& text);
  void flush();  // the buffered events to the part

  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };

  Clock::time_point origin_;
  uint64_t max_events_;
  size_t buffer_events_;
  uint64_t recorded_ = 0;
  uint64_t dropped_ = 0;
  std::vector<Event> events_;
  std::vector<std::pair<const char*, std::string>> texts_;
  std::vector<int> lanes_;                   // every lane an event was on, sorted
  std::vector<int64_t> allreduce_lane_end_;  // per allreduce lane: where its last slice ends
  std::unique_ptr<std::FILE, FileCloser> spill_;
  std::string spill_path_, spill_error_;
  int spill_rank_ = 0;
  int64_t spilled_bytes_ = 0;
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
// A spilling tracer's part is finished, sent in pieces of kTracePieceBytes and removed.
// Returns the events dropped on all ranks together (on rank 0; 0 elsewhere).
constexpr int64_t kTracePieceBytes = int64_t(16) << 20;
uint64_t WriteTrace(Tracer& tracer, MPI_Comm comm, int rank, const std::string& host,
                    const std::string& path, nlohmann::json metadata);

}  // namespace dlh
