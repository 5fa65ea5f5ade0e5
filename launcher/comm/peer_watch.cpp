// DLH — the stall watchdog and its heartbeats (see peer_watch.hpp).
#include "launcher/comm/peer_watch.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "launcher/comm/rank_guard.hpp"

namespace dlh {
namespace peer_watch_detail {
std::atomic<bool> active{false};
}  // namespace peer_watch_detail

namespace {

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", s);
  return buf;
}

// "MPI_Allreduce(MPI_IN_PLACE, ...)" (MPI_CHECK's text) -> "MPI_Allreduce".
std::string FunctionName(const char* call) {
  std::string s = call ? call : "";
  return s.substr(0, s.find('('));
}

std::string Who(const Heartbeat& h) {
  return "rank " + std::to_string(h.rank) + " (" + h.host + ")";
}

// The watchdog's state, one per process: MPI_CHECK reaches it from every module.
struct Watch {
  PeerWatchOptions options;
  std::atomic<const char*> call{nullptr};
  std::atomic<int64_t> wait_start_ns{0};
  std::atomic<int64_t> step{0};
  std::atomic<bool> finished{false};  // training is over; MPI_Finalize may still wait
  std::mutex mutex;                   // guards checkpoint, stop
  std::condition_variable wake;
  std::string checkpoint;
  bool stop = false;
  std::thread thread;
};
Watch* g_watch = nullptr;

std::string BeatPath(const Watch& w, int rank) {
  return w.options.heartbeat_dir + "/rank-" + std::to_string(rank) + ".json";
}
std::string MarkerPath(const Watch& w) {
  return w.options.heartbeat_dir + "/stalled-" + w.options.run_id + ".json";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A heartbeat that cannot be written only makes a later verdict vaguer; it must not end the run.
void WriteBeat(const std::string& path, const std::string& text) {
  try {
    WriteFileAtomically(path, text);
  } catch (const std::exception&) {
  }
}

// Creates `path` holding `text` only if it does not exist yet (link(2) is atomic and fails
// with EEXIST): of several ranks past the timeout at once, one gives the verdict.
bool CreateExclusively(const std::string& path, const std::string& text) {
  const std::string tmp = TemporaryPathFor(path);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
  }
  const bool created = link(tmp.c_str(), path.c_str()) == 0;
  unlink(tmp.c_str());
  return created;
}

Heartbeat Mine(Watch& w, bool finished) {
  Heartbeat h;
  h.rank = w.options.rank;
  h.host = w.options.host;
  h.pid = long(getpid());
  h.step = w.step.load();
  h.run_id = w.options.run_id;
  h.time = UnixNow();
  h.finished = finished;
  if (const char* call = w.call.load(std::memory_order_acquire)) {
    h.waiting_in = FunctionName(call);
    h.waiting_s = double(SteadyNs() - w.wait_start_ns.load()) * 1e-9;
  }
  return h;
}

std::vector<Heartbeat> ReadBeats(const Watch& w) {
  std::vector<Heartbeat> beats(size_t(w.options.size));
  for (int r = 0; r < w.options.size; ++r) {
    try {
      Heartbeat h = ParseHeartbeat(ReadAll(BeatPath(w, r)));
      if (h.rank == r && h.run_id == w.options.run_id) beats[size_t(r)] = h;
    } catch (const std::exception&) {
      // none yet, or being replaced: counts as no heartbeat
    }
  }
  return beats;
}

std::string Prefix(const Watch& w) {
  return "dlh-launch [rank " + std::to_string(w.options.rank) + "/" +
         std::to_string(w.options.size) + " " + w.options.host + "]: error: ";
}

std::string CheckpointNote(Watch& w) {
  std::lock_guard<std::mutex> lock(w.mutex);
  return w.checkpoint.empty() ? "no checkpoint yet" : "last good checkpoint " + w.checkpoint;
}

// MPI_Abort asks the launcher (mpirun's daemon, srun's step daemon through PMIx) to kill the
// job, and blocks until it does. When the launcher cannot be reached, a link down between
// this host and the one srun runs on, it blocks for good: then this rank ends itself after a
// grace, so that nothing lingers on a host cut off from the rest.
[[noreturn]] void AbortWorld() {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::_Exit(kExitStalled);
  }).detach();
  // Past MPI_Finalize (a peer froze while this rank was in it) MPI_Abort may not be called.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Abort(MPI_COMM_WORLD, kExitStalled);
  std::_Exit(kExitStalled);  // MPI_Abort does not return; if it did, nothing may linger
}

