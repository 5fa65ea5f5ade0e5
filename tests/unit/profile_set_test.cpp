// Tests of profiles measured on every type (issue 44, part 3): the profile set's JSON and its
// bad input (common/program_profile.hpp), each measured type planned from its own profile and
// only the others transferred, from the measured type closest in peaks
// (estimator/recommend/profile_speeds.hpp), and the jobs of `profile --slurm`
// (estimator/calibrate/slurm_profile.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/program_profile.hpp"
#include "estimator/calibrate/slurm_profile.hpp"
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

ProgramProfile OnType(const std::string& type, double per_sample_s) {
  ProgramProfile p;
  p.origin = "/runs/set.json";
  p.program = "train.py";
  p.gpu_type = type;
  p.params = 1000;
  p.samples = 6400;
  p.epochs = 2;
  ProfilePoint q;
  q.batch = 32;
  q.step_s = per_sample_s * 32;
  q.steps = 20;
  p.points = {q};
  return p;
}

GpuType Gpu(const std::string& name, double tflops, double gbs) {
  GpuType g;
  g.name = name;
  g.memory_gb = 16;
  g.peak_tflops = tflops;
  g.memory_bandwidth_gbs = gbs;
  g.active_watts = 300;
  g.idle_watts = 50;
  return g;
}

NodeType Node(const std::string& name, const std::string& gpu) {
  NodeType n;
  n.name = name;
  n.gpu = gpu;
  n.gpus_per_node = 2;
  n.nodes = 1;
  n.node_base_watts = 100;
  n.intra_node = Link{100, 5};
  return n;
}

// alpha 10 TFLOP/s, beta 4, gamma 5 (closer to beta than to alpha), delta 20 (closer to alpha).
Cluster FourTypes() {
  Cluster c;
  c.name = "four";
  c.gpu_types = {Gpu("alpha", 10, 1000), Gpu("beta", 4, 400), Gpu("gamma", 5, 500),
                 Gpu("delta", 20, 2000)};
  c.node_types = {Node("na", "alpha"), Node("nb", "beta"), Node("ng", "gamma"),
                  Node("nd", "delta")};
  c.inter_node = Link{10, 20};
  return c;
}

TEST(ProfileSetTest, JsonRoundTripKeepsEveryProfileAndItsProbe) {
  std::vector<ProgramProfile> set = {OnType("alpha", 1e-3), OnType("beta", 4e-3)};
  set[1].probe = json{{"kind", "cpu"}, {"threads", 1}, {"sgemm_gflops", 12.5}};
  const json j = ProfileSetToJson(set);
  EXPECT_EQ(j.at("dlh_profile_set"), 1);
  EXPECT_FALSE(j["profiles"][0].contains("probe"));  // none recorded: no key
  const auto back = ProfileSetFromJson(j, "s.json");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].gpu_type, "alpha");
  EXPECT_EQ(back[1].gpu_type, "beta");
  EXPECT_EQ(back[1].probe.at("sgemm_gflops"), 12.5);
  EXPECT_TRUE(back[0].probe.is_null());
  EXPECT_EQ(back[1].origin, "s.json");
  EXPECT_DOUBLE_EQ(back[1].points[0].step_s, 4e-3 * 32);
}

TEST(ProfileSetTest, EveryBadSetIsOneLineNamingFileAndField) {
  const json good = ProfileSetToJson({OnType("alpha", 1e-3), OnType("beta", 4e-3)});
  auto bad = [&](const std::function<void(json&)>& edit) {
    json j = good;
    edit(j);
    return ErrorOf([&] { ProfileSetFromJson(j, "s.json"); });
  };
  EXPECT_EQ(bad([](json& j) { j["dlh_profile_set"] = 2; }),
            "s.json: dlh_profile_set: unknown format version 2 (this build reads 1)");
  EXPECT_EQ(bad([](json& j) { j["extra"] = 1; }), "s.json: unknown key \"extra\"");
  EXPECT_EQ(bad([](json& j) { j["profiles"] = json::array(); }),
            "s.json: profiles: must be a non-empty array, got an empty array");
  EXPECT_EQ(bad([](json& j) { j["profiles"][1]["points"][0]["step_s"] = 0; }),
            "s.json: profiles[1].points[0].step_s: must be a positive number, got 0");
  EXPECT_EQ(bad([](json& j) { j["profiles"][1]["gpu_type"] = ""; }),
            "s.json: profiles[1].gpu_type: required when profiles of several GPU types are "
            "combined (dlh-launch run --gpu-type TYPE)");
  EXPECT_EQ(bad([](json& j) { j["profiles"][1]["gpu_type"] = "alpha"; }),
            "s.json: profiles[1].gpu_type: \"alpha\" is measured twice (profiles[0] has it "
            "too): one profile per GPU type");
  EXPECT_EQ(bad([](json& j) { j["profiles"][1]["params"] = 5; }),
            "s.json: profiles[1].params: 5, profiles[0] has 1000: profiles of one program only");
  EXPECT_EQ(bad([](json& j) { j["profiles"][0]["probe"] = 3; }),
            "s.json: profiles[0].probe: must be a JSON object (a device probe) or null, got 3");
  EXPECT_EQ(bad([](json& j) { j.erase("profiles"); }),
            "s.json: profiles: required (one profile per GPU type)");
}

