// A program's run under `dlh-launch run` (issue 44): the stall rule from the launch on
// (launcher/run/follow.hpp) and the program's energy (launcher/run/program_energy.hpp) with
// the trainer's meters, on the fake NVML (tests/fixtures/fake_nvml.c) and a fake powercap
// tree. The processes themselves run in tests/scripts/run_cmd.sh.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>

#include "launcher/run/follow.hpp"
#include "launcher/run/program_energy.hpp"
#include "launcher/run/run_env.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

namespace fs = std::filesystem;

ProgramStallState State(double since_launch, bool heard, int64_t steps, double since_step,
                        double idle) {
  ProgramStallState s;
  s.since_launch_s = since_launch;
  s.heard = heard;
  s.steps = steps;
  s.since_step_s = since_step;
  s.idle_s = idle;
  return s;
}

ProgramStallRule Rule(StepsExpected expected = StepsExpected::kNo) {
  ProgramStallRule r;
  r.timeout_s = 60;
  r.startup_s = 120;
  r.expected = expected;
  return r;
}

TEST(ProgramStall, AfterAStepNoStepForTheTimeout) {
  EXPECT_EQ(JudgeProgramStall(Rule(), State(500, true, 7, 59, 0)).kind, ProgramStall::kNone);
  const ProgramStallVerdict v = JudgeProgramStall(Rule(), State(500, true, 7, 61, 0));
  EXPECT_EQ(v.kind, ProgramStall::kNoStep);
  EXPECT_DOUBLE_EQ(v.silent_s, 61);
  // Idle or not: after a step only the steps count.
  EXPECT_EQ(JudgeProgramStall(Rule(), State(500, true, 7, 10, 400)).kind, ProgramStall::kNone);
}

TEST(ProgramStall, BeforeTheFirstStepDoingNothingIsAStallForEveryProgram) {
  const ProgramStallVerdict v = JudgeProgramStall(Rule(), State(70, false, 0, 0, 60));
  EXPECT_EQ(v.kind, ProgramStall::kIdle);
  EXPECT_DOUBLE_EQ(v.silent_s, 60);
  EXPECT_EQ(JudgeProgramStall(Rule(), State(70, false, 0, 0, 59)).kind, ProgramStall::kNone);
}

TEST(ProgramStall, AProgramThatWroteNothingIsNeverJudgedByItsSteps) {
  // Busy for an hour without a line: an unmodified torchrun script.
  EXPECT_EQ(JudgeProgramStall(Rule(), State(3600, false, 0, 0, 1)).kind, ProgramStall::kNone);
}

TEST(ProgramStall, AProgramThatReportsGetsTimeoutPlusStartupForItsFirstStep) {
  // It wrote a line (its description), or it is expected to report: busy, no step.
  for (const ProgramStallRule& rule :
       {Rule(), Rule(StepsExpected::kOption), Rule(StepsExpected::kProfile)}) {
    const bool heard = rule.expected == StepsExpected::kNo;
    EXPECT_EQ(JudgeProgramStall(rule, State(179, heard, 0, 0, 1)).kind, ProgramStall::kNone);
    const ProgramStallVerdict v = JudgeProgramStall(rule, State(180, heard, 0, 0, 1));
    EXPECT_EQ(v.kind, ProgramStall::kNoFirstStep);
    EXPECT_DOUBLE_EQ(v.silent_s, 180);
  }
}

TEST(ProgramStall, OffJudgesNothing) {
  ProgramStallRule off = Rule(StepsExpected::kOption);
  off.timeout_s = 0;
  EXPECT_EQ(JudgeProgramStall(off, State(1e6, true, 0, 0, 1e6)).kind, ProgramStall::kNone);
  EXPECT_EQ(JudgeProgramStall(off, State(1e6, true, 3, 1e6, 0)).kind, ProgramStall::kNone);
}

// Sets an environment variable for one test's scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

