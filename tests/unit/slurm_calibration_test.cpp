// Tests of `dlh-estimate calibrate --slurm`'s pure part
// (estimator/calibrate/slurm_calibration.cpp): the types picked from sinfo, the sbatch command
// line, job states read from scontrol, and the cluster description pointed at new calibrations with
// everything else kept.
#include "estimator/calibrate/slurm_calibration.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/error.hpp"
#include "estimator/cluster/cluster.hpp"

namespace dlh {
namespace {

using json = nlohmann::ordered_json;

const char* kSinfo =
    "alpha1|gpu:alpha:2(S:0)|gpu*|8|16000|\n"
    "alpha2|gpu:alpha:2(S:0)|gpu*|8|16000|\n"
    "beta1|gpu:beta:2|gpu*|8|16000|\n"
    "beta1|gpu:beta:2|big|8|16000|\n"
    "cpu1|(null)|gpu*|2|16000|\n"
    "old1|gpu:2|gpu*|2|16000|\n"
    "odd1|gpu:a$b:1|gpu*|2|16000|\n";

TEST(SlurmCalibration, PicksEveryTypedGpuTypeOnce) {
  const CalibrationTypes t = PickCalibrationTypes(NodesFromSinfo(kSinfo), {}, "");
  EXPECT_EQ(t.types, (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(t.nodes.at("alpha"), (std::vector<std::string>{"alpha1", "alpha2"}));
  EXPECT_EQ(t.nodes.at("beta"), std::vector<std::string>{"beta1"});
  // A GRES type that cannot be a file name or a cluster key is named, not submitted.
  ASSERT_EQ(t.failed.size(), 1u);
  EXPECT_EQ(t.failed[0].first, "a$b");
  EXPECT_NE(t.failed[0].second.find("not a valid GPU type name"), std::string::npos);
}

TEST(SlurmCalibration, WantedTypeNoNodeOffersFailsByNameOthersGoOn) {
  const CalibrationTypes t =
      PickCalibrationTypes(NodesFromSinfo(kSinfo), {"gamma", "alpha", "alpha"}, "");
  EXPECT_EQ(t.types, std::vector<std::string>{"alpha"});
  ASSERT_EQ(t.failed.size(), 1u);
  EXPECT_EQ(t.failed[0].first, "gamma");
  EXPECT_EQ(t.failed[0].second, "no node offers GRES gpu:gamma (sinfo)");
  EXPECT_EQ(t.nodes.count("beta"), 0u);
}

TEST(SlurmCalibration, PartitionLimitsTheTypes) {
  const CalibrationTypes t = PickCalibrationTypes(NodesFromSinfo(kSinfo), {"alpha"}, "big");
  EXPECT_TRUE(t.types.empty());
  ASSERT_EQ(t.failed.size(), 1u);
  EXPECT_EQ(t.failed[0].second, "no node in partition big offers GRES gpu:alpha (sinfo)");
  EXPECT_EQ(PickCalibrationTypes(NodesFromSinfo(kSinfo), {}, "big").types,
            std::vector<std::string>{"beta"});
}

TEST(SlurmCalibration, ShellQuoteSurvivesEveryCharacter) {
  EXPECT_EQ(ShellQuote("cpu"), "'cpu'");
  EXPECT_EQ(ShellQuote("it's $HOME `x`"), "'it'\\''s $HOME `x`'");
  EXPECT_EQ(ShellQuote(""), "''");
}

TEST(SlurmCalibration, SbatchArgsQuoteTheCommandAndEscapePercent) {
  CalibrationJob job;
  job.type = "alpha";
  job.estimate = "/opt/dlh 1/bin/dlh-estimate";
  job.device = "cuda:0";
  job.out = "/site/cal's/alpha.json";
  job.log = "/site/100%/alpha.log";
  job.time_limit = "01:00:00";
  job.quick = true;
  EXPECT_EQ(
      CalibrationSbatchArgs(job),
      (std::vector<std::string>{
          "sbatch", "--parsable", "--gres=gpu:alpha:1", "--exclusive", "-N", "1", "-n", "1",
          "--job-name=dlh-calibrate-alpha", "--time=01:00:00", "--output=/site/100%%/alpha.log",
          "--wrap='/opt/dlh 1/bin/dlh-estimate' calibrate --device 'cuda:0' --out "
          "'/site/cal'\\''s/alpha.json' --quick"}));
  job.quick = false;
  job.partition = "gpu";
  const auto args = CalibrationSbatchArgs(job);
  EXPECT_EQ(args[10], "--partition=gpu");
  EXPECT_EQ(args.back().find("--quick"), std::string::npos);
}

// `scontrol show job -o 12` of Slurm 22.05, shortened; the job name, working folder and
// command hold spaces and '=' signs.
const char* kRunning =
    "JobId=12 JobName=dlh calibrate alpha UserId=root(0) GroupId=root(0) MCS_label=N/A "
    "Priority=1 Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None "
    "Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 "
    "RunTime=00:00:41 TimeLimit=01:00:00 TimeMin=N/A NodeList=alpha1 BatchHost=alpha1 "
    "NumNodes=1 NumCPUs=8 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=8,mem=16000M,node=1,billing=8 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* "
    "OverSubscribe=NO Command=(null) WorkDir=/tmp/my work StdOut=/tmp/c/alpha.log "
    "TresPerNode=gres:gpu:alpha:1\n";

TEST(SlurmCalibration, ScontrolRunningJob) {
  const SlurmJobState s = ParseScontrolJob(kRunning);
  EXPECT_EQ(s.state, "RUNNING");
  EXPECT_EQ(s.reason, "");  // "None"
  EXPECT_EQ(s.nodes, "alpha1");
  EXPECT_EQ(s.exit_status, 0);
  EXPECT_EQ(s.signal, 0);
  EXPECT_DOUBLE_EQ(s.run_s, 41);
  EXPECT_FALSE(s.finished);
}

TEST(SlurmCalibration, ScontrolPendingAndFailedJobs) {
  SlurmJobState s = ParseScontrolJob(
      "JobId=13 JobName=dlh-calibrate-beta JobState=PENDING Reason=Resources "
      "ExitCode=0:0 RunTime=00:00:00 NodeList=(null)");
  EXPECT_EQ(s.state, "PENDING");
  EXPECT_EQ(s.reason, "Resources");
  EXPECT_EQ(s.nodes, "");
  EXPECT_FALSE(s.finished);

  s = ParseScontrolJob(
      "JobId=13 JobState=FAILED Reason=NonZeroExitCode ExitCode=2:0 RunTime=1-02:03:04 "
      "NodeList=beta1");
  EXPECT_EQ(s.state, "FAILED");
  EXPECT_EQ(s.reason, "NonZeroExitCode");
  EXPECT_EQ(s.exit_status, 2);
  EXPECT_DOUBLE_EQ(s.run_s, 86400 + 2 * 3600 + 3 * 60 + 4);
  EXPECT_TRUE(s.finished);

  s = ParseScontrolJob("JobId=14 JobState=CANCELLED Reason=None ExitCode=0:15");
  EXPECT_EQ(s.signal, 15);
  EXPECT_TRUE(s.finished);

  s = ParseScontrolJob("slurm_load_jobs error: Invalid job id specified");
  EXPECT_EQ(s.state, "");
  EXPECT_EQ(s.exit_status, -1);
  EXPECT_FALSE(s.finished);
}

TEST(SlurmCalibration, FinalStates) {
  for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                        "BOOT_FAIL", "DEADLINE", "PREEMPTED"})
    EXPECT_TRUE(JobStateFinished(s)) << s;
  for (const char* s :
       {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "REQUEUED", ""})
    EXPECT_FALSE(JobStateFinished(s)) << s;
}

TEST(SlurmCalibration, SlurmElapsed) {
  EXPECT_DOUBLE_EQ(ParseSlurmElapsed("00:00:41"), 41);
  EXPECT_DOUBLE_EQ(ParseSlurmElapsed("01:10"), 70);
  EXPECT_DOUBLE_EQ(ParseSlurmElapsed("2-00:00:01"), 172801);
  EXPECT_DOUBLE_EQ(ParseSlurmElapsed("INVALID"), -1);
  EXPECT_DOUBLE_EQ(ParseSlurmElapsed(""), -1);
  EXPECT_DOUBLE_EQ(ParseSlurmElapsed("1:2:3:4"), -1);
}

TEST(SlurmCalibration, CalibrationPathRelativeBelowACommonFolder) {
  EXPECT_EQ(CalibrationPathFor("/site/dlh/cluster.json", "/site/dlh/calibration/a.json"),
            "calibration/a.json");
  EXPECT_EQ(CalibrationPathFor("/site/dlh/cluster/c.json", "/site/dlh/calibration/a.json"),
            "../calibration/a.json");
  EXPECT_EQ(CalibrationPathFor("/site/dlh/./c.json", "/site/dlh/x/../a.json"), "a.json");
  // Only '/' in common: the absolute path survives moving either tree.
  EXPECT_EQ(CalibrationPathFor("/etc/dlh/cluster.json", "/opt/cal/a.json"), "/opt/cal/a.json");
}

const char* kCluster = R"({
  "name": "local",
  "description": "two types",
  "gpu_types": [
    {"name": "alpha", "memory_gb": 2, "peak_tflops": 0.05, "memory_bandwidth_gbs": 10,
     "active_watts": 30, "idle_watts": 5, "calibration": "../calibration/cpu.json",
     "description": "kept"},
    {"name": "beta", "memory_gb": 2, "peak_tflops": 0.02, "memory_bandwidth_gbs": 5,
     "active_watts": 20, "idle_watts": 4}
  ],
  "node_types": [
    {"name": "node-alpha", "gpu": "alpha", "gpus_per_node": 2, "nodes": 1,
     "node_base_watts": 20, "intra_node": {"bandwidth_gbs": 5.2, "latency_us": 1.4}},
    {"name": "node-beta", "gpu": "beta", "gpus_per_node": 2, "nodes": 1,
     "node_base_watts": 20, "intra_node": {"bandwidth_gbs": 5.2, "latency_us": 1.4}}
  ],
  "inter_node": {"bandwidth_gbs": 1, "latency_us": 50}
})";

