// Tests of a program's profile (common/program_profile.hpp) and of planning from it
// (estimator/recommend/profile_speeds.hpp): the JSON round trip, one exact line per bad field,
// merging runs into a file, the step-time line through the points, the speeds of the
// profiled and of the other GPU types, and a recommendation from a profile.
#include "common/program_profile.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "estimator/model/features.hpp"
#include "estimator/recommend/profile_speeds.hpp"
#include "estimator/recommend/recommender.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

using nlohmann::json;

template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

ProfilePoint Point(int64_t batch, double step_s, int steps = 20) {
  ProfilePoint p;
  p.batch = batch;
  p.step_s = step_s;
  p.step_s_min = step_s * 0.9;
  p.step_s_max = step_s * 1.2;
  p.steps = steps;
  return p;
}

// Every field set to something other than its default.
ProgramProfile Full() {
  ProgramProfile p;
  p.program = "train_ddp.py";
  p.command = {"python3", "train_ddp.py", "--batch", "256"};
  p.created = "2026-01-02T03:04:05Z";
  p.host = "node1";
  p.gpu_type = "fast";
  p.device = "cuda:0 (NVIDIA H100 80GB HBM3)";
  p.cpu_threads = 4;
  p.threads_offered = 4;
  p.params = 1000000;
  p.samples = 60000;
  p.epochs = 3;
  p.global_batch = 256;
  p.lr = 0.1;
  p.optimizer_slots = 2;
  p.memory_bytes = 2e8;
  p.points = {Point(64, 0.05), Point(256, 0.17)};
  return p;
}

// ---------------------------------------------------------------- JSON

void ExpectSame(const ProgramProfile& a, const ProgramProfile& b) {
  EXPECT_EQ(a.program, b.program);
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(a.created, b.created);
  EXPECT_EQ(a.host, b.host);
  EXPECT_EQ(a.gpu_type, b.gpu_type);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.cpu_threads, b.cpu_threads);
  EXPECT_EQ(a.threads_offered, b.threads_offered);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.epochs, b.epochs);
  EXPECT_EQ(a.global_batch, b.global_batch);
  EXPECT_EQ(a.lr, b.lr);
  EXPECT_EQ(a.optimizer_slots, b.optimizer_slots);
  EXPECT_EQ(a.memory_bytes, b.memory_bytes);
  ASSERT_EQ(a.points.size(), b.points.size());
  for (size_t i = 0; i < a.points.size(); ++i) {
    EXPECT_EQ(a.points[i].batch, b.points[i].batch);
    EXPECT_EQ(a.points[i].step_s, b.points[i].step_s);
    EXPECT_EQ(a.points[i].step_s_min, b.points[i].step_s_min);
    EXPECT_EQ(a.points[i].step_s_max, b.points[i].step_s_max);
    EXPECT_EQ(a.points[i].steps, b.points[i].steps);
    EXPECT_EQ(a.points[i].rounds, b.points[i].rounds);
  }
}

TEST(ProgramProfileTest, JsonRoundTripKeepsEveryField) {
  const ProgramProfile p = Full();
  const json j = ProgramProfileToJson(p);
  EXPECT_EQ(j["dlh_profile"], 1);
  EXPECT_FALSE(j.contains("origin"));  // where a file is, not what it says
  EXPECT_EQ(j["points"][1], json({{"batch", 256},
                                  {"step_s", 0.17},
                                  {"step_s_min", 0.17 * 0.9},
                                  {"step_s_max", 0.17 * 1.2},
                                  {"steps", 20}}));
  EXPECT_FALSE(j["points"][0].contains("rounds"));  // one run: no rounds
  const ProgramProfile back = ProgramProfileFromJson(j, "p.json");
  EXPECT_EQ(back.origin, "p.json");
  ExpectSame(p, back);

  // A point joined from runs keeps each run's step time.
  ProgramProfile joined = Full();
  joined.points[0].rounds = {0.05, 0.06, 0.04};
  const json jj = ProgramProfileToJson(joined);
  EXPECT_EQ(jj["points"][0]["rounds"], json({0.05, 0.06, 0.04}));
  ExpectSame(joined, ProgramProfileFromJson(jj, "p.json"));

  // Through a file, as dlh-launch run writes it.
  test::TempDir dir("profile-test");
  const std::string path = dir.Write("p.json", j.dump(2) + "\n");
  const ProgramProfile loaded = LoadProgramProfile(path);
  EXPECT_EQ(loaded.origin, path);
  ExpectSame(p, loaded);
}

