// Tests of the cluster description (parsing, errors, paths) and the allreduce model.
#include "estimator/cluster/cluster.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.hpp"
#include "estimator/model/comm_fit.hpp"
#include "estimator/model/comm_model.hpp"
#include "estimator/model/time_model.hpp"
#include "tests/util/repo_file.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

using dlh::test::RepoFile;

// Two GPU types, two node types: every field given.
json Valid() {
  return json::parse(R"({
    "name": "test",
    "gpu_types": [
      {"name": "a100", "memory_gb": 40, "peak_tflops": 19.5, "memory_bandwidth_gbs": 1555,
       "active_watts": 400, "idle_watts": 60, "calibration": "a100.json"},
      {"name": "v100", "memory_gb": 32, "peak_tflops": 15.7, "memory_bandwidth_gbs": 900,
       "active_watts": 300, "idle_watts": 40}
    ],
    "node_types": [
      {"name": "gpu-a100", "gpu": "a100", "gpus_per_node": 4, "nodes": 16,
       "node_base_watts": 350, "intra_node": {"bandwidth_gbs": 300, "latency_us": 3},
       "partitions": ["gpu"]},
      {"name": "gpu-v100", "gpu": "v100", "gpus_per_node": 4, "nodes": 8,
       "node_base_watts": 300, "intra_node": {"bandwidth_gbs": 150, "latency_us": 4}}
    ],
    "inter_node": {"bandwidth_gbs": 25, "latency_us": 2}
  })");
}