TEST(SlurmCalibration, ClusterUpdateSetsCalibrationAndKeepsEverythingElse) {
  const ClusterCalibrationUpdate u = SetClusterCalibrations(
      kCluster, "/site/dlh/local.json", {{"beta", "cal/beta.json"}, {"alpha", "cal/alpha.json"}});
  EXPECT_EQ(u.updated, (std::vector<std::string>{"alpha", "beta"}));  // file order
  EXPECT_TRUE(u.absent.empty());
  json expected = json::parse(kCluster);
  expected["gpu_types"][0]["calibration"] = "cal/alpha.json";  // in place, before description
  expected["gpu_types"][1]["calibration"] = "cal/beta.json";   // added last
  const json got = json::parse(u.text);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(got.dump(), expected.dump());  // the same keys in the same order
  std::vector<std::string> alpha_keys;
  for (const auto& [k, v] : got["gpu_types"][0].items()) alpha_keys.push_back(k);
  EXPECT_EQ(alpha_keys[6], "calibration");
  EXPECT_EQ(alpha_keys[7], "description");
  const Cluster c = ParseCluster(u.text, "/site/dlh/local.json", "/site/dlh");
  EXPECT_EQ(c.gpu("beta")->calibration, "/site/dlh/cal/beta.json");
}

TEST(SlurmCalibration, ClusterUpdateNamesTypesItDoesNotDescribe) {
  const ClusterCalibrationUpdate u =
      SetClusterCalibrations(kCluster, "local.json", {{"beta", "b.json"}, {"gamma", "g.json"}});
  EXPECT_EQ(u.updated, std::vector<std::string>{"beta"});
  EXPECT_EQ(u.absent, std::vector<std::string>{"gamma"});
  EXPECT_EQ(json::parse(u.text)["gpu_types"][0]["calibration"], "../calibration/cpu.json");
}

TEST(SlurmCalibration, ClusterUpdateRefusesABadDescriptionNamingFileAndField) {
  std::string bad = kCluster;
  bad.replace(bad.find("\"memory_gb\": 2"), 14, "\"memory_gb\": 0");
  try {
    SetClusterCalibrations(bad, "site.json", {{"alpha", "a.json"}});
    FAIL() << "accepted a bad description";
  } catch (const EstimateError& e) {
    EXPECT_EQ(std::string(e.what()),
              "site.json: gpu_types[0].memory_gb: must be a positive number, got 0");
  }
  EXPECT_THROW(SetClusterCalibrations("{\"name\": ", "site.json", {}), EstimateError);
}

}  // namespace
}  // namespace dlh
