// Real NCCL's non-blocking API as the GPU gradient sync uses it (launcher/engine/cuda/
// nccl_comm.hpp): a one-rank communicator joins, sums and is aborted; a join whose peer never
// comes stays in progress, without blocking the caller, until ncclCommAbort ends it. Skipped
// without a GPU (NCCL needs one); run by share/gpu/gpu-check.sh with REQUIRE_GPU=1.
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <thread>
#include <vector>

#include "launcher/engine/cuda/check.hpp"
#include "launcher/engine/cuda/resources.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace dlh {
namespace cuda {
namespace {

using Clock = std::chrono::steady_clock;

// Polls until NCCL is no longer in progress or `limit` passes; returns the last state.
ncclResult_t Settle(ncclComm_t comm, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress && Clock::now() < end) {
    EXPECT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
}

ncclResult_t StartJoin(ncclComm_t* comm, int nranks) {
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return ncclCommInitRankConfig(comm, nranks, id, 0, &config);
}

TEST(NcclNonBlocking, OneRankJoinsSumsAndIsAborted) {
  DLH_REQUIRE_GPU();
  ncclComm_t comm = nullptr;
  const ncclResult_t started = StartJoin(&comm, 1);
  ASSERT_TRUE(started == ncclSuccess || started == ncclInProgress) << ncclGetErrorString(started);
  ASSERT_EQ(Settle(comm, std::chrono::seconds(60)), ncclSuccess);
  Stream stream = MakeStream();
  DeviceArray<float> data(1000);
  std::vector<float> host(1000, 2.5f);
  CUDA_CHECK(cudaMemcpy(data.get(), host.data(), 4000, cudaMemcpyHostToDevice));
  ncclResult_t r =
      ncclAllReduce(data.get(), data.get(), 1000, ncclFloat, ncclSum, comm, stream.get());
  if (r == ncclInProgress) r = Settle(comm, std::chrono::seconds(60));
  ASSERT_EQ(r, ncclSuccess) << ncclGetErrorString(r);
  CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  CUDA_CHECK(cudaMemcpy(host.data(), data.get(), 4000, cudaMemcpyDeviceToHost));
  EXPECT_EQ(host[999], 2.5f);
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
}

TEST(NcclNonBlocking, AJoinWhosePeerNeverComesIsAborted) {
  DLH_REQUIRE_GPU();
  ncclComm_t comm = nullptr;
  const auto start = Clock::now();
  const ncclResult_t started = StartJoin(&comm, 2);  // rank 1 never joins
  const double returned_s = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_TRUE(started == ncclInProgress || started == ncclSuccess) << ncclGetErrorString(started);
  EXPECT_LT(returned_s, 30.0) << "ncclCommInitRankConfig blocked although non-blocking";
  EXPECT_EQ(Settle(comm, std::chrono::seconds(3)), ncclInProgress);
  const auto abort_start = Clock::now();
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  const double abort_s = std::chrono::duration<double>(Clock::now() - abort_start).count();
  EXPECT_LT(abort_s, 30.0) << "ncclCommAbort did not end the stuck join promptly";
  std::printf("ncclCommInitRankConfig returned in %.3f s; ncclCommAbort ended the join in %.3f s\n",
              returned_s, abort_s);
}

}  // namespace
}  // namespace cuda
}  // namespace dlh
