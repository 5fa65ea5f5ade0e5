// DLH — a stalled peer ends the job: every rank's watchdog thread times the MPI call its
// main thread is blocked in and, past --comm-timeout, names the rank that stopped answering
// and aborts the job (issue 15).
//
// Why a thread and not deadlines on non-blocking calls: a rank waits for its peers in many
// MPI calls (the gradient allreduce, the step's control allreduce, evaluation sums,
// checkpoint broadcasts, setup agreements), and every one of them hangs when a peer is
// SIGSTOPped or a link is down. MPI_CHECK opens a PeerWait around each call, so all of them are
// timed without rewriting them.
//
// Who stopped answering: each rank's thread also writes a heartbeat file (rank, host, pid,
// step, the MPI call it waits in and since when) into a folder its peers read, the run
// folder, which is shared between the hosts of a job. A SIGSTOPped or frozen rank's heartbeat
// goes stale; a rank that is alive but not waiting is still computing; when every rank waits,
// the network between them has failed. The first rank past the timeout writes the verdict as
// a marker file, prints its line and calls MPI_Abort after a grace of two heartbeats; the
// other live ranks see the marker and print their own line first, so every live rank ends
// with one line and nothing lingers (MPI_Abort kills a stopped rank too).
//
// A peer that is alive and busy (a long checkpoint write on rank 0 while the others wait)
// is not a stall: the waiting ranks give it up to four timeouts before aborting.
//
// A rank that hangs outside MPI (issue 41: a deadlock, a read that never returns, a stopped
// thread) still writes heartbeats, so its peers see it alive; its own watchdog sees that the
// process has used no CPU and moved no bytes for --comm-timeout (activity.hpp), says so and
// ends the job. The watch starts before MPI_Init, so that a rank that never reaches it (one
// that did not start, or hangs on the way) does not leave the others in MPI_Init for good;
// before MPI is up a rank can only end itself, and each does.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace dlh {

// --comm-timeout's default: a frozen or hung rank ends the job within two minutes (about 75 s:
// the timeout, then two heartbeats for the other ranks to say so).
constexpr double kDefaultCommTimeoutS = 60;

struct PeerWatchOptions {
  double timeout_s = kDefaultCommTimeoutS;  // seconds a rank may wait in one MPI call
  std::string heartbeat_dir;  // shared by all ranks; empty: no heartbeats, the timeout alone
  std::string run_id;         // the same on every rank (rank 0's), tells this run's files apart
  int rank = 0;
  int size = 1;
  std::string host;
  std::string node;  // the Slurm node (SLURMD_NODENAME), what a requeue excludes; else host
};

// One rank's heartbeat as written to and read from its file.
struct Heartbeat {
  int rank = -1;
  std::string host;
  std::string node;  // absent in older heartbeats: then the host
  long pid = 0;
  int64_t step = 0;
  std::string waiting_in;  // the MPI function it is blocked in; empty when not waiting
  double waiting_s = 0;    // for how long, when it wrote this
  double idle_s = 0;       // seconds the process has used no CPU and moved no bytes
  double time = 0;         // Unix time it wrote this
  std::string run_id;
  bool finished = false;
  // The newest checkpoint this rank knows is on disk (what its guard or a stall line would
  // name); empty before the first, and in older heartbeats.
  std::string checkpoint;
};

std::string HeartbeatJson(const Heartbeat& h);
// Throws dlh::Error when `text` is not a heartbeat.
Heartbeat ParseHeartbeat(const std::string& text);

// The verdict once this rank has waited `waited_s` in `call` at `step`: who stopped answering.
// `beats[r]` is rank r's heartbeat (rank -1: none readable, or of another run), `now` the
// Unix time, `stale_s` the age past which a heartbeat means a frozen rank.
struct StallVerdict {
  bool abort = false;   // false: keep waiting (a peer is alive and busy, within 4 timeouts)
  std::string culprit;  // "rank 2 (node-b) stopped answering: its heartbeat is 7 s old, ..."
  std::vector<std::string> culprit_nodes;  // where the ranks that stalled ran; empty: unknown
};
StallVerdict JudgeStall(const std::vector<Heartbeat>& beats, int self, double waited_s,
                        double timeout_s, double now, double stale_s);

// Starts this rank's watchdog; once it runs, a second call replaces its options (the trainer
// adds the heartbeats and the --comm-timeout it parsed to the watch main() started).
void StartPeerWatch(const PeerWatchOptions& options);
// Called before MPI_Init by the main thread: the watch, without heartbeats, with the rank,
// size and host the launcher's variables give (OMPI_COMM_WORLD_*, PMIX_RANK, SLURM_*).
// Does nothing outside an MPI launcher (a single process cannot wait for a peer).
void StartPeerWatchBeforeMpi(double timeout_s);
// MPI_Init returned: from now on a verdict ends the job with MPI_Abort, not this rank alone.
void SetPeerWatchMpiReady();
// --comm-timeout as given on a command line (seconds; "--comm-timeout S" or "=S"), or the
// default: the watch needs it before MPI_Init, options are parsed after. A value that is not
// a positive number gives the default here; the option parser then reports it.
double CommTimeoutFromArguments(int argc, char** argv);
// Training is over: heartbeats say the rank finished, and the watch goes on timing the calls
// that end MPI. MPI_Finalize waits for every rank, so a peer frozen after the last step's
// collective would otherwise hang the job for good.
void FinishPeerWatch();
// Stops it and writes a last heartbeat that says the rank finished. Safe when not started.
void StopPeerWatch();
// How long the main thread has been in the call it waits in now (seconds); 0 when it waits
// in none or the watch is off. Cheap (an atomic load, and a clock read while it waits):
// wait_nap.cpp asks it on every sched_yield of the process.
double SecondsInPeerWait();
// What the verdict line reports.
void SetPeerWatchStep(int64_t step);
void SetPeerWatchCheckpoint(const std::string& path);

// The CUDA backend (libdlh_cuda.so, loaded with dlopen) carries its own hidden copy of this
// module, whose watch is never started: its MPI calls (the NCCL id broadcast, the
// hierarchical allreduce's host step, its setup agreements) would go untimed and could hang
// the job. The launcher hands the backend its own Enter and Leave (EngineConfig::peer_wait),
// and the backend's copy forwards every PeerWait to them.
struct PeerWaitHooks {
  void (*enter)(const char* call) = nullptr;
  void (*leave)() = nullptr;
};
// This module's Enter and Leave, for a backend to forward to.
PeerWaitHooks PeerWaitHooksOfThisModule();
// From now on this module's PeerWaits report to `hooks` (both set), or to this module's own
// watch again (both null).
void ForwardPeerWaits(const PeerWaitHooks& hooks);

namespace peer_watch_detail {
extern std::atomic<bool> active;
void Enter(const char* call);
void Leave();
}  // namespace peer_watch_detail

// The main thread is in a call that may wait for peers (see MPI_CHECK).
class PeerWait {
 public:
  explicit PeerWait(const char* call)
      : on_(peer_watch_detail::active.load(std::memory_order_relaxed)) {
    if (on_) peer_watch_detail::Enter(call);
  }
  ~PeerWait() {
    if (on_) peer_watch_detail::Leave();
  }
  PeerWait(const PeerWait&) = delete;
  PeerWait& operator=(const PeerWait&) = delete;

 private:
  bool on_;
};

}  // namespace dlh