TEST(ProgramProfileTest, OnlyVersionAndPointsAreRequiredAndPointsAreSorted) {
  const ProgramProfile p = ProgramProfileFromJson(
      json::parse(R"({"dlh_profile": 1, "points": [{"batch": 128, "step_s": 0.2, "steps": 5},
                                                    {"batch": 32, "step_s": 0.1, "steps": 5}]})"),
      "p.json");
  EXPECT_EQ(p.program, "");
  EXPECT_EQ(p.params, 0);
  EXPECT_EQ(p.optimizer_slots, 1);
  EXPECT_EQ(p.cpu_threads, 0);
  ASSERT_EQ(p.points.size(), 2u);
  EXPECT_EQ(p.points[0].batch, 32);
  EXPECT_EQ(p.points[1].batch, 128);
  EXPECT_EQ(p.points[0].step_s_min, 0);  // not given
}

TEST(ProgramProfileTest, EveryBadFieldIsOneLineNamingFileAndField) {
  const json good = ProgramProfileToJson(Full());
  auto err = [&](const std::string& key, const json& value) {
    json j = good;
    j[key] = value;
    return ErrorOf([&] { ProgramProfileFromJson(j, "p.json"); });
  };
  auto point_err = [&](const std::string& key, const json& value) {
    json j = good;
    j["points"][1][key] = value;
    return ErrorOf([&] { ProgramProfileFromJson(j, "p.json"); });
  };
  auto without = [&](const std::string& key) {
    json j = good;
    j.erase(key);
    return ErrorOf([&] { ProgramProfileFromJson(j, "p.json"); });
  };
  EXPECT_EQ(ErrorOf([] { ProgramProfileFromJson(json::array(), "p.json"); }),
            "p.json: must be a JSON object, got an empty array");
  EXPECT_EQ(without("dlh_profile"),
            "p.json: dlh_profile: required (dlh-launch run --profile writes it: is this a "
            "profile?)");
  EXPECT_EQ(err("dlh_profile", 2),
            "p.json: dlh_profile: unknown format version 2 (this build "
            "reads 1)");
  EXPECT_EQ(err("dlh_profile", "1"),
            "p.json: dlh_profile: unknown format version \"1\" (this "
            "build reads 1)");
  EXPECT_EQ(err("layers", json::array()), "p.json: unknown key \"layers\"");
  EXPECT_EQ(err("program", 3), "p.json: program: must be a string, got 3");
  EXPECT_EQ(err("command", "python3 x.py"),
            "p.json: command: must be an array of strings, got \"python3 x.py\"");
  EXPECT_EQ(err("command", json::array({"python3", 1})),
            "p.json: command[1]: must be a string, got 1");
  EXPECT_EQ(err("created", nullptr), "p.json: created: must be a string, got null");
  EXPECT_EQ(err("host", false), "p.json: host: must be a string, got false");
  EXPECT_EQ(err("gpu_type", "a 100"),
            "p.json: gpu_type: must contain only letters, digits, '-', '_' and '.', got \"a "
            "100\"");
  EXPECT_EQ(err("device", 0), "p.json: device: must be a string, got 0");
  EXPECT_EQ(err("cpu_threads", -1), "p.json: cpu_threads: must be a non-negative integer, got -1");
  EXPECT_EQ(err("cpu_threads", 2000000),
            "p.json: cpu_threads: must be at most 1000000, got 2000000");
  EXPECT_EQ(err("params", 1.5), "p.json: params: must be a non-negative integer, got 1.5");
  EXPECT_EQ(err("params", 18446744073709551615u),
            "p.json: params: must be at most 9223372036854775807, got 18446744073709551615");
  EXPECT_EQ(err("samples", "many"),
            "p.json: samples: must be a non-negative integer, got \"many\"");
  EXPECT_EQ(err("epochs", 3.0), "p.json: epochs: must be a non-negative integer, got 3.0");
  EXPECT_EQ(err("global_batch", 3000000000u),
            "p.json: global_batch: must be at most 2147483647, got 3000000000");
  EXPECT_EQ(err("lr", -0.1), "p.json: lr: must be a non-negative number, got -0.1");
  EXPECT_EQ(err("optimizer_slots", -2),
            "p.json: optimizer_slots: must be a non-negative integer, got -2");
  EXPECT_EQ(err("memory_bytes", "2 GB"),
            "p.json: memory_bytes: must be a non-negative number, got \"2 GB\"");
  EXPECT_EQ(without("points"), "p.json: points: required (the timed batches)");
  EXPECT_EQ(err("points", json::array()),
            "p.json: points: must be a non-empty array, got an empty array");
  EXPECT_EQ(err("points", json::object()),
            "p.json: points: must be a non-empty array, got an empty object");
  EXPECT_EQ(err("points", json::array({5})), "p.json: points[0]: must be a JSON object, got 5");
  EXPECT_EQ(point_err("batch", 0), "p.json: points[1].batch: must be a positive integer, got 0");
  EXPECT_EQ(point_err("batch", 64),
            "p.json: points[1].batch: duplicate batch 64 (points[0] has it too)");
  EXPECT_EQ(point_err("step_s", 0), "p.json: points[1].step_s: must be a positive number, got 0");
  EXPECT_EQ(point_err("step_s_min", 1.0),
            "p.json: points[1].step_s_min: must not exceed step_s (0.17), got 1.0");
  EXPECT_EQ(point_err("step_s_max", 0.1),
            "p.json: points[1].step_s_max: must not be below step_s (0.17), got 0.1");
  EXPECT_EQ(point_err("steps", 0), "p.json: points[1].steps: must be a positive integer, got 0");
  EXPECT_EQ(point_err("time", 1), "p.json: points[1]: unknown key \"time\"");
  EXPECT_EQ(point_err("rounds", json::array({0.17})),
            "p.json: points[1].rounds: must be an array of 2 to steps (20) step times, one a "
            "run, got an array of 1 item");
  EXPECT_EQ(point_err("rounds", 0.17),
            "p.json: points[1].rounds: must be an array of 2 to steps (20) step times, one a "
            "run, got 0.17");
  EXPECT_EQ(point_err("rounds", json::array({0.17, "fast"})),
            "p.json: points[1].rounds[1]: must be a positive number of seconds up to a day, got "
            "\"fast\"");
  EXPECT_EQ(point_err("rounds", json::array({0.17, -1})),
            "p.json: points[1].rounds[1]: must be a positive number of seconds up to a day, got "
            "-1");
  EXPECT_EQ(point_err("rounds", json::array({0.17, 1e308})),
            "p.json: points[1].rounds[1]: must be a positive number of seconds up to a day, got "
            "1e+308");
  // 1e308 s a step planned into infinite times and a NaN energy.
  EXPECT_EQ(point_err("step_s", 1e308),
            "p.json: points[1].step_s: must be at most 86400.0 seconds (a day a step), got 1e+308");
  EXPECT_EQ(point_err("step_s_max", 1e9),
            "p.json: points[1].step_s_max: must be at most 86400.0 seconds (a day a step), got "
            "1000000000.0");
  EXPECT_EQ(point_err("rounds", json::array({0.16, 0.2})),
            "p.json: points[1].step_s: must be the median of rounds (0.18), got 0.17");
  json no_steps = good;
  no_steps["points"][0].erase("steps");
  EXPECT_EQ(ErrorOf([&] { ProgramProfileFromJson(no_steps, "p.json"); }),
            "p.json: points[0].steps: required");
  // Every message is a UsageError on one line, whatever the origin's name holds.
  EXPECT_THROW(ProgramProfileFromJson(json::array(), "p.json"), UsageError);
  EXPECT_EQ(ErrorOf([] { ProgramProfileFromJson(json::array(), "a\nb.json"); }),
            "a b.json: must be a JSON object, got an empty array");
}

