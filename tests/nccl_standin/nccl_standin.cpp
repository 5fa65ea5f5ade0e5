// DLH NCCL stand-in — libdlh_nccl_standin.so: the NCCL calls DLH makes, with NCCL's ABI, for
// running several ranks on one machine and one GPU (NCCL itself refuses two ranks on one GPU)
// and for injecting faults (fault.hpp). Loaded in NCCL's place with LD_PRELOAD, it is used by
// share/gpu/gpu-check.sh's multi-rank rows and tested on host memory in make check
// (tests/nccl_standin/standin_mpitest.cpp). Never shipped: it is slow (every byte goes through
// shared memory) and single-host.
//
// Device memory: a collective enqueued on a stream runs when the stream reaches it. An event
// recorded on the stream tells this communicator's worker thread that the inputs are written;
// a gate kernel after it (stream_gate.cu) holds the stream until the worker has copied them to
// host memory, summed or gathered them with the peers (collectives.hpp), copied the result
// back and written the collective's ticket into a flag in mapped host memory. Host memory (no
// GPU, or host pointers): the collective runs in the calling thread before the call returns.
//
// Non-blocking communicators (ncclConfig_t::blocking = 0) initialise on the worker: the init
// returns ncclInProgress and ncclCommGetAsyncError says ncclInProgress until every rank has
// joined, as NCCL's do. ncclCommAbort ends every wait of the communicator at once.
#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/random.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "tests/nccl_standin/collectives.hpp"
#include "tests/nccl_standin/fault.hpp"
#include "tests/nccl_standin/shm_group.hpp"

#define STANDIN_API extern "C" __attribute__((visibility("default")))

extern "C" cudaError_t dlhStandinGate(const unsigned* flag, unsigned ticket, cudaStream_t stream);

namespace {
using namespace dlh::nccl_standin;

constexpr char kIdMagic[] = "dlh-nccl-standin";

// One collective on device memory, between its enqueueing and its end.
struct DeviceOp {
  Collective c;
  int device = 0;
  bool hang = false;            // an injected fault: never runs, ends only with an abort
  cudaEvent_t ready = nullptr;  // recorded on the stream: the inputs are written
  unsigned ticket = 0;          // written to the communicator's flag when done
};

void Report(const std::string& what) {
  std::fprintf(stderr, "nccl-standin: %s\n", what.c_str());
  std::fflush(stderr);
}

// The process's injected fault: DLH_NCCL_STANDIN_FAULT, read at the first collective, or
// what dlhNcclStandinSetFault set.
struct FaultState {
  std::once_flag once;
  Fault fault;
  std::string text, problem;
  std::atomic<long> calls{0};
  void set(const std::string& spec) {
    text = spec;
    problem.clear();
    calls = 0;
    try {
      fault = ParseFault(spec);
    } catch (const std::exception& e) {
      fault = Fault{};
      problem = e.what();
    }
  }
};
FaultState& Faults() {
  static FaultState s;
  std::call_once(s.once, [] {
    const char* text = std::getenv("DLH_NCCL_STANDIN_FAULT");
    s.set(text ? text : "");
  });
  return s;
}

bool AnyGpu() {
  static const bool any = [] {
    int n = 0;
    const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    cudaGetLastError();  // a machine without a GPU leaves an error behind
    return ok;
  }();
  return any;
}

// The device `p` lives on, or -1 for host memory (any pointer when there is no GPU).
int DeviceOf(const void* p) {
  if (p == nullptr || !AnyGpu()) return -1;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? a.device : -1;
}

}  // namespace

// The opaque type behind ncclComm_t.
struct ncclComm {
  int rank = 0, nranks = 1;
  std::string shm_name;
  std::unique_ptr<ShmGroup> group;
  std::atomic<bool> stop{false};
  std::atomic<int> async{ncclSuccess};
  std::atomic<int> active_calls{0};  // calls now inside Launch (an abort waits for them)

  // The worker: non-blocking initialisation and collectives on device memory, in order.
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks;
  bool quit = false;
  std::thread worker;

