// DLH — the per-rank timeline and its gathering into one Chrome trace file (see trace.hpp).
#include "launcher/train/trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <utility>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "launcher/comm/collective.hpp"
#include "launcher/comm/mpi.hpp"

namespace dlh {
namespace {

// Microseconds with nanosecond digits: the format's unit, short in the file.
double Micros(int64_t ns) { return double(ns) / 1000.0; }

const char* LaneName(int lane) {
  switch (TraceLane(lane)) {
    case TraceLane::Step:
      return "step";
    case TraceLane::Compute:
      return "compute";
    case TraceLane::Writer:
      return "checkpoint write";
    default:
      return "allreduce";
  }
}

nlohmann::json Metadata(const char* name, int rank, int lane, nlohmann::json args) {
  return {{"ph", "M"}, {"name", name}, {"pid", rank}, {"tid", lane}, {"args", std::move(args)}};
}

}  // namespace

Tracer::Tracer(Clock::time_point origin, uint64_t max_events, size_t buffer_events)
    : origin_(origin),
      max_events_(max_events),
      buffer_events_(std::max<size_t>(buffer_events, 1)) {}

Tracer::~Tracer() = default;

void Tracer::spill_to(const std::string& path, int rank) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw IoError(path, std::strerror(errno));
  spill_.reset(f);
  spill_path_ = path;
  spill_rank_ = rank;
  flush();  // what came before
}

bool Tracer::append_to_spill(const std::string& text) {
  if (!spill_ || !spill_error_.empty()) return false;
  if (std::fwrite(text.data(), 1, text.size(), spill_.get()) == text.size() &&
      std::fflush(spill_.get()) == 0) {
    spilled_bytes_ += int64_t(text.size());
    return true;
  }
  spill_error_ = std::strerror(errno);
  // Whole events only: what a short write left of the last batch goes.
  if (ftruncate(fileno(spill_.get()), off_t(spilled_bytes_)) != 0) spilled_bytes_ = 0;
  return false;
}

void Tracer::flush() {
  if (!spill_ || events_.empty()) return;
  std::string text;
  for (const Event& e : events_)
    text += (spilled_bytes_ == 0 && text.empty() ? "" : ",\n") + event_json(e, spill_rank_);
  if (!append_to_spill(text)) {
    dropped_ += events_.size();
    recorded_ -= events_.size();
  }
  events_.clear();
  texts_.clear();
}

int64_t Tracer::finish_spill(const std::string& host) {
  if (!spill_) return 0;
  flush();
  if (spilled_bytes_ > 0 || !lanes_.empty())
    append_to_spill((spilled_bytes_ == 0 ? "" : ",\n") + metadata_json(spill_rank_, host));
  spill_.reset();
  return spilled_bytes_;
}

int64_t Tracer::since_origin(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
}

void Tracer::add(Event e, const char* text_name, std::string text) {
  if (recorded_ >= max_events_ || !spill_error_.empty()) {
    ++dropped_;
    return;
  }
  if (text_name && !text.empty()) {
    e.text = int32_t(texts_.size());
    texts_.emplace_back(text_name, std::move(text));
  }
  const auto lane = std::lower_bound(lanes_.begin(), lanes_.end(), e.lane);
  if (lane == lanes_.end() || *lane != e.lane) lanes_.insert(lane, e.lane);
  events_.push_back(e);
  ++recorded_;
  if (spill_ && events_.size() >= buffer_events_) {
    // The write is part of the run: it shows as a slice of its own.
    const Clock::time_point start = Clock::now();
    const int64_t step = e.step;
    flush();
    Event w;
    w.start_ns = since_origin(start);
    w.dur_ns = std::max<int64_t>(0, since_origin(Clock::now()) - w.start_ns);
    w.step = step;
    w.name = "trace write";
    w.lane = int(TraceLane::Compute);
    if (recorded_ < max_events_ && spill_error_.empty()) {
      events_.push_back(w);
      ++recorded_;
    }
  }
}

void Tracer::slice(TraceLane lane, const char* name, Clock::time_point start, Clock::time_point end,
                   int64_t step, std::initializer_list<TraceArg> args, const char* text_name,
                   std::string text) {
  Event e;
  e.start_ns = since_origin(start);
  e.dur_ns = std::max<int64_t>(0, since_origin(end) - e.start_ns);
  e.step = step;
  e.name = name;
  e.lane = int(lane);
  size_t k = 0;
  for (const TraceArg& a : args)
    if (k < 3) e.args[k++] = a;
  add(e, text_name, std::move(text));
}