std::string FakeNvmlPath() {
  char exe[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  return (fs::path(std::string(exe, size_t(n))).parent_path().parent_path() / "lib" /
          "libdlh_fake_nvml.so")
      .string();
}

// One RAPL package zone at `uj` microjoules.
void Zone(const fs::path& dir, const std::string& uj) {
  fs::create_directories(dir / "intel-rapl:0");
  std::ofstream(dir / "intel-rapl:0" / "energy_uj") << uj << "\n";
  std::ofstream(dir / "intel-rapl:0" / "max_energy_range_uj") << "100000000000\n";
}

TEST(ProgramEnergy, TheProgramsDeviceChoosesTheMeter) {
  test::TempDir dir("program-energy");
  Zone(fs::path(dir.path()), "1000000");
  ScopedEnv rapl("DLH_POWERCAP_DIR", dir.path());
  ScopedEnv nvml("DLH_NVML_LIBRARY", FakeNvmlPath());
  ScopedEnv step("FAKE_NVML_STEP_MJ", "4000");
  {
    ProgramEnergy e("0000:3B:00.0", "", true);
    Zone(fs::path(dir.path()), "3500000");  // +2.5 J on the CPU packages
    const RankEnergy cpu = e.Final("cpu");
    EXPECT_EQ(cpu.source, "rapl");
    EXPECT_NEAR(cpu.joules, 2.5, 1e-9);
    const RankEnergy gpu = e.Final("cuda:0 (NVIDIA H100)");
    EXPECT_EQ(gpu.source, "nvml");
    EXPECT_DOUBLE_EQ(gpu.joules, 4);        // one read after the meter's first
    EXPECT_EQ(e.Final("").source, "nvml");  // nothing said: the rank's GPU
    nlohmann::json rec = nlohmann::json::object();
    e.AddTo("cuda:0", &rec);
    EXPECT_TRUE(rec.contains("gpu_power_w")) << rec;
  }
  // No GPU: what the program said it runs on cannot be measured, and why.
  ProgramEnergy none("", "the CUDA driver (libcuda.so.1) is not installed", false);
  const RankEnergy covered = none.Final("");
  EXPECT_EQ(covered.joules, RunEnergy::kCovered);  // the node's first rank reads RAPL
  EXPECT_EQ(covered.source, "rapl");
  const RankEnergy lost = none.Final("cuda:0");
  EXPECT_EQ(lost.joules, -1);
  EXPECT_EQ(lost.why,
            "the program runs on cuda:0 but its GPU cannot be found: the CUDA driver "
            "(libcuda.so.1) is not installed");
}

TEST(ProgramEnergy, WithoutRaplNotMeasuredAndWhy) {
  ScopedEnv rapl("DLH_POWERCAP_DIR", "/nonexistent/powercap");
  ProgramEnergy e("", "no GPU", true);
  const RankEnergy r = e.Final("cpu");
  EXPECT_EQ(r.joules, -1);
  EXPECT_EQ(r.source, "");
  const nlohmann::json s = ProgramEnergySummary({r, RankEnergyFromText(RankEnergyText(r))}, 8, 1);
  EXPECT_EQ(s["measured"], false);
  EXPECT_EQ(s["why"],
            "rank 0: RAPL not readable: /nonexistent/powercap: No such file or directory");
}

TEST(ProgramEnergy, SummaryAddsRanksAndRefusesMixedMeters) {
  RankEnergy a{100, "nvml", ""}, b{300, "nvml", ""};
  nlohmann::json s = ProgramEnergySummary({a, b}, 400, 2);
  EXPECT_EQ(s["measured"], true);
  EXPECT_DOUBLE_EQ(s["joules_total"].get<double>(), 400);
  EXPECT_DOUBLE_EQ(s["joules_per_sample"].get<double>(), 1);
  const RankEnergy back = RankEnergyFromText(RankEnergyText({0.1, "rapl", "a\nb"}));
  EXPECT_DOUBLE_EQ(back.joules, 0.1);
  EXPECT_EQ(back.source, "rapl");
  EXPECT_EQ(back.why, "a b");
  s = ProgramEnergySummary({a, {RunEnergy::kCovered, "rapl", ""}}, 0, 1);
  EXPECT_EQ(s["measured"], false);
  EXPECT_EQ(s["why"],
            "the ranks ran on different kinds of device (rank 0: nvml, rank 1: rapl): their "
            "meters make no one total");
}

TEST(ProgramEnergy, NoDriverNoGpu) {
  // This machine's answer, whatever it is, is a bus id or a reason, never both.
  std::string why;
  const std::string bus = ProgramGpuBusId(-1, 0, &why);
  EXPECT_NE(bus.empty(), why.empty()) << bus << " / " << why;
}

TEST(ProgramDataPath, TheStagedPathReplacesTheParents) {
  RunEnvInputs in;
  in.parent = {"DLH_DATA=/stage/%n/d.h5", "PATH=/bin"};
  in.run_dir = "/r";
  std::vector<std::string> env = BuildRunEnv(in, "DLH_PLAN");
  EXPECT_EQ(std::count(env.begin(), env.end(), "DLH_DATA=/stage/%n/d.h5"), 1);
  in.data = "/stage/node7/d.h5";
  env = BuildRunEnv(in, "DLH_PLAN");
  EXPECT_EQ(std::count(env.begin(), env.end(), "DLH_DATA=/stage/node7/d.h5"), 1);
  EXPECT_EQ(std::count(env.begin(), env.end(), "DLH_DATA=/stage/%n/d.h5"), 0);
}

}  // namespace
}  // namespace dlh
