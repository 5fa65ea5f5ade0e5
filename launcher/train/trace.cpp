// DLH — the per-rank timeline and its gathering into one Chrome trace file (see trace.hpp).
#include "launcher/train/trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
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

// Sends `text` to rank 0 (or receives it there from `from`) in pieces that fit an int count.
constexpr int64_t kPiece = int64_t(1) << 30;
void SendText(const std::string& text, MPI_Comm comm) {
  for (int64_t at = 0; at < int64_t(text.size()); at += kPiece) {
    const int n = int(std::min<int64_t>(kPiece, int64_t(text.size()) - at));
    MPI_CHECK(MPI_Send(text.data() + at, n, MPI_CHAR, 0, 0, comm));
  }
}
void ReceiveText(std::string* out, int64_t bytes, int from, MPI_Comm comm) {
  const size_t base = out->size();
  out->resize(base + size_t(bytes));
  for (int64_t at = 0; at < bytes; at += kPiece) {
    const int n = int(std::min<int64_t>(kPiece, bytes - at));
    MPI_CHECK(MPI_Recv(out->data() + base + at, n, MPI_CHAR, from, 0, comm, MPI_STATUS_IGNORE));
  }
}

}  // namespace

Tracer::Tracer(Clock::time_point origin, size_t max_events)
    : origin_(origin), max_events_(max_events) {}

int64_t Tracer::since_origin(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
}

void Tracer::add(Event e, const char* text_name, std::string text) {
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  if (text_name && !text.empty()) {
    e.text = int32_t(texts_.size());
    texts_.emplace_back(text_name, std::move(text));
  }
  events_.push_back(e);
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

std::string Tracer::events_json(int rank, const std::string& host) const {
  std::vector<nlohmann::json> out;
  out.push_back(Metadata("process_name", rank, 0,
                         {{"name", "rank " + std::to_string(rank) + " (" + host + ")"}}));
  out.push_back(Metadata("process_sort_index", rank, 0, {{"sort_index", rank}}));
  std::vector<int> lanes;
  for (const Event& e : events_)
    if (std::find(lanes.begin(), lanes.end(), e.lane) == lanes.end()) lanes.push_back(e.lane);
  std::sort(lanes.begin(), lanes.end());
  for (int lane : lanes) {
    std::string name = LaneName(lane);
    if (lane > int(TraceLane::Allreduce))
      name += " (" + std::to_string(lane - int(TraceLane::Allreduce) + 1) + ")";
    out.push_back(Metadata("thread_name", rank, lane, {{"name", name}}));
    out.push_back(Metadata("thread_sort_index", rank, lane, {{"sort_index", lane}}));
  }
  std::string text;
  for (const nlohmann::json& m : out) text += (text.empty() ? "" : ",\n") + m.dump();
  // One object at a time: a json array of millions of events would take several times the
  // memory of its text.
  for (const Event& e : events_) {
    nlohmann::json j = {
        {"name", e.name}, {"pid", rank}, {"tid", e.lane}, {"ts", Micros(e.start_ns)}};
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
    text += ",\n" + j.dump();
  }
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

uint64_t WriteTrace(const Tracer& tracer, MPI_Comm comm, int rank, const std::string& host,
                    const std::string& path, nlohmann::json metadata) {
  int size = 1;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  const std::string mine = tracer.events_json(rank, host);
  // Bytes and dropped events of every rank; rank 0 then takes the texts one rank at a time
  // (point to point: a Gatherv's int displacements would overflow past 2 GiB in all).
  const int64_t counts[2] = {int64_t(mine.size()), int64_t(tracer.dropped())};
  std::vector<int64_t> all(rank == 0 ? 2 * size_t(size) : 0);
  MPI_CHECK(MPI_Gather(counts, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, 0, comm));
  uint64_t dropped = 0;
  std::string file;
  if (rank == 0) {
    std::vector<uint64_t> per_rank;
    for (int r = 0; r < size; ++r) per_rank.push_back(uint64_t(all[2 * size_t(r) + 1]));
    for (uint64_t d : per_rank) dropped += d;
    metadata["dropped_events"] = dropped;
    metadata["dropped_events_per_rank"] = per_rank;
    file = "{\"traceEvents\": [\n" + mine;
    for (int r = 1; r < size; ++r) {
      if (all[2 * size_t(r)] == 0) continue;
      file += ",\n";
      ReceiveText(&file, all[2 * size_t(r)], r, comm);
    }
    file += "\n],\n\"displayTimeUnit\": \"ms\",\n\"metadata\": " + metadata.dump() + "}\n";
  } else if (!mine.empty()) {
    SendText(mine, comm);
  }
  // A failed write (disk full) fails every rank alike, after training and its summary.
  RunCollectively(comm, [&] {
    if (rank == 0) WriteFileAtomically(path, file);
  });
  return dropped;
}

}  // namespace dlh