TEST(ProgramProfileTest, LoadNamesThePathWhenTheFileIsUnusable) {
  test::TempDir dir("profile-test");
  const std::string missing = dir / "none.json";
  EXPECT_EQ(ErrorOf([&] { LoadProgramProfile(missing); }),
            missing + ": cannot read: No such file or directory");
  EXPECT_EQ(ErrorOf([&] { LoadProgramProfile(dir.path()); }),
            dir.path() + ": cannot read: Is a directory");
  const std::string broken = dir.Write("broken.json", "{\"dlh_profile\": 1,\n");
  const std::string e = ErrorOf([&] { LoadProgramProfile(broken); });
  EXPECT_EQ(e.rfind(broken + ": not valid JSON: parse error at line 2", 0), 0u) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  const std::string dup = dir.Write("dup.json", R"({"dlh_profile": 1, "lr": 1, "lr": 2})");
  EXPECT_EQ(ErrorOf([&] { LoadProgramProfile(dup); }), dup + ": duplicate key \"lr\"");
}

// ---------------------------------------------------------------- merging

TEST(ProgramProfileTest, MergeReplacesTheSameBatchAndKeepsTheOthersSorted) {
  ProgramProfile base = Full();
  base.origin = "p.json";
  ProgramProfile run;  // one new run: what a rank knows plus one point
  run.program = "train_ddp.py";
  run.created = "2026-02-01T00:00:00Z";
  run.gpu_type = "fast";
  run.samples = 50000;
  run.points = {Point(128, 0.1)};
  ProgramProfile m = MergeProfiles(base, run);
  EXPECT_EQ(m.origin, "p.json");
  ASSERT_EQ(m.points.size(), 3u);
  EXPECT_EQ(m.points[0].batch, 64);
  EXPECT_EQ(m.points[1].batch, 128);
  EXPECT_EQ(m.points[2].batch, 256);
  EXPECT_EQ(m.created, "2026-02-01T00:00:00Z");  // known by the run
  EXPECT_EQ(m.samples, 50000);
  EXPECT_EQ(m.host, "node1");  // not known by the run: the file's
  EXPECT_EQ(m.params, 1000000);
  EXPECT_EQ(m.optimizer_slots, 2);  // the run's default 1 says nothing
  EXPECT_EQ(m.memory_bytes, 2e8);   // the run's batch is not the largest

  run.points = {Point(64, 0.04)};
  run.optimizer_slots = 0;
  m = MergeProfiles(m, run);
  ASSERT_EQ(m.points.size(), 3u);
  EXPECT_EQ(m.points[0].step_s, 0.04);  // replaced
  EXPECT_EQ(m.optimizer_slots, 0);

  // Memory is the peak at the largest batch: a run of a larger batch brings its own.
  run.points = {Point(512, 0.3)};
  run.memory_bytes = 3e8;
  m = MergeProfiles(m, run);
  EXPECT_EQ(m.memory_bytes, 3e8);
  EXPECT_EQ(m.points.back().batch, 512);
}

