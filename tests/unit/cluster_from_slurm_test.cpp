// Tests of `dlh-estimate cluster --from-slurm`'s pure part: sinfo text -> nodes -> a cluster
// description that ParseCluster accepts, the datasheet look-up and unknown GPU types.
#include "estimator/cluster/cluster_from_slurm.hpp"

#include <gtest/gtest.h>

#include <string>

#include "estimator/cluster/cluster.hpp"

namespace dlh {
namespace {

using json = nlohmann::ordered_json;

// `sinfo -h -N -O 'NodeList:|,Gres:|,Partition:|,CPUs:|,Memory:|'` on a mixed site: A100
// nodes in two partitions (the default one starred, GRES with socket affinity), 8-GPU H100
// nodes, CPU-only nodes, a 2-GPU A100 node, an unknown type and an untyped GPU node.
const char* kSinfo =
    "cpu001|(null)|cpu*|128|515000|\n"
    "cpu002|(null)|cpu*|128|515000|\n"
    "gpu001|gpu:a100:4(S:0-1)|gpu|64|1000000|\n"
    "gpu001|gpu:a100:4(S:0-1)|long|64|1000000|\n"
    "gpu002|gpu:a100:4(S:0-1)|gpu|64|1000000|\n"
    "gpu002|gpu:a100:4(S:0-1)|long|64|1000000|\n"
    "gpu003|gpu:a100:2(S:0)|gpu|32|500000|\n"
    "hop01|gpu:H100:8(S:0-1),shard:H100:64|hopper|112|2000000|\n"
    "hop02|gpu:H100:8(S:0-1),shard:H100:64|hopper|112|2000000|\n"
    "hop03|gpu:H100:8(S:0-1),shard:H100:64|hopper|112|2000000|\n"
    "mi01|gpu:mi250x:8|amd|64|512000|\n"
    "old01|gpu:2|legacy|16|64000|\n"
    "sinfo: warning: some words that are not a node line\n";

TEST(ClusterFromSlurm, NodesFromSinfoMergesPartitions) {
  auto nodes = NodesFromSinfo(kSinfo);
  ASSERT_EQ(nodes.size(), 10u);
  EXPECT_EQ(nodes[0].name, "cpu001");
  EXPECT_EQ(nodes[0].partitions, std::vector<std::string>{"cpu"});  // '*' dropped
  EXPECT_EQ(nodes[2].name, "gpu001");
  EXPECT_EQ(nodes[2].gres, "gpu:a100:4(S:0-1)");
  EXPECT_EQ(nodes[2].partitions, (std::vector<std::string>{"gpu", "long"}));
  EXPECT_EQ(nodes[2].cpus, 64);
  EXPECT_EQ(nodes[2].memory_mb, 1000000);
}

// sinfo lists a node's partitions in no fixed order (CI once saw "big" before "gpu"): the
// default partition comes first, the others by name, whatever the order of the lines.
TEST(ClusterFromSlurm, PartitionOrderDoesNotFollowSinfo) {
  auto a = NodesFromSinfo(
      "n1|gpu:a100:4|zeta|8|1000|\nn1|gpu:a100:4|big|8|1000|\n"
      "n1|gpu:a100:4|gpu*|8|1000|\n");
  auto b = NodesFromSinfo(
      "n1|gpu:a100:4|gpu*|8|1000|\nn1|gpu:a100:4|big|8|1000|\n"
      "n1|gpu:a100:4|zeta|8|1000|\n");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].partitions, (std::vector<std::string>{"gpu", "big", "zeta"}));
  EXPECT_EQ(b[0].partitions, a[0].partitions);
}