std::string ErrorOf(const std::string& text) {
  try {
    ParseCluster(text, "c.json", "/etc/dlh");
  } catch (const EstimateError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string ErrorOf(const std::function<void(json&)>& edit) {
  json j = Valid();
  edit(j);
  return ErrorOf(j.dump());
}

TEST(Cluster, ValidParses) {
  Cluster c = ParseCluster(Valid().dump(), "c.json", "/etc/dlh");
  EXPECT_EQ(c.name, "test");
  ASSERT_EQ(c.gpu_types.size(), 2u);
  EXPECT_EQ(c.gpu_types[0].name, "a100");
  EXPECT_DOUBLE_EQ(c.gpu_types[0].memory_gb, 40);
  EXPECT_DOUBLE_EQ(c.gpu_types[0].peak_tflops, 19.5);
  EXPECT_DOUBLE_EQ(c.gpu_types[0].memory_bandwidth_gbs, 1555);
  EXPECT_DOUBLE_EQ(c.gpu_types[0].active_watts, 400);
  EXPECT_DOUBLE_EQ(c.gpu_types[0].idle_watts, 60);
  EXPECT_EQ(c.gpu_types[0].calibration, "/etc/dlh/a100.json");
  EXPECT_EQ(c.gpu_types[1].calibration, "");
  ASSERT_EQ(c.node_types.size(), 2u);
  const NodeType& n = c.node_types[0];
  EXPECT_EQ(n.name, "gpu-a100");
  EXPECT_EQ(n.gpu, "a100");
  EXPECT_EQ(n.gpus_per_node, 4);
  EXPECT_EQ(n.nodes, 16);
  EXPECT_EQ(n.available, -1);
  EXPECT_DOUBLE_EQ(n.node_base_watts, 350);
  EXPECT_DOUBLE_EQ(n.intra_node.bandwidth_gbs, 300);
  EXPECT_DOUBLE_EQ(n.intra_node.latency_us, 3);
  EXPECT_EQ(n.partitions, std::vector<std::string>{"gpu"});
  EXPECT_TRUE(c.node_types[1].partitions.empty());
  EXPECT_DOUBLE_EQ(c.inter_node.bandwidth_gbs, 25);
  EXPECT_DOUBLE_EQ(c.inter_node.latency_us, 2);
  ASSERT_NE(c.gpu("v100"), nullptr);
  EXPECT_EQ(c.gpu("v100")->name, "v100");
  EXPECT_EQ(c.gpu("h200"), nullptr);
}

TEST(Cluster, ExampleFileParses) {
  Cluster c = LoadCluster(RepoFile("share/cluster/example.json"));
  EXPECT_EQ(c.name, "example");
  EXPECT_EQ(c.gpu_types.size(), 4u);
  EXPECT_EQ(c.node_types.size(), 4u);
  for (const NodeType& n : c.node_types) {
    EXPECT_NE(c.gpu(n.gpu), nullptr) << n.name;
    EXPECT_GT(n.intra_node.bandwidth_gbs, 0) << n.name;
  }
  // The h100 type names the calibration measured on an H100 (share/gpu/gpu-check.sh run),
  // resolved against the cluster file's folder; the others have none.
  for (const GpuType& g : c.gpu_types) {
    if (g.name == "h100") {
      EXPECT_EQ(g.calibration, RepoFile("share/calibration/h100-80gb-hbm3.json"));
      EXPECT_EQ(LoadCalibration(g.calibration).device, "cuda");
    } else {
      EXPECT_EQ(g.calibration, "") << g.name;
    }
  }
  EXPECT_DOUBLE_EQ(c.inter_node.bandwidth_gbs, 25);
  EXPECT_DOUBLE_EQ(c.inter_node.latency_us, 2);
}

TEST(Cluster, LocalFileParses) {
  const std::string path = RepoFile("share/cluster/local.json");
  Cluster c = LoadCluster(path);
  ASSERT_EQ(c.gpu_types.size(), 3u);
  EXPECT_EQ(c.gpu_types[0].name, "alpha");
  EXPECT_EQ(c.gpu_types[1].name, "beta");
  // The CPU node type: a device type and a node type of one name, timed by cpu.json.
  EXPECT_EQ(c.gpu_types[2].name, "cpu-local");
  EXPECT_TRUE(c.gpu_types[2].cpu);
  EXPECT_EQ(c.gpu_types[2].calibration, c.gpu_types[0].calibration);
  // ../calibration/cpu.json next to share/cluster/, whether or not the file exists yet.
  EXPECT_EQ(fs::path(c.gpu_types[0].calibration),
            (fs::path(path).parent_path() / "../calibration/cpu.json").lexically_normal());
  EXPECT_EQ(c.gpu_types[1].calibration, "");
  ASSERT_EQ(c.node_types.size(), 3u);  // and cpu-local: 2 cores, 2 ranks at most
  for (const NodeType& n : c.node_types) {
    EXPECT_EQ(n.nodes, 1);
    EXPECT_EQ(n.gpus_per_node, 2);
  }
}

// Issue 46: CPU node types, each one device type and one node type of the same name.
json CpuNode() {
  return json::parse(R"({"name": "cpu-epyc", "nodes": 1000, "cores": 64, "memory_gb": 256,
      "active_watts": 450, "idle_watts": 150,
      "node_base_watts": 60, "calibration": "epyc.json", "feature": "epyc",
      "partitions": ["cpu"]})");
}

TEST(Cluster, CpuNodeTypesParse) {
  json j = Valid();
  j["cpu_node_types"] = json::array({CpuNode()});
  Cluster c = ParseCluster(j.dump(), "c.json", "/etc/dlh");
  ASSERT_EQ(c.gpu_types.size(), 3u);
  const GpuType& g = c.gpu_types[2];
  EXPECT_TRUE(g.cpu);
  EXPECT_FALSE(c.gpu_types[0].cpu);
  EXPECT_EQ(g.name, "cpu-epyc");
  EXPECT_DOUBLE_EQ(g.memory_gb, 256);
  EXPECT_DOUBLE_EQ(g.active_watts, 450);
  EXPECT_EQ(g.calibration, "/etc/dlh/epyc.json");
  EXPECT_EQ(g.compute_capability, "");
  const NodeType* n = c.node_type("cpu-epyc");
  ASSERT_NE(n, nullptr);
  EXPECT_TRUE(n->cpu);
  EXPECT_EQ(n->gpu, "cpu-epyc");
  EXPECT_EQ(n->gpus_per_node, 64);  // at most one rank a core
  EXPECT_EQ(n->cpu_cores, 64);
  EXPECT_EQ(n->nodes, 1000);
  EXPECT_EQ(n->slurm_feature(), "epyc");
  EXPECT_DOUBLE_EQ(n->node_base_watts, 60);
  // Ranks of a node reduce through shared memory unless the file says otherwise.
  EXPECT_GT(n->intra_node.bandwidth_gbs, 0);
  // A cluster of CPU nodes alone needs no GPU types.
  json cpus = {{"name", "cpus"},
               {"cpu_node_types", json::array({CpuNode()})},
               {"inter_node", {{"bandwidth_gbs", 25}, {"latency_us", 2}}}};
  Cluster only = ParseCluster(cpus.dump(), "c.json", "/etc/dlh");
  ASSERT_EQ(only.node_types.size(), 1u);
  EXPECT_EQ(only.node_types[0].slurm_feature(), "epyc");
}

TEST(Cluster, BadCpuNodeTypesNameFileAndField) {
  auto with = [](const std::function<void(json&)>& edit) {
    return ErrorOf([&](json& j) {
      json n = CpuNode();
      edit(n);
      j["cpu_node_types"] = json::array({n});
    });
  };
  EXPECT_EQ(with([](json& n) { n.erase("calibration"); }),
            "c.json: cpu_node_types[0].calibration: required");
  EXPECT_EQ(with([](json& n) { n["cores"] = 0; }),
            "c.json: cpu_node_types[0].cores: must be a positive integer up to 1024, got 0");
  EXPECT_EQ(with([](json& n) { n["gpu"] = "a100"; }),
            "c.json: cpu_node_types[0]: unknown key \"gpu\"");
  EXPECT_EQ(with([](json& n) { n["peak_tflops"] = 2.5; }),
            "c.json: cpu_node_types[0]: unknown key \"peak_tflops\"");
  EXPECT_EQ(with([](json& n) { n["name"] = "a100"; }),
            "c.json: cpu_node_types[0].name: duplicate name \"a100\" (already a GPU type or "
            "node type)");
  EXPECT_EQ(
      with([](json& n) { n["idle_watts"] = 500; }),
      "c.json: cpu_node_types[0].idle_watts: must not exceed active_watts (450.0), got 500.0");
}

// types=/--types: names of either kind, and `cpu` / `gpu` for each group.
TEST(Cluster, TypeNamesResolveGroups) {
  json j = Valid();
  j["cpu_node_types"] = json::array({CpuNode()});
  Cluster c = ParseCluster(j.dump(), "c.json", "/etc/dlh");
  using V = std::vector<std::string>;
  EXPECT_EQ(ResolveTypeNames({"cpu"}, c, "--types"), V({"cpu-epyc"}));
  EXPECT_EQ(ResolveTypeNames({"gpu"}, c, "--types"), V({"a100", "v100"}));
  EXPECT_EQ(ResolveTypeNames({"v100", "gpu", "cpu-epyc"}, c, "--types"),
            V({"v100", "a100", "cpu-epyc"}));
  try {
    ResolveTypeNames({"h100"}, c, "--types");
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--types: c.json has no GPU type or CPU node type 'h100'");
  }
  Cluster gpus = ParseCluster(Valid().dump(), "c.json", "/etc/dlh");
  try {
    ResolveTypeNames({"cpu"}, gpus, "--types");
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--types: c.json has no CPU node type for 'cpu'");
  }
}

TEST(Cluster, BadInputsNameFileAndField) {
  EXPECT_EQ(ErrorOf([](json& j) { j["node_types"][1]["gpu"] = "h200"; }),
            "c.json: node_types[1].gpu: unknown GPU type \"h200\"");
  EXPECT_EQ(ErrorOf([](json& j) { j["gpu_types"][0]["memory_gb"] = 0; }),
            "c.json: gpu_types[0].memory_gb: must be a positive number, got 0");
  EXPECT_EQ(ErrorOf([](json& j) { j["gpu_types"][1]["peak_tflops"] = -2.5; }),
            "c.json: gpu_types[1].peak_tflops: must be a positive number, got -2.5");
  // 1e308 planned into infinite energies and ratios of seventy digits.
  EXPECT_EQ(ErrorOf([](json& j) { j["gpu_types"][1]["peak_tflops"] = 1e308; }),
            "c.json: gpu_types[1].peak_tflops: must be at most 1e+09, got 1e+308");
  EXPECT_EQ(ErrorOf([](json& j) { j["gpu_types"][0]["active_watts"] = 2e9; }),
            "c.json: gpu_types[0].active_watts: must be at most 1e+09, got 2000000000.0");
  EXPECT_EQ(ErrorOf([](json& j) { j["gpu_types"][1]["tf32_tflops"] = 156; }),
            "c.json: gpu_types[1].sms: required with tf32_tflops (the GPU layer model takes both)");
  EXPECT_EQ(ErrorOf([](json& j) {
              j["gpu_types"][1]["tf32_tflops"] = 0;
              j["gpu_types"][1]["sms"] = 108;
            }),
            "c.json: gpu_types[1].tf32_tflops: must be a positive number, got 0");
  EXPECT_EQ(ErrorOf([](json& j) {
              j["gpu_types"][1]["tf32_tflops"] = 156;
              j["gpu_types"][1]["sms"] = 1.5;
            }),
            "c.json: gpu_types[1].sms: must be a positive integer up to 100000, got 1.5");
  EXPECT_EQ(ErrorOf([](json& j) { j["gpu_types"][1]["name"] = "a100"; }),
            "c.json: gpu_types[1].name: duplicate GPU type \"a100\"");
  EXPECT_EQ(ErrorOf([](json& j) { j["node_types"][1]["name"] = "gpu-a100"; }),
            "c.json: node_types[1].name: duplicate node type \"gpu-a100\"");
  EXPECT_EQ(ErrorOf([](json& j) { j["gpu_types"][0].erase("memory_bandwidth_gbs"); }),
            "c.json: gpu_types[0].memory_bandwidth_gbs: required");
  EXPECT_EQ(ErrorOf([](json& j) { j.erase("inter_node"); }), "c.json: inter_node: required");
  EXPECT_EQ(ErrorOf([](json& j) { j["node_types"][0]["available"] = 3; }),
            "c.json: node_types[0]: unknown key \"available\"");
  EXPECT_EQ(ErrorOf([](json& j) { j["colour"] = "blue"; }), "c.json: unknown key \"colour\"");
  EXPECT_EQ(ErrorOf([](json& j) { j["node_types"][0]["gpus_per_node"] = 2.5; }),
            "c.json: node_types[0].gpus_per_node: must be a positive integer up to 1024, got 2.5");
  EXPECT_EQ(ErrorOf([](json& j) { j["node_types"][1]["nodes"] = 0; }),
            "c.json: node_types[1].nodes: must be a positive integer up to 1048576, got 0");
  EXPECT_EQ(ErrorOf([](json& j) { j["inter_node"]["bandwidth_gbs"] = "25"; }),
            "c.json: inter_node.bandwidth_gbs: must be a positive number, got \"25\"");
  EXPECT_EQ(ErrorOf([](json& j) { j["inter_node"]["latency_us"] = -1; }),
            "c.json: inter_node.latency_us: must be a non-negative number, got -1");
  EXPECT_EQ(ErrorOf([](json& j) { j["gpu_types"][0]["idle_watts"] = 500; }),
            "c.json: gpu_types[0].idle_watts: must not exceed active_watts (400.0), got 500.0");
  EXPECT_EQ(ErrorOf([](json& j) { j["gpu_types"][0]["compute_capability"] = "8"; }),
            "c.json: gpu_types[0].compute_capability: must be MAJOR.MINOR such as \"8.0\" or "
            "\"9.0\", got \"8\"");
  EXPECT_EQ(ErrorOf([](json& j) { j["node_types"][0].erase("intra_node"); }),
            "c.json: node_types[0].intra_node: required");
  EXPECT_EQ(ErrorOf([](json& j) { j["node_types"][0]["intra_node"] = 300; }),
            "c.json: node_types[0].intra_node: must be an object, got 300");
  EXPECT_EQ(ErrorOf([](json& j) {
              j["node_types"][0]["partitions"] = json::array({"gpu", 3});
            }),
            "c.json: node_types[0].partitions[1]: must be a non-empty string, got 3");
  EXPECT_EQ(ErrorOf([](json& j) { j["gpu_types"] = json::array(); }),
            "c.json: gpu_types: must be a non-empty array, got an empty array");
  EXPECT_EQ(ErrorOf([](json& j) { j["gpu_types"][0]["name"] = "a 100"; }),
            "c.json: gpu_types[0].name: must contain only letters, digits, '-', '_' and '.', got "
            "\"a 100\"");
  EXPECT_EQ(ErrorOf([](json& j) { j["gpu_types"][0]["calibration"] = ""; }),
            "c.json: gpu_types[0].calibration: must not be empty");
  EXPECT_EQ(ErrorOf([](json& j) {
              j["runtime"] = {{"startup_s", 2}, {"launch_s", 3}};
            }),
            "c.json: runtime.launch_s: must be at most startup_s (it is a part of it)");
  EXPECT_EQ(ErrorOf([](json& j) {
              j["runtime"] = {{"launch_s", -1}};
            }),
            "c.json: runtime.launch_s: must be a non-negative number, got -1");
  EXPECT_EQ(ErrorOf([](json& j) { j["name"] = 7; }), "c.json: name: must be a string, got 7");
  EXPECT_EQ(ErrorOf("[1, 2]"), "c.json: must be a JSON object, got an array of 2 items");
  EXPECT_EQ(ErrorOf(R"({"name": "x", "name": "y"})"), "c.json: duplicate key \"name\"");
  EXPECT_EQ(ErrorOf(R"({"inter_node": {"latency_us": 1, "latency_us": 2}})"),
            "c.json: inter_node: duplicate key \"latency_us\"");
  EXPECT_EQ(ErrorOf(R"({"gpu_types": [{}, {"name": "a", "name": "b"}]})"),
            "c.json: gpu_types[1]: duplicate key \"name\"");
  EXPECT_EQ(ErrorOf("{").rfind("c.json: not valid JSON: parse error", 0), 0u) << ErrorOf("{");
}

TEST(Cluster, SingleGpuNodesNeedNoIntraLink) {
  json j = Valid();
  j["node_types"][1]["gpus_per_node"] = 1;
  j["node_types"][1].erase("intra_node");
  Cluster c = ParseCluster(j.dump(), "c.json", "");
  EXPECT_DOUBLE_EQ(c.node_types[1].intra_node.bandwidth_gbs, 0);
}

TEST(Cluster, LinkRegimesParse) {
  json j = Valid();
  j["node_types"][0]["intra_node"] = json::parse(R"({"regimes": [
      {"up_to_bytes": 65536, "latency_us": 1.5, "bandwidth_gbs": 3},
      {"up_to_bytes": 4194304, "latency_us": 10, "bandwidth_gbs": 6.5},
      {"latency_us": 0, "bandwidth_gbs": 2}]})");
  Cluster c = ParseCluster(j.dump(), "c.json", "");
  const Link& l = c.node_types[0].intra_node;
  ASSERT_EQ(l.regimes.size(), 3u);
  EXPECT_DOUBLE_EQ(l.regimes[0].up_to_bytes, 65536);
  EXPECT_DOUBLE_EQ(l.regimes[0].latency_us, 1.5);
  EXPECT_DOUBLE_EQ(l.regimes[0].bandwidth_gbs, 3);
  EXPECT_DOUBLE_EQ(l.regimes[1].up_to_bytes, 4194304);
  EXPECT_DOUBLE_EQ(l.regimes[2].up_to_bytes, 0);  // the last: every larger message
  EXPECT_DOUBLE_EQ(l.regimes[2].bandwidth_gbs, 2);
  // The pair is not given alongside regimes and stays 0.
  EXPECT_DOUBLE_EQ(l.bandwidth_gbs, 0);
  EXPECT_DOUBLE_EQ(l.latency_us, 0);
  // A last regime may name its size anyway; it still covers everything above.
  j["node_types"][0]["intra_node"]["regimes"][2]["up_to_bytes"] = 1e9;
  c = ParseCluster(j.dump(), "c.json", "");
  EXPECT_DOUBLE_EQ(c.node_types[0].intra_node.regimes[2].up_to_bytes, 0);
  // inter_node takes regimes too.
  j["inter_node"] = json::parse(R"({"regimes": [{"latency_us": 2, "bandwidth_gbs": 25}]})");
  c = ParseCluster(j.dump(), "c.json", "");
  ASSERT_EQ(c.inter_node.regimes.size(), 1u);
}