TEST(ProgramProfileTest, MergeJoinsTheSameBatchAsOneMoreRoundWhenAsked) {
  ProgramProfile base = Full();  // batch 64: 0.05 s (0.045 to 0.06), 20 steps
  ProgramProfile run;
  run.gpu_type = "fast";
  run.points = {Point(64, 0.07)};  // 0.063 to 0.084
  ProgramProfile m = MergeProfiles(base, run, true);
  ASSERT_EQ(m.points.size(), 2u);
  const ProfilePoint& p = m.points[0];
  EXPECT_EQ(p.rounds, (std::vector<double>{0.05, 0.07}));
  EXPECT_DOUBLE_EQ(p.step_s, 0.06);  // the median of two: their mean
  EXPECT_DOUBLE_EQ(p.step_s_min, 0.045);
  EXPECT_DOUBLE_EQ(p.step_s_max, 0.084);
  EXPECT_EQ(p.steps, 40);
  EXPECT_EQ(m.points[1].step_s, 0.17);  // another batch: untouched

  // A third round: the median, so one slow run moves the point no further.
  run.points = {Point(64, 0.2)};
  m = MergeProfiles(m, run, true);
  EXPECT_EQ(m.points[0].rounds, (std::vector<double>{0.05, 0.07, 0.2}));
  EXPECT_DOUBLE_EQ(m.points[0].step_s, 0.07);
  EXPECT_DOUBLE_EQ(m.points[0].step_s_max, 0.24);
  EXPECT_EQ(m.points[0].steps, 60);
  // The file as the launcher writes it reads back (step_s the rounds' median).
  ExpectSame(m, ProgramProfileFromJson(ProgramProfileToJson(m), "p.json"));

  // A point that never had rounds is joined as a round; without the flag, replaced.
  run.points = {Point(256, 0.19)};
  m = MergeProfiles(m, run, true);
  EXPECT_EQ(m.points[1].rounds, (std::vector<double>{0.17, 0.19}));
  m = MergeProfiles(m, run);
  EXPECT_TRUE(m.points[1].rounds.empty());
  EXPECT_EQ(m.points[1].step_s, 0.19);
  EXPECT_EQ(m.points[1].steps, 20);
}