TEST(ClusterFromSlurm, DatasheetSpellings) {
  struct Case {
    const char* gres;
    const char* model;  // nullptr: unknown
  } cases[] = {
      {"a100", "NVIDIA A100 SXM4 40 GB"},
      {"A100", "NVIDIA A100 SXM4 40 GB"},
      {"a100_80g", "NVIDIA A100 SXM4 80 GB"},
      {"a100-80gb", "NVIDIA A100 SXM4 80 GB"},
      {"nvidia_a100-sxm4-80gb", "NVIDIA A100 SXM4 80 GB"},
      {"a100_pcie", "NVIDIA A100 PCIe 40 GB"},
      {"a100_40g", "NVIDIA A100 SXM4 40 GB"},
      {"h100", "NVIDIA H100 SXM5 80 GB"},
      {"nvidia_h100_80gb_hbm3", "NVIDIA H100 SXM5 80 GB"},
      {"h100_pcie", "NVIDIA H100 PCIe 80 GB"},
      {"H100-PCIe", "NVIDIA H100 PCIe 80 GB"},
      {"h200", "NVIDIA H200 SXM 141 GB"},
      {"v100", "NVIDIA V100 SXM2 32 GB"},
      {"tesla_v100-sxm2-16gb", "NVIDIA V100 SXM2 16 GB"},
      {"v100_pcie_16gb", "NVIDIA V100 PCIe 16 GB"},
      {"l40s", "NVIDIA L40S 48 GB"},
      {"L40S", "NVIDIA L40S 48 GB"},
      {"a40", "NVIDIA A40 48 GB"},
      {"a10", "NVIDIA A10 24 GB"},
      // Unknown: named, not guessed.
      {"alpha", nullptr},
      {"mi250x", nullptr},
      {"h100_nvl", nullptr},      // another model (94 GB)
      {"a100_3g.20gb", nullptr},  // a MIG slice
      {"a100_24g", nullptr},      // no such size
      {"l40s_sxm", nullptr},      // no such form
      {"a100_h100", nullptr},     // two models
      {"a1000", nullptr},         // not an A100
      {"a10g", nullptr},          // AWS's A10G is not an A10
      {"", nullptr},
  };
  for (const Case& c : cases) {
    const GpuDatasheet* s = LookUpGpuDatasheet(c.gres);
    if (!c.model) {
      EXPECT_EQ(s, nullptr) << c.gres << " matched " << (s ? s->model : "");
      continue;
    }
    ASSERT_NE(s, nullptr) << c.gres;
    EXPECT_STREQ(s->model, c.model) << c.gres;
  }
  const GpuDatasheet* a100 = LookUpGpuDatasheet("a100");
  EXPECT_DOUBLE_EQ(a100->memory_gb, 40);
  EXPECT_DOUBLE_EQ(a100->peak_tflops, 19.5);
  EXPECT_DOUBLE_EQ(a100->memory_bandwidth_gbs, 1555);
  EXPECT_DOUBLE_EQ(a100->active_watts, 400);
  EXPECT_DOUBLE_EQ(a100->intra_node.bandwidth_gbs, 300);
  EXPECT_DOUBLE_EQ(LookUpGpuDatasheet("a100_80g")->memory_bandwidth_gbs, 2039);
  EXPECT_DOUBLE_EQ(LookUpGpuDatasheet("h100_pcie")->intra_node.bandwidth_gbs, 64);

  std::string assumed;
  LookUpGpuDatasheet("a100", &assumed);
  EXPECT_NE(assumed.find("does not say its memory size nor SXM or PCIe"), std::string::npos)
      << assumed;
  LookUpGpuDatasheet("a100_80g_sxm4", &assumed);
  EXPECT_EQ(assumed, "");
  LookUpGpuDatasheet("l40s", &assumed);
  EXPECT_EQ(assumed, "");  // one model only
}

