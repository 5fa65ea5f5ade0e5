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
  // Seconds until the jobs running on it reach their time limits (0: none runs there; -1:
  // unknown). From Slurm's running jobs (squeue, or slurmctld in the plugin); it tells the
  // plan how long a busy node keeps a waiting job (expected_start.hpp).
  double free_in_s = -1;
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

// Whether `node` is one of node type `nt`'s nodes: it carries GPUs of nt's GPU type and,
// when several node types share that GPU type, exactly nt's gpus_per_node of them; for a
// CPU node type, it carries nt's feature and no GPU.
bool IsNodeOfType(const Cluster& cluster, const NodeType& nt, const LiveNode& node);

// The names of node type `nt`'s nodes among `nodes`, whatever their state: a job on two
// types tells each rank its type by its node's name (DLH_PLAN allocation.parts[].node_names).
std::vector<std::string> NodeNamesOfType(const Cluster& cluster, const NodeType& nt,
                                         const std::vector<LiveNode>& nodes);

// Whether `node` counts as free now for node type `nt` (the rule at the top).
bool IsFreeForType(const Cluster& cluster, const NodeType& nt, const LiveNode& node);

// Sets node_types[i].available from the nodes (never above node_types[i].nodes) and returns
// a note such as "free now: node-alpha 1/1, node-beta 0/1".
std::string OverlayAvailability(Cluster& cluster, const std::vector<LiveNode>& nodes);

// Nodes from `sinfo -h -N -O 'NodeList:|,StateLong:|,Gres:|,GresUsed:|,Features:|'` (the
// stable command-line interface; share/slurm/cli_filter.lua). Each line is
// name|state|gres|used|features| (features may be missing: then none);
// sinfo's state flags count as not free ("idle*" not responding, "idle~" powered down,
// "mixed$" in maintenance). Lines that do not have four fields are skipped.
std::vector<LiveNode> LiveNodesFromSinfo(const std::string& text);

// The running jobs, as `squeue -h -t RUNNING,COMPLETING -o '%N|%L'` lists them: per job its
// nodes (a Slurm hostlist) and its time left ("D-HH:MM:SS", "HH:MM:SS", "MM:SS";
// "UNLIMITED" or "NOT_SET"). The command both front ends run (squeue is Slurm's stable
// interface; plugin/slurm_nodes.cpp, estimator/cli/slurm_plan_cmd.cpp).
extern const char* const kSqueueRunningArgs[6];

// Sets each node's free_in_s from the running jobs (`text`, the output above): the longest
// time left of the jobs on it, 0 where none runs; a job with no limit makes its nodes never
// free (infinity). A line it cannot read leaves the nodes of unknown free time (-1) only if
// they are not covered otherwise: returns false when any line could not be read, and the
// nodes keep -1 then (the plan does not guess).
bool ApplyRunningJobs(const std::string& text, std::vector<LiveNode>* nodes);

// Runs that squeue (as the submitting user, under `timeout 20`, no shell) and applies its
// output; false when it fails or cannot be read (then every free_in_s stays -1, and a plan
// that must wait takes the best allocation of the whole cluster, as before).
bool LoadRunningJobs(std::vector<LiveNode>* nodes);

}  // namespace dlh::plan
