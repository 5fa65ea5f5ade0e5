// DLH — tests of the timeline buffer (--trace): Chrome trace events, allreduce lanes that never
// hold overlapping slices, the event cap, and the check of the file's folder.
#include "launcher/train/trace.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/error.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

using Clock = Tracer::Clock;
using std::chrono::microseconds;

nlohmann::json Events(const Tracer& t, int rank = 0) {
  return nlohmann::json::parse("[" + t.events_json(rank, "node7") + "]");
}

// The events that are not metadata, in recording order.
nlohmann::json Slices(const nlohmann::json& events) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : events)
    if (e["ph"] != "M") out.push_back(e);
  return out;
}

TEST(TracerTest, SlicesAreCompleteEventsInMicrosecondsFromTheOrigin) {
  const Clock::time_point origin = Clock::now();
  Tracer t(origin);
  t.slice(TraceLane::Compute, "forward", origin + microseconds(1500), origin + microseconds(4000),
          7, {{"bytes", 64}});
  const nlohmann::json events = Events(t, 3);
  const nlohmann::json s = Slices(events);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["ph"], "X");
  EXPECT_EQ(s[0]["name"], "forward");
  EXPECT_EQ(s[0]["pid"], 3);
  EXPECT_EQ(s[0]["tid"], int(TraceLane::Compute));
  EXPECT_DOUBLE_EQ(s[0]["ts"].get<double>(), 1500.0);
  EXPECT_DOUBLE_EQ(s[0]["dur"].get<double>(), 2500.0);
  EXPECT_EQ(s[0]["args"], (nlohmann::json{{"step", 7}, {"bytes", 64}}));
  // The rank and its lane are named for the viewer.
  bool process = false, lane = false;
  for (const auto& e : events) {
    if (e["name"] == "process_name") process = e["args"]["name"] == "rank 3 (node7)";
    if (e["name"] == "thread_name" && e["tid"] == int(TraceLane::Compute))
      lane = e["args"]["name"] == "compute";
  }
  EXPECT_TRUE(process);
  EXPECT_TRUE(lane);
}

TEST(TracerTest, OverlappingBucketsGoToSeparateLanesThatNeverOverlap) {
  const Clock::time_point o = Clock::now();
  Tracer t(o);
  // Buckets 0 and 1 in flight together (1 ends after 0: they do not nest), 2 after both.
  t.allreduce(o + microseconds(10), o + microseconds(50), 1, 0, 4096, true);
  t.allreduce(o + microseconds(20), o + microseconds(80), 1, 1, 8192, true);
  t.allreduce(o + microseconds(60), o + microseconds(90), 1, 2, 4, false);
  const nlohmann::json s = Slices(Events(t));
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0]["tid"], int(TraceLane::Allreduce));
  EXPECT_EQ(s[1]["tid"], int(TraceLane::Allreduce) + 1);
  EXPECT_EQ(s[2]["tid"], int(TraceLane::Allreduce)) << "lane 0 is free again at 60 us";
  EXPECT_EQ(s[1]["args"],
            (nlohmann::json{{"step", 1}, {"bucket", 1}, {"bytes", 8192}, {"overlapped", 1}}));
}

TEST(TracerTest, InstantsCarryTheirText) {
  const Clock::time_point o = Clock::now();
  Tracer t(o);
  t.instant("signal", o + microseconds(5), 12, "signal", "SIGTERM");
  const nlohmann::json s = Slices(Events(t));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["ph"], "i");
  EXPECT_FALSE(s[0].contains("dur"));
  EXPECT_EQ(s[0]["args"], (nlohmann::json{{"step", 12}, {"signal", "SIGTERM"}}));
}

TEST(TracerTest, EventsPastTheCapAreCountedNotKept) {
  const Clock::time_point o = Clock::now();
  Tracer t(o, 2);
  for (int i = 0; i < 5; ++i) t.slice(TraceLane::Step, "step", o, o, i);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.dropped(), 3u);
}

// A part as the file's events: its text between brackets.
nlohmann::json Part(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse("[" + text.str() + "]");
}

