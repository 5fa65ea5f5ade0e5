// Tests of a run's energy figures: summary.json's "energy" from every rank's joules, and the
// run's meter on a GPU (the fake NVML) and where nothing can be measured.
#include "launcher/train/run_energy.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <string>
#include <vector>

namespace dlh {
namespace {

TEST(EnergySummary, AddsMeasuredRanks) {
  const nlohmann::json e = EnergySummary({100, 300}, {"", ""}, "nvml", 400, 2);
  EXPECT_EQ(e["measured"], true);
  EXPECT_EQ(e["source"], "nvml");
  EXPECT_EQ(e["joules_per_rank"], nlohmann::json({100.0, 300.0}));
  EXPECT_DOUBLE_EQ(e["joules_total"].get<double>(), 400);
  EXPECT_DOUBLE_EQ(e["joules_per_sample"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(e["mean_power_w"].get<double>(), 200);
}

TEST(EnergySummary, CoveredRanksAreNull) {
  const nlohmann::json e =
      EnergySummary({50, RunEnergy::kCovered, 70, RunEnergy::kCovered}, {}, "rapl", 0, 1);
  EXPECT_EQ(e["measured"], true);
  EXPECT_EQ(e["joules_per_rank"], nlohmann::json::parse("[50.0, null, 70.0, null]"));
  EXPECT_DOUBLE_EQ(e["joules_total"].get<double>(), 120);
  EXPECT_FALSE(e.contains("joules_per_sample"));  // no samples trained
  EXPECT_NE(e["scope"].get<std::string>().find("node"), std::string::npos);
}

TEST(EnergySummary, OneUnmeasuredRankMeansNotMeasured) {
  nlohmann::json e = EnergySummary({50, -1}, {"", "NVML not found: x"}, "nvml", 10, 1);
  EXPECT_EQ(e, nlohmann::json({{"measured", false}, {"why", "rank 1: NVML not found: x"}}));
  e = EnergySummary({-1}, {"RAPL not readable: y"}, "", 10, 1);
  EXPECT_EQ(e, nlohmann::json({{"measured", false}, {"why", "RAPL not readable: y"}}));
}

TEST(RunEnergy, CpuWithoutRaplIsNotMeasured) {
  setenv("DLH_POWERCAP_DIR", "/nonexistent/powercap", 1);
  RunEnergy leader("", true), other("", false);
  unsetenv("DLH_POWERCAP_DIR");
  EXPECT_EQ(leader.final_joules(), -1);
  EXPECT_NE(leader.why_not().find("RAPL not readable"), std::string::npos) << leader.why_not();
  EXPECT_EQ(other.final_joules(), RunEnergy::kCovered);
  nlohmann::json rec = nlohmann::json::object();
  leader.poll();
  leader.add_to(&rec);
  EXPECT_TRUE(rec.empty());  // nothing made up
}

TEST(RunEnergy, GpuReadsItsMeterAndSamplesThroughNvml) {
  // The fake NVML beside the test binary (tests/fixtures/fake_nvml.c; energy_test.cpp).
  char exe[PATH_MAX] = {};
  ASSERT_GT(readlink("/proc/self/exe", exe, sizeof exe - 1), 0);
  const std::string lib =
      (std::filesystem::path(exe).parent_path().parent_path() / "lib" / "libdlh_fake_nvml.so")
          .string();
  setenv("DLH_NVML_LIBRARY", lib.c_str(), 1);
  setenv("FAKE_NVML_STEP_MJ", "4000", 1);
  {
    RunEnergy gpu("0000:3B:00.0", false);  // node_leader matters only on the CPU
    EXPECT_EQ(gpu.source(), "nvml");
    nlohmann::json rec = nlohmann::json::object();
    gpu.poll();  // within the second: nothing read again
    gpu.add_to(&rec);
    EXPECT_EQ(
        rec,
        nlohmann::json::parse(
            R"({"energy_j": 0.0, "gpu_power_w": 287.5, "gpu_util": 93.0, "gpu_mem_gib": 1.5})"));
    EXPECT_DOUBLE_EQ(gpu.final_joules(), 4);  // one read after the meter's first
    RunEnergy unknown("0000:AF:00.0", true);
    EXPECT_EQ(unknown.final_joules(), -1);
    EXPECT_NE(unknown.why_not().find("NVML has no GPU 0000:AF:00.0"), std::string::npos);
  }
  unsetenv("FAKE_NVML_STEP_MJ");
  unsetenv("DLH_NVML_LIBRARY");
}

}  // namespace
}  // namespace dlh
