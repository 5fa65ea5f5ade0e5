// DLH — --device: option checking and where the CUDA backend is looked for.
#include "launcher/engine/device.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "common/error.hpp"

namespace dlh {
namespace {

TEST(DeviceTest, AcceptsTheThreeKindsOnly) {
  EXPECT_NO_THROW(CheckDeviceKind("auto"));
  EXPECT_NO_THROW(CheckDeviceKind("cpu"));
  EXPECT_NO_THROW(CheckDeviceKind("cuda"));
  EXPECT_THROW(CheckDeviceKind("gpu"), UsageError);
  EXPECT_THROW(CheckDeviceKind(""), UsageError);
}

TEST(DeviceTest, BackendSitsInLibDlhBesideBinOrWhereTheEnvironmentSays) {
  unsetenv("DLH_CUDA_BACKEND");
  const std::string path = CudaBackendPath();
  EXPECT_NE(path.find("/lib/dlh/libdlh_cuda.so"), std::string::npos) << path;
  setenv("DLH_CUDA_BACKEND", "/opt/x/libdlh_cuda.so", 1);
  EXPECT_EQ(CudaBackendPath(), "/opt/x/libdlh_cuda.so");
  unsetenv("DLH_CUDA_BACKEND");
}

}  // namespace
}  // namespace dlh