void Tracer::allreduce(Clock::time_point start, Clock::time_point end, int64_t step, size_t bucket,
                       size_t bytes, bool overlapped) {
  const int64_t from = since_origin(start), to = since_origin(end);
  size_t k = 0;
  while (k < allreduce_lane_end_.size() && allreduce_lane_end_[k] > from) ++k;
  if (k == allreduce_lane_end_.size()) allreduce_lane_end_.push_back(to);
  allreduce_lane_end_[k] = std::max(allreduce_lane_end_[k], to);
  slice(TraceLane(int(TraceLane::Allreduce) + int(k)), "allreduce", start, end, step,
        {{"bucket", int64_t(bucket)}, {"bytes", int64_t(bytes)}, {"overlapped", overlapped}});
}

void Tracer::instant(const char* name, Clock::time_point at, int64_t step, const char* text_name,
                     std::string text) {
  Event e;
  e.start_ns = since_origin(at);
  e.step = step;
  e.name = name;
  e.lane = int(TraceLane::Compute);
  add(e, text_name, std::move(text));
}

std::string Tracer::metadata_json(int rank, const std::string& host) const {
  std::vector<nlohmann::json> out;
  out.push_back(Metadata("process_name", rank, 0,
                         {{"name", "rank " + std::to_string(rank) + " (" + host + ")"}}));
  out.push_back(Metadata("process_sort_index", rank, 0, {{"sort_index", rank}}));
  for (int lane : lanes_) {
    std::string name = LaneName(lane);
    if (lane > int(TraceLane::Allreduce))
      name += " (" + std::to_string(lane - int(TraceLane::Allreduce) + 1) + ")";
    out.push_back(Metadata("thread_name", rank, lane, {{"name", name}}));
    out.push_back(Metadata("thread_sort_index", rank, lane, {{"sort_index", lane}}));
  }
  std::string text;
  for (const nlohmann::json& m : out) text += (text.empty() ? "" : ",\n") + m.dump();
  return text;
}

std::string Tracer::event_json(const Event& e, int rank) const {
  nlohmann::json j = {{"name", e.name}, {"pid", rank}, {"tid", e.lane}, {"ts", Micros(e.start_ns)}};
  if (e.dur_ns < 0) {
    j["ph"] = "i";
    j["s"] = "p";  // drawn across the rank's lanes
  } else {
    j["ph"] = "X";
    j["dur"] = Micros(e.dur_ns);
  }
  nlohmann::json args = nlohmann::json::object();
  if (e.step >= 0) args["step"] = e.step;
  for (const TraceArg& a : e.args)
    if (a.name) args[a.name] = a.value;
  if (e.text >= 0) args[texts_[size_t(e.text)].first] = texts_[size_t(e.text)].second;
  if (!args.empty()) j["args"] = std::move(args);
  return j.dump();
}

std::string Tracer::events_json(int rank, const std::string& host) const {
  std::string text = metadata_json(rank, host);
  // One object at a time: a json array of millions of events would take several times the
  // memory of its text.
  for (const Event& e : events_) text += ",\n" + event_json(e, rank);
  return text;
}

void CheckTracePath(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) throw UsageError("--trace: needs a file name");
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw UsageError("--trace: " + path + ": is a folder, expected a file name");
  const fs::path folder =
      fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::is_directory(folder, ec))
    throw UsageError("--trace: " + path + ": folder " + folder.string() + " does not exist");
  if (access(folder.c_str(), W_OK | X_OK) != 0)
    throw UsageError("--trace: " + path + ": folder " + folder.string() + " is not writable");
}

namespace {

// A spilled part, from rank `from` to rank 0, in pieces: each is its length (an int64_t; -1:
// the sender could not read its part, nothing more follows) and then its bytes. Rank 0 hands
// every piece to `write`; the sender reads its file a piece at a time.
void SendPart(const std::string& path, int64_t bytes, MPI_Comm comm) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::vector<char> piece(size_t(std::min(bytes, kTracePieceBytes)));
  for (int64_t at = 0; at < bytes;) {
    int64_t n = std::min(kTracePieceBytes, bytes - at);
    if (!f || std::fread(piece.data(), 1, size_t(n), f) != size_t(n)) n = -1;
    MPI_CHECK(MPI_Send(&n, 1, MPI_INT64_T, 0, 1, comm));
    if (n < 0) break;
    MPI_CHECK(MPI_Send(piece.data(), int(n), MPI_CHAR, 0, 2, comm));
    at += n;
  }
  if (f) std::fclose(f);
}