// The draft parses, with the right node types, counts, partitions and marks.
TEST(ClusterFromSlurm, DraftWithUnknownTypes) {
  ClusterDraftOptions o;
  o.name = "site";
  o.source = "a test";
  ClusterDraft d = DraftClusterFromNodes(NodesFromSinfo(kSinfo), o);
  ASSERT_FALSE(d.description.is_null());
  Cluster c = ParseCluster(d.description.dump(), "draft", "");
  EXPECT_EQ(c.name, "site");
  ASSERT_EQ(c.gpu_types.size(), 2u);       // H100, a100 (sorted); mi250x left out
  EXPECT_EQ(c.gpu_types[0].name, "H100");  // Slurm's spelling kept: it is the GRES type
  EXPECT_DOUBLE_EQ(c.gpu_types[0].peak_tflops, 67);
  EXPECT_EQ(c.gpu_types[1].name, "a100");
  EXPECT_DOUBLE_EQ(c.gpu_types[1].memory_gb, 40);
  EXPECT_EQ(c.gpu_types[0].compute_capability, "9.0");  // from the datasheet
  EXPECT_EQ(c.gpu_types[1].compute_capability, "8.0");
  ASSERT_EQ(c.node_types.size(), 3u);
  EXPECT_EQ(c.node_types[0].name, "gpu-H100");
  EXPECT_EQ(c.node_types[0].gpus_per_node, 8);
  EXPECT_EQ(c.node_types[0].nodes, 3);
  EXPECT_EQ(c.node_types[0].partitions, std::vector<std::string>{"hopper"});
  EXPECT_DOUBLE_EQ(c.node_types[0].intra_node.bandwidth_gbs, 450);
  EXPECT_EQ(c.node_types[1].name, "gpu-a100-x2");
  EXPECT_EQ(c.node_types[1].gpus_per_node, 2);
  EXPECT_EQ(c.node_types[1].nodes, 1);
  EXPECT_EQ(c.node_types[2].name, "gpu-a100-x4");
  EXPECT_EQ(c.node_types[2].nodes, 2);
  EXPECT_EQ(c.node_types[2].partitions, (std::vector<std::string>{"gpu", "long"}));
  EXPECT_GT(c.inter_node.bandwidth_gbs, 0);
  EXPECT_EQ(d.nodes, 6);

  // Every figure is marked for the admin to confirm.
  const json& j = d.description;
  for (const json& g : j["gpu_types"]) {
    std::string desc = g["description"];
    EXPECT_NE(desc.find("datasheet figures for NVIDIA"), std::string::npos) << desc;
    EXPECT_NE(desc.find("confirm memory_gb"), std::string::npos) << desc;
  }
  for (const json& n : j["node_types"]) {
    std::string desc = n["description"];
    EXPECT_NE(desc.find("intra_node: datasheet"), std::string::npos) << desc;
    EXPECT_NE(desc.find("node_base_watts 300 is a default"), std::string::npos) << desc;
  }
  EXPECT_NE(j["node_types"][2]["description"].get<std::string>().find("2 nodes (gpu001, gpu002)"),
            std::string::npos);
  EXPECT_NE(j["description"].get<std::string>().find("inter_node is a conservative default"),
            std::string::npos);
  EXPECT_NE(j["description"].get<std::string>().find("from a test"), std::string::npos);

  // Unknown and untyped GPUs are named; the draft is incomplete.
  EXPECT_TRUE(d.incomplete);
  ASSERT_EQ(d.problems.size(), 2u);
  EXPECT_EQ(d.problems[0].rfind("GPUs without a type on old01:", 0), 0u) << d.problems[0];
  EXPECT_EQ(d.problems[1].rfind("gpu type 'mi250x' on mi01: no datasheet figures; add its "
                                "memory_gb, peak_tflops",
                                0),
            0u)
      << d.problems[1];
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(
      d.notes[0].rfind("2 nodes without GPUs (cpu001, cpu002) left out: --cpu-calibration", 0), 0u);
}

TEST(ClusterFromSlurm, PlaceholdersAreMarked) {
  ClusterDraftOptions o;
  o.allow_placeholders = true;
  ClusterDraft d = DraftClusterFromNodes(
      NodesFromSinfo("alpha1|gpu:alpha:2|gpu*|8|16000|\nbeta1|gpu:a100:2|gpu*|8|16000|\n"), o);
  EXPECT_FALSE(d.incomplete);
  Cluster c = ParseCluster(d.description.dump(), "draft", "");
  ASSERT_EQ(c.gpu_types.size(), 2u);
  EXPECT_EQ(c.gpu_types[1].name, "alpha");
  const json& j = d.description;
  EXPECT_EQ(j["gpu_types"][1]["description"].get<std::string>().rfind("PLACEHOLDER figures", 0),
            0u);
  EXPECT_NE(j["node_types"][1]["description"].get<std::string>().find("PLACEHOLDER"),
            std::string::npos);
  EXPECT_NE(j["description"].get<std::string>().find("PLACEHOLDER figures for GPU types without "
                                                     "a datasheet: alpha"),
            std::string::npos);
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_NE(d.problems[0].find("gpu type 'alpha' on alpha1: no datasheet figures; wrote "
                               "PLACEHOLDER"),
            std::string::npos);
}

// A V100 (compute capability 7.0) is described, with its capability, and the draft says that
// no plan will use it: CUDA 13 has no target for it (issue 42).
TEST(ClusterFromSlurm, TypesTheEngineCannotRunAreMarked) {
  ClusterDraftOptions o;
  ClusterDraft d =
      DraftClusterFromNodes(NodesFromSinfo("v1|gpu:tesla_v100-sxm2-32gb:4|gpu*|40|380000|\n"
                                           "a1|gpu:a100:4|gpu*|64|1000000|\n"),
                            o);
  EXPECT_FALSE(d.incomplete);
  Cluster c = ParseCluster(d.description.dump(), "draft", "");
  ASSERT_EQ(c.gpu_types.size(), 2u);
  EXPECT_EQ(c.gpu_types[1].name, "tesla_v100-sxm2-32gb");
  EXPECT_EQ(c.gpu_types[1].compute_capability, "7.0");
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0],
            "gpu type 'tesla_v100-sxm2-32gb' on v1: compute capability 7.0: DLH's "
            "GPU engine is built for sm_80, sm_90 and PTX compute_90; plans leave it "
            "out");
}

