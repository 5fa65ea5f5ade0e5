// DLH planning core — the nodes a user's request names (requested_nodes.hpp).
#include "estimator/plan/requested_nodes.hpp"

#include <algorithm>
#include <set>

#include "common/error.hpp"
#include "common/hostlist.hpp"

namespace dlh::plan {

namespace {

// The node type of a live node ("" when it is of none of the cluster's types).
const NodeType* TypeOfNode(const Cluster& cluster, const LiveNode& node) {
  for (const NodeType& nt : cluster.node_types)
    if (IsNodeOfType(cluster, nt, node)) return &nt;
  return nullptr;
}

// The live node an option names; UsageError where Slurm has none of that name (`listed`:
// the nodes Slurm lists, before any was excluded).
const LiveNode& RequireNode(const std::string& option, const std::string& name,
                            const std::vector<LiveNode>& live, size_t listed) {
  for (const LiveNode& n : live)
    if (n.name == name) return n;
  throw UsageError("--" + option + ": " + name + " is no node of this cluster (Slurm lists " +
                   std::to_string(listed) + " nodes)");
}

// The names of an option's hostlist; throws UsageError naming the option.
std::vector<std::string> NamesOf(const std::string& option, const std::string& value) {
  std::vector<std::string> names = ExpandHostlist(value, "--" + option);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (names.empty()) throw UsageError("--" + option + ": names no node");
  return names;
}

std::string Joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& t : items) s += (s.empty() ? "" : ", ") + t;
  return s;
}

}  // namespace

std::string ApplyRequestedNodes(UserRequest* user, Cluster* cluster, std::vector<LiveNode>* live,
                                const std::string& live_error, bool mixed) {
  const bool from_file = user->nodelist.find('/') != std::string::npos;
  if (user->exclude.empty() && (user->nodelist.empty() || from_file)) {
    return from_file ? "your --nodelist is a file of node names, which Slurm reads and this plan "
                       "does not"
                     : "";
  }
  const bool known = live_error.empty();
  const size_t listed_by_slurm = live->size();
  const std::vector<std::string> excluded =
      user->exclude.empty() ? std::vector<std::string>() : NamesOf("exclude", user->exclude);
  std::string note;

  if (!excluded.empty()) {
    if (known) {
      std::vector<std::string> left_out;
      for (const std::string& name : excluded) {
        const LiveNode& node = RequireNode("exclude", name, *live, listed_by_slurm);
        for (NodeType& type : cluster->node_types)
          if (IsNodeOfType(*cluster, type, node)) {
            if (type.nodes > 0) --type.nodes;
            left_out.push_back(type.name);
            break;
          }
      }
      live->erase(std::remove_if(live->begin(), live->end(),
                                 [&](const LiveNode& n) {
                                   return std::binary_search(excluded.begin(), excluded.end(),
                                                             n.name);
                                 }),
                  live->end());
      std::sort(left_out.begin(), left_out.end());
      left_out.erase(std::unique(left_out.begin(), left_out.end()), left_out.end());
      std::string counts;
      for (const std::string& name : left_out) {
        const NodeType* nt = cluster->node_type(name);
        counts += (counts.empty() ? "" : ", ") + name + " " + std::to_string(nt->nodes) +
                  (nt->nodes == 1 ? " node" : " nodes");
      }
      note = "your --exclude=" + user->exclude + " left out" +
             (counts.empty() ? std::string(" no node of a planned type") : ": " + counts);
    } else {
      note = "your --exclude=" + user->exclude + ": not planned around (live node state unknown)";
    }
  }

  if (!user->nodelist.empty() && !from_file) {
    const std::vector<std::string> listed = NamesOf("nodelist", user->nodelist);
    for (const std::string& name : listed)
      if (std::binary_search(excluded.begin(), excluded.end(), name))
        throw UsageError("--nodelist: " + name + " is in your --exclude too");
    if (known) {
      std::set<std::string> types;  // GPU types (a CPU node type's `gpu` is its own name)
      std::vector<std::string> of_type;
      for (const std::string& name : listed) {
        const NodeType* nt =
            TypeOfNode(*cluster, RequireNode("nodelist", name, *live, listed_by_slurm));
        if (!nt)
          throw UsageError("--nodelist: " + name +
                           " is of no node type of the cluster description, so DLH cannot plan "
                           "for it");
        if (types.insert(nt->gpu).second) of_type.push_back(name + ": " + nt->name);
      }
      if (types.size() > 1 && !mixed)
        throw UsageError("--nodelist: names nodes of " + std::to_string(types.size()) + " types (" +
                         Joined(of_type) + "); one job on two types needs --dlh-auto=...,mixed");
      user->nodelist_types.assign(types.begin(), types.end());
    }
    if (!user->nodes_set && !mixed) {
      user->nodes = int(listed.size());
      user->nodes_from_nodelist = true;
    }
    const std::string count =
        std::to_string(listed.size()) + (listed.size() == 1 ? " node" : " nodes");
    note +=
        std::string(note.empty() ? "" : "; ") + "your --nodelist=" + user->nodelist +
        (known ? ": planned on its " + count + " of " + Joined(user->nodelist_types)
               : ": planned for its " + count + ", whatever their type (live node state unknown)");
  }
  return note;
}

std::vector<std::string> TypesOfNodelist(const UserRequest& user,
                                         const std::vector<std::string>& allowed) {
  if (user.nodelist_types.empty()) return allowed;
  std::vector<std::string> out;
  for (const std::string& t : user.nodelist_types)
    if (allowed.empty() || std::find(allowed.begin(), allowed.end(), t) != allowed.end())
      out.push_back(t);
  if (out.empty())
    throw UsageError("--nodelist: names " + Joined(user.nodelist_types) +
                     " nodes, which your --gres/--gpus, --constraint or types= rule out");
  return out;
}

}  // namespace dlh::plan
