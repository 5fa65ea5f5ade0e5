// nccl_standin_tests — the NCCL stand-in (libdlh_nccl_standin.so) through NCCL's own API, on
// host memory, under mpirun with 1 to 4 ranks (make check): the collectives DLH's GPU
// gradient sync makes, in its layouts, against closed forms; non-blocking initialisation; and
// the injected faults, ended by ncclCommAbort. Its main is the MPI tests' (tests/mpi/mpi_main.cpp).
// The same library runs the GPU engine's multi-rank rows on one GPU (share/gpu/gpu-check.sh).
#include <gtest/gtest.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "tests/mpi/mpi_test_util.hpp"

extern "C" int dlhNcclStandinSetFault(const char* spec);

namespace {

using dlh::test::Rank;
using dlh::test::Size;

// A communicator over MPI_COMM_WORLD, rank 0's id broadcast as DLH's NcclComm does.
ncclComm_t MakeComm(bool blocking = true) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (Rank() == 0) {
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  }
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  if (blocking) {
    EXPECT_EQ(ncclCommInitRank(&comm, Size(), id, Rank()), ncclSuccess);
    return comm;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, Size(), id, Rank(), &config);
  EXPECT_TRUE(r == ncclInProgress || r == ncclSuccess) << ncclGetErrorString(r);
  ncclResult_t state = ncclInProgress;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
    EXPECT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(state, ncclSuccess);
  return comm;
}

float Value(int rank, size_t i) { return float(rank + 1 + int(i % 5)); }
// The sum over ranks of Value(r, i): n(n+1)/2 + n * (i % 5), exact in float here.
float SumOfValues(int n, size_t i) { return float(n * (n + 1) / 2 + n * int(i % 5)); }

// Element counts around the stand-in's 1 MiB round (262,144 floats).
const std::vector<size_t> kCounts = {0, 1, 7, 262144, 262147, 600001};