TEST(ProfileSetTest, LoadProfilesReadsASetOrOneProfile) {
  test::TempDir dir("profile-set-test");
  const std::string set = dir.path() + "/set.json", one = dir.path() + "/one.json";
  std::ofstream(set) << ProfileSetToJson({OnType("alpha", 1e-3), OnType("beta", 4e-3)}).dump();
  std::ofstream(one) << ProgramProfileToJson(OnType("alpha", 1e-3)).dump();
  const auto a = LoadProfiles(set), b = LoadProfiles(one);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].origin, set);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].gpu_type, "alpha");
  std::ofstream(one) << "{\"dlh_profile_set\": 1, \"profiles\": [}";
  EXPECT_NE(ErrorOf([&] { LoadProfiles(one); }).find(one + ": "), std::string::npos);
}

TEST(ProfileSetTest, EachMeasuredTypeUsesItsOwnProfileOnlyTheOthersAreTransferred) {
  // beta measured 4x slower per sample than alpha; its peaks alone would say 2.5x.
  const Job job = JobFromProfiles({OnType("alpha", 1e-3), OnType("beta", 4e-3)});
  ASSERT_EQ(job.profiles.size(), 2u);
  const auto speeds = DeviceSpeeds(job, FourTypes());
  ASSERT_EQ(speeds.size(), 4u);
  EXPECT_NEAR(speeds.at("alpha").per_sample_s, 1e-3, 1e-15);
  EXPECT_EQ(speeds.at("alpha").source, "profiled (set.json: 1 batch, 32: proportional)");
  EXPECT_NEAR(speeds.at("beta").per_sample_s, 4e-3, 1e-15);  // its own, not alpha's / 0.4
  EXPECT_EQ(speeds.at("beta").reference, "");
  // gamma from beta (closer in peaks), delta from alpha, each by its FLOP/s ratio.
  EXPECT_EQ(speeds.at("gamma").reference, "beta");
  EXPECT_NEAR(speeds.at("gamma").per_sample_s, 4e-3 / (5.0 / 4.0), 1e-15);
  EXPECT_EQ(speeds.at("gamma").source, "scaled from beta's profile (set.json): FLOP/s x1.25");
  EXPECT_EQ(speeds.at("delta").reference, "alpha");
  EXPECT_NEAR(speeds.at("delta").per_sample_s, 1e-3 / 2, 1e-15);
  // A transfer carries the uncertainty of a transfer between types on top of the profile's.
  EXPECT_GT(speeds.at("gamma").log_sigma, 0.2);
  EXPECT_LT(speeds.at("beta").log_sigma, 0.1);
  const ProfileSources from = ProfileSourcesOf(job, FourTypes());
  EXPECT_EQ(ProfileSourcesText(from),
            "measured on alpha, beta; transferred to delta (from alpha), gamma (from beta)");
  EXPECT_EQ(ProfileSourcesText(ProfileSourcesOfSpeeds(speeds)), ProfileSourcesText(from));

  // The plan says so in its JSON.
  Job planned = job;
  planned.deadline_s = 1e6;
  const Recommendation rec = Recommend(planned, FourTypes());
  const json plan = PlanJson(planned, rec, rec.ranked.front());
  EXPECT_EQ(plan["profiled"]["measured"], json({"alpha", "beta"}));
  EXPECT_EQ(plan["profiled"]["transferred"], json({{"delta", "alpha"}, {"gamma", "beta"}}));
}

TEST(ProfileSetTest, ATypeTheClusterLacksOrMeasuredTwiceIsBadInput) {
  EXPECT_EQ(ErrorOf([] {
              JobFromProfiles({OnType("alpha", 1e-3), OnType("alpha", 2e-3)});
            }),
            "/runs/set.json: profiles[1].gpu_type: \"alpha\" is measured twice (profiles[0] "
            "has it too): one profile per GPU type");
  const Job job = JobFromProfiles({OnType("alpha", 1e-3), OnType("omega", 4e-3)});
  EXPECT_NE(ErrorOf([&] {
              DeviceSpeeds(job, FourTypes());
            }).find("/runs/set.json: gpu_type: \"omega\" is not in the cluster"),
            std::string::npos);
  EXPECT_THROW(JobFromProfiles({}), UsageError);
}