TEST(ProgramProfileTest, MergeRefusesAnotherGpuTypeOrAnotherProgram) {
  ProgramProfile base = Full();
  base.origin = "p.json";
  ProgramProfile run;
  run.gpu_type = "slow";
  run.points = {Point(128, 0.1)};
  EXPECT_EQ(ErrorOf([&] { MergeProfiles(base, run); }),
            "p.json: profiled on fast, this run is on slow: use another --profile-out");
  run.gpu_type = "";
  run.params = 5;
  EXPECT_EQ(ErrorOf([&] { MergeProfiles(base, run); }),
            "p.json: a program of 1000000 params, this run has 5: use another --profile-out");
  EXPECT_THROW(MergeProfiles(base, run), UsageError);
  run.params = 0;  // unknown: no conflict
  EXPECT_EQ(MergeProfiles(base, run).points.size(), 3u);
}

// ---------------------------------------------------------------- the step-time line

TEST(ProfileLineTest, OneBatchIsProportional) {
  const ProfileLine l = FitProfileLine({Point(64, 0.08)});
  EXPECT_EQ(l.fixed_s, 0);
  EXPECT_DOUBLE_EQ(l.per_sample_s, 0.08 / 64);
  EXPECT_EQ(l.how, "1 batch, 64: proportional");
}

TEST(ProfileLineTest, PointsOnALineGiveThatLine) {
  // t = 0.01 + 0.0005 b
  ProfileLine l = FitProfileLine({Point(64, 0.042), Point(256, 0.138)});
  EXPECT_NEAR(l.fixed_s, 0.01, 1e-12);
  EXPECT_NEAR(l.per_sample_s, 0.0005, 1e-15);
  EXPECT_EQ(l.how, "2 batches, 64-256");
  l = FitProfileLine({Point(32, 0.026), Point(64, 0.042), Point(512, 0.266)});
  EXPECT_NEAR(l.fixed_s, 0.01, 1e-12);
  EXPECT_NEAR(l.per_sample_s, 0.0005, 1e-15);
  EXPECT_EQ(l.how, "3 batches, 32-512");
}

TEST(ProfileLineTest, TheFitMinimisesTheRelativeError) {
  // t = 0.005 + 0.001 b, the largest batch 10% slow. Plain least squares would follow the
  // long step (its squared error is the largest in seconds) and miss the short ones by up
  // to 3.4%; the relative fit spreads the error (fixed 3.88 ms, 1.0887 ms per sample).
  const std::vector<ProfilePoint> points = {Point(10, 0.015), Point(20, 0.025),
                                            Point(1000, 1.1055)};
  const ProfileLine l = FitProfileLine(points);
  EXPECT_NEAR(l.fixed_s, 0.0038799, 1e-6);
  EXPECT_NEAR(l.per_sample_s, 0.0010887, 1e-7);
  auto squared_relative = [&](double fixed, double per) {
    double sum = 0;
    for (const ProfilePoint& q : points)
      sum += std::pow((fixed + per * double(q.batch)) / q.step_s - 1, 2);
    return sum;
  };
  const double ours = squared_relative(l.fixed_s, l.per_sample_s);
  EXPECT_LT(ours, squared_relative(0.0034723, 0.0011020));  // the plain least-squares line
  // A step either way along both coefficients only makes it worse.
  for (double d : {-1e-4, 1e-4}) {
    EXPECT_GT(squared_relative(l.fixed_s + d, l.per_sample_s), ours);
    EXPECT_GT(squared_relative(l.fixed_s, l.per_sample_s * (1 + d)), ours);
  }
}

TEST(ProfileLineTest, ANegativeFixedPartIsRefitThroughTheOrigin) {
  // The line through both points crosses zero at batch 43 (fixed -0.02).
  const ProfileLine l = FitProfileLine({Point(64, 0.01), Point(128, 0.04)});
  EXPECT_EQ(l.fixed_s, 0);
  // Through the origin, relative error: per = sum(b/t) / sum(b^2/t^2).
  const double per = (64 / 0.01 + 128 / 0.04) / (64 * 64 / 1e-4 + 128 * 128 / 16e-4);
  EXPECT_DOUBLE_EQ(l.per_sample_s, per);
  EXPECT_EQ(l.how, "2 batches, 64-128, through the origin");
}