  // Host staging of device collectives, grown as needed (the worker's alone).
  void* send_host = nullptr;
  void* recv_host = nullptr;
  size_t send_cap = 0, recv_cap = 0;
  cudaStream_t copy = nullptr;
  // The gates' flag (mapped host memory, read by the gate kernels) and the last ticket given.
  unsigned* flag = nullptr;
  unsigned tickets = 0;
  void open_gates(unsigned upto) { __atomic_store_n(flag, upto, __ATOMIC_RELEASE); }

  void start_worker() {
    worker = std::thread([this] {
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock<std::mutex> lock(m);
          cv.wait(lock, [&] { return quit || !tasks.empty() || stop.load(); });
          if (tasks.empty() || stop.load()) return;
          task = std::move(tasks.front());
          tasks.pop_front();
        }
        task();
      }
    });
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(m);
      tasks.push_back(std::move(task));
    }
    cv.notify_all();
  }
  // Ends the worker: after what is queued (destroy), or at once (abort).
  void end_worker(bool at_once) {
    if (at_once) stop.store(true);
    {
      std::lock_guard<std::mutex> lock(m);
      quit = true;
    }
    cv.notify_all();
    if (worker.joinable()) worker.join();
    // Tasks an abort left behind: run now, with `stop` raised, each only marks its operation
    // done, which releases the stream holding for it.
    for (auto& task : tasks) task();
    tasks.clear();
    if (at_once && flag) open_gates(~0u);  // every gate still on a stream opens
  }
  ~ncclComm() {
    end_worker(true);
    if (flag) cudaFreeHost(flag);
    if (copy) cudaStreamDestroy(copy);
    if (send_host) cudaFreeHost(send_host);
    if (recv_host) cudaFreeHost(recv_host);
  }
};

namespace {

bool Join(ncclComm* comm) {
  try {
    comm->group = std::make_unique<ShmGroup>(comm->shm_name, comm->nranks, comm->rank);
  } catch (const std::exception& e) {
    Report(e.what());
    return false;
  }
  return comm->group->barrier(comm->stop);
}

void Grow(void** p, size_t* cap, size_t bytes) {
  if (bytes <= *cap) return;
  if (*p) cudaFreeHost(*p);
  *p = nullptr;
  *cap = 0;
  if (cudaMallocHost(p, bytes) != cudaSuccess) throw std::runtime_error("cudaMallocHost failed");
  *cap = bytes;
}

// On the worker: once the stream has written the op's inputs, stage, run, copy back, and open
// the op's gate.
void RunDeviceOp(ncclComm* comm, DeviceOp* op) {
  bool ok = false;
  if (cudaSetDevice(op->device) == cudaSuccess) {
    cudaError_t state = cudaErrorNotReady;
    while (!comm->stop.load() && (state = cudaEventQuery(op->ready)) == cudaErrorNotReady)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    ok = state == cudaSuccess;
  }
  if (ok && (op->hang || comm->stop.load())) ok = false;
  if (ok) {
    try {
      const size_t sb = SendBytes(op->c, comm->nranks), rb = RecvBytes(op->c, comm->nranks);
      if (!comm->copy &&
          cudaStreamCreateWithFlags(&comm->copy, cudaStreamNonBlocking) != cudaSuccess)
        throw std::runtime_error("cudaStreamCreate failed");
      Grow(&comm->send_host, &comm->send_cap, sb);
      Grow(&comm->recv_host, &comm->recv_cap, rb);
      // Only the root's send buffer matters to a broadcast; every rank's to the others.
      if (sb > 0 && (op->c.kind != Collective::Broadcast || comm->rank == op->c.root) &&
          cudaMemcpyAsync(comm->send_host, op->c.send, sb, cudaMemcpyDeviceToHost, comm->copy) !=
              cudaSuccess)
        throw std::runtime_error("cudaMemcpyAsync to the host failed");
      // In place, NCCL's outputs keep what the collective does not write (a reduce's
      // non-roots, nothing else here): start from the device's contents.
      if (rb > 0 && op->c.kind == Collective::Reduce && comm->rank != op->c.root &&
          cudaMemcpyAsync(comm->recv_host, op->c.recv, rb, cudaMemcpyDeviceToHost, comm->copy) !=
              cudaSuccess)
        throw std::runtime_error("cudaMemcpyAsync to the host failed");
      if (cudaStreamSynchronize(comm->copy) != cudaSuccess)
        throw std::runtime_error("cudaStreamSynchronize failed");
      Collective host = op->c;
      host.send = comm->send_host;
      host.recv = comm->recv_host;
      ok = RunCollective(*comm->group, host, comm->stop);
      if (ok && rb > 0 &&
          (cudaMemcpyAsync(op->c.recv, comm->recv_host, rb, cudaMemcpyHostToDevice, comm->copy) !=
               cudaSuccess ||
           cudaStreamSynchronize(comm->copy) != cudaSuccess))
        throw std::runtime_error("cudaMemcpyAsync to the device failed");
    } catch (const std::exception& e) {
      Report(e.what());
      ok = false;
    }
  }
  if (!ok) comm->async.store(ncclSystemError);
  if (op->ready) cudaEventDestroy(op->ready);
  op->ready = nullptr;
  // The gate opens whatever happened: a failed collective shows in the asynchronous error,
  // and a stream held for good would hang the rank that owns it.
  comm->open_gates(op->ticket);
}

bool ToElement(ncclDataType_t t, Element* e) {
  switch (t) {
    case ncclFloat32:
      *e = Element::Float32;
      return true;
    case ncclFloat64:
      *e = Element::Float64;
      return true;
    case ncclInt32:
      *e = Element::Int32;
      return true;
    case ncclInt8:
    case ncclUint8:
      *e = Element::Bytes;
      return true;
    default:
      return false;
  }
}

// The communicators not yet destroyed or aborted: a call on a gone one (a collective a test's
// host stream runs after the abort, as CUDA would have killed it) is refused, not a crash.
std::mutex g_live_mutex;
std::set<ncclComm*> g_live;

// A call in progress on a live communicator; the communicator is not freed until it ends.
class ActiveCall {
 public:
  explicit ActiveCall(ncclComm* comm) {
    std::lock_guard<std::mutex> lock(g_live_mutex);
    if (comm == nullptr || g_live.count(comm) == 0) return;
    comm_ = comm;
    ++comm_->active_calls;
  }
  ~ActiveCall() {
    if (comm_) --comm_->active_calls;  // last: an abort waiting for it may free the comm
  }
  explicit operator bool() const { return comm_ != nullptr; }