// Returns false when the sender could not read its part (what came is written: whole
// events up to a piece's cut, which the caller then reports).
bool ReceivePart(int from, int64_t bytes, MPI_Comm comm,
                 const std::function<void(const char*, size_t)>& write) {
  std::vector<char> piece(size_t(std::min(bytes, kTracePieceBytes)));
  for (int64_t at = 0; at < bytes;) {
    int64_t n = 0;
    MPI_CHECK(MPI_Recv(&n, 1, MPI_INT64_T, from, 1, comm, MPI_STATUS_IGNORE));
    if (n < 0) return false;
    MPI_CHECK(MPI_Recv(piece.data(), int(n), MPI_CHAR, from, 2, comm, MPI_STATUS_IGNORE));
    write(piece.data(), size_t(n));
    at += n;
  }
  return true;
}

}  // namespace

uint64_t WriteTrace(Tracer& tracer, MPI_Comm comm, int rank, const std::string& host,
                    const std::string& path, nlohmann::json metadata) {
  int size = 1;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  const bool spilled = tracer.spilling();
  std::string mine;  // the events in memory, when the tracer did not spill
  int64_t bytes = 0;
  if (spilled) {
    bytes = tracer.finish_spill(host);
  } else {
    mine = tracer.events_json(rank, host);
    bytes = int64_t(mine.size());
  }
  // Bytes and dropped events of every rank; rank 0 then takes the parts one rank at a time
  // (point to point, in pieces: a Gatherv's int displacements would overflow past 2 GiB).
  const int64_t counts[2] = {bytes, int64_t(tracer.dropped())};
  std::vector<int64_t> all(rank == 0 ? 2 * size_t(size) : 0);
  MPI_CHECK(MPI_Gather(counts, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, 0, comm));
  uint64_t dropped = 0;
  // A failed write (disk full) fails every rank alike, after training and its summary; rank 0
  // takes every piece sent to it whatever happens to its file, so no sender waits for good.
  RunCollectively(comm, [&] {
    if (rank != 0) {
      if (spilled && bytes > 0) SendPart(tracer.spill_path(), bytes, comm);
      if (!spilled && bytes > 0) {
        for (int64_t at = 0; at < bytes; at += kTracePieceBytes) {
          int64_t n = std::min(kTracePieceBytes, bytes - at);
          MPI_CHECK(MPI_Send(&n, 1, MPI_INT64_T, 0, 1, comm));
          MPI_CHECK(MPI_Send(mine.data() + at, int(n), MPI_CHAR, 0, 2, comm));
        }
      }
      return;
    }
    std::vector<uint64_t> per_rank;
    for (int r = 0; r < size; ++r) per_rank.push_back(uint64_t(all[2 * size_t(r) + 1]));
    for (uint64_t d : per_rank) dropped += d;
    metadata["dropped_events"] = dropped;
    metadata["dropped_events_per_rank"] = per_rank;
    std::vector<int> unreadable;
    CommitAtomically(path, [&](const std::string& tmp) {
      std::FILE* out = std::fopen(tmp.c_str(), "wb");
      std::string failure = out ? "" : std::strerror(errno);
      auto write = [&](const char* data, size_t n) {
        if (failure.empty() && std::fwrite(data, 1, n, out) != n) failure = std::strerror(errno);
      };
      auto put = [&](const std::string& text) { write(text.data(), text.size()); };
      put("{\"traceEvents\": [\n");
      bool first = true;
      for (int r = 0; r < size; ++r) {
        const int64_t n = all[2 * size_t(r)];
        if (n == 0) continue;
        if (!first) put(",\n");
        first = false;
        if (r != 0) {
          if (!ReceivePart(r, n, comm, write)) unreadable.push_back(r);
        } else if (!spilled) {
          put(mine);
        } else if (std::FILE* part = std::fopen(tracer.spill_path().c_str(), "rb")) {
          std::vector<char> piece(size_t(std::min(n, kTracePieceBytes)));
          for (size_t got; (got = std::fread(piece.data(), 1, piece.size(), part)) > 0;)
            write(piece.data(), got);
          std::fclose(part);
        } else {
          unreadable.push_back(0);
        }
      }
      put("\n],\n\"displayTimeUnit\": \"ms\",\n\"metadata\": " + metadata.dump() + "}\n");
      if (out && failure.empty() && (std::fflush(out) != 0 || fsync(fileno(out)) != 0))
        failure = std::strerror(errno);
      if (out) std::fclose(out);
      if (!failure.empty()) throw IoError(path, failure);
      if (!unreadable.empty())
        throw IoError(path, "the trace's part of rank " + std::to_string(unreadable[0]) +
                                " could not be read back (" + tracer.spill_path() +
                                " on that rank)");
    });
  });
  if (spilled) std::remove(tracer.spill_path().c_str());
  return dropped;
}

}  // namespace dlh