TEST(Cluster, LinksWithoutRegimesAreUnchanged) {
  Cluster c = ParseCluster(Valid().dump(), "c.json", "");
  for (const NodeType& n : c.node_types) EXPECT_TRUE(n.intra_node.regimes.empty()) << n.name;
  EXPECT_TRUE(c.inter_node.regimes.empty());
  const AlphaBeta ab = AlphaBeta::from_link(c.inter_node);
  EXPECT_TRUE(ab.regimes.empty());
  // The single-pair formula, bit for bit.
  for (double bytes : {1.0, 4096.0, 3e6, 1e9})
    for (int p : {2, 3, 8})
      EXPECT_EQ(RingAllreduceSeconds(bytes, p, ab),
                2 * (p - 1) * 2e-6 + 2.0 * (p - 1) / p * bytes * (1 / 25e9));
}

TEST(Cluster, BadLinkRegimesNameFileAndField) {
  auto regimes = [](const char* text) {
    return [text](json& j) { j["node_types"][1]["intra_node"] = json::parse(text); };
  };
  EXPECT_EQ(ErrorOf(regimes(R"({"bandwidth_gbs": 5, "latency_us": 1,
                                "regimes": [{"latency_us": 1, "bandwidth_gbs": 5}]})")),
            "c.json: node_types[1].intra_node: give either bandwidth_gbs and latency_us or "
            "regimes, not both");
  EXPECT_EQ(ErrorOf(regimes(R"({"regimes": []})")),
            "c.json: node_types[1].intra_node.regimes: must be a non-empty array, got an empty "
            "array");
  EXPECT_EQ(ErrorOf(regimes(R"({"regimes": {"latency_us": 1}})")),
            "c.json: node_types[1].intra_node.regimes: must be a non-empty array, got an object "
            "of 1 key");
  EXPECT_EQ(ErrorOf(regimes(R"({"regimes": [{"latency_us": 1, "bandwidth_gbs": 5},
                                            {"latency_us": 2, "bandwidth_gbs": 6}]})")),
            "c.json: node_types[1].intra_node.regimes[0].up_to_bytes: required (only the last "
            "regime may leave it out)");
  EXPECT_EQ(ErrorOf(regimes(R"({"regimes": [
                {"up_to_bytes": 65536, "latency_us": 1, "bandwidth_gbs": 5},
                {"up_to_bytes": 4096, "latency_us": 2, "bandwidth_gbs": 6},
                {"latency_us": 2, "bandwidth_gbs": 6}]})")),
            "c.json: node_types[1].intra_node.regimes[1].up_to_bytes: must be larger than the "
            "previous regime's (65536.0), got 4096.0");
  EXPECT_EQ(ErrorOf(regimes(R"({"regimes": [
                {"up_to_bytes": 0, "latency_us": 1, "bandwidth_gbs": 5},
                {"latency_us": 2, "bandwidth_gbs": 6}]})")),
            "c.json: node_types[1].intra_node.regimes[0].up_to_bytes: must be a positive "
            "number, got 0");
  EXPECT_EQ(ErrorOf(regimes(R"({"regimes": [{"latency_us": -1, "bandwidth_gbs": 5}]})")),
            "c.json: node_types[1].intra_node.regimes[0].latency_us: must be a non-negative "
            "number, got -1");
  EXPECT_EQ(ErrorOf(regimes(R"({"regimes": [{"latency_us": 1, "bandwidth_gbs": 0}]})")),
            "c.json: node_types[1].intra_node.regimes[0].bandwidth_gbs: must be a positive "
            "number, got 0");
  EXPECT_EQ(ErrorOf(regimes(R"({"regimes": [{"latency_us": 1}]})")),
            "c.json: node_types[1].intra_node.regimes[0].bandwidth_gbs: required");
  EXPECT_EQ(ErrorOf(regimes(R"({"regimes": [{"latency_us": 1, "bandwidth_gbs": 5, "up_to": 9}]})")),
            "c.json: node_types[1].intra_node.regimes[0]: unknown key \"up_to\"");
  EXPECT_EQ(ErrorOf(regimes(R"({"regimes": [7]})")),
            "c.json: node_types[1].intra_node.regimes[0]: must be an object, got 7");
  EXPECT_EQ(ErrorOf(regimes(R"({"latency_us": 1})")),
            "c.json: node_types[1].intra_node.bandwidth_gbs: required");
}