 private:
  ncclComm* comm_ = nullptr;
};

ncclResult_t LaunchOnLive(Collective c, ncclDataType_t type, ncclRedOp_t op, bool reduces,
                          ncclComm_t comm, cudaStream_t stream);

ncclResult_t Launch(Collective c, ncclDataType_t type, ncclRedOp_t op, bool reduces,
                    ncclComm_t comm, cudaStream_t stream) {
  ActiveCall active(comm);
  if (!active) return ncclInvalidArgument;
  return LaunchOnLive(c, type, op, reduces, comm, stream);
}

ncclResult_t LaunchOnLive(Collective c, ncclDataType_t type, ncclRedOp_t op, bool reduces,
                          ncclComm_t comm, cudaStream_t stream) {
  if (const int failed = comm->async.load(); failed != ncclSuccess && failed != ncclInProgress)
    return ncclResult_t(failed);  // as NCCL: a communicator that failed takes no more work
  if (comm->async.load() == ncclInProgress) {
    Report("a collective on a communicator still initialising");
    return ncclInvalidUsage;
  }
  if (!ToElement(type, &c.element) || (reduces && (op != ncclSum || c.element == Element::Bytes))) {
    Report("only sums of float, double and int32 (and copies of bytes) are stood in for");
    return ncclInvalidArgument;
  }
  FaultState& faults = Faults();
  if (!faults.problem.empty()) {
    Report(faults.problem);
    return ncclInvalidUsage;
  }
  const long call = ++faults.calls;
  const Fault& f = faults.fault;
  const bool faulty = f.kind != Fault::None && f.call == call && f.rank == ProcessRank();
  if (faulty) Report("rank " + std::to_string(f.rank) + ": injecting " + faults.text);
  if (faulty && f.kind == Fault::Stop) std::raise(SIGSTOP);
  if (faulty && f.kind == Fault::Error) {
    comm->async.store(ncclSystemError);
    return DeviceOf(c.kind == Collective::Send ? c.send : c.recv) < 0 ? ncclSystemError
                                                                      : ncclSuccess;
  }
  const bool hang = faulty && f.kind == Fault::Hang;
  // A send has no output: its input says where the data lives.
  const int device = DeviceOf(c.kind == Collective::Send ? c.send : c.recv);
  if (device < 0) {
    // Host memory: here and now.
    bool ok = false;
    if (hang) {
      while (!comm->stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } else {
      ok = RunCollective(*comm->group, c, comm->stop);
    }
    if (!ok) comm->async.store(ncclSystemError);
    return ok ? ncclSuccess : ncclSystemError;
  }
  auto dop = std::make_shared<DeviceOp>();
  dop->c = c;
  dop->device = device;
  dop->hang = hang;
  if (comm->flag == nullptr) {
    // Mapped (and, with unified addressing, the same pointer on the device), so that the gate
    // kernel sees the worker's writes.
    if (cudaHostAlloc(reinterpret_cast<void**>(&comm->flag), sizeof(unsigned),
                      cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess)
      return ncclUnhandledCudaError;
    *comm->flag = 0;
  }
  if (cudaEventCreateWithFlags(&dop->ready, cudaEventDisableTiming) != cudaSuccess)
    return ncclUnhandledCudaError;
  dop->ticket = ++comm->tickets;
  if (cudaEventRecord(dop->ready, stream) != cudaSuccess ||
      dlhStandinGate(comm->flag, dop->ticket, stream) != cudaSuccess) {
    cudaEventDestroy(dop->ready);
    --comm->tickets;
    return ncclUnhandledCudaError;
  }
  comm->post([comm, dop] { RunDeviceOp(comm, dop.get()); });
  return ncclSuccess;
}

ncclResult_t Init(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, bool blocking) {
  if (out == nullptr || nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks ||
      std::memcmp(id.internal, kIdMagic, sizeof kIdMagic - 1) != 0)
    return ncclInvalidArgument;
  auto comm = std::make_unique<ncclComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  char hex[2 * 16 + 1];
  for (int i = 0; i < 16; ++i)
    std::snprintf(hex + 2 * i, 3, "%02x",
                  unsigned(static_cast<unsigned char>(id.internal[64 + i])));
  comm->shm_name = std::string("/dlh-nccl-") + hex;
  comm->start_worker();
  {
    std::lock_guard<std::mutex> lock(g_live_mutex);
    g_live.insert(comm.get());
  }
  if (blocking) {
    if (!Join(comm.get())) {
      std::lock_guard<std::mutex> lock(g_live_mutex);
      g_live.erase(comm.get());
      return ncclSystemError;
    }
    *out = comm.release();
    return ncclSuccess;
  }
  comm->async.store(ncclInProgress);
  ncclComm* c = comm.get();
  c->post([c] { c->async.store(Join(c) ? ncclSuccess : ncclSystemError); });
  *out = comm.release();
  return ncclInProgress;
}

void Free(ncclComm_t comm, bool at_once) {
  {
    std::lock_guard<std::mutex> lock(g_live_mutex);
    if (g_live.erase(comm) == 0) return;  // destroyed or aborted before
  }
  comm->end_worker(at_once);
  while (comm->active_calls.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  delete comm;
}

}  // namespace

// The stand-in's own: replaces DLH_NCCL_STANDIN_FAULT (empty: no fault) and counts calls from
// 0 again. Returns 0, or -1 with the reason on stderr when `spec` is not a fault.
STANDIN_API int dlhNcclStandinSetFault(const char* spec) {
  FaultState& faults = Faults();
  faults.set(spec ? spec : "");
  if (faults.problem.empty()) return 0;
  Report(faults.problem);
  return -1;
}

STANDIN_API ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

STANDIN_API ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return ncclInvalidArgument;
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, kIdMagic, sizeof kIdMagic - 1);
  if (getrandom(id->internal + 64, 16, 0) != 16) return ncclSystemError;
  return ncclSuccess;
}

STANDIN_API ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return Init(comm, nranks, id, rank, true);
}

