// DLH — main of the GPU tests. Without a usable GPU every test skips with the reason, and
// the run says so once, visibly: CI machines have no GPU. With REQUIRE_GPU=1 (set by
// share/gpu/gpu-check.sh on a GPU machine) a skipped test fails the run instead: there a
// green run must prove that the GPU path ran.
#include <cstdio>
#include <cstdlib>
#include <string>

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

namespace {

// REQUIRE_GPU set to anything but "" or "0".
bool GpuRequired() {
  const char* value = std::getenv("REQUIRE_GPU");
  return value != nullptr && *value != '\0' && std::string(value) != "0";
}

// With REQUIRE_GPU: 0 when no test skipped, else 1 after one line naming the skipped tests.
int FailOnSkips(const std::string& no_gpu_reason) {
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  const int skipped = unit.skipped_test_count();
  if (skipped == 0) return 0;
  std::string names;
  int listed = 0;
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    for (int j = 0; j < suite.total_test_count(); ++j) {
      const ::testing::TestInfo& test = *suite.GetTestInfo(j);
      if (!test.should_run() || !test.result()->Skipped()) continue;
      if (listed++ < 5)
        names += std::string(listed > 1 ? ", " : "") + suite.name() + "." + test.name();
    }
  }
  if (listed > 5) names += ", ...";
  std::printf("gpu_tests: FAIL: REQUIRE_GPU=1 but %d of %d tests skipped (%s): %s\n", skipped,
              unit.test_to_run_count(),
              no_gpu_reason.empty() ? "see their skip messages" : no_gpu_reason.c_str(),
              names.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Plain fp32 in cuDNN: the tests compare with the CPU at fp32 tolerances, which TF32
  // (cuDNN's default for fp32 convolutions on Ampere and newer) would not meet.
  setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
  ::testing::InitGoogleTest(&argc, argv);
  const bool required = GpuRequired();
  char reason[512] = "";
  if (dlh_cuda_probe(reason, sizeof reason) == 0)
    dlh::cuda::NoGpuReason() = std::string("no usable GPU: ") + reason;
  const std::string& no_gpu = dlh::cuda::NoGpuReason();
  if (!no_gpu.empty()) {
    std::printf("gpu_tests: SKIPPING every GPU test (%s)\n", no_gpu.c_str());
    if (required) std::printf("gpu_tests: REQUIRE_GPU=1: the skips fail this run\n");
    std::fflush(stdout);
  }
  const int rc = RUN_ALL_TESTS();
  if (required && FailOnSkips(no_gpu) != 0) return 1;
  return rc;
}
