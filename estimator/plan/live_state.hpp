// DLH planning core — which nodes are free now, from Slurm, overlaid onto the cluster
// description (NodeType::available).
//
// A node counts as free for a node type when it carries GPUs of the node type's GPU (GRES)
// type, none of them is in use (gres_used), and it is idle or mixed (some CPUs free);
// down, drained, failing, powered-down, reserved and fully allocated nodes are not free.
// When several node types share a GPU type, a node also needs their gpus_per_node.
// A CPU node type's nodes (NodeType::cpu) carry its Slurm feature and no GPU; one is free
// only when idle: a CPU plan uses every core of its nodes.
//
// Pure parsing and counting (unit-tested), no Slurm headers. The nodes come from sinfo's
// text (`dlh-estimate slurm-plan`) or, in the SPANK plugin, from slurmctld
// (plugin/slurm_nodes.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "estimator/cluster/cluster.hpp"

namespace dlh::plan {

struct LiveNode {
  std::string name;
  std::string state;          // idle, mixed, alloc, down, drain, reserved, unknown
  std::string gres;           // e.g. "gpu:a100:4(S:0-1)"
  std::string gres_used;      // e.g. "gpu:a100:2(IDX:0,2)"
  std::string features = "";  // available features, "cpu-epyc,ib" ("" or "(null)": none)
};

struct GresItem {
  std::string name;  // "gpu"
  std::string type;  // "a100", "" when untyped
  int64_t count = 0;
  bool count_given = false;  // false: no count written, `count` is the implied 1
};

// Parses a GRES list as Slurm prints it: items separated by ',' outside parentheses, each
// name[:type][:count][(details)], count 1 when missing; "(null)" and "" give nothing.
std::vector<GresItem> ParseGres(const std::string& text);

// Whether `feature` is one of a node's comma-separated `features` (LiveNode::features).
bool HasFeature(const std::string& features, const std::string& feature);

// Whether `node` is one of node type `nt`'s nodes: it carries GPUs of nt's GPU type and,
// when several node types share that GPU type, exactly nt's gpus_per_node of them; for a
// CPU node type, it carries nt's feature and no GPU.
bool IsNodeOfType(const Cluster& cluster, const NodeType& nt, const LiveNode& node);

// The names of node type `nt`'s nodes among `nodes`, whatever their state: a job on two
// types tells each rank its type by its node's name (DLH_PLAN allocation.parts[].node_names).
std::vector<std::string> NodeNamesOfType(const Cluster& cluster, const NodeType& nt,
                                         const std::vector<LiveNode>& nodes);

// Sets node_types[i].available from the nodes (never above node_types[i].nodes) and returns
// a note such as "free now: node-alpha 1/1, node-beta 0/1".
std::string OverlayAvailability(Cluster& cluster, const std::vector<LiveNode>& nodes);

// Where the nodes of a GPU type have fewer GPUs than its gpus_per_node (their configured
// GRES, whatever their state), gpus_per_node becomes the fewest: Slurm refuses a request
// for more ("Requested node configuration is not available"). Returns "" or
// "; node-alpha: 1 GPU a node, not 2 (the nodes' GRES)" for each type it lowered.
std::string BoundGpusPerNode(Cluster& cluster, const std::vector<LiveNode>& nodes);

// Nodes from `sinfo -h -N -O 'NodeList:|,StateLong:|,Gres:|,GresUsed:|,Features:|'` (the
// stable command-line interface; share/slurm/cli_filter.lua). Each line is
// name|state|gres|used|features| (features may be missing: then none);
// sinfo's state flags count as not free ("idle*" not responding, "idle~" powered down,
// "mixed$" in maintenance). Lines that do not have four fields are skipped.
std::vector<LiveNode> LiveNodesFromSinfo(const std::string& text);

}  // namespace dlh::plan