STANDIN_API ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id,
                                                int rank, ncclConfig_t* config) {
  return Init(comm, nranks, id, rank, config == nullptr || config->blocking != 0);
}

STANDIN_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  if (comm == nullptr || error == nullptr) return ncclInvalidArgument;
  *error = ncclResult_t(comm->async.load());
  return ncclSuccess;
}

STANDIN_API ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return comm == nullptr ? ncclInvalidArgument : ncclSuccess;
}

STANDIN_API ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm != nullptr) Free(comm, false);
  return ncclSuccess;
}

STANDIN_API ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm != nullptr) Free(comm, true);
  return ncclSuccess;
}

STANDIN_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

STANDIN_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

STANDIN_API const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (stand-in)";
    case ncclSystemError:
      return "unhandled system error (stand-in: aborted, or a fault injected)";
    case ncclInternalError:
      return "internal error (stand-in)";
    case ncclInvalidArgument:
      return "invalid argument (stand-in)";
    case ncclInvalidUsage:
      return "invalid usage (stand-in)";
    case ncclRemoteError:
      return "remote process exited or there was a network error (stand-in)";
    case ncclInProgress:
      return "NCCL operation in progress (stand-in)";
    default:
      return "unknown result code (stand-in)";
  }
}

STANDIN_API const char* ncclGetLastError(ncclComm_t) { return ""; }