[[noreturn]] void AbortJob(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  AbortWorld();
}

void Loop(Watch& w) {
  const double timeout = w.options.timeout_s;
  const double tick = std::clamp(timeout / 10, 0.2, 30.0);
  const double stale = std::max(3 * tick, 2.0);
  const bool beats = !w.options.heartbeat_dir.empty();
  std::unique_lock<std::mutex> lock(w.mutex);
  while (!w.wake.wait_for(lock, std::chrono::duration<double>(tick), [&] { return w.stop; })) {
    lock.unlock();
    const Heartbeat me = Mine(w, w.finished.load());
    if (beats) {
      WriteBeat(BeatPath(w, me.rank), HeartbeatJson(me));
      const std::string marker = ReadAll(MarkerPath(w));
      if (!marker.empty()) {
        // Another rank gave the verdict: say so here too, then end with it.
        std::string by = "another rank", culprit = "a peer stopped answering";
        try {
          const json m = json::parse(marker);
          by = "rank " + std::to_string(m.at("rank").get<int>()) + " (" +
               m.at("host").get<std::string>() + ")";
          culprit = m.at("culprit").get<std::string>();
        } catch (const std::exception&) {
        }
        AbortJob(Prefix(w) + "stopping at step " + std::to_string(me.step) + ": " + by +
                 " timed out waiting for its peers: " + culprit + "; " + CheckpointNote(w));
      }
    }
    if (!me.waiting_in.empty() && me.waiting_s > timeout) {
      const StallVerdict v = JudgeStall(beats ? ReadBeats(w) : std::vector<Heartbeat>{}, me.rank,
                                        me.waiting_s, timeout, UnixNow(), stale);
      if (v.abort) {
        const json m = {
            {"rank", me.rank}, {"host", me.host}, {"step", me.step}, {"culprit", v.culprit}};
        if (!beats || CreateExclusively(MarkerPath(w), m.dump())) {
          const std::string line = Prefix(w) + "waited " + Seconds(me.waiting_s) + " s in " +
                                   me.waiting_in + " at step " + std::to_string(me.step) + ": " +
                                   v.culprit + "; " + CheckpointNote(w) +
                                   "; aborting the job (--comm-timeout " + Seconds(timeout) + ")";
          std::fprintf(stderr, "%s\n", line.c_str());
          std::fflush(stderr);
          // The other live ranks read the marker within a heartbeat and print their line.
          if (beats) std::this_thread::sleep_for(std::chrono::duration<double>(2 * tick + 0.5));
          AbortWorld();
        }
      }
    }
    lock.lock();
  }
}

}  // namespace

std::string HeartbeatJson(const Heartbeat& h) {
  json j = {{"rank", h.rank},     {"host", h.host}, {"pid", h.pid},          {"step", h.step},
            {"run_id", h.run_id}, {"time", h.time}, {"finished", h.finished}};
  if (!h.waiting_in.empty()) j["waiting"] = {{"in", h.waiting_in}, {"seconds", h.waiting_s}};
  return j.dump() + "\n";
}

Heartbeat ParseHeartbeat(const std::string& text) {
  try {
    const json j = json::parse(text);
    Heartbeat h;
    h.rank = j.at("rank").get<int>();
    h.host = j.at("host").get<std::string>();
    h.pid = j.at("pid").get<long>();
    h.step = j.at("step").get<int64_t>();
    h.run_id = j.at("run_id").get<std::string>();
    h.time = j.at("time").get<double>();
    h.finished = j.at("finished").get<bool>();
    if (j.contains("waiting")) {
      h.waiting_in = j["waiting"].at("in").get<std::string>();
      h.waiting_s = j["waiting"].at("seconds").get<double>();
    }
    return h;
  } catch (const json::exception& e) {
    throw Error(std::string("not a heartbeat: ") + e.what());
  }
}

