// Tests of the energy meters: NVML through a real dlopen of a fake library
// (tests/fixtures/fake_nvml.c, built beside the test binary), the missing library, and the
// RAPL reader on a fake powercap tree.
#include "common/energy.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

namespace fs = std::filesystem;

// Sets an environment variable for one test's scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = std::make_unique<std::string>(old);
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::unique_ptr<std::string> old_;
};

// The fake library: BUILDDIR/lib/ beside the test binary's BUILDDIR/bin/.
std::string FakeNvmlPath() {
  char exe[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  return (fs::path(std::string(exe, size_t(n))).parent_path().parent_path() / "lib" /
          "libdlh_fake_nvml.so")
      .string();
}

// How many NVML initialisations the fake holds open (each must be shut down again).
int LiveInits(const std::string& library) {
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!h) return 0;  // not loaded at all: nothing open
  auto count = reinterpret_cast<int (*)()>(dlsym(h, "fake_nvml_live_inits"));
  const int live = count ? count() : -1;
  dlclose(h);
  return live;
}

constexpr const char* kBus = "0000:3B:00.0";

class FakeNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(lib_)) GTEST_FAIL() << "fake NVML not built: " << lib_;
  }
  const std::string lib_ = FakeNvmlPath();
  ScopedEnv use_{"DLH_NVML_LIBRARY", lib_};
};

TEST_F(FakeNvml, MeterCountsFromItsCreation) {
  ScopedEnv step("FAKE_NVML_STEP_MJ", "2500");
  std::string why = "untouched";
  std::unique_ptr<EnergyMeter> meter = MakeGpuEnergyMeter(kBus, &why);
  ASSERT_NE(meter, nullptr) << why;
  EXPECT_EQ(why, "untouched");
  EXPECT_EQ(meter->source(), "nvml");
  EXPECT_EQ(meter->scope(), std::string("gpu ") + kBus);
  // The counter grows 2.5 J per read; the first read was the meter's start.
  EXPECT_DOUBLE_EQ(meter->joules(), 2.5);
  EXPECT_DOUBLE_EQ(meter->joules(), 5.0);
}

TEST_F(FakeNvml, SamplesPowerUtilisationAndMemory) {
  GpuSample s;
  ASSERT_TRUE(SampleGpu(kBus, &s));
  EXPECT_DOUBLE_EQ(s.power_w, 287.5);
  EXPECT_DOUBLE_EQ(s.util_percent, 93);
  EXPECT_DOUBLE_EQ(s.mem_used_gib, 1.5);
  ScopedEnv no_power("FAKE_NVML_NO_POWER", "1");
  ASSERT_TRUE(SampleGpu(kBus, &s));
  EXPECT_EQ(s.power_w, -1);  // absent, the others still there
  EXPECT_DOUBLE_EQ(s.util_percent, 93);
  EXPECT_FALSE(SampleGpu("0000:AF:00.0", &s));
  EXPECT_EQ(s.util_percent, -1);
}

TEST_F(FakeNvml, UnknownGpuOrNoCounterIsNotMeasured) {
  std::string why;
  EXPECT_EQ(MakeGpuEnergyMeter("0000:AF:00.0", &why), nullptr);
  EXPECT_NE(why.find("NVML has no GPU 0000:AF:00.0: Not Found"), std::string::npos) << why;
  ScopedEnv no_energy("FAKE_NVML_NO_ENERGY", "1");
  EXPECT_EQ(MakeGpuEnergyMeter(kBus, &why), nullptr);
  EXPECT_NE(why.find("has no energy counter"), std::string::npos) << why;
  EXPECT_EQ(MakeGpuEnergyMeter("", &why), nullptr);
  EXPECT_NE(why.find("no GPU"), std::string::npos) << why;
}