TEST(ProfileLineTest, LargerBatchesNoSlowerGiveAFlatLine) {
  const ProfileLine l = FitProfileLine({Point(64, 0.05), Point(128, 0.048)});
  EXPECT_NEAR(l.fixed_s, 0.049, 0.001);
  EXPECT_GT(l.per_sample_s, 0);  // a valid speed, negligible per sample
  EXPECT_LT(l.per_sample_s * 1e6, l.fixed_s);
  EXPECT_EQ(l.how, "2 batches, 64-128, no slower at larger batches: flat");
}

// ---------------------------------------------------------------- speeds and plans

GpuType Gpu(const std::string& name, double tflops, double memory_gb) {
  GpuType g;
  g.name = name;
  g.memory_gb = memory_gb;
  g.peak_tflops = tflops;
  g.memory_bandwidth_gbs = 500;
  g.active_watts = 300;
  g.idle_watts = 50;
  return g;
}

NodeType Node(const std::string& name, const std::string& gpu, int gpn, int nodes) {
  NodeType n;
  n.name = name;
  n.gpu = gpu;
  n.gpus_per_node = gpn;
  n.nodes = nodes;
  n.node_base_watts = 100;
  n.intra_node = Link{100, 5};
  return n;
}

// "fast" (10 TFLOP/s): 2 nodes x 4; "slow" (4 TFLOP/s): 2 nodes x 2.
Cluster TwoTypes() {
  Cluster c;
  c.name = "two";
  c.gpu_types = {Gpu("fast", 10, 16), Gpu("slow", 4, 16)};
  c.node_types = {Node("nf", "fast", 4, 2), Node("ns", "slow", 2, 2)};
  c.inter_node = Link{10, 20};
  return c;
}

// A GPU's profile (no CPU threads: ranks sharing a node do not slow each other down).
ProgramProfile Profiled() {
  ProgramProfile p = Full();
  p.origin = "/runs/train.profile.json";
  p.cpu_threads = 0;
  p.points = {Point(64, 0.042), Point(256, 0.138)};  // t = 0.01 + 0.0005 b
  return p;
}

TEST(ProfileSpeedsTest, MeasuredOnTheProfiledTypeScaledByFlopsOnTheOthers) {
  ProgramProfile cpu = Profiled();
  cpu.cpu_threads = 4;
  const Job job = JobFromProfile(cpu);
  const auto speeds = DeviceSpeeds(job, TwoTypes());
  ASSERT_EQ(speeds.size(), 2u);
  const DeviceSpeed& fast = speeds.at("fast");
  EXPECT_NEAR(fast.fixed_s, 0.01, 1e-12);
  EXPECT_NEAR(fast.per_sample_s, 0.0005, 1e-15);
  EXPECT_EQ(fast.source, "profiled (train.profile.json: 2 batches, 64-256)");
  EXPECT_EQ(fast.reference, "");
  EXPECT_EQ(fast.cpu_threads, 4);
  EXPECT_EQ(fast.stale, "");
  const DeviceSpeed& slow = speeds.at("slow");
  EXPECT_DOUBLE_EQ(slow.fixed_s, fast.fixed_s);                  // the host's part, kept
  EXPECT_DOUBLE_EQ(slow.per_sample_s, fast.per_sample_s / 0.4);  // 4 / 10 TFLOP/s
  EXPECT_EQ(slow.source, "scaled from fast's profile (train.profile.json): FLOP/s x0.40");
  EXPECT_EQ(slow.reference, "fast");
  EXPECT_EQ(slow.cpu_threads, 4);
  EXPECT_TRUE(StaleCalibrationWarnings(speeds).empty());

  // The profiled type need not be allowed: the others are scaled from it all the same.
  Job only_slow = job;
  only_slow.allowed_types = {"slow"};
  const auto one = DeviceSpeeds(only_slow, TwoTypes());
  ASSERT_EQ(one.size(), 1u);
  EXPECT_DOUBLE_EQ(one.at("slow").per_sample_s, slow.per_sample_s);
}