TEST(Cluster, RelativeCalibrationPathsFollowTheFile) {
  json j = Valid();
  j["gpu_types"][0]["calibration"] = "../calibration/a100.json";
  j["gpu_types"][1]["calibration"] = "/opt/cal/v100.json";
  Cluster c = ParseCluster(j.dump(), "c.json", "/etc/dlh/cluster");
  EXPECT_EQ(c.gpu_types[0].calibration, "/etc/dlh/calibration/a100.json");
  EXPECT_EQ(c.gpu_types[1].calibration, "/opt/cal/v100.json");
  // No folder: relative to the working folder, as given.
  c = ParseCluster(j.dump(), "c.json", "");
  EXPECT_EQ(c.gpu_types[0].calibration, "../calibration/a100.json");

  // LoadCluster resolves against the file's own folder.
  test::TempDir tmp("dlh-cluster-test");
  const std::string dir = tmp.path();
  fs::create_directories(dir + "/sub");
  j["gpu_types"][0]["calibration"] = "cal/a100.json";
  std::ofstream(dir + "/sub/cluster.json") << j.dump(2);
  c = LoadCluster(dir + "/sub/cluster.json");
  EXPECT_EQ(c.gpu_types[0].calibration, dir + "/sub/cal/a100.json");
}

TEST(Cluster, UnreadableFile) {
  try {
    LoadCluster("/nonexistent/cluster.json");
    FAIL() << "no error";
  } catch (const EstimateError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/cluster.json: cannot read: No such file or directory");
  }
}

