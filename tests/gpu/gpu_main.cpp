// DLH — main of the GPU tests. Without a usable GPU every test skips with the reason, and
// the run says so once, visibly: CI machines have no GPU.
#include <cstdio>
#include <cstdlib>

#include "launcher/engine/cuda/backend_api.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace dlh {
namespace cuda {
std::string& NoGpuReason() {
  static std::string reason;
  return reason;
}
}  // namespace cuda
}  // namespace dlh

int main(int argc, char** argv) {
  // Plain fp32 in cuDNN: the tests compare with the CPU at fp32 tolerances, which TF32
  // (cuDNN's default for fp32 convolutions on Ampere and newer) would not meet.
  setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
  ::testing::InitGoogleTest(&argc, argv);
  char reason[512] = "";
  if (dlh_cuda_probe(reason, sizeof reason) == 0)
    dlh::cuda::NoGpuReason() = std::string("no usable GPU: ") + reason;
  if (!dlh::cuda::NoGpuReason().empty())
    std::printf("gpu_tests: SKIPPING every GPU test (%s)\n", dlh::cuda::NoGpuReason().c_str());
  return RUN_ALL_TESTS();
}
