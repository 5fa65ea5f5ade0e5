// DLH estimator — a cluster description drafted from Slurm's view of the nodes (the pure
// part of `dlh-estimate cluster --from-slurm`): sinfo text -> nodes -> node types, and the
// built-in datasheet figures of the GPUs it knows. Every figure it writes is marked, in the
// types' "description", for the admin to confirm; a GPU type it does not know is named,
// never guessed (docs/reference/cluster-description.md, "Drafting it from Slurm").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "estimator/cluster/cluster.hpp"

namespace dlh {

// Vendor figures of one GPU model (in docs/reference/cluster-description.md's units).
struct GpuDatasheet {
  const char* model;  // "NVIDIA A100 SXM4 40 GB"
  double memory_gb;
  double peak_tflops;  // fp32, no tensor cores, no sparsity
  double memory_bandwidth_gbs;
  double active_watts;  // TDP
  double idle_watts;    // typical draw while allocated and idle
  const char* link;     // the GPU-to-GPU link inside a node: "NVLink 3", "PCIe 4.0 x16"
  Link intra_node;      // its figures, per GPU, per direction
  const char* compute_capability = nullptr;  // "8.0" (nullptr: unknown)
};

// The datasheet entry for a Slurm GRES type, matched case-insensitively on its words
// (split at anything but letters and digits): a model (a100, h100, h200, v100, l40s, a40,
// a10), optionally a memory size (40g, 80gb, ...), a form factor (sxm, sxm4, pcie, ...), a
// memory kind (hbm3, ...) and a vendor word (nvidia, tesla): "a100", "A100_80G",
// "a100-80gb", "nvidia_h100_pcie", "tesla_v100-sxm2-16gb". Any other word ("nvl", a MIG
// profile "3g.20gb"), or a size or form factor the model does not come in, gives nullptr:
// unknown, not guessed. A type that leaves the memory size or form factor open gets the
// most common model ("a100": SXM4 40 GB), and `assumed` (if given) says so in words;
// otherwise `assumed` is set empty.
const GpuDatasheet* LookUpGpuDatasheet(const std::string& gres_type,
                                       std::string* assumed = nullptr);

// One node as sinfo lists it (one line per node and partition, merged).
struct SinfoNode {
  std::string name;
  std::string gres;                     // "gpu:a100:4(S:0-1)", "(null)"
  std::vector<std::string> partitions;  // without the default partition's '*'
  int64_t cpus = 0;
  int64_t memory_mb = 0;
  std::vector<std::string> features;  // available features ("(null)": none)
};

// The GPUs of one node's GRES (SinfoNode::gres): (type, count) of each "gpu" item, counts of
// one type added up; type "" when untyped. "gpu:a100:4(S:0-1),shard:a100:8" -> {(a100, 4)};
// "(null)" or "" -> {}.
std::vector<std::pair<std::string, int64_t>> GpusOfGres(const std::string& gres);

// The columns `dlh-estimate cluster --from-slurm` asks sinfo for, in this order.
constexpr const char* kSinfoNodeFormat = "NodeList:|,Gres:|,Partition:|,CPUs:|,Memory:|,Features:|";

// Nodes from `sinfo -h -N -O 'NodeList:|,Gres:|,Partition:|,CPUs:|,Memory:|,Features:|'`:
// each line is name|gres|partition|cpus|memory|features| (the features may be missing, as in
// the five columns of an older draft). Lines of one node are merged (their partitions
// collected, in the order seen); lines without five fields are skipped.
std::vector<SinfoNode> NodesFromSinfo(const std::string& text);

struct ClusterDraftOptions {
  std::string name = "slurm";       // the description's "name"
  std::string source;               // where the nodes came from, for the top description
  bool allow_placeholders = false;  // write marked placeholders for unknown GPU types
  // Nodes without GPUs become CPU node types (cpu_node_types[], issue 46) timed by this
  // calibration (as written into the file); "": they are left out, with a note saying how.
  std::string cpu_calibration;
};

struct ClusterDraft {
  // The cluster description (ParseCluster accepts it), or null when no node could be
  // described (no GPU nodes, or only unknown types without allow_placeholders).
  nlohmann::ordered_json description;
  // One line per GPU node that is missing from `description` or described by placeholders:
  // unknown GPU types, GPUs without a type, nodes with several GPU types.
  std::vector<std::string> problems;
  // True when a node with GPUs was left out of `description`: the command exits non-zero.
  bool incomplete = false;
  std::vector<std::string> notes;  // informational: nodes without GPUs
  int node_types = 0, gpu_types = 0, nodes = 0;
  int cpu_node_types = 0, cpu_nodes = 0;
};

// Groups the GPU nodes into node types by (GRES GPU type, GPUs per node), counts them and
// collects their partitions; each GPU type gets its datasheet figures (or, for an unknown
// type with allow_placeholders, placeholders marked PLACEHOLDER); inter_node and
// node_base_watts get conservative defaults marked "confirm". With cpu_calibration, the nodes
// without GPUs are grouped by (CPUs, memory) into CPU node types "cpu-<CPUs>c" (and
// "-<GB>g" where two share a CPU count): cores from sinfo's CPUs, power defaults marked
// "confirm", and as feature one every node of the group carries and no other node does
// (else the type's name, and a note to add it in slurm.conf: a plan asks for the nodes by it).
ClusterDraft DraftClusterFromNodes(const std::vector<SinfoNode>& nodes,
                                   const ClusterDraftOptions& options);

}  // namespace dlh
