// DLH — the stall watchdog and its heartbeats (see peer_watch.hpp).
#include "launcher/watch/peer_watch.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "launcher/watch/activity.hpp"
#include "launcher/watch/rank_guard.hpp"

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

std::string NodeOf(const Heartbeat& h) { return h.node.empty() ? h.host : h.node; }

pid_t ThisThread() { return pid_t(syscall(SYS_gettid)); }

// The watchdog's state, one per process: MPI_CHECK reaches it from every module.
struct Watch {
  PeerWatchOptions options;  // guarded by mutex: StartPeerWatch may replace it
  std::atomic<const char*> call{nullptr};
  std::atomic<int64_t> wait_start_ns{0};
  std::atomic<int64_t> step{0};
  std::atomic<int64_t> calls{0};       // MPI calls entered: progress, for the idle clock
  std::atomic<bool> finished{false};   // training is over; MPI_Finalize may still wait
  std::atomic<bool> mpi_ready{false};  // MPI_Init returned: MPI_Abort may be called
  pid_t main_tid = 0;                  // the thread whose hang the idle clock judges
  std::mutex mutex;                    // guards options, checkpoint, stop
  std::condition_variable wake;
  std::string checkpoint;
  bool stop = false;
  std::thread thread;
};
Watch* g_watch = nullptr;

std::string BeatPath(const PeerWatchOptions& o, int rank) {
  return o.heartbeat_dir + "/rank-" + std::to_string(rank) + ".json";
}
std::string MarkerPath(const PeerWatchOptions& o) {
  return o.heartbeat_dir + "/stalled-" + o.run_id + ".json";
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

Heartbeat Mine(Watch& w, const PeerWatchOptions& o, bool finished) {
  Heartbeat h;
  h.rank = o.rank;
  h.host = o.host;
  h.node = o.node;
  h.pid = long(getpid());
  h.step = w.step.load();
  h.run_id = o.run_id;
  h.time = UnixNow();
  h.finished = finished;
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    h.checkpoint = w.checkpoint;
  }
  if (const char* call = w.call.load(std::memory_order_acquire)) {
    h.waiting_in = FunctionName(call);
    h.waiting_s = double(SteadyNs() - w.wait_start_ns.load()) * 1e-9;
  }
  return h;
}

std::vector<Heartbeat> ReadBeats(const PeerWatchOptions& o) {
  std::vector<Heartbeat> beats(size_t(o.size));
  for (int r = 0; r < o.size; ++r) {
    try {
      Heartbeat h = ParseHeartbeat(ReadAll(BeatPath(o, r)));
      if (h.rank == r && h.run_id == o.run_id) beats[size_t(r)] = h;
    } catch (const std::exception&) {
      // none yet, or being replaced: counts as no heartbeat
    }
  }
  return beats;
}

std::string Prefix(const PeerWatchOptions& o) {
  return "dlh-launch [rank " + std::to_string(o.rank) + "/" + std::to_string(o.size) + " " +
         o.host + "]: error: ";
}

std::string CheckpointNote(Watch& w) {
  std::lock_guard<std::mutex> lock(w.mutex);
  return w.checkpoint.empty() ? "no checkpoint yet" : "last good checkpoint " + w.checkpoint;
}

// MPI_Abort asks the launcher (mpirun's daemon, srun's step daemon through PMIx) to kill the
// job, and blocks until it does. When the launcher cannot be reached, a link down between
// this host and the one srun runs on, it blocks for good: then this rank ends itself after a
// grace, so that nothing lingers on a host cut off from the rest.
// Before MPI_Init has returned, MPI_Abort may not be called: the rank ends itself, and the
// launcher (mpirun) or each other rank's own watch (srun) ends the rest.
[[noreturn]] void AbortWorld(const Watch& w) {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::_Exit(kExitStalled);
  }).detach();
  // Past MPI_Finalize (a peer froze while this rank was in it) MPI_Abort may not be called.
  int finalized = 0;
  if (w.mpi_ready.load()) MPI_Finalized(&finalized);
  if (w.mpi_ready.load() && !finalized) MPI_Abort(MPI_COMM_WORLD, kExitStalled);
  std::_Exit(kExitStalled);  // MPI_Abort does not return; if it did, nothing may linger
}

[[noreturn]] void AbortJob(const Watch& w, const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  AbortWorld(w);
}

// The verdict of this rank: printed, written as the marker the others read (the first of
// several ranks to write it gives the verdict), then, after two heartbeats in which the other
// live ranks print their own line, the job ends.
void GiveVerdict(Watch& w, const PeerWatchOptions& o, const Heartbeat& me, const std::string& line,
                 const std::string& culprit, const std::vector<std::string>& culprit_nodes,
                 bool self, double tick) {
  const bool beats = !o.heartbeat_dir.empty();
  const json m = {{"rank", me.rank},        {"host", me.host},    {"node", NodeOf(me)},
                  {"step", me.step},        {"culprit", culprit}, {"culprit_nodes", culprit_nodes},
                  {"this_rank_hangs", self}};
  if (beats && !CreateExclusively(MarkerPath(o), m.dump() + "\n")) return;  // another rank did
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  if (beats) std::this_thread::sleep_for(std::chrono::duration<double>(2 * tick + 0.5));
  AbortWorld(w);
}