TEST(NcclStandin, AllReduceSumsInPlaceAndOutOfPlace) {
  ncclComm_t comm = MakeComm();
  for (size_t count : kCounts) {
    std::vector<float> a(count), b(count, -1);
    for (size_t i = 0; i < count; ++i) a[i] = Value(Rank(), i);
    ASSERT_EQ(ncclAllReduce(a.data(), b.data(), count, ncclFloat, ncclSum, comm, nullptr),
              ncclSuccess);
    ASSERT_EQ(ncclAllReduce(a.data(), a.data(), count, ncclFloat, ncclSum, comm, nullptr),
              ncclSuccess);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(b[i], SumOfValues(Size(), i)) << "count " << count << " at " << i;
      ASSERT_EQ(a[i], b[i]) << "in place, count " << count << " at " << i;
    }
  }
  int n = 0, r = -1;
  EXPECT_EQ(ncclCommCount(comm, &n), ncclSuccess);
  EXPECT_EQ(ncclCommUserRank(comm, &r), ncclSuccess);
  EXPECT_EQ(n, Size());
  EXPECT_EQ(r, Rank());
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// The hierarchical allreduce's body: reduce-scatter into this rank's shard of the array
// itself, then all-gather from it (gpu_allreduce.cpp), which together are an allreduce.
TEST(NcclStandin, ReduceScatterThenAllGatherInPlaceIsAnAllReduce) {
  ncclComm_t comm = MakeComm();
  const int n = Size(), me = Rank();
  for (size_t shard : {size_t(1), size_t(5), size_t(100003)}) {
    std::vector<float> data(shard * size_t(n));
    for (size_t i = 0; i < data.size(); ++i) data[i] = Value(me, i);
    float* mine = data.data() + size_t(me) * shard;
    ASSERT_EQ(ncclReduceScatter(data.data(), mine, shard, ncclFloat, ncclSum, comm, nullptr),
              ncclSuccess);
    for (size_t i = 0; i < shard; ++i)
      ASSERT_EQ(mine[i], SumOfValues(n, size_t(me) * shard + i)) << "shard " << shard;
    ASSERT_EQ(ncclAllGather(mine, data.data(), shard, ncclFloat, comm, nullptr), ncclSuccess);
    for (size_t i = 0; i < data.size(); ++i)
      ASSERT_EQ(data[i], SumOfValues(n, i)) << "shard " << shard << " at " << i;
  }
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// The root path of unequal nodes: the sum at the root, then broadcast from it.
TEST(NcclStandin, ReduceToTheRootThenBroadcast) {
  ncclComm_t comm = MakeComm();
  const size_t count = 300007;
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = Value(Rank(), i);
  ASSERT_EQ(ncclReduce(data.data(), data.data(), count, ncclFloat, ncclSum, 0, comm, nullptr),
            ncclSuccess);
  for (size_t i = 0; i < count; ++i)
    ASSERT_EQ(data[i], Rank() == 0 ? SumOfValues(Size(), i) : Value(Rank(), i)) << i;
  ASSERT_EQ(ncclBroadcast(data.data(), data.data(), count, ncclFloat, 0, comm, nullptr),
            ncclSuccess);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(data[i], SumOfValues(Size(), i)) << i;
  // Doubles and ints sum too; half precision is refused, not summed wrongly.
  std::vector<double> d(3, Rank() + 0.5);
  ASSERT_EQ(ncclAllReduce(d.data(), d.data(), 3, ncclFloat64, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(d[2], Size() * Size() / 2.0);
  EXPECT_EQ(ncclAllReduce(d.data(), d.data(), 3, ncclFloat16, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(d.data(), d.data(), 3, ncclFloat64, ncclMax, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// A pipeline's transfers (launcher/engine/cuda/cuda_pipeline.cpp): each rank sends to the
// next and receives from the one before, in order, messages of one to several mailboxes;
// the ranks of a pair only, the others elsewhere. One rank sends to itself within a mailbox.
TEST(NcclStandin, SendAndRecvPassMessagesAlongAChainInOrder) {
  ncclComm_t comm = MakeComm();
  const int n = Size(), me = Rank();
  for (size_t count : {size_t(0), size_t(1), size_t(65536), size_t(200003)}) {
    if (n == 1 && count > 65536) continue;  // to itself: within one mailbox
    for (int message = 0; message < 3; ++message) {
      std::vector<float> out(count), in(count, -1);
      for (size_t i = 0; i < count; ++i) out[i] = Value(me, i) + float(message);
      const int next = (me + 1) % n, prev = (me + n - 1) % n;
      // A chain, as a pipeline's stages: the first sends first, every other receives first,
      // so that no pair waits on a full mailbox both ways.
      if (me == 0) {
        ASSERT_EQ(ncclSend(out.data(), count, ncclFloat, next, comm, nullptr), ncclSuccess);
        ASSERT_EQ(ncclRecv(in.data(), count, ncclFloat, prev, comm, nullptr), ncclSuccess);
      } else {
        ASSERT_EQ(ncclRecv(in.data(), count, ncclFloat, prev, comm, nullptr), ncclSuccess);
        ASSERT_EQ(ncclSend(out.data(), count, ncclFloat, next, comm, nullptr), ncclSuccess);
      }
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(in[i], Value(prev, i) + float(message)) << "count " << count << " at " << i;
    }
  }
  std::vector<float> v(4);
  EXPECT_EQ(ncclSend(v.data(), v.size(), ncclFloat, n, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclRecv(v.data(), v.size(), ncclFloat, -1, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(NcclStandin, NonBlockingInitialisationEndsInSuccess) {
  ncclComm_t comm = MakeComm(/*blocking=*/false);
  std::vector<float> v(10, 1);
  ASSERT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat, ncclSum, comm, nullptr),
            ncclSuccess);
  EXPECT_EQ(v[9], float(Size()));
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// A fault at call 2 on the last rank: its peers are left waiting inside their call, as they
// would be with NCCL, until ncclCommAbort (here from a second thread, as a watchdog would)
// ends the wait with an error. Nothing hangs and every rank learns of the failure.
void ExpectFaultEndsWithAbort(const char* kind) {
  const int faulty = Size() - 1;
  const std::string spec = std::string(kind) + ":" + std::to_string(faulty) + ":2";
  ncclComm_t comm = MakeComm();
  ASSERT_EQ(dlhNcclStandinSetFault(spec.c_str()), 0);
  std::vector<float> v(1000, 1);
  ASSERT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat, ncclSum, comm, nullptr),
            ncclSuccess);  // call 1
  std::promise<void> returned;
  std::future<void> call_returned = returned.get_future();
  std::thread watchdog([&] {
    // A rank whose call has not returned within 2 s is waiting for the faulty peer.
    if (call_returned.wait_for(std::chrono::seconds(2)) == std::future_status::timeout)
      ncclCommAbort(comm);
  });
  const ncclResult_t r =
      ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat, ncclSum, comm, nullptr);  // call 2
  returned.set_value();
  watchdog.join();
  EXPECT_EQ(r, ncclSystemError) << kind << " on rank " << faulty;
  if (std::string(kind) == "error" && Rank() == faulty) {
    // The faulty rank itself returned at once, its communicator marked failed.
    ncclResult_t async = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSystemError);
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  }
  ASSERT_EQ(dlhNcclStandinSetFault(""), 0);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(NcclStandin, AnInjectedErrorLeavesPeersWaitingUntilAborted) {
  if (Size() < 2) GTEST_SKIP() << "needs a peer to leave waiting";
  ExpectFaultEndsWithAbort("error");
}

TEST(NcclStandin, AnInjectedHangEndsWithAbortOnEveryRank) { ExpectFaultEndsWithAbort("hang"); }

TEST(NcclStandin, BadFaultSpecsAreRefused) {
  for (const char* bad : {"stop", "stop:1", "freeze:1:2", "stop:x:2", "stop:1:0", "stop:1:2:3"})
    EXPECT_EQ(dlhNcclStandinSetFault(bad), -1) << bad;
  EXPECT_EQ(dlhNcclStandinSetFault("stop:1:5"), 0);
  EXPECT_EQ(dlhNcclStandinSetFault(""), 0);
}

}  // namespace