// ---------------------------------------------------------------- allreduce model

TEST(CommModel, FromLink) {
  AlphaBeta ab = AlphaBeta::from_link(Link{25, 2});
  EXPECT_DOUBLE_EQ(ab.alpha_s, 2e-6);
  EXPECT_DOUBLE_EQ(ab.beta_s_per_byte, 1 / 25e9);
}

TEST(CommModel, RingByHand) {
  const AlphaBeta ab{2e-6, 4e-11};
  // 2*3*2us + 2*3/4 * 1e9 B * 0.04 ns/B = 12 us + 60 ms
  EXPECT_NEAR(RingAllreduceSeconds(1e9, 4, ab), 0.060012, 1e-12);
  // 2 ranks: 2*1*2us + 1 * 1e6 * 4e-11 = 4 us + 40 us
  EXPECT_NEAR(RingAllreduceSeconds(1e6, 2, ab), 44e-6, 1e-15);
  EXPECT_EQ(RingAllreduceSeconds(1e9, 1, ab), 0);
  EXPECT_EQ(RingAllreduceSeconds(1e9, 0, ab), 0);
  EXPECT_EQ(RingAllreduceSeconds(0, 8, ab), 0);
}

TEST(CommModel, HierarchicalByHand) {
  const AlphaBeta intra = AlphaBeta::from_link(Link{300, 3});
  const AlphaBeta inter = AlphaBeta::from_link(Link{25, 2});
  // g = 4, m = 2, n = 1e8 bytes:
  //   intra 2*3*3us + 2*3/4 * 1e8 / 300e9 = 18 us + 500 us
  //   inter 2*1*2us + 2*1/2 * 2.5e7 / 25e9 = 4 us + 1000 us
  EXPECT_NEAR(HierarchicalAllreduceSeconds(1e8, 4, 2, intra, inter), 1.522e-3, 1e-12);
  // One node: the intra-node ring; one GPU per node: the inter-node ring.
  EXPECT_DOUBLE_EQ(HierarchicalAllreduceSeconds(1e8, 4, 1, intra, inter),
                   RingAllreduceSeconds(1e8, 4, intra));
  EXPECT_DOUBLE_EQ(HierarchicalAllreduceSeconds(1e8, 1, 5, intra, inter),
                   RingAllreduceSeconds(1e8, 5, inter));
  EXPECT_EQ(HierarchicalAllreduceSeconds(1e8, 1, 1, intra, inter), 0);
  EXPECT_EQ(HierarchicalAllreduceSeconds(0, 4, 4, intra, inter), 0);
}