TEST(ClusterFromSlurm, NothingToDescribe) {
  ClusterDraftOptions o;
  ClusterDraft only_unknown =
      DraftClusterFromNodes(NodesFromSinfo("alpha1|gpu:alpha:2|gpu*|8|16000|\n"), o);
  EXPECT_TRUE(only_unknown.description.is_null());
  EXPECT_TRUE(only_unknown.incomplete);
  ClusterDraft cpus = DraftClusterFromNodes(NodesFromSinfo("c1|(null)|cpu*|8|16000|\n"), o);
  EXPECT_TRUE(cpus.description.is_null());
  EXPECT_FALSE(cpus.incomplete);

  // A node with two GPU types cannot be one node type.
  ClusterDraft mixed = DraftClusterFromNodes(
      NodesFromSinfo("m1|gpu:a100:2,gpu:v100:2|gpu|8|16000|\nn1|gpu:v100:4|gpu|8|16000|\n"), o);
  EXPECT_TRUE(mixed.incomplete);
  ASSERT_EQ(mixed.problems.size(), 1u);
  EXPECT_NE(mixed.problems[0].find("node m1 has GPUs of several types (a100:2, v100:2)"),
            std::string::npos);
  EXPECT_EQ(ParseCluster(mixed.description.dump(), "d", "").node_types.size(), 1u);
}

// Issue 46: with --cpu-calibration the nodes without GPUs become CPU node types, grouped by
// CPUs and memory, each found by a feature that picks exactly its nodes.
TEST(ClusterFromSlurm, CpuNodesBecomeCpuNodeTypes) {
  const std::string sinfo =
      "gpu001|gpu:a100:4(S:0-1)|gpu*|64|1000000|a100,ib|\n"
      "cpu001|(null)|cpu|128|515000|epyc,ib|\n"
      "cpu002|(null)|cpu|128|515000|epyc,ib|\n"
      "cpu002|(null)|long|128|515000|epyc,ib|\n"
      "big01|(null)|cpu|128|2060000|(null)|\n";
  const auto nodes = NodesFromSinfo(sinfo);
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[1].features, (std::vector<std::string>{"epyc", "ib"}));
  EXPECT_TRUE(nodes[3].features.empty());
  ClusterDraftOptions o;
  ClusterDraft left_out = DraftClusterFromNodes(nodes, o);
  EXPECT_FALSE(left_out.description.contains("cpu_node_types"));
  ASSERT_EQ(left_out.notes.size(), 1u);
  EXPECT_NE(left_out.notes[0].find("--cpu-calibration FILE describes them as CPU node types"),
            std::string::npos);
  o.cpu_calibration = "epyc.json";
  ClusterDraft d = DraftClusterFromNodes(nodes, o);
  EXPECT_EQ(d.cpu_node_types, 2);
  EXPECT_EQ(d.cpu_nodes, 3);
  const json& types = d.description.at("cpu_node_types");
  ASSERT_EQ(types.size(), 2u);
  // Two groups share a CPU count: their names say the memory too.
  EXPECT_EQ(types[0]["name"], "cpu-128c-540g");
  EXPECT_EQ(types[0]["nodes"], 2);
  EXPECT_EQ(types[0]["cores"], 128);
  EXPECT_EQ(types[0]["feature"], "epyc");  // "ib" is on the GPU node too
  EXPECT_EQ(types[0]["partitions"], json({"cpu", "long"}));
  EXPECT_EQ(types[0]["calibration"], "epyc.json");
  EXPECT_EQ(types[1]["name"], "cpu-128c-2160g");
  EXPECT_FALSE(types[1].contains("feature"));
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0],
            "CPU node type cpu-128c-2160g: add Features=cpu-128c-2160g to big01 in "
            "slurm.conf");
  const Cluster c = ParseCluster(d.description.dump(), "d", "/site");
  ASSERT_NE(c.node_type("cpu-128c-540g"), nullptr);
  EXPECT_TRUE(c.node_type("cpu-128c-540g")->cpu);
  EXPECT_EQ(c.node_type("cpu-128c-2160g")->slurm_feature(), "cpu-128c-2160g");
  // CPU nodes alone make a description too.
  ClusterDraft cpus = DraftClusterFromNodes(NodesFromSinfo("c1|(null)|cpu*|8|16000|\n"), o);
  ASSERT_FALSE(cpus.description.is_null());
  EXPECT_FALSE(cpus.description.contains("gpu_types"));
  EXPECT_EQ(ParseCluster(cpus.description.dump(), "d", "").gpu_types.size(), 1u);
}

}  // namespace
}  // namespace dlh