TEST(SlurmProfileTest, TheJobRunsTheProgramUnderDlhLaunchOnItsType) {
  ProfileJob j;
  j.type = "alpha";
  j.estimate = "/opt/dlh/bin/dlh-estimate";
  j.launch = "/opt/dlh/bin/dlh-launch";
  j.out = "/runs/p.alpha.json";
  j.log = "/runs/p%.alpha.log";
  j.time_limit = "00:10:00";
  j.partition = "gpu";
  j.steps = 12;
  j.warmup = 3;
  j.command = {"python3", "train.py", "--name", "it's"};
  const std::vector<std::string> want = {
      "sbatch",
      "--parsable",
      "--gres=gpu:alpha:1",
      "--exclusive",
      "-N",
      "1",
      "-n",
      "1",
      "--job-name=dlh-profile-alpha",
      "--time=00:10:00",
      "--partition=gpu",
      "--output=/runs/p%%.alpha.log",
      "--wrap='/opt/dlh/bin/dlh-estimate' profile --slurm-job 'alpha' --launch "
      "'/opt/dlh/bin/dlh-launch' --out '/runs/p.alpha.json' --steps 12 --warmup 3 -- "
      "'python3' 'train.py' '--name' 'it'\\''s'"};
  EXPECT_EQ(ProfileSbatchArgs(j), want);
  const std::vector<std::string> run = {"srun",
                                        "-n",
                                        "1",
                                        "--mpi=pmix",
                                        "/opt/dlh/bin/dlh-launch",
                                        "run",
                                        "--profile",
                                        "12",
                                        "--profile-warmup",
                                        "3",
                                        "--gpu-type",
                                        "alpha",
                                        "--profile-out",
                                        "/runs/x.json",
                                        "--",
                                        "python3",
                                        "train.py",
                                        "--name",
                                        "it's"};
  EXPECT_EQ(ProfileRunArgs(j, "/runs/x.json"), run);
}

// A job of `type` with the default steps, the programs from PATH and files at the root.
ProfileJob JobOn(const std::string& type) {
  ProfileJob j;
  j.type = type;
  j.estimate = "dlh-estimate";
  j.launch = "dlh-launch";
  j.out = "/p." + type + ".json";
  j.log = "/p." + type + ".log";
  j.time_limit = "00:10:00";
  return j;
}

TEST(SlurmProfileTest, RoundsRunTheProgramAgainJoiningTheFirstRunsPoints) {
  ProfileJob j = JobOn("beta");
  j.rounds = 3;
  j.command = {"./train"};
  const std::string wrap = ProfileSbatchArgs(j).back();
  EXPECT_NE(wrap.find(" --steps 20 --warmup 5 --rounds 3 -- './train'"), std::string::npos) << wrap;
  j.rounds = 1;  // one round: the job's line as before rounds existed
  EXPECT_EQ(ProfileSbatchArgs(j).back().find("--rounds"), std::string::npos);
  // The first round writes the file; the later ones join it.
  const std::vector<std::string> first = ProfileRunArgs(j, "/r.json");
  const std::vector<std::string> later = ProfileRunArgs(j, "/r.json", true);
  EXPECT_EQ(std::count(first.begin(), first.end(), "--profile-join"), 0);
  ASSERT_EQ(later.size(), first.size() + 1);
  const auto dashes = std::find(later.begin(), later.end(), "--");
  ASSERT_NE(dashes, later.end());
  EXPECT_EQ(*(dashes - 1), "--profile-join");  // an option of dlh-launch, not of the program
  EXPECT_EQ(later.back(), "./train");
}

TEST(SlurmProfileTest, BatchesGoIntoTheCommandTakingTurnsRoundByRound) {
  ProfileJob j = JobOn("alpha");
  j.rounds = 3;
  j.batches = {32, 128};
  j.command = {"python3", "train.py", "--batch", "{batch}", "--tag=b{batch}x{batch}"};
  EXPECT_TRUE(HasBatchPlaceholder(j.command));
  EXPECT_FALSE(HasBatchPlaceholder({"python3", "train.py", "{batches}x", "{ batch}"}));
  const std::string wrap = ProfileSbatchArgs(j).back();
  EXPECT_NE(wrap.find(" --rounds 3 --batches 32,128 -- 'python3' 'train.py' '--batch' '{batch}'"),
            std::string::npos)
      << wrap;
  // Each round runs every batch once, in turns: a drift over the job leans on no batch alone.
  EXPECT_EQ(ProfileRunOrder(j), (std::vector<int>{32, 128, 128, 32, 32, 128}));
  const std::vector<std::string> run = ProfileRunArgs(j, "/r.json", true, 128);
  const std::vector<std::string> tail(run.end() - 4, run.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"train.py", "--batch", "128", "--tag=b128x128"}));
  // Batch 0 (no --batches): the command as given, and one run a round.
  EXPECT_EQ(ProfileRunArgs(j, "/r.json").back(), "--tag=b{batch}x{batch}");
  j.batches.clear();
  EXPECT_EQ(ProfileRunOrder(j), (std::vector<int>{0, 0, 0}));
}

TEST(SlurmProfileTest, EachTypesFilesLieNextToTheSet) {
  EXPECT_EQ(ProfileTypePath("runs/train.json", "alpha", ".json"), "runs/train.alpha.json");
  EXPECT_EQ(ProfileTypePath("/r/train.profiles", "beta", ".log"), "/r/train.profiles.beta.log");
  EXPECT_EQ(ProfileTypePath(".json", "a", ".json"), ".json.a.json");
}

}  // namespace
}  // namespace dlh