TEST(CommModel, FitRecoversAlphaAndBeta) {
  const AlphaBeta truth{5e-6, 1e-10};
  for (int ranks : {2, 3, 8}) {
    std::vector<AllreducePoint> points;
    for (double bytes : {8.0, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8})
      points.push_back({bytes, RingAllreduceSeconds(bytes, ranks, truth)});
    AlphaBeta fit = FitAlphaBeta(points, ranks);
    EXPECT_NEAR(fit.alpha_s / truth.alpha_s, 1, 1e-9) << ranks;
    EXPECT_NEAR(fit.beta_s_per_byte / truth.beta_s_per_byte, 1, 1e-9) << ranks;
  }
}

TEST(CommModel, FitErrors) {
  auto error = [](const std::vector<AllreducePoint>& points, int ranks) -> std::string {
    try {
      FitAlphaBeta(points, ranks);
    } catch (const EstimateError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error({{1e3, 1e-5}, {1e6, 1e-3}}, 4),
            "allreduce fit: too few points to fit alpha and beta: got 2, need at least 3");
  EXPECT_EQ(error({{1e3, 1e-5}, {1e6, 1e-3}, {1e7, 1e-2}}, 1),
            "allreduce fit: needs at least 2 ranks, got 1");
  EXPECT_EQ(error({{1e6, 1e-3}, {1e6, 1.1e-3}, {1e6, 0.9e-3}}, 4),
            "allreduce fit: the points need at least 2 different message sizes to separate "
            "latency from bandwidth");
  EXPECT_EQ(error({{1e3, 1e-5}, {1e6, 0}, {1e7, 1e-2}}, 4).rfind("allreduce fit: point 1 ", 0), 0u);
  // Time falling with size: a negative bandwidth term.
  EXPECT_EQ(error({{1e3, 1e-2}, {1e6, 1e-3}, {1e7, 1e-4}}, 4)
                .rfind("allreduce fit: non-positive result", 0),
            0u);
}

}  // namespace
}  // namespace dlh