StallVerdict JudgeStall(const std::vector<Heartbeat>& beats, int self, double waited_s,
                        double timeout_s, double now, double stale_s) {
  StallVerdict v;
  if (waited_s <= timeout_s) return v;
  if (beats.empty()) {
    v.abort = true;
    v.culprit = "a peer stopped answering (no heartbeats say which)";
    return v;
  }
  std::vector<std::string> frozen, busy, done, waiting;
  for (size_t r = 0; r < beats.size(); ++r) {
    if (int(r) == self) continue;
    const Heartbeat& h = beats[r];
    if (h.rank < 0) {
      frozen.push_back("rank " + std::to_string(r) + " (no heartbeat from it)");
    } else if (h.finished) {
      done.push_back(Who(h) + " at step " + std::to_string(h.step));
    } else if (now - h.time > stale_s) {
      // Not its step: a heartbeat is up to a period old when it stops, so the step in it
      // can be well behind the one the rank froze in (the waiting rank's line has that).
      frozen.push_back(Who(h) + ", pid " + std::to_string(h.pid) + ", silent for " +
                       Seconds(now - h.time) + " s");
    } else if (h.waiting_in.empty()) {
      busy.push_back(Who(h) + " at step " + std::to_string(h.step));
    } else {
      waiting.push_back(Who(h) + " in " + h.waiting_in + " for " + Seconds(h.waiting_s) + " s");
    }
  }
  auto join = [](const std::vector<std::string>& items) {
    std::string s;
    for (const auto& i : items) s += (s.empty() ? "" : "; ") + i;
    return s;
  };
  if (!frozen.empty()) {
    v.abort = true;
    v.culprit = "stopped answering: " + join(frozen);
  } else if (!done.empty()) {
    v.abort = true;
    v.culprit = "a peer ended its run while this one waits: " + join(done);
  } else if (!busy.empty()) {
    // Alive and computing (a long checkpoint write, an evaluation): wait longer before
    // calling it a hang.
    v.abort = waited_s > 4 * timeout_s;
    v.culprit = "alive but not reaching the call for " + Seconds(waited_s) + " s: " + join(busy);
  } else {
    v.abort = true;
    v.culprit = "every rank is alive and waiting (" + join(waiting) +
                "): messages between them are lost, a network link or the MPI transport failed";
  }
  return v;
}

void StartPeerWatch(const PeerWatchOptions& options) {
  if (g_watch) return;
  g_watch = new Watch;  // lives until StopPeerWatch; never freed while the thread may run
  g_watch->options = options;
  if (!options.heartbeat_dir.empty()) {
    // Written first by this thread, so peers reading it do not see "no heartbeat".
    WriteBeat(BeatPath(*g_watch, options.rank), HeartbeatJson(Mine(*g_watch, false)));
  }
  g_watch->thread = std::thread(Loop, std::ref(*g_watch));
  peer_watch_detail::active.store(true);
}

void FinishPeerWatch() {
  if (g_watch) g_watch->finished.store(true);
}

void StopPeerWatch() {
  if (!g_watch) return;
  peer_watch_detail::active.store(false);
  {
    std::lock_guard<std::mutex> lock(g_watch->mutex);
    g_watch->stop = true;
  }
  g_watch->wake.notify_all();
  g_watch->thread.join();
  if (!g_watch->options.heartbeat_dir.empty())
    WriteBeat(BeatPath(*g_watch, g_watch->options.rank), HeartbeatJson(Mine(*g_watch, true)));
  delete g_watch;
  g_watch = nullptr;
}

void SetPeerWatchStep(int64_t step) {
  SetGuardedStep(step);
  if (g_watch) g_watch->step.store(step);
}

void SetPeerWatchCheckpoint(const std::string& path) {
  SetGuardedCheckpoint(path);
  if (!g_watch) return;
  std::lock_guard<std::mutex> lock(g_watch->mutex);
  g_watch->checkpoint = path;
}

namespace {
PeerWaitHooks g_forward;  // set in a loaded backend: the launcher's Enter and Leave
}  // namespace

PeerWaitHooks PeerWaitHooksOfThisModule() {
  PeerWaitHooks hooks;
  hooks.enter = &peer_watch_detail::Enter;
  hooks.leave = &peer_watch_detail::Leave;
  return hooks;
}

void ForwardPeerWaits(const PeerWaitHooks& hooks) {
  const bool forward = hooks.enter != nullptr && hooks.leave != nullptr;
  g_forward = forward ? hooks : PeerWaitHooks{};
  // PeerWait asks `active` first; the launcher's Enter returns at once while its watch is off.
  if (forward) peer_watch_detail::active.store(true);
}

namespace peer_watch_detail {
void Enter(const char* call) {
  if (g_forward.enter) return g_forward.enter(call);
  if (!g_watch) return;
  g_watch->wait_start_ns.store(SteadyNs());
  g_watch->call.store(call, std::memory_order_release);
}
void Leave() {
  if (g_forward.leave) return g_forward.leave();
  if (g_watch) g_watch->call.store(nullptr, std::memory_order_release);
}
}  // namespace peer_watch_detail

}  // namespace dlh
