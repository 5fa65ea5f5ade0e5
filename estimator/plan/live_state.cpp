// DLH planning core — live node state (see live_state.hpp).
#include "estimator/plan/live_state.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>

namespace dlh::plan {

namespace {

// "gpu:a100:4(S:0-1)" -> {gpu, a100, 4}. A last field of digits is the count; Slurm may
// add a unit suffix (K, M, G) to large counts, which GPUs never reach.
GresItem ParseGresItem(const std::string& item) {
  std::string core = item.substr(0, item.find('('));
  std::vector<std::string> f;
  size_t start = 0;
  for (;;) {
    const size_t colon = core.find(':', start);
    f.push_back(core.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  auto digits = [](const std::string& s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  GresItem g;
  g.name = f[0];
  g.count = 1;
  if (f.size() >= 2 && digits(f.back())) {
    g.count = std::strtoll(f.back().c_str(), nullptr, 10);
    g.count_given = true;
    f.pop_back();
  }
  if (f.size() >= 2) g.type = f[1];
  return g;
}

int64_t Count(const std::vector<GresItem>& items, const std::string& type) {
  int64_t n = 0;
  for (const GresItem& g : items)
    if (g.name == "gpu" && g.type == type) n += g.count;
  return n;
}

}  // namespace

std::vector<GresItem> ParseGres(const std::string& text) {
  std::vector<GresItem> out;
  if (text.empty() || text == "(null)") return out;
  int depth = 0;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(ParseGresItem(cur));
    cur.clear();
  };
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    if (c == ',' && depth == 0)
      flush();
    else
      cur += c;
  }
  flush();
  return out;
}

bool HasFeature(const std::string& features, const std::string& feature) {
  size_t start = 0;
  for (;;) {
    const size_t comma = features.find(',', start);
    if (features.compare(start, comma == std::string::npos ? std::string::npos : comma - start,
                         feature) == 0)
      return true;
    if (comma == std::string::npos) return false;
    start = comma + 1;
  }
}

namespace {

bool HasGpus(const LiveNode& node) {
  for (const GresItem& g : ParseGres(node.gres))
    if (g.name == "gpu" && g.count > 0) return true;
  return false;
}

}  // namespace

bool IsNodeOfType(const Cluster& cluster, const NodeType& nt, const LiveNode& node) {
  if (nt.cpu) return !HasGpus(node) && HasFeature(node.features, nt.slurm_feature());
  const int64_t total = Count(ParseGres(node.gres), nt.gpu);
  if (total <= 0) return false;
  int types_using_gpu = 0;
  for (const NodeType& other : cluster.node_types) types_using_gpu += other.gpu == nt.gpu;
  return types_using_gpu == 1 || total == nt.gpus_per_node;
}

std::vector<std::string> NodeNamesOfType(const Cluster& cluster, const NodeType& nt,
                                         const std::vector<LiveNode>& nodes) {
  std::vector<std::string> names;
  for (const LiveNode& n : nodes)
    if (IsNodeOfType(cluster, nt, n)) names.push_back(n.name);
  return names;
}

std::string OverlayAvailability(Cluster& cluster, const std::vector<LiveNode>& nodes) {
  std::string note;
  for (NodeType& nt : cluster.node_types) {
    int free = 0;
    for (const LiveNode& n : nodes) {
      if (!IsNodeOfType(cluster, nt, n)) continue;
      if (n.state != "idle" && (nt.cpu || n.state != "mixed")) continue;
      if (Count(ParseGres(n.gres_used), nt.gpu) > 0) continue;
      ++free;
    }
    nt.available = std::min(free, nt.nodes);
    note += (note.empty() ? "free now: " : ", ") + nt.name + " " + std::to_string(nt.available) +
            "/" + std::to_string(nt.nodes);
  }
  return note;
}

std::string BoundGpusPerNode(Cluster& cluster, const std::vector<LiveNode>& nodes) {
  std::string note;
  for (NodeType& nt : cluster.node_types) {
    if (nt.cpu) continue;
    int64_t fewest = 0;  // the fewest GPUs of the type a node of it has (0: none says)
    for (const LiveNode& n : nodes) {
      if (!IsNodeOfType(cluster, nt, n)) continue;
      const int64_t gpus = Count(ParseGres(n.gres), nt.gpu);
      if (gpus > 0 && (fewest == 0 || gpus < fewest)) fewest = gpus;
    }
    if (fewest > 0 && fewest < nt.gpus_per_node) {
      note += "; " + nt.name + ": " + std::to_string(fewest) + " GPU" + (fewest == 1 ? "" : "s") +
              " a node, not " + std::to_string(nt.gpus_per_node) + " (the nodes' GRES)";
      nt.gpus_per_node = int(fewest);
    }
  }
  return note;
}

namespace {

// sinfo's long state ("idle", "mixed*", "drained", "allocated+") as StateOf names it.
std::string StateFromSinfo(std::string state) {
  std::string flags;
  while (!state.empty() && std::string("*~#!%$@^-+").find(state.back()) != std::string::npos) {
    flags += state.back();
    state.pop_back();
  }
  if (state.rfind("drain", 0) == 0) return "drain";
  if (flags.find_first_of("*~#!%@^-") != std::string::npos) return "down";
  if (flags.find('$') != std::string::npos || state == "reserved" || state == "maint")
    return "reserved";
  if (state == "idle" || state == "mixed") return state;
  if (state == "allocated" || state == "completing") return "alloc";
  return state == "down" || state == "fail" || state == "failing" ? "down" : "unknown";
}

}  // namespace

std::vector<LiveNode> LiveNodesFromSinfo(const std::string& text) {
  std::vector<LiveNode> nodes;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> fields;
    std::stringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, '|')) {
      const size_t first = cell.find_first_not_of(' ');
      const size_t last = cell.find_last_not_of(' ');
      fields.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
    }
    if (fields.size() < 4 || fields[0].empty()) continue;
    nodes.push_back({fields[0], StateFromSinfo(fields[1]), fields[2], fields[3],
                     fields.size() > 4 ? fields[4] : std::string()});
  }
  return nodes;
}

}  // namespace dlh::plan
