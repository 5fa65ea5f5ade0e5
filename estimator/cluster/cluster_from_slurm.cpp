// DLH estimator — a cluster description drafted from sinfo (see cluster_from_slurm.hpp).
#include "estimator/cluster/cluster_from_slurm.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "common/short_list.hpp"
#include "estimator/model/cuda_targets.hpp"

namespace dlh {

using json = nlohmann::ordered_json;  // fields in cluster-description.md's order

namespace {

// ---------------------------------------------------------------- datasheets

// One model variant. `usual_size`: the one meant when a GRES type names the model and form
// factor but no memory size; `usual_form`: the one meant when it names no form factor.
struct Variant {
  const char* word;  // the model word in GRES type names
  const char* form;  // "sxm" or "pcie"
  int memory_gb;
  bool usual_size;
  bool usual_form;
  GpuDatasheet sheet;
};

const Link kNvlink2{150, 3};  // per GPU, per direction: 6 links x 25 GB/s
const Link kNvlink3{300, 3};  // 12 links x 25 GB/s
const Link kNvlink4{450, 3};  // 18 links x 25 GB/s
const Link kPcie3{16, 5};     // x16, per direction
const Link kPcie4{32, 5};
const Link kPcie5{64, 5};

// NVIDIA datasheets: fp32 without tensor cores or sparsity; TDP as active_watts; idle_watts
// a typical draw of an allocated, idle board (nvidia-smi), which datasheets do not give.
const Variant kVariants[] = {
    {"a100",
     "sxm",
     40,
     true,
     true,
     {"NVIDIA A100 SXM4 40 GB", 40, 19.5, 1555, 400, 55, "NVLink 3", kNvlink3, "8.0"}},
    {"a100",
     "sxm",
     80,
     false,
     true,
     {"NVIDIA A100 SXM4 80 GB", 80, 19.5, 2039, 400, 60, "NVLink 3", kNvlink3, "8.0"}},
    {"a100",
     "pcie",
     40,
     true,
     false,
     {"NVIDIA A100 PCIe 40 GB", 40, 19.5, 1555, 250, 35, "PCIe 4.0 x16", kPcie4, "8.0"}},
    {"a100",
     "pcie",
     80,
     false,
     false,
     {"NVIDIA A100 PCIe 80 GB", 80, 19.5, 1935, 300, 40, "PCIe 4.0 x16", kPcie4, "8.0"}},
    {"h100",
     "sxm",
     80,
     true,
     true,
     {"NVIDIA H100 SXM5 80 GB", 80, 67, 3350, 700, 70, "NVLink 4", kNvlink4, "9.0"}},
    {"h100",
     "pcie",
     80,
     true,
     false,
     {"NVIDIA H100 PCIe 80 GB", 80, 51.2, 2000, 350, 50, "PCIe 5.0 x16", kPcie5, "9.0"}},
    {"h200",
     "sxm",
     141,
     true,
     true,
     {"NVIDIA H200 SXM 141 GB", 141, 67, 4800, 700, 75, "NVLink 4", kNvlink4, "9.0"}},
    {"v100",
     "sxm",
     32,
     true,
     true,
     {"NVIDIA V100 SXM2 32 GB", 32, 15.7, 900, 300, 40, "NVLink 2", kNvlink2, "7.0"}},
    {"v100",
     "sxm",
     16,
     false,
     true,
     {"NVIDIA V100 SXM2 16 GB", 16, 15.7, 900, 300, 40, "NVLink 2", kNvlink2, "7.0"}},
    {"v100",
     "pcie",
     32,
     true,
     false,
     {"NVIDIA V100 PCIe 32 GB", 32, 14, 900, 250, 35, "PCIe 3.0 x16", kPcie3, "7.0"}},
    {"v100",
     "pcie",
     16,
     false,
     false,
     {"NVIDIA V100 PCIe 16 GB", 16, 14, 900, 250, 35, "PCIe 3.0 x16", kPcie3, "7.0"}},
    {"l40s",
     "pcie",
     48,
     true,
     true,
     {"NVIDIA L40S 48 GB", 48, 91.6, 864, 350, 35, "PCIe 4.0 x16", kPcie4, "8.9"}},
    {"a40",
     "pcie",
     48,
     true,
     true,
     {"NVIDIA A40 48 GB", 48, 37.4, 696, 300, 30, "PCIe 4.0 x16", kPcie4, "8.6"}},
    {"a10",
     "pcie",
     24,
     true,
     true,
     {"NVIDIA A10 24 GB", 24, 31.2, 600, 150, 20, "PCIe 4.0 x16", kPcie4, "8.6"}},
};

// Placeholders for a GPU type without datasheet figures (--allow-placeholders): modest
// figures of no particular GPU, always marked PLACEHOLDER.
const GpuDatasheet kPlaceholder{"no known GPU", 16, 10, 500, 300, 50, "PCIe 3.0 x16", kPcie3};

// Defaults that Slurm cannot tell, marked "confirm" wherever they are written.
constexpr double kDefaultNodeBaseWatts = 300;  // CPUs, memory, NICs, fans of one node
const Link kDefaultInterNode{12.5, 5};         // 100 Gb/s per node (EDR InfiniBand, 100 GbE)

std::vector<std::string> Words(const std::string& s) {
  std::vector<std::string> words;
  std::string cur;
  for (unsigned char c : s) {
    if (std::isalnum(c)) {
      cur += char(std::tolower(c));
    } else if (!cur.empty()) {
      words.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) words.push_back(cur);
  return words;
}

// "80g", "80gb", "80" -> 80; anything else -> -1.
int MemoryWord(const std::string& w) {
  size_t digits = 0;
  while (digits < w.size() && std::isdigit(static_cast<unsigned char>(w[digits]))) ++digits;
  if (digits == 0 || digits > 4) return -1;
  const std::string rest = w.substr(digits);
  if (rest != "" && rest != "g" && rest != "gb") return -1;
  return std::atoi(w.substr(0, digits).c_str());
}

// 19.5 -> "19.5", 400 -> "400".
std::string Fmt(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// ---------------------------------------------------------------- sinfo

std::vector<std::string> SplitBars(const std::string& line) {
  std::vector<std::string> f;
  size_t start = 0;
  for (size_t bar; (bar = line.find('|', start)) != std::string::npos; start = bar + 1)
    f.push_back(line.substr(start, bar - start));
  f.push_back(line.substr(start));
  return f;
}

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

bool ParseCount(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 15) return false;
  for (unsigned char c : s)
    if (!std::isdigit(c)) return false;
  *out = std::strtoll(s.c_str(), nullptr, 10);
  return true;
}

bool ValidName(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

// "alpha1", "gpu1, gpu2", "gpu1, gpu2, gpu3 and 13 more".
std::string NodeNames(const std::vector<std::string>& names) { return ShortList(names); }

std::string Range(int64_t lo, int64_t hi) {
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
}

std::string Plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// 400 rather than 400.0.
json Num(double v) {
  if (v == double(int64_t(v))) return int64_t(v);
  return v;
}

json LinkJson(const Link& l) {
  return {{"bandwidth_gbs", Num(l.bandwidth_gbs)}, {"latency_us", Num(l.latency_us)}};
}

constexpr const char* kBy = "(dlh-estimate cluster --from-slurm)";

// A CPU node's power when its cores train and when it waits, per core: a 64-core server CPU
// of 280 W TDP (AMD EPYC 7763) is 4.4 W a core, about 0.4 of it drawn idle; defaults for an
// admin to confirm, like kDefaultNodeBaseWatts for the rest of the node.
constexpr double kDefaultCpuWattsPerCore = 4.4;
constexpr double kDefaultCpuIdleShare = 0.4;
// The rest of a CPU node (memory, NICs, fans): its CPUs are in active_watts and idle_watts.
constexpr double kDefaultCpuNodeBaseWatts = 100;

double Tenths(double v) { return std::round(v * 10) / 10; }

// The nodes without GPUs, grouped by (CPUs, memory), as cpu_node_types[] entries.
json DraftCpuNodeTypes(const std::vector<SinfoNode>& nodes, const std::string& calibration,
                       ClusterDraft* draft) {
  std::map<std::pair<int64_t, int64_t>, std::vector<const SinfoNode*>> groups;
  std::map<int64_t, int> groups_of_cpus;
  for (const SinfoNode& n : nodes)
    if (GpusOfGres(n.gres).empty() && n.cpus > 0) {
      auto& g = groups[{n.cpus, n.memory_mb}];
      if (g.empty()) ++groups_of_cpus[n.cpus];
      g.push_back(&n);
    }
  json out = json::array();
  for (const auto& [key, members] : groups) {
    const auto& [cpus, memory_mb] = key;
    const double memory_gb = Tenths(double(memory_mb) * 1048576 / 1e9);  // sinfo's MB are MiB
    std::string name = "cpu-" + std::to_string(cpus) + "c";
    if (groups_of_cpus[cpus] > 1) name += "-" + Fmt(std::round(memory_gb)) + "g";
    std::vector<std::string> names, partitions;
    for (const SinfoNode* n : members) {
      names.push_back(n->name);
      for (const std::string& p : n->partitions)
        if (std::find(partitions.begin(), partitions.end(), p) == partitions.end())
          partitions.push_back(p);
    }
    // A feature that picks exactly these nodes: --constraint=FEATURE then lands on them.
    std::string feature;
    for (const std::string& f : members[0]->features) {
      bool exact = true;
      for (const SinfoNode& n : nodes) {
        const bool member = std::find(members.begin(), members.end(), &n) != members.end();
        const bool has = std::find(n.features.begin(), n.features.end(), f) != n.features.end();
        exact = exact && member == has;
      }
      if (exact && ValidName(f)) {
        feature = f;
        break;
      }
    }
    const double watts = Tenths(kDefaultCpuWattsPerCore * double(cpus));
    const double idle = Tenths(watts * kDefaultCpuIdleShare);
    std::string description =
        Plural(members.size(), "node", "nodes") + " (" + NodeNames(names) + ") without GPUs, " +
        std::to_string(cpus) + " CPUs (sinfo; hardware threads where SMT is on: confirm cores), " +
        Fmt(memory_gb) + " GB memory; active_watts " + Fmt(watts) + " and idle_watts " + Fmt(idle) +
        " are defaults (" + Fmt(kDefaultCpuWattsPerCore) + " W a core), node_base_watts " +
        Fmt(kDefaultCpuNodeBaseWatts) + " (memory, NICs, fans)" +
        " likewise: confirm; the calibration must be measured on one of these nodes " + kBy;
    if (feature.empty()) {
      description += "; no Slurm feature picks exactly these nodes: add Features=" + name +
                     " to them in slurm.conf (a plan asks for them with --constraint=" + name + ")";
      draft->notes.push_back("CPU node type " + name + ": add Features=" + name + " to " +
                             NodeNames(names) + " in slurm.conf");
    }
    json t = {{"name", name},
              {"description", description},
              {"nodes", members.size()},
              {"cores", cpus},
              {"memory_gb", Num(memory_gb)},
              {"active_watts", Num(watts)},
              {"idle_watts", Num(idle)},
              {"node_base_watts", Num(kDefaultCpuNodeBaseWatts)},
              {"calibration", calibration}};
    if (!feature.empty()) t["feature"] = feature;
    if (!partitions.empty()) t["partitions"] = partitions;
    out.push_back(std::move(t));
    draft->cpu_nodes += int(members.size());
  }
  return out;
}

}  // namespace

const GpuDatasheet* LookUpGpuDatasheet(const std::string& gres_type, std::string* assumed) {
  if (assumed) assumed->clear();
  std::string model, form;
  int memory = -1;
  for (const std::string& w : Words(gres_type)) {
    int m = MemoryWord(w);
    bool is_model = false;
    for (const Variant& v : kVariants) is_model = is_model || w == v.word;
    if (w == "nvidia" || w == "tesla" || w == "hbm2" || w == "hbm2e" || w == "hbm3" ||
        w == "hbm3e" || w == "gddr6") {
      continue;
    } else if (is_model && model.empty()) {
      model = w;
    } else if ((w == "sxm" || w == "sxm2" || w == "sxm4" || w == "sxm5") && form.empty()) {
      form = "sxm";
    } else if (w == "pcie" && form.empty()) {
      form = "pcie";
    } else if (m > 0 && memory < 0) {
      memory = m;
    } else {
      return nullptr;  // a word that may change the figures: name it, do not guess
    }
  }
  if (model.empty()) return nullptr;
  std::set<int> sizes;
  std::set<std::string> forms;
  const Variant* found = nullptr;
  for (const Variant& v : kVariants) {
    if (model != v.word) continue;
    sizes.insert(v.memory_gb);
    forms.insert(v.form);
    if (!form.empty() ? form != v.form : !v.usual_form) continue;
    if (memory > 0 ? memory != v.memory_gb : !v.usual_size) continue;
    found = &v;
  }
  if (!found) return nullptr;
  if (assumed) {
    std::vector<std::string> open;
    if (memory < 0 && sizes.size() > 1) open.push_back("its memory size");
    if (form.empty() && forms.size() > 1) open.push_back("SXM or PCIe");
    if (!open.empty())
      *assumed = "the GRES type does not say " + open[0] +
                 (open.size() > 1 ? " nor " + open[1] : "") + ": assumed the most common model";
  }
  return &found->sheet;
}

std::vector<SinfoNode> NodesFromSinfo(const std::string& text) {
  std::vector<SinfoNode> nodes;
  std::map<std::string, size_t> index;
  std::string default_partition;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f = SplitBars(line);
    // name|gres|partition|cpus|memory|features| (the last '|' leaves an empty field after
    // it; an older draft asked for no features)
    if (f.size() < 5 || f.size() > 7 || (f.size() == 7 && !Trim(f[6]).empty())) continue;
    for (auto& s : f) s = Trim(s);
    if (f[0].empty()) continue;
    auto [it, fresh] = index.emplace(f[0], nodes.size());
    if (fresh) {
      SinfoNode n;
      n.name = f[0];
      n.gres = f[1];
      ParseCount(f[3], &n.cpus);
      ParseCount(f[4], &n.memory_mb);
      if (f.size() >= 6 && f[5] != "(null)") {
        std::stringstream features(f[5]);
        for (std::string ft; std::getline(features, ft, ',');)
          if (!Trim(ft).empty()) n.features.push_back(Trim(ft));
      }
      nodes.push_back(std::move(n));
    }
    SinfoNode& n = nodes[it->second];
    std::string part = f[2];
    if (!part.empty() && part.back() == '*') {
      part.pop_back();
      default_partition = part;
    }
    if (!part.empty() &&
        std::find(n.partitions.begin(), n.partitions.end(), part) == n.partitions.end())
      n.partitions.push_back(part);
  }
  // sinfo lists a node's partitions in no fixed order; the default first, then by name, keeps
  // the description the same from one run to the next.
  for (SinfoNode& n : nodes)
    std::sort(n.partitions.begin(), n.partitions.end(),
              [&](const std::string& a, const std::string& b) {
                return std::make_pair(a != default_partition, a) <
                       std::make_pair(b != default_partition, b);
              });
  return nodes;
}

std::vector<std::pair<std::string, int64_t>> GpusOfGres(const std::string& gres) {
  std::vector<std::pair<std::string, int64_t>> out;
  if (gres.empty() || gres == "(null)") return out;
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : gres) {
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    if (c == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else if (depth == 0 && c != ')') {
      cur += c;
    }
  }
  items.push_back(cur);
  for (const std::string& item : items) {
    std::vector<std::string> f;
    std::stringstream ss(item);
    for (std::string part; std::getline(ss, part, ':');) f.push_back(part);
    if (f.empty() || f[0] != "gpu") continue;
    int64_t count = 1;
    if (f.size() >= 2 && ParseCount(f.back(), &count)) f.pop_back();
    if (count <= 0) continue;
    std::string type = f.size() >= 2 ? f[1] : "";
    bool merged = false;
    for (auto& [t, n] : out)
      if (t == type) n += count, merged = true;
    if (!merged) out.emplace_back(type, count);
  }
  return out;
}

ClusterDraft DraftClusterFromNodes(const std::vector<SinfoNode>& nodes,
                                   const ClusterDraftOptions& options) {
  ClusterDraft draft;
  struct Group {
    std::vector<const SinfoNode*> nodes;
    std::vector<std::string> names;
  };
  std::map<std::pair<std::string, int64_t>, Group> groups;  // (gpu type, gpus per node)
  std::map<std::string, std::vector<std::string>> by_type;  // gpu type -> its nodes
  std::vector<std::string> without_gpus, untyped;
  for (const SinfoNode& n : nodes) {
    auto gpus = GpusOfGres(n.gres);
    if (gpus.empty()) {
      without_gpus.push_back(n.name);
    } else if (gpus.size() > 1) {
      std::string list;
      for (const auto& [t, c] : gpus)
        list += (list.empty() ? "" : ", ") + t + ":" + std::to_string(c);
      draft.problems.push_back("node " + n.name + " has GPUs of several types (" + list +
                               "): a node type has one GPU type, so it is left out; describe it "
                               "by hand");
      draft.incomplete = true;
    } else if (gpus[0].first.empty()) {
      untyped.push_back(n.name);
    } else if (!ValidName(gpus[0].first)) {
      draft.problems.push_back("gpu type '" + gpus[0].first + "' on " + n.name +
                               ": not a valid cluster description name (letters, digits, '-', "
                               "'_', '.'): left out");
      draft.incomplete = true;
    } else {
      Group& g = groups[{gpus[0].first, gpus[0].second}];
      g.nodes.push_back(&n);
      g.names.push_back(n.name);
      by_type[gpus[0].first].push_back(n.name);
    }
  }
  if (!untyped.empty()) {
    draft.problems.push_back("GPUs without a type on " + NodeNames(untyped) +
                             ": their GRES names no type (gres.conf Type=), so they can neither "
                             "be told apart nor requested as gpu:TYPE:N; left out");
    draft.incomplete = true;
  }
  json cpu_node_types = json::array();
  if (!without_gpus.empty() && options.cpu_calibration.empty())
    draft.notes.push_back(Plural(without_gpus.size(), "node", "nodes") + " without GPUs (" +
                          NodeNames(without_gpus) +
                          ") left out: --cpu-calibration FILE describes them as CPU node types "
                          "(FILE: dlh-estimate calibrate on one of them)");
  else if (!without_gpus.empty())
    cpu_node_types = DraftCpuNodeTypes(nodes, options.cpu_calibration, &draft);

  // GPU types, sorted by name.
  std::map<std::string, const GpuDatasheet*> sheets;
  std::vector<std::string> placeholders;
  json gpu_types = json::array();
  for (const auto& [type, type_nodes] : by_type) {
    std::string assumed;
    const GpuDatasheet* sheet = LookUpGpuDatasheet(type, &assumed);
    const std::string where = "gpu type '" + type + "' on " + NodeNames(type_nodes);
    const std::string fields =
        "memory_gb, peak_tflops, memory_bandwidth_gbs, active_watts, idle_watts and its node "
        "types' intra_node";
    std::string description;
    if (sheet) {
      description = "datasheet figures for " + std::string(sheet->model) + ": confirm memory_gb " +
                    Fmt(sheet->memory_gb) + ", peak_tflops " + Fmt(sheet->peak_tflops) +
                    " (fp32, no tensor cores or sparsity), memory_bandwidth_gbs " +
                    Fmt(sheet->memory_bandwidth_gbs) + ", active_watts " +
                    Fmt(sheet->active_watts) + " (TDP), idle_watts " + Fmt(sheet->idle_watts) +
                    " (typical, not on the datasheet)" + (assumed.empty() ? "" : "; " + assumed) +
                    "; then calibrate it " + kBy;
    } else if (options.allow_placeholders) {
      sheet = &kPlaceholder;
      placeholders.push_back(type);
      description = "PLACEHOLDER figures: no datasheet for GPU type '" + type +
                    "'; memory_gb, peak_tflops, memory_bandwidth_gbs, active_watts and "
                    "idle_watts are made up; replace them (and calibrate) before trusting a "
                    "recommendation " +
                    kBy;
      draft.problems.push_back(where +
                               ": no datasheet figures; wrote PLACEHOLDER figures, "
                               "replace its " +
                               fields + " by hand");
    } else {
      draft.problems.push_back(where + ": no datasheet figures; add its " + fields +
                               " by hand (left out; --allow-placeholders writes marked "
                               "placeholders)");
      draft.incomplete = true;
      continue;
    }
    sheets[type] = sheet;
    json gpu = {{"name", type},
                {"description", description},
                {"memory_gb", Num(sheet->memory_gb)},
                {"peak_tflops", Num(sheet->peak_tflops)},
                {"memory_bandwidth_gbs", Num(sheet->memory_bandwidth_gbs)},
                {"active_watts", Num(sheet->active_watts)},
                {"idle_watts", Num(sheet->idle_watts)}};
    if (sheet->compute_capability) {
      gpu["compute_capability"] = sheet->compute_capability;
      // Described all the same (the nodes exist), but no plan will use them.
      if (const std::string why = WhyEngineCannotRun(sheet->compute_capability); !why.empty())
        draft.notes.push_back(where + ": " + why + "; plans leave it out");
    }
    gpu_types.push_back(gpu);
  }

  // Node types, by GPU type then GPUs per node.
  std::map<std::string, int> counts_per_type;
  for (const auto& [key, g] : groups) ++counts_per_type[key.first];
  json node_types = json::array();
  for (const auto& [key, g] : groups) {
    const auto& [type, per_node] = key;
    auto s = sheets.find(type);
    if (s == sheets.end()) continue;
    const GpuDatasheet& sheet = *s->second;
    const bool placeholder = &sheet == &kPlaceholder;
    std::string name = "gpu-" + type;
    if (counts_per_type[type] > 1) name += "-x" + std::to_string(per_node);
    std::vector<std::string> partitions;
    int64_t cpu_lo = INT64_MAX, cpu_hi = 0, mem_lo = INT64_MAX, mem_hi = 0;
    for (const SinfoNode* n : g.nodes) {
      for (const std::string& p : n->partitions)
        if (std::find(partitions.begin(), partitions.end(), p) == partitions.end())
          partitions.push_back(p);
      cpu_lo = std::min(cpu_lo, n->cpus), cpu_hi = std::max(cpu_hi, n->cpus);
      mem_lo = std::min(mem_lo, n->memory_mb), mem_hi = std::max(mem_hi, n->memory_mb);
    }
    std::string description = Plural(g.nodes.size(), "node", "nodes") + " (" + NodeNames(g.names) +
                              ") with " + std::to_string(per_node) + " x " + type + ", " +
                              Range(cpu_lo, cpu_hi) + " CPUs, " + Range(mem_lo, mem_hi) +
                              " MB memory (sinfo); ";
    const std::string link = Fmt(sheet.intra_node.bandwidth_gbs) + " GB/s per GPU per direction, " +
                             Fmt(sheet.intra_node.latency_us) + " us";
    description += placeholder ? "intra_node is a PLACEHOLDER (" + std::string(sheet.link) + ", " +
                                     link + "): replace it"
                               : "intra_node: datasheet " + std::string(sheet.link) + " (" + link +
                                     "), confirm";
    description += "; node_base_watts " + Fmt(kDefaultNodeBaseWatts) +
                   " is a default for CPUs, memory, NICs and fans: confirm " + kBy;
    json nt = {{"name", name},
               {"description", description},
               {"gpu", type},
               {"gpus_per_node", per_node},
               {"nodes", g.nodes.size()},
               {"node_base_watts", Num(kDefaultNodeBaseWatts)},
               {"intra_node", LinkJson(sheet.intra_node)}};
    if (!partitions.empty()) nt["partitions"] = partitions;
    node_types.push_back(std::move(nt));
    draft.nodes += int(g.nodes.size());
  }
  draft.gpu_types = int(gpu_types.size());
  draft.node_types = int(node_types.size());
  draft.cpu_node_types = int(cpu_node_types.size());
  // nothing to describe: description stays null
  if (node_types.empty() && cpu_node_types.empty()) return draft;

  std::string top = "Drafted by dlh-estimate cluster --from-slurm" +
                    (options.source.empty() ? std::string() : " from " + options.source) +
                    ". Every figure is a datasheet value or a default for an admin to confirm "
                    "(see each type's description). inter_node is a conservative default (" +
                    Fmt(kDefaultInterNode.bandwidth_gbs) + " GB/s = 100 Gb/s per node, " +
                    Fmt(kDefaultInterNode.latency_us) +
                    " us), not read from Slurm: confirm it, e.g. by fitting dlh-launch "
                    "bench-allreduce with dlh-estimate comm.";
  if (!placeholders.empty()) {
    std::string list;
    for (const auto& p : placeholders) list += (list.empty() ? "" : ", ") + p;
    top += " Contains PLACEHOLDER figures for GPU types without a datasheet: " + list + ".";
  }
  draft.description = {{"name", options.name}, {"description", top}};
  if (!node_types.empty()) {
    draft.description["gpu_types"] = gpu_types;
    draft.description["node_types"] = node_types;
  }
  if (!cpu_node_types.empty()) draft.description["cpu_node_types"] = cpu_node_types;
  draft.description["inter_node"] = LinkJson(kDefaultInterNode);
  return draft;
}

}  // namespace dlh