TEST(TracerTest, ASpillingTracerKeepsOnlyItsBufferInMemory) {
  const std::string path = testing::TempDir() + "trace-spill-" + std::to_string(getpid());
  const Clock::time_point o = Clock::now();
  Tracer t(o, Tracer::kMaxEvents, 4);
  t.slice(TraceLane::Step, "step", o, o, 0);  // before spill_to: kept, then written with it
  t.spill_to(path, 3);
  size_t most = 0;
  for (int i = 1; i <= 100; ++i) {
    t.slice(TraceLane::Step, "step", o, o + std::chrono::microseconds(i), i);
    most = std::max(most, t.buffered());
  }
  t.instant("signal", o, 100, "signal", "SIGUSR1");
  EXPECT_LE(most, 5u);  // the buffer, and the slice of its own write
  EXPECT_GT(t.finish_spill("node7"), 0);
  const nlohmann::json events = Part(path);
  size_t steps = 0, writes = 0, meta = 0, signals = 0;
  for (const nlohmann::json& e : events) {
    EXPECT_EQ(e["pid"], 3);
    const std::string name = e["name"];
    steps += name == "step";
    writes += name == "trace write";
    signals += name == "signal" && e["args"]["signal"] == "SIGUSR1";
    meta += e["ph"] == "M";
  }
  EXPECT_EQ(steps, 101u);
  EXPECT_GE(writes, 20u);  // every 4 events
  EXPECT_EQ(signals, 1u);
  EXPECT_EQ(meta, 2u + 2u * 2u);  // the rank's name and order, each lane's (step, compute)
  EXPECT_EQ(t.size(), steps + writes + signals);
  std::remove(path.c_str());
}

// A million steps' slices (200,000 in a sanitized build, where each event's JSON takes
// 100 times as long: still three times the buffer).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kManySteps = 200000;
#else
constexpr int kManySteps = 1000000;
#endif

TEST(TracerTest, AMillionStepsStayInTheBuffer) {
  const std::string path = testing::TempDir() + "trace-million-" + std::to_string(getpid());
  const Clock::time_point o = Clock::now();
  Tracer t(o);
  t.spill_to(path, 0);
  size_t most = 0;
  for (int i = 0; i < kManySteps; ++i) {
    t.slice(TraceLane::Step, "step", o, o, i);
    most = std::max(most, t.buffered());
  }
  EXPECT_LE(most, Tracer::kBufferEvents + 1);
  EXPECT_EQ(t.dropped(), 0u);
  const int64_t bytes = t.finish_spill("node7");
  std::ifstream in(path);
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_GE(lines, size_t(kManySteps));
  EXPECT_GT(bytes, int64_t(kManySteps) * 40);
  std::remove(path.c_str());
}

TEST(TracerTest, AFullDiskDropsEventsNotTheRun) {
  const Clock::time_point o = Clock::now();
  Tracer t(o, Tracer::kMaxEvents, 4);
  t.spill_to("/dev/full", 0);
  for (int i = 0; i < 20; ++i) t.slice(TraceLane::Step, "step", o, o, i);
  EXPECT_NE(t.spill_error(), "");
  EXPECT_GE(t.dropped(), 16u);
  EXPECT_EQ(t.finish_spill("node7"), 0);
}

TEST(TraceSpanTest, ANullTracerRecordsNothing) {
  TraceSpan span(nullptr, TraceLane::Compute, "optimizer", 1);  // must not crash
  const Clock::time_point o = Clock::now();
  Tracer t(o);
  { TraceSpan timed(&t, TraceLane::Compute, "optimizer", 1); }
  EXPECT_EQ(t.size(), 1u);
}

TEST(CheckTracePathTest, AMissingOrUnusableFolderIsBadInputNamingTheOption) {
  test::TempDir tmp("dlh-trace");
  EXPECT_NO_THROW(CheckTracePath(tmp.path() + "/trace.json"));
  EXPECT_NO_THROW(CheckTracePath("trace.json"));  // the current folder
  try {
    CheckTracePath(tmp.path() + "/missing/trace.json");
    FAIL() << "a missing folder was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--trace: " + tmp.path() + "/missing/trace.json: folder " +
                                         tmp.path() + "/missing does not exist");
  }
  EXPECT_THROW(CheckTracePath(tmp.path()), UsageError) << "a folder is not a file name";
  EXPECT_THROW(CheckTracePath(""), UsageError);
}

}  // namespace
}  // namespace dlh