void Loop(Watch& w) {
  const pid_t self_tid = ThisThread();
  IdleClock idle;
  std::unique_lock<std::mutex> lock(w.mutex);
  for (;;) {
    const PeerWatchOptions o = w.options;
    const double timeout = o.timeout_s;
    const double tick = std::clamp(timeout / 10, 0.2, 30.0);
    const double stale = std::max(3 * tick, 2.0);
    if (w.wake.wait_for(lock, std::chrono::duration<double>(tick), [&] { return w.stop; })) break;
    lock.unlock();
    const bool beats = !o.heartbeat_dir.empty();
    const double steady_now = double(SteadyNs()) * 1e-9;
    idle.Observe(steady_now, ReadProcessActivity(self_tid), w.step.load() + w.calls.load());
    Heartbeat me = Mine(w, o, w.finished.load());
    me.idle_s = idle.idle_s(steady_now);
    if (beats) {
      WriteBeat(BeatPath(o, me.rank), HeartbeatJson(me));
      const std::string marker = ReadAll(MarkerPath(o));
      if (!marker.empty()) {
        // Another rank gave the verdict: say so here too, then end with it.
        std::string by = "another rank", culprit = "a peer stopped answering";
        bool by_itself = false;
        try {
          const json m = json::parse(marker);
          by = "rank " + std::to_string(m.at("rank").get<int>()) + " (" +
               m.at("host").get<std::string>() + ")";
          culprit = m.at("culprit").get<std::string>();
          by_itself = m.value("this_rank_hangs", false);
        } catch (const std::exception&) {
        }
        AbortJob(w,
                 Prefix(o) + "stopping at step " + std::to_string(me.step) + ": " +
                     (by_itself ? culprit : by + " timed out waiting for its peers: " + culprit) +
                     "; " + CheckpointNote(w));
      }
    }
    if (me.waiting_in.empty() && !me.finished && me.idle_s > timeout) {
      // Alive, in no MPI call, and doing nothing: this rank hangs, and its peers, waiting
      // for it in their next collective, cannot tell it from a busy one.
      const std::string where = DescribeThreadState(w.main_tid);
      const std::string what = "no progress for " + Seconds(me.idle_s) + " s outside MPI at step " +
                               std::to_string(me.step) + " (no CPU time or I/O in this process" +
                               (where.empty() ? "" : "; its main thread is " + where) + ")";
      GiveVerdict(w, o, me,
                  Prefix(o) + what + ": this rank hangs; " + CheckpointNote(w) +
                      "; aborting the job (--comm-timeout " + Seconds(timeout) + ")",
                  Who(me) + " hangs: " + what, {NodeOf(me)}, /*self=*/true, tick);
    } else if (!me.waiting_in.empty() && me.waiting_s > timeout) {
      StallVerdict v = JudgeStall(beats ? ReadBeats(o) : std::vector<Heartbeat>{}, me.rank,
                                  me.waiting_s, timeout, UnixNow(), stale);
      if (v.abort) {
        if (!w.mpi_ready.load())
          v.culprit = "not every rank of the job reached " + me.waiting_in +
                      " (a rank that did not start, or one that hangs before it)";
        GiveVerdict(w, o, me,
                    Prefix(o) + "waited " + Seconds(me.waiting_s) + " s in " + me.waiting_in +
                        (w.mpi_ready.load() ? " at step " + std::to_string(me.step) : "") + ": " +
                        v.culprit + "; " + CheckpointNote(w) +
                        "; aborting the job (--comm-timeout " + Seconds(timeout) + ")",
                    v.culprit, v.culprit_nodes, /*self=*/false, tick);
      }
    }
    lock.lock();
  }
}

}  // namespace

std::string HeartbeatJson(const Heartbeat& h) {
  json j = {{"rank", h.rank}, {"host", h.host},     {"node", h.node},
            {"pid", h.pid},   {"step", h.step},     {"run_id", h.run_id},
            {"time", h.time}, {"idle_s", h.idle_s}, {"finished", h.finished}};
  if (!h.waiting_in.empty()) j["waiting"] = {{"in", h.waiting_in}, {"seconds", h.waiting_s}};
  if (!h.checkpoint.empty()) j["checkpoint"] = h.checkpoint;
  return j.dump() + "\n";
}

