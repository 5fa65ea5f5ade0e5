// Unit tests for the observation store: launcher/observe/ (records, the store's rules) and
// estimator/observe/ (reading it back, robust statistics, corrected predictions).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/spec.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/job_time.hpp"
#include "estimator/observe/correction.hpp"
#include "estimator/observe/model_key.hpp"
#include "estimator/observe/phases.hpp"
#include "estimator/observe/robust.hpp"
#include "estimator/observe/store_reader.hpp"
#include "launcher/observe/record.hpp"
#include "launcher/observe/store.hpp"
#include "tests/util/repo_file.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

TrainSpec Tiny() {
  return ParseSpec(R"({"name": "tiny", "input": {"channels": 1, "height": 8, "width": 8},
    "classes": 4, "layers": [{"type": "conv2d", "filters": 4, "kernel": 3}, {"type": "relu"},
    {"type": "flatten"}, {"type": "dense", "units": 4}],
    "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 16, "epochs": 1,
    "dataset": "x.h5"})",
                   "tiny.json", "");
}

Job TinyJob() {
  Job job;
  job.spec = Tiny();
  job.features = ComputeFeatures(job.spec);
  job.samples = 640;
  job.epochs = 1;
  return job;
}

// Another model than Tiny(): a wider dense layer after the same convolution.
std::string WiderSpecText() {
  return R"({"name": "wider", "input": {"channels": 1, "height": 8, "width": 8}, "classes": 4,
    "layers": [{"type": "conv2d", "filters": 4, "kernel": 3}, {"type": "relu"},
    {"type": "flatten"}, {"type": "dense", "units": 64}, {"type": "relu"},
    {"type": "dense", "units": 4}], "optimizer": {"type": "sgd", "lr": 0.1},
    "batch_size": 16, "epochs": 1, "dataset": "x.h5"})";
}

Job WiderJob() {
  Job job = TinyJob();
  job.spec = ParseSpec(WiderSpecText(), "wider.json", "");
  job.features = ComputeFeatures(job.spec);
  return job;
}

Observation Record(const std::string& key, double step_s, int64_t batch = 10) {
  Observation o;
  o.created = "2026-11-28T09:30:00Z";
  o.user = "alice";
  o.command = "train";
  o.model_key = key;
  o.model_name = "tiny";
  o.gpu_type = "alpha";
  o.device = "cpu";
  o.ranks = 1;
  o.threads_per_rank = 2;
  o.hosts = {"node1"};
  o.global_batch = o.per_rank_batch = batch;
  o.step_s = step_s;
  o.steps = 40;
  o.startup_s = 1.5;
  o.eval_s = 0.4;
  o.evaluations = 2;
  o.checkpoint_s = 0.3;
  o.checkpoints = 3;
  o.total_s = 12;
  return o;
}

Cluster OneType(const std::string& store = "") {
  Cluster c;
  c.name = "one";
  GpuType g;
  g.name = "alpha";
  g.memory_gb = 16;
  g.peak_tflops = 10;
  g.memory_bandwidth_gbs = 500;
  g.active_watts = 300;
  g.idle_watts = 50;
  c.gpu_types = {g};
  NodeType n;
  n.name = "n";
  n.gpu = "alpha";
  n.gpus_per_node = 1;
  n.nodes = 1;
  c.node_types = {n};
  c.observations = store;
  return c;
}

std::map<std::string, DeviceSpeed> Speeds() {
  DeviceSpeed s;
  s.fixed_s = 0.001;
  s.per_sample_s = 0.0001;  // 2 ms at batch 10
  s.source = "calibrated (cpu.json)";
  s.log_sigma = 0.1;
  return {{"alpha", s}};
}

StoredObservation Stored(const Observation& o, uid_t owner) {
  StoredObservation s;
  s.record = o;
  s.owner = owner;
  s.path = "store/x.json";
  return s;
}

// ---------------------------------------------------------------- records

TEST(ObservationRecordTest, JsonRoundTripKeepsEveryField) {
  Observation o = Record("0123456789abcdef", 0.02);
  o.energy_j = 120.5;
  o.has_prediction = true;
  o.predicted_step_s = 0.018;
  o.predicted_comm_s = 0.002;
  o.predicted_total_s = 11;
  o.features = {{"params", 620}};
  o.steps_s = 0.85;
  o.later_steps = 30;
  o.later_steps_s = 0.6;
  o.first_eval_s = 0.15;
  o.allreduce_s = 0.004;
  const Observation back = ObservationFromJson(ObservationToJson(o), "r.json");
  EXPECT_DOUBLE_EQ(back.allreduce_s, 0.004);
  EXPECT_DOUBLE_EQ(back.step_comm_s(), 0.004);  // measured, not the plan's 0.002
  EXPECT_DOUBLE_EQ(back.steps_s, 0.85);
  EXPECT_DOUBLE_EQ(back.mean_step_s(), 0.85 / 40);
  EXPECT_DOUBLE_EQ(back.steady_step_s(), 0.6 / 30);
  EXPECT_DOUBLE_EQ(back.first_eval_s, 0.15);
  EXPECT_EQ(ObservationToJson(back), ObservationToJson(o));
  EXPECT_EQ(back.model_key, "0123456789abcdef");
  EXPECT_DOUBLE_EQ(back.energy_j, 120.5);
  EXPECT_DOUBLE_EQ(back.predicted_comm_s, 0.002);
  EXPECT_EQ(back.hosts, std::vector<std::string>{"node1"});
}

TEST(ObservationRecordTest, UnknownEnergyAndStartUpAreNull) {
  Observation o = Record("0123456789abcdef", 0.02);
  o.startup_s = -1;
  const nlohmann::json j = ObservationToJson(o);
  EXPECT_TRUE(j["measured"]["energy_j"].is_null());
  EXPECT_TRUE(j["measured"]["startup_s"].is_null());
  EXPECT_TRUE(j["measured"]["steps_s"].is_null());  // a record of an older writer: the median
  EXPECT_DOUBLE_EQ(ObservationFromJson(j, "r.json").mean_step_s(), 0.02);
  // No steps after a first epoch, no first evaluation timed apart: the mean (here the median).
  EXPECT_TRUE(j["measured"]["later_steps_s"].is_null() && j["measured"]["later_steps"] == 0);
  EXPECT_TRUE(j["measured"]["first_eval_s"].is_null());
  EXPECT_DOUBLE_EQ(ObservationFromJson(j, "r.json").steady_step_s(), 0.02);
  EXPECT_TRUE(j["predicted"].is_null());
  EXPECT_LT(ObservationFromJson(j, "r.json").startup_s, 0);
  // No allreduce measured (an older writer) and no plan: none.
  EXPECT_TRUE(j["measured"]["allreduce_s"].is_null());
  EXPECT_EQ(ObservationFromJson(j, "r.json").step_comm_s(), 0);
}