TEST_F(FakeNvml, ShutsDownWhenTheLibraryIsLetGo) {
  {
    std::string why;
    std::unique_ptr<EnergyMeter> meter = MakeGpuEnergyMeter(kBus, &why);
    ASSERT_NE(meter, nullptr) << why;
    EXPECT_EQ(LiveInits(lib_), 1);  // one initialisation, shared by meters and samples
    GpuSample s;
    EXPECT_TRUE(SampleGpu(kBus, &s));
    EXPECT_EQ(LiveInits(lib_), 1);
    // Another library named: the process lets go of this one once the meter is gone too.
    ScopedEnv other("DLH_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
    EXPECT_FALSE(SampleGpu(kBus, &s));
    EXPECT_EQ(LiveInits(lib_), 1);
  }
  EXPECT_EQ(LiveInits(lib_), 0);
}

TEST_F(FakeNvml, FailedInitSaysWhy) {
  ScopedEnv fail("FAKE_NVML_INIT_FAIL", "1");
  // Another spelling of the same file, so that the process opens it anew.
  ScopedEnv reload("DLH_NVML_LIBRARY",
                   (fs::path(lib_).parent_path() / "." / "libdlh_fake_nvml.so").string());
  std::string why;
  EXPECT_EQ(MakeGpuEnergyMeter(kBus, &why), nullptr);
  EXPECT_EQ(why, "NVML cannot start: Driver Not Loaded");
}

TEST(NvmlMissing, GivesNullAndWhy) {
  ScopedEnv use("DLH_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
  std::string why;
  EXPECT_EQ(MakeGpuEnergyMeter(kBus, &why), nullptr);
  EXPECT_EQ(why.rfind("NVML not found: /nonexistent/libnvidia-ml.so.1: cannot open", 0), 0u) << why;
  GpuSample s;
  EXPECT_FALSE(SampleGpu(kBus, &s));
  EXPECT_EQ(s.power_w, -1);
}

TEST(Energy, ReadCpuEnergyJoulesDoesNotCrash) {
  double j = -7;
  if (ReadCpuEnergyJoules(&j)) {
    EXPECT_GE(j, 0);
  } else {
    EXPECT_EQ(j, -7);  // untouched on failure
  }
}

class FakePowercap : public ::testing::Test {
 protected:
  void Zone(const std::string& name, const std::string& uj, const std::string& max_uj) {
    fs::create_directories(dir_ / name);
    if (!uj.empty()) std::ofstream(dir_ / name / "energy_uj") << uj << "\n";
    if (!max_uj.empty()) std::ofstream(dir_ / name / "max_energy_range_uj") << max_uj << "\n";
  }
  test::TempDir tmp_{"dlh-energy-test"};
  const fs::path dir_ = tmp_.path();
};

TEST_F(FakePowercap, SumsTopLevelPackagesOnly) {
  Zone("intel-rapl:1", "2500000", "262143328850");
  Zone("intel-rapl:0", "1000000", "262143328850");
  Zone("intel-rapl:0:0", "9000000", "262143328850");     // core sub-zone: inside package 0
  Zone("intel-rapl-mmio:0", "7000000", "262143328850");  // the same package through MMIO
  fs::create_directories(dir_ / "intel-rapl");           // the control type, not a zone
  std::vector<EnergyZone> zones;
  ASSERT_TRUE(ReadEnergyZones(dir_.string(), &zones));
  ASSERT_EQ(zones.size(), 2u);
  EXPECT_EQ(zones[0].name, "intel-rapl:0");
  EXPECT_EQ(zones[1].name, "intel-rapl:1");
  EXPECT_DOUBLE_EQ(zones[0].joules + zones[1].joules, 3.5);
  EXPECT_NEAR(zones[0].max_joules, 262143.32885, 1e-6);
}

TEST_F(FakePowercap, FailsWithoutReadableZones) {
  std::vector<EnergyZone> zones;
  std::string why;
  EXPECT_FALSE(ReadEnergyZones(dir_.string(), &zones, &why));  // empty
  EXPECT_EQ(why, "no package zone (intel-rapl:N) under " + dir_.string());
  EXPECT_FALSE(ReadEnergyZones((dir_ / "absent").string(), &zones));
  Zone("intel-rapl:0", "", "100");  // energy_uj missing (or root-only on real systems)
  EXPECT_FALSE(ReadEnergyZones(dir_.string(), &zones, &why));
  EXPECT_NE(why.find("intel-rapl:0/energy_uj: cannot read"), std::string::npos) << why;
  Zone("intel-rapl:0", "garbage", "100");
  EXPECT_FALSE(ReadEnergyZones(dir_.string(), &zones));
  EXPECT_TRUE(zones.empty());
}

TEST(Energy, BetweenHandlesCounterWrap) {
  std::vector<EnergyZone> before{{"intel-rapl:0", 10.0, 100.0}, {"intel-rapl:1", 99.5, 100.0}};
  std::vector<EnergyZone> after{{"intel-rapl:0", 12.5, 100.0}, {"intel-rapl:1", 0.5, 100.0}};
  EXPECT_DOUBLE_EQ(EnergyBetween(before, after), 2.5 + 1.0);
  after[1].max_joules = 0;  // wrapped, but the range is unknown
  EXPECT_EQ(EnergyBetween(before, after), -1);
  after.pop_back();  // a zone vanished
  EXPECT_EQ(EnergyBetween(before, after), -1);
  EXPECT_EQ(EnergyBetween({}, {}), -1);
}

TEST_F(FakePowercap, MeterAddsReadingsAcrossWraps) {
  ScopedEnv use("DLH_POWERCAP_DIR", dir_.string());
  Zone("intel-rapl:0", "90000000", "100000000");  // 90 J of a 100 J range
  Zone("intel-rapl:1", "1000000", "100000000");
  std::string why;
  std::unique_ptr<EnergyMeter> meter = MakeCpuEnergyMeter(&why);
  ASSERT_NE(meter, nullptr) << why;
  EXPECT_EQ(meter->source(), "rapl");
  EXPECT_EQ(meter->scope(), "cpu package(s) of this node");
  EXPECT_DOUBLE_EQ(meter->joules(), 0);
  Zone("intel-rapl:0", "99000000", "");  // +9 J
  Zone("intel-rapl:1", "4000000", "");   // +3 J
  EXPECT_NEAR(meter->joules(), 12, 1e-9);
  Zone("intel-rapl:0", "5000000", "100000000");  // wrapped: +6 J
  EXPECT_NEAR(meter->joules(), 18, 1e-9);
  Zone("intel-rapl:0", "8000000", "100000000");  // +3 J, a second wrap seen apart
  Zone("intel-rapl:1", "1000000", "100000000");  // wrapped: +97 J
  EXPECT_NEAR(meter->joules(), 118, 1e-9);
  fs::remove(dir_ / "intel-rapl:0" / "energy_uj");  // unreadable for a moment
  EXPECT_NEAR(meter->joules(), 118, 1e-9);
}

TEST_F(FakePowercap, NoZonesIsNotMeasured) {
  ScopedEnv use("DLH_POWERCAP_DIR", dir_.string());
  std::string why;
  EXPECT_EQ(MakeCpuEnergyMeter(&why), nullptr);
  EXPECT_EQ(why, "RAPL not readable: no package zone (intel-rapl:N) under " + dir_.string());
}

TEST(DescribeJoules, PicksTheUnit) {
  EXPECT_EQ(DescribeJoules(850), "850 J");
  EXPECT_EQ(DescribeJoules(12345), "12.3 kJ");
  EXPECT_EQ(DescribeJoules(4.56e6), "4.56 MJ (1.27 kWh)");
}

}  // namespace
}  // namespace dlh