TEST(ProfileSpeedsTest, TheProfiledTypeMustBeKnown) {
  ProgramProfile p = Profiled();
  p.gpu_type = "";
  EXPECT_EQ(ErrorOf([&] { DeviceSpeeds(JobFromProfile(p), TwoTypes()); }),
            "/runs/train.profile.json: gpu_type: not given, and cluster \"two\" has fast, slow: "
            "profile with dlh-launch run --gpu-type TYPE");
  EXPECT_THROW(DeviceSpeeds(JobFromProfile(p), TwoTypes()), UsageError);
  // A cluster of one type: that one.
  Cluster one = TwoTypes();
  one.gpu_types.pop_back();
  one.node_types.pop_back();
  EXPECT_EQ(DeviceSpeeds(JobFromProfile(p), one).at("fast").source,
            "profiled (train.profile.json: 2 batches, 64-256)");
  p.gpu_type = "gamma";
  EXPECT_EQ(ErrorOf([&] { DeviceSpeeds(JobFromProfile(p), TwoTypes()); }),
            "/runs/train.profile.json: gpu_type: \"gamma\" is not in the cluster (cluster \"two\" "
            "has fast, slow)");
}

TEST(ProfileSpeedsTest, JobFromProfileFillsWhatTheRecommenderReads) {
  const ProgramProfile p = Profiled();
  const Job job = JobFromProfile(p);
  ASSERT_TRUE(job.profile.has_value());
  EXPECT_EQ(job.spec.origin, "/runs/train.profile.json");
  EXPECT_EQ(job.spec.name, "train_ddp.py");
  EXPECT_EQ(job.spec.batch_size, 256);
  EXPECT_EQ(job.spec.optimizer.lr, 0.1);
  EXPECT_EQ(job.spec.optimizer.kind, OptimizerSpec::Kind::Adam);  // 2 slots
  EXPECT_EQ(job.samples, 60000);
  EXPECT_EQ(job.epochs, 3);
  EXPECT_EQ(job.features.params, 1e6);
  // An evaluation sample costs a third of a training sample.
  EXPECT_DOUBLE_EQ(job.features.flops_fwd() / job.features.flops_train(), 1.0 / 3);
  EXPECT_DOUBLE_EQ(WorkOf(job.features, 1, 1, 1, 2).forward_fraction, 1.0 / 3);
  // The measured peak, reproduced at the largest batch.
  EXPECT_DOUBLE_EQ(TrainingMemoryBytes(job.features, 256, 2, MemoryEngine::kDevice), 2e8);

  ProgramProfile bare = p;
  bare.global_batch = 0;    // the largest point's batch
  bare.memory_bytes = 1e6;  // less than the parameters alone: nothing grows with the batch
  bare.optimizer_slots = 1;
  const Job j2 = JobFromProfile(bare);
  EXPECT_EQ(j2.spec.batch_size, 256);
  EXPECT_EQ(j2.features.activation_elements, 0);
  EXPECT_EQ(j2.spec.optimizer.kind, OptimizerSpec::Kind::Sgd);
  EXPECT_GT(j2.spec.optimizer.momentum, 0);
  bare.optimizer_slots = 0;
  EXPECT_EQ(JobFromProfile(bare).spec.optimizer.momentum, 0);
  bare.memory_bytes = 0;  // unknown: the parameters only
  EXPECT_EQ(JobFromProfile(bare).features.activation_elements, 0);
  EXPECT_EQ(ProfileWarnings(bare).size(), 1u);
  bare.params = 0;
  EXPECT_EQ(ProfileWarnings(bare),
            (std::vector<std::string>{
                "train.profile.json: params unknown: the allreduce and the checkpoints are taken "
                "as free (the program can write 'params N' to DLH_PROGRESS_FD)",
                "train.profile.json: memory unknown: GPU memory is checked for the parameters "
                "only (the program can write 'memory BYTES' to DLH_PROGRESS_FD)"}));
  EXPECT_TRUE(ProfileWarnings(p).empty());
}

