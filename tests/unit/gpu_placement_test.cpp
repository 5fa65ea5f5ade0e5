// Tests of the CPU placement near a rank's GPU (launcher/engine/gpu_placement.hpp) against a
// sysfs PCI tree written to a temporary folder: a two-socket node's GPUs, a VM's, and
// damaged files.
#include "launcher/engine/gpu_placement.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

void Device(const std::string& root, const std::string& address, const std::string& cpus,
            const std::string& node) {
  const std::string dir = root + "/" + address;
  std::filesystem::create_directories(dir);
  if (!cpus.empty()) std::ofstream(dir + "/local_cpulist") << cpus << "\n";
  if (!node.empty()) std::ofstream(dir + "/numa_node") << node << "\n";
}

std::vector<int> Range(int first, int last) {
  std::vector<int> v;
  for (int c = first; c <= last; ++c) v.push_back(c);
  return v;
}

TEST(GpuPlacement, CpuLists) {
  EXPECT_EQ(ParseCpuList("0-3,8,10-11", "t"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(ParseCpuList("5", "t"), std::vector<int>{5});
  EXPECT_EQ(ParseCpuList("8,0-1,1", "t"), (std::vector<int>{0, 1, 8}));
  for (const char* bad : {"", "a", "1-", "3-1", "1,,2", "0-3;4", "-1"})
    EXPECT_THROW(ParseCpuList(bad, "t"), UsageError) << bad;
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({}), "");
}

TEST(GpuPlacement, PciAddresses) {
  EXPECT_EQ(SysfsPciAddress("00000000:3B:00.0"), "0000:3b:00.0");  // cudaDeviceGetPCIBusId
  EXPECT_EQ(SysfsPciAddress("0000:00:06.0"), "0000:00:06.0");
  EXPECT_EQ(SysfsPciAddress("0001:c1:00.1"), "0001:c1:00.1");
  EXPECT_EQ(SysfsPciAddress("GPU-5a3c"), "");
  EXPECT_EQ(SysfsPciAddress("0000:3b:00"), "");
}

// A two-socket node: CPUs 0-31 on socket 0 (GPUs 3b and 5e), 32-63 on socket 1 (GPU af).
TEST(GpuPlacement, TwoSockets) {
  test::TempDir dir("gpu-placement");
  const std::string root = dir.path();
  Device(root, "0000:3b:00.0", "0-31", "0");
  Device(root, "0000:af:00.0", "32-63", "1");
  const std::vector<int> whole = Range(0, 63);

  // Not bound by the launcher: the rank keeps its GPU's socket.
  GpuPlacement p = PlaceNearGpu("00000000:AF:00.0", whole, root);
  EXPECT_TRUE(p.bind);
  EXPECT_EQ(p.cpus, Range(32, 63));
  EXPECT_EQ(p.numa_node, 1);
  EXPECT_EQ(p.note, "bound to CPUs 32-63, near GPU 00000000:AF:00.0 (NUMA node 1), of 0-63");

  // srun --gpu-bind=closest (or --cpu-bind) already put it there: nothing changes.
  p = PlaceNearGpu("00000000:3B:00.0", Range(8, 15), root);
  EXPECT_FALSE(p.bind);
  EXPECT_EQ(p.note, "CPUs 8-15 all near GPU 00000000:3B:00.0 (NUMA node 0)");

  // Partly near: the near part is kept.
  std::vector<int> straddling = Range(28, 35);
  p = PlaceNearGpu("00000000:3B:00.0", straddling, root);
  EXPECT_TRUE(p.bind);
  EXPECT_EQ(p.cpus, Range(28, 31));

  // Bound to the other socket on purpose: left alone, and said.
  p = PlaceNearGpu("00000000:3B:00.0", Range(40, 47), root);
  EXPECT_FALSE(p.bind);
  EXPECT_NE(p.note.find("CPUs 40-47 are all far from GPU 00000000:3B:00.0 (NUMA node 0), whose "
                        "near CPUs are 0-31: left as the launcher bound them"),
            std::string::npos)
      << p.note;
}

// A VM (this machine among them): numa_node -1, every CPU local; or no device folder at all;
// or a damaged list. None binds, and none throws.
TEST(GpuPlacement, NothingToGoBy) {
  test::TempDir dir("gpu-placement");
  const std::string root = dir.path();
  Device(root, "0000:00:06.0", "0-1", "-1");
  GpuPlacement p = PlaceNearGpu("0000:00:06.0", {0, 1}, root);
  EXPECT_FALSE(p.bind);
  EXPECT_EQ(p.numa_node, -1);
  EXPECT_EQ(p.note, "CPUs 0-1 all near GPU 0000:00:06.0");

  p = PlaceNearGpu("0000:00:07.0", {0, 1}, root);
  EXPECT_FALSE(p.bind);
  EXPECT_NE(p.note.find("no " + root + "/0000:00:07.0/local_cpulist"), std::string::npos) << p.note;

  Device(root, "0000:00:08.0", "zero-one", "0");
  p = PlaceNearGpu("0000:00:08.0", {0, 1}, root);
  EXPECT_FALSE(p.bind);
  EXPECT_NE(p.note.find("not a CPU list"), std::string::npos) << p.note;

  p = PlaceNearGpu("not-a-bus-id", {0, 1}, root);
  EXPECT_FALSE(p.bind);
}

// This process, with DLH_GPU_BIND=none, is left alone whatever the bus id.
TEST(GpuPlacement, OffByEnvironment) {
  const std::vector<int> before = AllowedCpus();
  ASSERT_FALSE(before.empty());
  setenv("DLH_GPU_BIND", "none", 1);
  EXPECT_EQ(ApplyGpuPlacement("0000:00:00.0").note, "");
  unsetenv("DLH_GPU_BIND");
  EXPECT_EQ(AllowedCpus(), before);
}

}  // namespace
}  // namespace dlh