STANDIN_API ncclResult_t ncclGroupStart() { return ncclSuccess; }
STANDIN_API ncclResult_t ncclGroupEnd() { return ncclSuccess; }

STANDIN_API ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count,
                                       ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                       cudaStream_t stream) {
  return Launch({Collective::AllReduce, send, recv, count}, type, op, true, comm, stream);
}

STANDIN_API ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                                    ncclRedOp_t op, int root, ncclComm_t comm,
                                    cudaStream_t stream) {
  Collective c{Collective::Reduce, send, recv, count};
  c.root = root;
  return Launch(c, type, op, true, comm, stream);
}

STANDIN_API ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count,
                                       ncclDataType_t type, int root, ncclComm_t comm,
                                       cudaStream_t stream) {
  Collective c{Collective::Broadcast, send, recv, count};
  c.root = root;
  return Launch(c, type, ncclSum, false, comm, stream);
}

STANDIN_API ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t type, int root,
                                   ncclComm_t comm, cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, type, root, comm, stream);
}

STANDIN_API ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recv_count,
                                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  return Launch({Collective::ReduceScatter, send, recv, recv_count}, type, op, true, comm, stream);
}

// Point to point (a pipeline's activations and gradients): matched in order between each
// pair of ranks, as NCCL matches them; outside a group, since ncclGroupStart/End here run
// nothing together (a send waits only while its mailbox is full, so a pair's send before its
// receive does not deadlock; two ranks each sending the other more than a mailbox first do).
static ncclResult_t PointToPoint(Collective::Kind kind, const void* send, void* recv, size_t count,
                                 ncclDataType_t type, int peer, ncclComm_t comm,
                                 cudaStream_t stream) {
  ActiveCall active(comm);
  if (!active) return ncclInvalidArgument;
  Element e = Element::Bytes;
  if (!ToElement(type, &e)) {
    Report("send/recv: only float, double, int32 and bytes are stood in for");
    return ncclInvalidArgument;
  }
  if (peer < 0 || peer >= comm->nranks ||
      (peer == comm->rank && count * ElementSize(e) > kMailBytes)) {
    Report("send/recv: peer " + std::to_string(peer) + " of " + std::to_string(comm->nranks) +
           " ranks (to itself only within one mailbox)");
    return ncclInvalidArgument;
  }
  Collective c{kind, send, recv, count};
  c.peer = peer;
  return LaunchOnLive(c, type, ncclSum, false, comm, stream);
}

STANDIN_API ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  return PointToPoint(Collective::Send, send, nullptr, count, type, peer, comm, stream);
}

STANDIN_API ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  return PointToPoint(Collective::Recv, nullptr, recv, count, type, peer, comm, stream);
}

STANDIN_API ncclResult_t ncclAllGather(const void* send, void* recv, size_t send_count,
                                       ncclDataType_t type, ncclComm_t comm, cudaStream_t stream) {
  return Launch({Collective::AllGather, send, recv, send_count}, type, ncclSum, false, comm,
                stream);
}