TEST(ProfileSpeedsTest, RecommendingFromAProfilePredictsItsMeasuredStep) {
  Job job = JobFromProfile(Profiled());
  job.max_gpus = 1;  // one GPU: no allreduce, the step is the profile's own
  job.objective = Objective::Time;
  const Cluster c = TwoTypes();
  const Recommendation rec = Recommend(job, c);
  ASSERT_TRUE(rec.feasible);
  const Allocation& a = rec.ranked.front();
  ASSERT_EQ(a.parts.size(), 1u);
  EXPECT_EQ(a.parts[0].gpu, "fast");
  EXPECT_EQ(a.parts[0].per_gpu_batch, 256);
  EXPECT_NEAR(a.step_s, 0.138, 1e-12);  // measured at batch 256
  EXPECT_EQ(a.comm_s, 0);
  EXPECT_EQ(a.steps, 3 * (60000 / 256));
  EXPECT_DOUBLE_EQ(a.memory_bytes, 2e8);
  EXPECT_DOUBLE_EQ(a.lr, 0.1);
  const json plan = PlanJson(job, rec, a);
  EXPECT_EQ(plan["profile"], "/runs/train.profile.json");
  EXPECT_EQ(plan["spec"], "/runs/train.profile.json");
  EXPECT_EQ(plan["speed_source"]["fast"], "profiled (train.profile.json: 2 batches, 64-256)");
  EXPECT_EQ(plan["global_batch"], 256);

  // More GPUs split the global batch, and the profile's parameters size the allreduce.
  job.max_gpus = 0;
  job.top = 0;
  const Recommendation all = Recommend(job, c);
  int split = 0;
  for (const Allocation& x : all.ranked)
    if (x.gpus == 4 && x.parts.size() == 1 && x.parts[0].gpu == "fast") {
      ++split;  // 1 node x 4 and 2 nodes x 2
      EXPECT_EQ(x.parts[0].per_gpu_batch, 64);
      EXPECT_NEAR(x.compute_s, 0.042, 1e-12);
      EXPECT_GT(x.comm_s, 0);
    }
  EXPECT_EQ(split, 2);
  // The checkpoints hold the profile's optimizer slots, even a count no spec optimizer has.
  Job three = JobFromProfile(Profiled());
  three.max_gpus = 1;
  three.objective = Objective::Time;
  three.profile->optimizer_slots = 3;
  const Recommendation r3 = Recommend(three, c);
  EXPECT_GT(r3.ranked.front().phases.checkpoint_s, a.phases.checkpoint_s);
  EXPECT_DOUBLE_EQ(r3.ranked.front().memory_bytes, 2e8 + 4e6);  // one more array of weights
  // A plan from a spec has no "profile".
  Job spec_job = job;
  spec_job.profile.reset();
  EXPECT_FALSE(PlanJson(spec_job, rec, a).contains("profile"));
}

// A CPU program that sets its own thread count (torch.set_num_threads(1)) runs that many
// whatever the node's cores: planned as if it took the rank's share, one pinned to 1 thread on
// 2 cores was predicted at 2.06 ms a step and took 3.53 ms (2026-12-07).
TEST(ProfileSpeedsTest, AProgramThatSetsItsOwnThreadsIsPlannedAtThem) {
  ProgramProfile p = Profiled();
  p.device = "cpu";
  p.cpu_threads = 1;
  p.threads_offered = 2;
  p.points = {Point(128, 0.00353)};
  p.global_batch = 128;
  Cluster c = TwoTypes();
  for (NodeType& n : c.node_types) n.cpu_cores = 2;
  auto step = [&](const ProgramProfile& profile) {
    Job job = JobFromProfile(profile);
    job.max_gpus = 1;
    job.objective = Objective::Time;
    const Recommendation rec = Recommend(job, c);
    EXPECT_TRUE(rec.feasible);
    return rec.ranked.front().step_s;
  };
  EXPECT_TRUE(ProgramSetsItsThreads(p));
  EXPECT_EQ(JobFromProfile(p).threads_per_rank, 1);
  EXPECT_NEAR(step(p), 0.00353, 1e-9);  // as measured: one thread, the other core idle
  EXPECT_NE(ProfileWarnings(p).back().find("the program computes with 1 thread of its own "
                                           "(offered 2 when profiled)"),
            std::string::npos);
  // A program that took what it was offered (1 thread) gets the rank's share, 2 threads.
  ProgramProfile follows = p;
  follows.threads_offered = 1;
  EXPECT_FALSE(ProgramSetsItsThreads(follows));
  EXPECT_EQ(JobFromProfile(follows).threads_per_rank, 0);
  EXPECT_LT(step(follows), 0.00353 * 0.8);
  // Profiles from before threads_offered: as before.
  ProgramProfile older = p;
  older.threads_offered = 0;
  EXPECT_FALSE(ProgramSetsItsThreads(older));
}

}  // namespace
}  // namespace dlh