TEST(ObservationRecordTest, ForeignOrDamagedRecordsNameTheField) {
  const nlohmann::json good = ObservationToJson(Record("0123456789abcdef", 0.02));
  auto message = [](const nlohmann::json& j) {
    try {
      ObservationFromJson(j, "r.json");
    } catch (const RecordError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  nlohmann::json j = good;
  j["dlh_observation"] = 2;
  EXPECT_NE(message(j).find("r.json: dlh_observation: must be 1"), std::string::npos);
  j = good;
  j.erase("dlh_observation");
  EXPECT_NE(message(j).find("dlh_observation: missing"), std::string::npos);
  j = good;
  j["measured"].erase("step_s");
  EXPECT_NE(message(j).find("measured.step_s: missing"), std::string::npos);
  j = good;
  j["measured"]["step_s"] = 0;
  EXPECT_NE(message(j).find("measured.step_s: must be a positive number"), std::string::npos);
  j = good;
  j["model"]["key"] = "XYZ";
  EXPECT_NE(message(j).find("model.key"), std::string::npos);
  j = good;
  j["where"]["ranks"] = "two";
  EXPECT_NE(message(j).find("where.ranks"), std::string::npos);
  EXPECT_NE(message(nlohmann::json::array()).find("must be an object"), std::string::npos);
  // A part larger than its whole.
  j = good;
  j["measured"]["later_steps"] = 41;  // of 40 steps
  EXPECT_EQ(message(j), "r.json: measured.later_steps: must be an integer in [0, 40], got 41");
  j = good;
  j["measured"]["steps_s"] = 0.8;
  j["measured"]["later_steps"] = 20;
  j["measured"]["later_steps_s"] = 0.9;
  EXPECT_EQ(message(j), "r.json: measured.later_steps_s: must be at most steps_s (0.8), got 0.9");
  j = good;
  j["measured"]["steps_s"] = 0.8;
  j["measured"]["allreduce_s"] = 0.03;  // of 40 steps of 20 ms on average
  EXPECT_EQ(message(j),
            "r.json: measured.allreduce_s: must be at most the mean step (steps_s / steps, 0.02), "
            "got 0.03");
  j = good;
  j["measured"]["first_eval_s"] = j["measured"]["eval_s"].get<double>() + 1;
  EXPECT_NE(message(j).find("r.json: measured.first_eval_s: must be at most eval_s"),
            std::string::npos);
  j["measured"]["first_eval_s"] = "soon";
  EXPECT_EQ(message(j),
            "r.json: measured.first_eval_s: must be a non-negative number, got \"soon\"");
}

TEST(ObservationRecordTest, ModelKeyIsSixteenHexDigitsAndIgnoresTheBatch) {
  Job a = TinyJob(), b = TinyJob();
  b.spec.batch_size = 512;
  b.features = ComputeFeatures(b.spec);
  const std::string key = JobModelKey(a);
  EXPECT_EQ(key.size(), 16u);
  EXPECT_EQ(key, JobModelKey(b));
  EXPECT_EQ(key, FeaturesJsonModelKey(FeaturesRecordJson(a.features)));
  // A record written before the features counted what the CPU engine skips, or the
  // convolutions' weights, has the key of its features as they were.
  nlohmann::json older = FeaturesRecordJson(a.features);
  for (const char* derived :
       {"cpu_skipped_conv_flops_bwd", "cpu_skipped_dense_flops_bwd", "cpu_skipped_other_flops_bwd",
        "cpu_skipped_workspace_elements", "conv_weight_elements"}) {
    EXPECT_TRUE(older.contains(derived)) << derived;
    older.erase(derived);
  }
  EXPECT_EQ(key, ModelKey(older.dump()));
  EXPECT_EQ(ModelKey(""), "cbf29ce484222325");  // FNV-1a's offset basis: the empty string
}

// ---------------------------------------------------------------- the store's rules

TEST(ObservationStoreTest, WritesAWholeRecordReadableByEveryone) {
  TempDir dir("dlh-obs");
  ::chmod(dir.path().c_str(), 01777);
  const StoreWrite w = WriteObservation(dir.path(), Record("0123456789abcdef", 0.02));
  ASSERT_TRUE(w.written) << w.warning;
  struct stat st {};
  ASSERT_EQ(::stat(w.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++files;
    EXPECT_TRUE(IsRecordName(e.path().filename().string())) << e.path();  // no temporary left
  }
  EXPECT_EQ(files, 1);
  const StoreContents s = ReadStore(dir.path());
  ASSERT_EQ(s.records.size(), 1u);
  EXPECT_TRUE(s.problems.empty());
  EXPECT_EQ(s.records[0].owner, getuid());
}

TEST(ObservationStoreTest, AStoreOthersCanWriteWithoutTheStickyBitIsRefused) {
  TempDir dir("dlh-obs");
  ::chmod(dir.path().c_str(), 0777);
  const StoreCheck c = CheckStore(dir.path());
  EXPECT_EQ(c.state, StoreState::kUnsafe);
  EXPECT_NE(c.message.find(dir.path()), std::string::npos);
  EXPECT_NE(c.message.find("others could replace a user's records; chmod +t"), std::string::npos);
  EXPECT_EQ(c.message.find('\n'), std::string::npos);
  const StoreWrite w = WriteObservation(dir.path(), Record("0123456789abcdef", 0.02));
  EXPECT_FALSE(w.written);
  EXPECT_NE(w.warning.find("chmod +t"), std::string::npos);
  EXPECT_EQ(CountRecords(dir.path()), 0);
  ::chmod(dir.path().c_str(), 0775);  // group-writable is the same risk
  EXPECT_EQ(CheckStore(dir.path()).state, StoreState::kUnsafe);
  ::chmod(dir.path().c_str(), 01777);
  EXPECT_EQ(CheckStore(dir.path()).state, StoreState::kOk);
  ::chmod(dir.path().c_str(), 0755);
  EXPECT_EQ(CheckStore(dir.path()).state, StoreState::kOk);
}

TEST(ObservationStoreTest, AMissingStoreIsAWarningNotAnError) {
  TempDir dir("dlh-obs");
  const StoreWrite w = WriteObservation(dir / "none", Record("0123456789abcdef", 0.02));
  EXPECT_FALSE(w.written);
  EXPECT_NE(w.warning.find("does not exist"), std::string::npos);
  EXPECT_EQ(ReadStore(dir / "none").check.state, StoreState::kMissing);
}

TEST(ObservationStoreTest, AFullStoreGetsNoMoreRecords) {
  TempDir dir("dlh-obs");
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(WriteObservation(dir.path(), Record("0123456789abcdef", 0.02), 3).written);
  const StoreWrite w = WriteObservation(dir.path(), Record("0123456789abcdef", 0.02), 3);
  EXPECT_FALSE(w.written);
  EXPECT_NE(w.warning.find("holds 3 records"), std::string::npos);
  EXPECT_EQ(CountRecords(dir.path()), 3);
}

// Another user's files neither stop a user's records nor push them out of a read: the limit
// counts a user's own records, and a read takes all of one's own and the newest few of each
// other user's, whatever the files are named.
TEST(ObservationStoreTest, AnotherUsersFloodNeitherStopsNorHidesMyRecords) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown records to another user";
  TempDir dir("dlh-obs");
  const uid_t other = 65534;
  ASSERT_TRUE(WriteObservation(dir.path(), Record("0123456789abcdef", 0.02), 3).written);
  const Observation theirs = Record("fedcba9876543210", 0.05);
  const size_t flood = kMaxRecordsPerOtherUser + 20;
  for (size_t i = 0; i < flood; ++i) {
    // Named to sort after every real record, as a flood would be.
    const std::string path = dir / ("99999999T999999-" + std::to_string(i) + ".json");
    std::ofstream(path) << ObservationToJson(theirs).dump();
    ASSERT_EQ(::chown(path.c_str(), other, other), 0);
  }
  EXPECT_EQ(CountRecordsOf(dir.path(), geteuid()), 1);
  EXPECT_TRUE(WriteObservation(dir.path(), Record("0123456789abcdef", 0.02), 3).written);
  EXPECT_EQ(ReadStore(dir.path()).records.size(), flood + 2);  // observations, refit: all
  const StoreContents s = ReadStore(dir.path(), StoreReading::kForPlanning);
  size_t mine = 0, others = 0;
  for (const StoredObservation& r : s.records) (r.owner == geteuid() ? mine : others)++;
  EXPECT_EQ(mine, 2u);
  EXPECT_EQ(others, kMaxRecordsPerOtherUser);
  ASSERT_EQ(s.problems.size(), 1u);
  EXPECT_NE(s.problems[0].find("20 of other users left out"), std::string::npos) << s.problems[0];
}

TEST(ObservationStoreTest, ARecordOverTheLimitIsNotWritten) {
  TempDir dir("dlh-obs");
  Observation o = Record("0123456789abcdef", 0.02);
  o.hosts.assign(5000, "a-rather-long-node-name");
  const StoreWrite w = WriteObservation(dir.path(), o);
  EXPECT_FALSE(w.written);
  EXPECT_NE(w.warning.find("more than 65536"), std::string::npos);
  EXPECT_EQ(CountRecords(dir.path()), 0);
}

TEST(ObservationStoreTest, ReadingSkipsDamagedAndForeignRecordsOneLineEach) {
  TempDir dir("dlh-obs");
  ASSERT_TRUE(WriteObservation(dir.path(), Record("0123456789abcdef", 0.02)).written);
  dir.Write("bad-json.json", "{\"dlh_observation\": 1,");
  nlohmann::json foreign = ObservationToJson(Record("0123456789abcdef", 0.02));
  foreign["dlh_observation"] = 7;
  dir.Write("foreign.json", foreign.dump());
  nlohmann::json missing = ObservationToJson(Record("0123456789abcdef", 0.02));
  missing["batch"].erase("per_rank");
  dir.Write("missing.json", missing.dump());
  dir.Write("huge.json", std::string(kMaxObservationBytes + 10, ' '));
  dir.Write(".half.json.tmp", "{");  // a temporary file: not a record
  fs::create_symlink(dir / "foreign.json", dir / "link.json");
  const StoreContents s = ReadStore(dir.path());
  EXPECT_EQ(s.records.size(), 1u);
  ASSERT_EQ(s.problems.size(), 5u);
  auto has = [&](const std::string& file, const std::string& what) {
    for (const std::string& p : s.problems)
      if (p.find(file) != std::string::npos && p.find(what) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("bad-json.json", "not valid JSON"));
  EXPECT_TRUE(has("foreign.json", "dlh_observation: must be 1"));
  EXPECT_TRUE(has("missing.json", "batch.per_rank: missing"));
  EXPECT_TRUE(has("huge.json", "larger than 64 KiB"));
  EXPECT_TRUE(has("link.json", "symbolic link"));
  for (const std::string& p : s.problems) EXPECT_EQ(p.find('\n'), std::string::npos) << p;
}

TEST(ObservationStoreTest, ARecordWithoutFeaturesGetsThemFromItsSpec) {
  TempDir dir("dlh-obs");
  Observation o = Record("0000000000000000", 0.02);
  o.spec = nlohmann::json::parse(Tiny().json);
  ASSERT_TRUE(WriteObservation(dir.path(), o).written);
  const StoreContents s = ReadStore(dir.path());
  ASSERT_EQ(s.records.size(), 1u) << (s.problems.empty() ? "" : s.problems[0]);
  EXPECT_EQ(s.records[0].record.model_key, JobModelKey(TinyJob()));
  EXPECT_TRUE(s.records[0].record.features.is_object());
}

// An Adam run of the same layers is another model's history (model_key.hpp): its key is
// marked, as the store reads it back from the record's spec; SGD with momentum keeps the
// features' own key.
TEST(ObservationStoreTest, AnAdamRunHasAKeyOfItsOwn) {
  Job momentum = TinyJob(), adam = TinyJob();
  momentum.spec.optimizer.momentum = 0.9;
  adam.spec.optimizer.kind = OptimizerSpec::Kind::Adam;
  const std::string features = FeaturesModelKey(momentum.features);
  EXPECT_EQ(JobModelKey(momentum), features);
  EXPECT_EQ(JobModelKey(adam), AdamModelKey(features));
  EXPECT_NE(JobModelKey(adam), features);
  TempDir dir("dlh-obs");
  Observation o = Record("0000000000000000", 0.02);
  o.spec = nlohmann::json::parse(Tiny().json);
  o.spec["optimizer"] = {{"type", "adam"}, {"lr", 0.001}};
  ASSERT_TRUE(WriteObservation(dir.path(), o).written);
  const StoreContents s = ReadStore(dir.path());
  ASSERT_EQ(s.records.size(), 1u) << (s.problems.empty() ? "" : s.problems[0]);
  EXPECT_EQ(s.records[0].record.model_key, JobModelKey(adam));
  EXPECT_FALSE(SpecJsonTrainsWithAdam(nlohmann::json()));
  EXPECT_FALSE(SpecJsonTrainsWithAdam(nlohmann::json::parse(Tiny().json)));
}

// ---------------------------------------------------------------- robust statistics

TEST(ObservationRobustTest, MadIgnoresOneWildValue) {
  EXPECT_DOUBLE_EQ(RobustSigma({1, 2, 3, 4, 1000}), 1.4826);
  EXPECT_EQ(WithoutOutliers({1, 2, 3, 4, 1000}), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(RobustSigma({5}), 0);
}

TEST(ObservationRobustTest, TheTypeCorrectionIsShrunkWhenFewJobsExist) {
  Residuals r;
  r.own = {std::log(1.2)};
  EXPECT_NEAR(TypeCorrection(r).log_factor, std::log(1.2) / 6, 1e-12);  // 1 / (1 + 5)
  r.own.assign(45, std::log(1.2));
  EXPECT_NEAR(TypeCorrection(r).log_factor, std::log(1.2) * 0.9, 1e-12);  // 45 / 50
}

TEST(ObservationRobustTest, OthersMoveATypeCorrectionByAtMostTheCap) {
  Residuals r;
  r.others.assign(50, std::log(10.0));
  EXPECT_NEAR(TypeCorrection(r).log_factor, kOthersCapLog, 1e-12);
  r.own.assign(20, 0.0);
  EXPECT_NEAR(TypeCorrection(r).log_factor, kOthersCapLog, 1e-12);
}

// ---------------------------------------------------------------- corrected predictions

TEST(ObservationCorrectionTest, ASecondRunIsPredictedAtTheFirstOnesStep) {
  const Job job = TinyJob();
  StoreContents store;
  store.records.push_back(Stored(Record(JobModelKey(job), 0.005), getuid()));  // 2.5x
  auto speeds = Speeds();
  ApplyObservationsFrom(store, getuid(), job, OneType(), &speeds);
  const DeviceSpeed& s = speeds.at("alpha");
  EXPECT_NEAR(s.seconds(10), 0.005, 1e-12);
  EXPECT_EQ(s.observed_runs, 1);
  EXPECT_EQ(s.provenance, "from 1 earlier run of this spec on alpha");
  EXPECT_NEAR(s.log_sigma, std::hypot(0.1, kDefaultRunLogSigma), 1e-12);
}

// At the shape the caller ran the model at, the band is that of the runs: how far the learned
// prediction misses them and how much they scatter; at another shape, and from another
// user's runs, it keeps the calibration's error.
TEST(ObservationCorrectionTest, ARepeatsBandComesFromItsOwnRuns) {
  const Job job = TinyJob();
  StoreContents store;
  store.records.push_back(Stored(Record(JobModelKey(job), 0.005), getuid()));
  auto speeds = Speeds();
  ApplyObservationsFrom(store, getuid(), job, OneType(), &speeds);
  const DeviceSpeed& s = speeds.at("alpha");
  ASSERT_EQ(s.repeat_log_sigma.size(), 1u);
  // One run, predicted at its own step: the default spread of a few runs alone.
  EXPECT_NEAR(s.repeat_log_sigma.at(RunShape{1, 1, 10}), kDefaultRunLogSigma, 1e-12);
  EXPECT_NEAR(s.log_sigma, std::hypot(0.1, kDefaultRunLogSigma), 1e-12);
  // Two runs 20% apart at one shape, one at another batch: the shape's band holds the
  // prediction's miss of them (the median of all three sets it) and their spread.
  StoreContents two = store;
  two.records.push_back(Stored(Record(JobModelKey(job), 0.006), getuid()));
  two.records.push_back(Stored(Record(JobModelKey(job), 0.004 * 2, 20), getuid()));
  auto speeds2 = Speeds();
  ApplyObservationsFrom(two, getuid(), job, OneType(), &speeds2);
  const DeviceSpeed& s2 = speeds2.at("alpha");
  ASSERT_EQ(s2.repeat_log_sigma.size(), 2u);
  const double at10 = s2.repeat_log_sigma.at(RunShape{1, 1, 10});
  EXPECT_GT(at10, kDefaultRunLogSigma);
  EXPECT_LT(at10, 0.2);
  // Another user's runs narrow nothing.
  StoreContents theirs;
  theirs.records.push_back(Stored(Record(JobModelKey(job), 0.005), getuid() + 1));
  auto speeds3 = Speeds();
  ApplyObservationsFrom(theirs, getuid(), job, OneType(), &speeds3);
  EXPECT_TRUE(speeds3.at("alpha").repeat_log_sigma.empty());
}

// The plan's band (and so its time limit) takes the repeat's spread at that shape only.
TEST(ObservationCorrectionTest, ThePlanAtARepeatShapeTakesItsBand) {
  const Job job = TinyJob();
  const auto speeds = Speeds();
  const Allocation wide = Recommend(job, OneType(), speeds).fastest;
  ASSERT_EQ(wide.parts.size(), 1u);
  auto repeat = speeds;
  repeat.at("alpha").repeat_log_sigma[RunShape{wide.gpus, wide.parts[0].gpus_per_node,
                                               wide.parts[0].per_gpu_batch}] = 0.01;
  const Allocation narrow = Recommend(job, OneType(), repeat).fastest;
  EXPECT_DOUBLE_EQ(narrow.total_s, wide.total_s);
  EXPECT_LT(narrow.total_upper_s, wide.total_upper_s);
  auto elsewhere = speeds;
  elsewhere.at("alpha").repeat_log_sigma[RunShape{wide.gpus, wide.parts[0].gpus_per_node,
                                                  wide.parts[0].per_gpu_batch + 1}] = 0.01;
  EXPECT_DOUBLE_EQ(Recommend(job, OneType(), elsewhere).fastest.total_upper_s, wide.total_upper_s);
}

TEST(ObservationCorrectionTest, OtherModelsGetTheTypesShrunkCorrection) {
  const Job job = TinyJob();
  // Another model (a wider dense layer), each of its 5 jobs 2x slower than ITS OWN model's
  // prediction (here the roofline: OneType has no calibration): the type's correction is
  // half of that, and it is judged against the other model, not against this job's.
  const std::string wider = WiderSpecText();
  const Job other = WiderJob();
  const double other_predicted = CalibratedDeviceSpeeds(other, OneType()).at("alpha").seconds(10);
  StoreContents store;
  for (int i = 0; i < 5; ++i) {
    Observation r = Record("00000000000000aa", 2 * other_predicted);
    r.spec = nlohmann::json::parse(wider);
    store.records.push_back(Stored(r, getuid()));
  }
  auto speeds = Speeds();
  ApplyObservationsFrom(store, getuid(), job, OneType(), &speeds);
  const DeviceSpeed& s = speeds.at("alpha");
  EXPECT_NEAR(s.seconds(10), 0.002 * std::sqrt(2.0), 1e-9);
  EXPECT_EQ(s.provenance, "calibration alpha (cpu.json), corrected by 5 jobs (+41%)");
  // A record of another model without a spec (a program) cannot be judged: left out.
  StoreContents programs;
  programs.records.push_back(Stored(Record("00000000000000bb", 1.0), getuid()));
  auto unchanged = Speeds();
  ApplyObservationsFrom(programs, getuid(), job, OneType(), &unchanged);
  EXPECT_NEAR(unchanged.at("alpha").seconds(10), 0.002, 1e-12);
}

TEST(ObservationCorrectionTest, WithoutRecordsOnlyTheProvenanceIsSet) {
  auto speeds = Speeds();
  ApplyObservationsFrom(StoreContents(), getuid(), TinyJob(), OneType(), &speeds);
  EXPECT_NEAR(speeds.at("alpha").seconds(10), 0.002, 1e-15);
  EXPECT_EQ(speeds.at("alpha").provenance, "calibration alpha (cpu.json)");
  EXPECT_EQ(speeds.at("alpha").observed_runs, 0);
}

// A poisoned store: another user's 50 records claim this very model runs 10x slower.
TEST(ObservationCorrectionTest, AnotherUsersRecordsMoveAPredictionByNoMoreThanTheCap) {
  const Job job = TinyJob();
  const uid_t me = getuid(), other = me + 4242;
  StoreContents store;
  for (int i = 0; i < 50; ++i)
    store.records.push_back(Stored(Record(JobModelKey(job), 0.020), other));
  auto speeds = Speeds();
  ApplyObservationsFrom(store, me, job, OneType(), &speeds);
  EXPECT_LE(speeds.at("alpha").seconds(10), 0.002 * 1.15 + 1e-12);
  EXPECT_NE(speeds.at("alpha").provenance.find("by other users"), std::string::npos);
  // The caller's own 3 runs at 1.5x decide, whatever the others claim.
  for (int i = 0; i < 3; ++i) store.records.push_back(Stored(Record(JobModelKey(job), 0.003), me));
  speeds = Speeds();
  ApplyObservationsFrom(store, me, job, OneType(), &speeds);
  EXPECT_NEAR(speeds.at("alpha").seconds(10), 0.003, 1e-12);
  EXPECT_EQ(speeds.at("alpha").provenance, "from 3 earlier runs of this spec on alpha");
}

// The same through real files: the owner is the file's (chown), never its "user" field.
TEST(ObservationCorrectionTest, APoisonedStoreOnDiskIsCappedByFileOwner) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown records to another user";
  TempDir dir("dlh-obs");
  ::chmod(dir.path().c_str(), 01777);
  const Job job = TinyJob();
  const uid_t other = getuid() + 4242;
  for (int i = 0; i < 50; ++i) {
    Observation o = Record(JobModelKey(job), 0.020);
    o.user = "root";  // a lie: the reader goes by the file's owner
    const StoreWrite w = WriteObservation(dir.path(), o);
    ASSERT_TRUE(w.written) << w.warning;
    ASSERT_EQ(::chown(w.path.c_str(), other, other), 0);
  }
  auto speeds = Speeds();
  ApplyObservations(job, OneType(dir.path()), &speeds);
  const double poisoned = speeds.at("alpha").seconds(10);
  EXPECT_LE(poisoned, 0.002 * 1.15 + 1e-12);
  EXPECT_GT(poisoned, 0.002);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(WriteObservation(dir.path(), Record(JobModelKey(job), 0.003)).written);
  speeds = Speeds();
  ApplyObservations(job, OneType(dir.path()), &speeds);
  EXPECT_NEAR(speeds.at("alpha").seconds(10), 0.003, 1e-12);
}

// A poisoned store of another kind: another user's 50 records of this model, half at e^-6
// and half at e^+6 times its prediction. Their median moves nothing (+0%, within the cap),
// but their spread (8.9) went into the band whole: a job predicted at 62 minutes had its 90%
// upper end at 10 years and a time limit of 3,993 days; now 77 minutes and 81 minutes.
// Others widen the band by the cap at most, through the model's history and through the
// type's correction of another model alike.
TEST(ObservationCorrectionTest, AnotherUsersScatteredRecordsWidenTheBandByNoMoreThanTheCap) {
  Job job = TinyJob();
  job.samples = 16 * 1350000;  // 1.35 million steps at the spec's batch of 16: 2.6 ms each
  const uid_t me = getuid(), other = me + 4242;
  const double widest = std::hypot(Speeds().at("alpha").log_sigma, kOthersCapLog);
  for (const Job& recorded : {job, WiderJob()}) {
    const double predicted =
        recorded.spec.name == job.spec.name
            ? Speeds().at("alpha").seconds(10)
            : CalibratedDeviceSpeeds(recorded, OneType()).at("alpha").seconds(10);
    StoreContents store;
    for (int i = 0; i < 50; ++i) {
      Observation r = Record(JobModelKey(recorded), predicted * std::exp(i % 2 ? 6 : -6));
      if (recorded.spec.name != job.spec.name) r.spec = nlohmann::json::parse(WiderSpecText());
      store.records.push_back(Stored(r, other));
    }
    auto speeds = Speeds();
    ApplyObservationsFrom(store, me, job, OneType(), &speeds);
    EXPECT_LE(speeds.at("alpha").log_sigma, widest + 1e-12) << recorded.spec.name;
    EXPECT_NEAR(speeds.at("alpha").seconds(10), 0.002, 1e-9) << recorded.spec.name;
    // The time limit is at most the one of a band widened by the cap.
    auto capped = Speeds();
    capped.at("alpha").log_sigma = widest;
    const Allocation poisoned = Recommend(job, OneType(), speeds).fastest;
    const Allocation bound = Recommend(job, OneType(), capped).fastest;
    EXPECT_LE(poisoned.total_upper_s, bound.total_upper_s * (1 + 1e-12)) << recorded.spec.name;
    EXPECT_LE(JobTimeLimit(job, poisoned).minutes, JobTimeLimit(job, bound).minutes)
        << recorded.spec.name;
  }
}

using dlh::test::RepoFile;

// A CPU type whose nodes are one 2-core machine (a test cluster, runtime.shared_host_cores),
// alpha timed by a CPU calibration (the tests' fixture, 2 threads): ranks of a job share
// those cores, and every model's prediction comes from the same calibration.
Cluster SharedCores() {
  Cluster c = OneType();
  c.runtime.shared_host_cores = 2;
  c.node_types[0].gpus_per_node = 2;
  c.node_types[0].nodes = 2;
  c.gpu_types[0].calibration = RepoFile("tests/fixtures/cpu-calibration.json");
  return c;
}

std::map<std::string, DeviceSpeed> CpuSpeeds(const Job& job = TinyJob()) {
  auto speeds = CalibratedDeviceSpeeds(job, SharedCores());
  EXPECT_GT(speeds.at("alpha").cpu_threads, 0);
  return speeds;
}

// The calibration's whole-step thread scaling reaches the plan; a file made before the
// engine's pool took the fewer threads (2026-12-01) measured nothing, and is not used.
TEST(ObservationCorrectionTest, ThreadScalingOfTheCalibrationIsPlannedWith) {
  TempDir dir("dlh-thread-scaling-");
  nlohmann::json cal =
      nlohmann::json::parse(std::ifstream(RepoFile("tests/fixtures/cpu-calibration.json")));
  cal["thread_scaling"] = {{"threads", {1, 2}}, {"step_time_ratio", {1.6, 1.0}}, {"models", 10}};
  auto speeds_of = [&](const std::string& created) {
    cal["created"] = created;
    const std::string path = dir.path() + "/cal.json";
    std::ofstream(path) << cal.dump();
    Cluster c = SharedCores();
    c.gpu_types[0].calibration = path;
    return CalibratedDeviceSpeeds(TinyJob(), c).at("alpha").cpu_scaling;
  };
  const ThreadScaling now = speeds_of("2026-12-05T07:00:00Z");
  EXPECT_EQ(now.measured_step_ratio, (std::map<int, double>{{1, 1.6}, {2, 1.0}}));
  EXPECT_DOUBLE_EQ(ThreadTimeRatio(now, 2, 1), 1.6);
  EXPECT_TRUE(speeds_of("2026-11-30T12:00:00Z").measured_step_ratio.empty());
}

Observation AtRanks(Observation o, int ranks, double factor, const DeviceSpeed& predicted,
                    const Cluster& c) {
  o.ranks = o.ranks_per_node = ranks;
  o.step_s = 1;  // PredictedCompute does not read it
  o.step_s = factor * PredictedCompute(o, predicted, c, "alpha");
  return o;
}

// Ranks side by side on shared cores ran 1.9x their prediction, one rank alone 1.2x: a run
// at either shape again is predicted at what that shape measured, not at a median of both.
TEST(ObservationCorrectionTest, ARepeatIsPredictedAtItsOwnShape) {
  const Job job = TinyJob();
  const Cluster c = SharedCores();
  const DeviceSpeed before = CpuSpeeds().at("alpha");
  const Observation one = AtRanks(Record(JobModelKey(job), 0), 1, 1.2, before, c);
  const Observation two = AtRanks(Record(JobModelKey(job), 0), 2, 1.9, before, c);
  StoreContents store;
  store.records.push_back(Stored(one, getuid()));
  store.records.push_back(Stored(two, getuid()));
  auto speeds = CpuSpeeds();
  ApplyObservationsFrom(store, getuid(), job, c, &speeds);
  const DeviceSpeed& s = speeds.at("alpha");
  EXPECT_NEAR(PredictedCompute(one, s, c, "alpha"), one.step_s, 1e-12);
  EXPECT_NEAR(PredictedCompute(two, s, c, "alpha"), two.step_s, 1e-12);
  EXPECT_EQ(s.provenance, "from 2 earlier runs of this spec on alpha; side by side: 2 ranks +58%");
  // The record's mean step is what a job takes: with all its steps' sum, that is the one used.
  Observation slow_tail = one;
  slow_tail.steps_s = double(one.steps) * one.step_s * 1.1;
  store.records = {Stored(slow_tail, getuid())};
  speeds = CpuSpeeds();
  ApplyObservationsFrom(store, getuid(), job, c, &speeds);
  EXPECT_NEAR(PredictedCompute(one, speeds.at("alpha"), c, "alpha"), one.step_s * 1.1, 1e-12);
}

// A store holding the wider model's runs alone (1.2x its prediction) and 2 ranks side by side
// (`two_ranks` x), each with a predicted allreduce of `comm_share` times its compute, and one
// run of the tiny model alone, at its prediction; `two` is that run at 2 ranks.
struct TwoModels {
  Cluster cluster = SharedCores();
  Job tiny = TinyJob(), wider = WiderJob();
  DeviceSpeed tiny_before, wider_before;
  StoreContents store;
  Observation two;
};

TwoModels WiderRanBothWays(double two_ranks, double comm_share) {
  TwoModels m;
  m.wider_before = CpuSpeeds(m.wider).at("alpha");
  for (auto [ranks, factor] : {std::pair{1, 1.2}, std::pair{2, two_ranks}}) {
    Observation r =
        AtRanks(Record(JobModelKey(m.wider), 0), ranks, factor, m.wider_before, m.cluster);
    r.has_prediction = comm_share > 0;
    r.predicted_comm_s = comm_share * r.step_s / factor;
    r.step_s += r.predicted_comm_s;
    r.spec = nlohmann::json::parse(WiderSpecText());
    m.store.records.push_back(Stored(r, getuid()));
  }
  m.tiny_before = CpuSpeeds().at("alpha");
  const Observation mine =
      AtRanks(Record(JobModelKey(m.tiny), 0), 1, 1.0, m.tiny_before, m.cluster);
  m.store.records.push_back(Stored(mine, getuid()));
  m.two = mine;
  m.two.ranks = m.two.ranks_per_node = 2;
  return m;
}

// What running side by side costs is learned from a model that ran both ways and carried to
// another that ran alone only, shrunk as a type's correction is: the other model's 2-rank job
// is predicted (1.9 / 1.2)^(1 / (1 + kShrinkJobs)) times its own run alone, scaled by the
// curves (one model taught it; how crowded cores slow a step differs from model to model).
TEST(ObservationCorrectionTest, SideBySideIsLearnedFromAnotherModel) {
  const TwoModels m = WiderRanBothWays(1.9, 0);
  auto speeds = CpuSpeeds();
  ApplyObservationsFrom(m.store, getuid(), m.tiny, m.cluster, &speeds);
  const double shrunk = std::pow(1.9 / 1.2, 1 / (1 + kShrinkJobs));
  EXPECT_NEAR(PredictedCompute(m.two, speeds.at("alpha"), m.cluster, "alpha"),
              PredictedCompute(m.two, m.tiny_before, m.cluster, "alpha") * shrunk, 1e-9);
  EXPECT_EQ(speeds.at("alpha").provenance,
            "from 1 earlier run of this spec on alpha; side by side: 2 ranks +8%");
  const Observation& mine = m.store.records[2].record;
  EXPECT_NEAR(PredictedCompute(mine, speeds.at("alpha"), m.cluster, "alpha"), mine.step_s, 1e-12);
}

// Another user's records of 5 models, each 2.7x its prediction alone and 7.4x at 2 ranks side
// by side: the type's correction (+15%, capped) and the 2-rank offset (+15%, capped, then
// shrunk by 5 / (5 + 5)) were each within the cap, but together moved this model's 2-rank
// step by 23%. Others' records move a count's step by the cap in all.
TEST(ObservationCorrectionTest, AnotherUsersRecordsMoveEachCountOfRanksByNoMoreThanTheCap) {
  const Cluster c = SharedCores();
  const Job job = TinyJob();
  StoreContents store;
  for (int units = 8; units < 13; ++units) {
    std::string text = WiderSpecText();
    const std::string wide = "\"units\": 64";
    text.replace(text.find(wide), wide.size(), "\"units\": " + std::to_string(units));
    Job model = TinyJob();
    model.spec = ParseSpec(text, "model.json", "");
    model.features = ComputeFeatures(model.spec);
    const DeviceSpeed predicted = CpuSpeeds(model).at("alpha");
    for (int ranks : {1, 2}) {
      Observation r = AtRanks(Record(JobModelKey(model), 0), ranks, std::exp(ranks), predicted, c);
      r.spec = nlohmann::json::parse(text);
      store.records.push_back(Stored(r, getuid() + 4242));
    }
  }
  const DeviceSpeed before = CpuSpeeds().at("alpha");
  auto speeds = CpuSpeeds();
  ApplyObservationsFrom(store, getuid(), job, c, &speeds);
  for (int ranks : {1, 2, 3}) {
    Observation at = Record(JobModelKey(job), 0);
    at.ranks = at.ranks_per_node = ranks;
    const double moved = PredictedCompute(at, speeds.at("alpha"), c, "alpha") /
                         PredictedCompute(at, before, c, "alpha");
    EXPECT_LE(moved, std::exp(kOthersCapLog) * (1 + 1e-12)) << ranks << " ranks";
    EXPECT_GT(moved, 1) << ranks << " ranks";
  }
}

// A model whose allreduce was most of its step (the plan predicted twice its compute) ran
// 1.2x alone and 3x side by side: what crowded ranks cost it is its allreduce's error, not the
// compute's. Another model's 2-rank job keeps the curves' prediction; the comm-bound model's
// own 2-rank job is still predicted from its own run at that shape.
TEST(ObservationCorrectionTest, ACommBoundModelTeachesNoOtherModelSideBySide) {
  const TwoModels m = WiderRanBothWays(3.0, 2.0);
  auto speeds = CpuSpeeds();
  ApplyObservationsFrom(m.store, getuid(), m.tiny, m.cluster, &speeds);
  EXPECT_NEAR(PredictedCompute(m.two, speeds.at("alpha"), m.cluster, "alpha"),
              PredictedCompute(m.two, m.tiny_before, m.cluster, "alpha"), 1e-9);
  EXPECT_EQ(speeds.at("alpha").provenance, "from 1 earlier run of this spec on alpha");
  // The comm-bound model itself: its 2-rank run is its own best predictor.
  auto its = CpuSpeeds(m.wider);
  ApplyObservationsFrom(m.store, getuid(), m.wider, m.cluster, &its);
  const Observation& its_two = m.store.records[1].record;
  EXPECT_NEAR(PredictedCompute(its_two, its.at("alpha"), m.cluster, "alpha"),
              PredictedCompute(its_two, m.wider_before, m.cluster, "alpha") * 3.0, 1e-9);
}

// Two nodes of one rank each, linked at 1 GB/s and 50 us, as the local test cluster's file
// says (its two nodes being one machine, MPI's ranks talk faster than that).
Cluster TwoNodes() {
  Cluster c = SharedCores();
  c.inter_node = Link(1, 50);
  c.node_types[0].intra_node = Link(5, 2);
  return c;
}

// The wider model ran on two nodes: its compute 1.2x its prediction, its ranks waiting half
// the allreduce the links model. The link's error is learned as the link's and the compute's
// as the compute's: a 2-node job of the wider model, or of another model, is planned with
// half the modelled allreduce.
TEST(ObservationCorrectionTest, ALinksErrorIsLearnedAsTheLinksNotAsCompute) {
  const Cluster c = TwoNodes();
  const Job wider = WiderJob(), tiny = TinyJob();
  const DeviceSpeed before = CpuSpeeds(wider).at("alpha");
  Observation base = Record(JobModelKey(wider), 0);
  base.threads_per_rank = 1;  // a core each: no rank waits for a peer the scheduler holds
  Observation r = AtRanks(base, 2, 1.2, before, c);
  r.ranks_per_node = 1;
  r.spec = nlohmann::json::parse(WiderSpecText());
  const double modelled = ModelledComm(r, wider.features.param_bytes(), before, c, "alpha");
  ASSERT_GT(modelled, 20e-6);
  // The hierarchical ring across 2 nodes of 1 rank: 2 messages of half the gradient each way.
  EXPECT_NEAR(modelled, 2 * (50e-6 + wider.features.param_bytes() / 2 / 1e9), 1e-9);
  r.allreduce_s = 0.5 * modelled;
  r.step_s += r.allreduce_s;
  r.has_prediction = true;
  r.predicted_comm_s = modelled;  // what the plan charged: learning from it would say 0.96x
  StoreContents store;
  store.records.push_back(Stored(r, getuid()));

  auto its = CpuSpeeds(wider);
  ApplyObservationsFrom(store, getuid(), wider, c, &its);
  const DeviceSpeed& s = its.at("alpha");
  EXPECT_NEAR(PredictedCompute(r, s, c, "alpha"), r.step_s - r.allreduce_s, 1e-12);
  EXPECT_NEAR(s.comm_log_factor[1], std::log(0.5), 1e-12);
  EXPECT_EQ(s.comm_log_factor[0], 0);  // nothing ran within one node
  EXPECT_NEAR(s.comm_log_at.at({2, 1}), std::log(0.5), 1e-12);
  EXPECT_EQ(s.provenance,
            "from 1 earlier run of this spec on alpha; side by side: 2 ranks +0%; allreduce across "
            "nodes x0.5 (1 job)");

  // Another model: the link's factor as measured, for that shape and that regime (across
  // nodes, a core for every thread). Its compute teaches no other model: in this record the
  // allreduce was most of the step (ACommBoundModelTeachesNoOtherModelSideBySide).
  auto other = CpuSpeeds(tiny);
  ApplyObservationsFrom(store, getuid(), tiny, c, &other);
  EXPECT_NEAR(other.at("alpha").comm_log_factor[CommRegime(2, false)], std::log(0.5), 1e-12);
  EXPECT_EQ(other.at("alpha").comm_log_factor[CommRegime(2, true)], 0);
  EXPECT_NEAR(other.at("alpha").comm_log_at.at({2, 1}), std::log(0.5), 1e-12);
  EXPECT_EQ(other.at("alpha").provenance,
            "calibration alpha (cpu-calibration.json); allreduce across nodes x0.5 (1 job)");
  // Another user's record moves the link by the cap at most.
  store.records[0].owner = getuid() + 1;
  other = CpuSpeeds(tiny);
  ApplyObservationsFrom(store, getuid(), tiny, c, &other);
  EXPECT_NEAR(other.at("alpha").comm_log_factor[1], -kOthersCapLog, 1e-12);
  store.records[0].owner = getuid();
  // A local SGD record waits for no allreduce a step: it teaches the links nothing.
  store.records[0].record.spec["sync"] = {{"mode", "local_sgd"}, {"period", 4}};
  EXPECT_LT(ModelledComm(store.records[0].record, wider.features.param_bytes(), before, c, "alpha"),
            0);
  other = CpuSpeeds(tiny);
  ApplyObservationsFrom(store, getuid(), tiny, c, &other);
  EXPECT_EQ(other.at("alpha").comm_log_factor[1], 0);
}

// The caller's own job of one model measured the link across nodes at 3x its model; another
// user's runs of the planned model say 1x. A model's history is preferred to the type's, but
// another user's may move the caller's own measurement of the link by the cap at most, for
// the regime and for the shape alike.
TEST(ObservationCorrectionTest, OthersRunsOfTheModelMoveTheCallersLinkByAtMostTheCap) {
  const Cluster c = TwoNodes();
  const Job wider = WiderJob(), tiny = TinyJob();
  auto across = [&](const Job& job, double link) {
    const DeviceSpeed before = CpuSpeeds(job).at("alpha");
    Observation base = Record(JobModelKey(job), 0);
    base.threads_per_rank = 1;
    Observation r = AtRanks(base, 2, 1.0, before, c);
    r.ranks_per_node = 1;
    r.spec = nlohmann::json::parse(job.spec.json);
    r.allreduce_s = link * ModelledComm(r, job.features.param_bytes(), before, c, "alpha");
    r.step_s += r.allreduce_s;
    return r;
  };
  StoreContents store;
  store.records.push_back(Stored(across(tiny, 3.0), getuid()));
  for (int i = 0; i < 5; ++i) store.records.push_back(Stored(across(wider, 1.0), getuid() + 1));
  auto speeds = CpuSpeeds(wider);
  ApplyObservationsFrom(store, getuid(), wider, c, &speeds);
  const DeviceSpeed& s = speeds.at("alpha");
  EXPECT_NEAR(s.comm_log_factor[CommRegime(2, false)], std::log(3.0) - kOthersCapLog, 1e-9);
  EXPECT_NEAR(s.comm_log_at.at({2, 1}), std::log(3.0) - kOthersCapLog, 1e-9);
  // Without the caller's own record, the others' runs count within the cap of none.
  store.records.erase(store.records.begin());
  speeds = CpuSpeeds(wider);
  ApplyObservationsFrom(store, getuid(), wider, c, &speeds);
  EXPECT_NEAR(speeds.at("alpha").comm_log_factor[CommRegime(2, false)], 0, 1e-9);
}

// A plan's allreduce is the modelled one times what the store learned: the shape's factor
// where the model (or type) ran at that shape, else the regime's.
TEST(ObservationCorrectionTest, APlanTakesTheLearnedLinkFactor) {
  Job job = WiderJob();
  job.max_gpus = 2;
  Cluster c = OneType();
  c.node_types[0].nodes = 2;  // one GPU each: two GPUs are two nodes
  c.inter_node = Link(1, 50);
  const Allocation modelled = Recommend(job, c, Speeds()).fastest;
  ASSERT_EQ(modelled.gpus, 2);
  ASSERT_GT(modelled.comm_s, 0);
  auto learned = Speeds();
  learned.at("alpha").comm_log_factor[CommRegime(2, false)] = std::log(0.5);
  EXPECT_NEAR(Recommend(job, c, learned).fastest.comm_s, 0.5 * modelled.comm_s, 1e-12);
  learned.at("alpha").comm_log_at[{2, 1}] = std::log(3.0);  // this shape ran: its own factor
  EXPECT_NEAR(Recommend(job, c, learned).fastest.comm_s, 3.0 * modelled.comm_s, 1e-12);
}

// The phases one run of the tiny model (its step 5 ms) teaches its caller.
LearnedPhases LearnedFromOneRun() {
  const Job job = TinyJob();
  StoreContents store;
  store.records.push_back(Stored(Record(JobModelKey(job), 0.005), getuid()));
  return LearnPhasesFrom(store, getuid(), job, OneType(), "alpha");
}

TEST(ObservationPhasesTest, ASecondRunsPhasesComeFromItsFirst) {
  const Job job = TinyJob();
  const LearnedPhases l = LearnedFromOneRun();
  JobPhases p;
  p.startup_s = 30;
  p.data_s = 0.5;
  p.eval_s = 1;
  p.evaluations = 4;
  p.checkpoint_s = 2;
  p.checkpoints = 4;
  ApplyLearnedPhases(l, 1, 1, 0, &p);
  // The whole job but its steps, evaluations and checkpoints: 12 - 40 x 0.005 - 0.4 - 0.3.
  EXPECT_DOUBLE_EQ(p.startup_s, 11.1);
  EXPECT_DOUBLE_EQ(p.data_s, 0);
  EXPECT_DOUBLE_EQ(p.eval_s, 4 * 0.2);
  EXPECT_DOUBLE_EQ(p.checkpoint_s, 4 * 0.1);
  // With the sum of its steps, the slow steps' excess is the steps', not the start-up's.
  Observation summed = Record(JobModelKey(job), 0.005);
  summed.steps_s = 40 * 0.006;
  StoreContents with_sum;
  with_sum.records.push_back(Stored(summed, getuid()));
  JobPhases q;
  ApplyLearnedPhases(LearnPhasesFrom(with_sum, getuid(), job, OneType(), "alpha"), 1, 1, 0, &q);
  EXPECT_NEAR(q.startup_s, 12 - 0.24 - 0.4 - 0.3, 1e-12);
  JobPhases two = p;
  two.eval_s = 1;
  ApplyLearnedPhases(l, 2, 1, 0, &two);  // evaluations at another rank count: not learned
  EXPECT_DOUBLE_EQ(two.eval_s, 1);
}

// A record that times its first evaluation apart gives one evaluation as those after it,
// and the first's excess once; one with its steps after the first epoch gives the steady
// step, and the first epoch's excess goes to the job's fixed cost (a longer job pays it once).
TEST(ObservationPhasesTest, TheFirstEvaluationAndTheFirstEpochArePaidOnce) {
  const Job job = TinyJob();
  Observation o = Record(JobModelKey(job), 0.005);
  o.evaluations = 2;
  o.eval_s = 0.5;
  o.first_eval_s = 0.3;  // the second: 0.2
  o.steps_s = 40 * 0.006;
  o.later_steps = 20;
  o.later_steps_s = 20 * 0.005;  // the first epoch's 20 steps: 0.14 s, 0.04 s more
  StoreContents store;
  store.records.push_back(Stored(o, getuid()));
  JobPhases p;
  p.startup_s = 30;
  p.eval_s = 8;
  p.evaluations = 8;
  ApplyLearnedPhases(LearnPhasesFrom(store, getuid(), job, OneType(), "alpha"), 1, 1, 0, &p);
  EXPECT_NEAR(p.eval_s, 8 * 0.2 + 0.1, 1e-12);
  // The whole job but its steps at 5 ms, its evaluations and checkpoints: the first epoch's
  // 0.04 s are in it.
  EXPECT_NEAR(p.startup_s, 12 - 40 * 0.005 - 0.5 - o.checkpoint_s, 1e-12);
  auto speeds = Speeds();
  ApplyObservationsFrom(store, getuid(), job, OneType(), &speeds);
  EXPECT_NEAR(speeds.at("alpha").seconds(10), 0.005, 1e-12);  // the steady step
  // Another user's excess moves a prediction by at most the cap around a quarter of an
  // evaluation; an older record (no first evaluation apart) adds none.
  StoreContents others;
  o.first_eval_s = 0.45;  // 0.4 more than the second's 0.05
  others.records.push_back(Stored(o, getuid() + 1));
  JobPhases q;
  q.eval_s = 8;
  q.evaluations = 8;
  ApplyLearnedPhases(LearnPhasesFrom(others, getuid(), job, OneType(), "alpha"), 1, 1, 0, &q);
  EXPECT_NEAR(q.eval_s, 8 * 1 * std::exp(-kOthersCapLog) + 0.25 * std::exp(kOthersCapLog), 1e-9);
  o.first_eval_s = -1;
  StoreContents old;
  old.records.push_back(Stored(o, getuid()));
  JobPhases r;
  r.eval_s = 8;
  r.evaluations = 8;
  ApplyLearnedPhases(LearnPhasesFrom(old, getuid(), job, OneType(), "alpha"), 1, 1, 0, &r);
  EXPECT_NEAR(r.eval_s, 8 * 0.25, 1e-12);
}

// Another model's first epoch is a multiple of that model's step: the type's start-up is
// all of its job but all its steps, and the planned job keeps its own predicted warm-up.
TEST(ObservationPhasesTest, AnotherModelsFirstEpochIsNotTheTypes) {
  const Job job = TinyJob();
  Observation o = Record("another-model", 0.005);
  o.steps_s = 40 * 0.006;
  o.later_steps = 20;
  o.later_steps_s = 20 * 0.005;  // its first epoch's 20 steps: 0.14 s, 0.04 s over steady
  StoreContents store;
  store.records.push_back(Stored(o, getuid()));
  JobPhases p;
  p.startup_s = 30;
  p.data_s = 0.5;
  p.warmup_s = 0.07;
  ApplyLearnedPhases(LearnPhasesFrom(store, getuid(), job, OneType(), "alpha"), 1, 1, 0, &p);
  EXPECT_NEAR(p.startup_s, 12 - 40 * 0.006 - o.eval_s - o.checkpoint_s, 1e-12);
  EXPECT_DOUBLE_EQ(p.data_s, 0);
  EXPECT_DOUBLE_EQ(p.warmup_s, 0.07);
}

// Ranks that crowd the cores take turns through their start-up: a record's crowding excess
// (its launcher start-up less that over its crowding) is the crowding's, not the type's, and a
// plan pays it at its own crowding; another user's moves a start-up by at most the cap.
TEST(ObservationPhasesTest, CrowdedRanksStartUpInTurns) {
  const Job job = TinyJob();
  Cluster c = OneType();
  c.runtime.shared_host_cores = 2;
  Observation o = Record(JobModelKey(job), 0.005);
  o.ranks = 4;
  o.threads_per_rank = 1;  // 4 busy threads on 2 cores: twice over
  o.startup_s = 3;         // 1.5 s uncrowded
  StoreContents store;
  store.records.push_back(Stored(o, getuid()));
  const double rest = 12 - 40 * 0.005 - o.eval_s - o.checkpoint_s - 1.5;
  JobPhases alone, crowded, more;
  alone.startup_s = crowded.startup_s = more.startup_s = 30;
  const LearnedPhases l = LearnPhasesFrom(store, getuid(), job, c, "alpha");
  ApplyLearnedPhases(l, 1, 1, 0, &alone);
  ApplyLearnedPhases(l, 4, 2, 0, &crowded);
  ApplyLearnedPhases(l, 8, 4, 0, &more);
  EXPECT_NEAR(alone.startup_s, rest, 1e-12);
  EXPECT_NEAR(crowded.startup_s, rest + 1.5, 1e-12);
  EXPECT_NEAR(more.startup_s, rest + 3 * 1.5, 1e-12);
  // A record is not crowded where its node's cores are unknown: its whole rest is the
  // start-up and its whole launcher start-up what a crowded plan pays again.
  JobPhases unknown;
  ApplyLearnedPhases(LearnPhasesFrom(store, getuid(), job, OneType(), "alpha"), 4, 2, 0, &unknown);
  EXPECT_NEAR(unknown.startup_s, rest + 1.5 + 3, 1e-12);
  StoreContents others;
  o.startup_s = 300;  // a poisoned record: 150 s of crowding
  others.records.push_back(Stored(o, getuid() + 1));
  JobPhases capped;
  capped.startup_s = 30;
  ApplyLearnedPhases(LearnPhasesFrom(others, getuid(), job, c, "alpha"), 4, 2, 0, &capped);
  EXPECT_LE(capped.startup_s, 30 * std::exp(kOthersCapLog) * std::exp(kOthersCapLog) + 1e-9);
}

TEST(ObservationPhasesTest, OthersMovePhasesByAtMostTheCap) {
  const Job job = TinyJob();
  StoreContents store;
  Observation o = Record(JobModelKey(job), 0.005);
  o.total_s = 3000;
  for (int i = 0; i < 20; ++i) store.records.push_back(Stored(o, getuid() + 1));
  JobPhases p;
  p.startup_s = 30;
  ApplyLearnedPhases(LearnPhasesFrom(store, getuid(), job, OneType(), "alpha"), 1, 1, 0, &p);
  EXPECT_NEAR(p.startup_s, 30 * 1.15, 1e-9);
}

// What no record can see (srun's step launch and end, the cluster's runtime.launch_s) stays
// in the start-up that a record replaces; a site's start-up below it keeps only itself.
TEST(ObservationPhasesTest, TheLaunchOutsideTheRecordsIsKept) {
  const LearnedPhases l = LearnedFromOneRun();
  JobPhases p;
  p.startup_s = 30;
  ApplyLearnedPhases(l, 1, 1, 1.5, &p);
  EXPECT_DOUBLE_EQ(p.startup_s, 1.5 + 11.1);
  JobPhases small;
  small.startup_s = 1;
  ApplyLearnedPhases(l, 1, 1, 1.5, &small);
  EXPECT_DOUBLE_EQ(small.startup_s, 1 + 11.1);
}

}  // namespace
}  // namespace dlh