Heartbeat ParseHeartbeat(const std::string& text) {
  try {
    const json j = json::parse(text);
    Heartbeat h;
    h.rank = j.at("rank").get<int>();
    h.host = j.at("host").get<std::string>();
    h.node = j.value("node", std::string());
    h.idle_s = j.value("idle_s", 0.0);
    h.pid = j.at("pid").get<long>();
    h.step = j.at("step").get<int64_t>();
    h.run_id = j.at("run_id").get<std::string>();
    h.time = j.at("time").get<double>();
    h.finished = j.at("finished").get<bool>();
    h.checkpoint = j.value("checkpoint", std::string());
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
  std::vector<std::string> frozen, hung, busy, done, waiting;
  std::vector<std::string> frozen_nodes, hung_nodes;
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
      frozen_nodes.push_back(NodeOf(h));
    } else if (h.waiting_in.empty() && h.idle_s > timeout_s) {
      // Its own watch ends the job too (it sees the same idle time); whichever is first.
      hung.push_back(Who(h) + " at step " + std::to_string(h.step) + ", no CPU time or I/O for " +
                     Seconds(h.idle_s) + " s");
      hung_nodes.push_back(NodeOf(h));
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
    v.culprit_nodes = frozen_nodes;
  } else if (!hung.empty()) {
    v.abort = true;
    v.culprit = "hangs outside MPI: " + join(hung);
    v.culprit_nodes = hung_nodes;
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
  if (g_watch) {
    {
      std::lock_guard<std::mutex> lock(g_watch->mutex);
      g_watch->options = options;
    }
    if (!options.heartbeat_dir.empty())
      WriteBeat(BeatPath(options, options.rank), HeartbeatJson(Mine(*g_watch, options, false)));
    return;
  }
  g_watch = new Watch;  // lives until StopPeerWatch; never freed while the thread may run
  g_watch->options = options;
  g_watch->main_tid = ThisThread();
  if (!options.heartbeat_dir.empty()) {
    // Written first by this thread, so peers reading it do not see "no heartbeat".
    WriteBeat(BeatPath(options, options.rank), HeartbeatJson(Mine(*g_watch, options, false)));
  }
  g_watch->thread = std::thread(Loop, std::ref(*g_watch));
  peer_watch_detail::active.store(true);
}

namespace {
int LauncherVariable(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names)
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  return fallback;
}
}  // namespace

void StartPeerWatchBeforeMpi(double timeout_s) {
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMIX_RANK")) return;
  PeerWatchOptions o;
  o.timeout_s = timeout_s;
  o.rank = LauncherVariable({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"}, 0);
  o.size = LauncherVariable({"OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}, 1);
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  o.host = name;
  const char* node = std::getenv("SLURMD_NODENAME");
  o.node = node && *node ? node : o.host;
  StartPeerWatch(o);
}

void SetPeerWatchMpiReady() {
  if (g_watch) g_watch->mpi_ready.store(true);
}

double CommTimeoutFromArguments(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    std::string value;
    if (a == "--comm-timeout" && i + 1 < argc)
      value = argv[i + 1];
    else if (a.rfind("--comm-timeout=", 0) == 0)
      value = a.substr(15);
    else
      continue;
    char* end = nullptr;
    const double s = std::strtod(value.c_str(), &end);
    if (end != value.c_str() && *end == '\0' && s > 0 && s < 1e9) return s;
    return kDefaultCommTimeoutS;
  }
  return kDefaultCommTimeoutS;
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
  const PeerWatchOptions& o = g_watch->options;  // the thread is gone: no one replaces it
  if (!o.heartbeat_dir.empty())
    WriteBeat(BeatPath(o, o.rank), HeartbeatJson(Mine(*g_watch, o, true)));
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

namespace {
// When the main thread entered the call it waits in now (SteadyNs), 0 outside one. Apart from
// the Watch, which StopPeerWatch frees: any thread of the process may ask, at any time.
std::atomic<int64_t> g_in_wait_since_ns{0};
}  // namespace

double SecondsInPeerWait() {
  const int64_t since = g_in_wait_since_ns.load(std::memory_order_relaxed);
  return since == 0 ? 0 : double(SteadyNs() - since) * 1e-9;
}

namespace peer_watch_detail {
void Enter(const char* call) {
  if (g_forward.enter) return g_forward.enter(call);
  if (!g_watch) return;
  g_watch->calls.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = SteadyNs();
  g_watch->wait_start_ns.store(now);
  g_in_wait_since_ns.store(now, std::memory_order_relaxed);
  g_watch->call.store(call, std::memory_order_release);
}
void Leave() {
  if (g_forward.leave) return g_forward.leave();
  g_in_wait_since_ns.store(0, std::memory_order_relaxed);
  if (g_watch) g_watch->call.store(nullptr, std::memory_order_release);
}
}  // namespace peer_watch_detail

}  // namespace dlh
