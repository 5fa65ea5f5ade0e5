// DLH estimator — the cluster description: parsing and validation.
#include "estimator/cluster/cluster.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>

#include "common/count_limits.hpp"
#include "common/file_text.hpp"
#include "common/json_parse.hpp"
#include "estimator/model/cuda_targets.hpp"

namespace dlh {

using nlohmann::json;

namespace {

constexpr size_t kMaxClusterBytes = 16u << 20;

// A CPU node type's intra_node link when the file gives none: shared-memory MPI_Allreduce
// between ranks of one node, as measured on the test host (share/cluster/local.json, the
// regime of messages from 11 KB to 11 MB).
constexpr double kDefaultSharedMemoryGbs = 5.364;
constexpr double kDefaultSharedMemoryLatencyUs = 6.352;

// ---------------------------------------------------------------- messages

// A JSON value for "got ...": compact, ASCII, one line, at most about 60 characters.

std::string Quote(const std::string& s) {
  return json(s).dump(-1, ' ', true, json::error_handler_t::replace);
}

// "<origin>: <path>: <problem>", or "<origin>: <problem>" for the whole file; one line.
[[noreturn]] void Throw(const std::string& origin, const std::string& path,
                        const std::string& problem) {
  std::string msg = (origin.empty() ? std::string("cluster") : origin) + ": ";
  if (!path.empty()) msg += path + ": ";
  msg += problem;
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  throw EstimateError(msg);
}

// ---------------------------------------------------------------- field reader

// Reads the fields of one JSON object, failing with the field's full path.
class Fields {
 public:
  Fields(const json& j, const std::string& origin, std::string path)
      : j_(j), origin_(origin), path_(std::move(path)) {
    if (!j_.is_object()) Throw(origin_, path_, "must be an object, got " + ShownJsonValue(j_));
  }

  const std::string& origin() const { return origin_; }
  std::string at(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    Throw(origin_, key.empty() ? path_ : at(key), problem);
  }
  bool has(const char* key) const { return j_.contains(key); }
  const json& required(const char* key) const {
    if (!has(key)) fail(key, "required");
    return j_.at(key);
  }

  void only(std::initializer_list<const char*> allowed) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool known = false;
      for (const char* a : allowed) known = known || it.key() == a;
      if (!known) fail("", "unknown key " + Quote(it.key()));
    }
  }

  // A finite number; `positive`: > 0, else >= 0; at most `most`. Every quantity of a
  // cluster (watts, GB, TFLOP/s, GB/s, microseconds, seconds) is far below 1e9: 1e308
  // passed, and planned into infinite energies and ratios printed with seventy digits
  // (2026-12-07).
  double number(const char* key, bool positive, double most = 1e9) const {
    const json& v = required(key);
    const char* want = positive ? "must be a positive number" : "must be a non-negative number";
    if (!v.is_number()) fail(key, std::string(want) + ", got " + ShownJsonValue(v));
    double d = v.get<double>();
    if (!std::isfinite(d) || (positive ? !(d > 0) : !(d >= 0)))
      fail(key, std::string(want) + ", got " + ShownJsonValue(v));
    if (d > most) {
      char cap[32];
      std::snprintf(cap, sizeof cap, "%g", most);
      fail(key, std::string("must be at most ") + cap + ", got " + ShownJsonValue(v));
    }
    return d;
  }

  int positive_integer(const char* key, int64_t max = INT_MAX) const {
    const json& v = required(key);
    bool ok =
        v.is_number_unsigned() && v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= uint64_t(max);
    if (!ok)
      fail(key, "must be a positive integer" +
                    (max < INT_MAX ? " up to " + std::to_string(max) : std::string()) + ", got " +
                    ShownJsonValue(v));
    return int(v.get<uint64_t>());
  }

  std::string text(const char* key) const {
    const json& v = required(key);
    if (!v.is_string()) fail(key, "must be a string, got " + ShownJsonValue(v));
    std::string s = v.get<std::string>();
    if (s.empty()) fail(key, "must not be empty");
    return s;
  }

  // A name also used on Slurm's command line (GRES type, node type): letters, digits and
  // "-_.", not empty.
  std::string name(const char* key) const {
    std::string s = text(key);
    for (unsigned char c : s)
      if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.'))
        fail(key, "must contain only letters, digits, '-', '_' and '.', got " +
                      ShownJsonValue(j_.at(key)));
    return s;
  }

  void optional_string(const char* key) const {
    if (has(key) && !j_.at(key).is_string())
      fail(key, "must be a string, got " + ShownJsonValue(j_.at(key)));
  }

  const json& array(const char* key) const {
    const json& v = required(key);
    if (!v.is_array() || v.empty())
      fail(key, "must be a non-empty array, got " + ShownJsonValue(v));
    return v;
  }

 private:
  const json& j_;
  const std::string& origin_;
  std::string path_;
};

// regimes[i]: {"up_to_bytes", "latency_us", "bandwidth_gbs"}; every regime but the last
// needs up_to_bytes, and the limits grow strictly, so each message size has one regime.
std::vector<LinkRegime> ParseRegimes(const Fields& link) {
  const json& list = link.array("regimes");
  std::vector<LinkRegime> regimes;
  for (size_t i = 0; i < list.size(); ++i) {
    Fields f(list[i], link.origin(), link.at("regimes") + "[" + std::to_string(i) + "]");
    f.only({"up_to_bytes", "latency_us", "bandwidth_gbs"});
    LinkRegime r;
    const bool last = i + 1 == list.size();
    if (!last && !f.has("up_to_bytes"))
      f.fail("up_to_bytes", "required (only the last regime may leave it out)");
    if (f.has("up_to_bytes")) {
      r.up_to_bytes = f.number("up_to_bytes", true, 1e15);
      if (!regimes.empty() && !(r.up_to_bytes > regimes.back().up_to_bytes))
        f.fail("up_to_bytes", "must be larger than the previous regime's (" +
                                  json(regimes.back().up_to_bytes).dump() + "), got " +
                                  json(r.up_to_bytes).dump());
    }
    r.latency_us = f.number("latency_us", false);
    r.bandwidth_gbs = f.number("bandwidth_gbs", true);
    regimes.push_back(r);
  }
  // The last regime covers every larger message too (its own up_to_bytes, if any, is only a
  // note of the largest size measured).
  regimes.back().up_to_bytes = 0;
  return regimes;
}

// Either the single pair or the regimes: two descriptions of one link that could disagree
// would leave the reader guessing which one the estimator uses.
Link ParseLink(const json& j, const std::string& origin, const std::string& path) {
  Fields f(j, origin, path);
  f.only({"bandwidth_gbs", "latency_us", "regimes"});
  Link link;
  if (f.has("regimes")) {
    if (f.has("bandwidth_gbs") || f.has("latency_us"))
      f.fail("", "give either bandwidth_gbs and latency_us or regimes, not both");
    link.regimes = ParseRegimes(f);
    return link;
  }
  link.bandwidth_gbs = f.number("bandwidth_gbs", true);
  link.latency_us = f.number("latency_us", false);
  return link;
}

GpuType ParseGpuType(const json& j, const std::string& origin, const std::string& path,
                     const std::string& base_dir) {
  Fields f(j, origin, path);
  f.only({"name", "description", "memory_gb", "peak_tflops", "memory_bandwidth_gbs", "active_watts",
          "idle_watts", "calibration", "compute_capability", "tf32_tflops", "sms"});
  GpuType g;
  g.name = f.name("name");
  f.optional_string("description");
  g.memory_gb = f.number("memory_gb", true);
  g.peak_tflops = f.number("peak_tflops", true);
  g.memory_bandwidth_gbs = f.number("memory_bandwidth_gbs", true);
  // The GPU layer model's peaks (optional): both, or neither.
  if (f.has("tf32_tflops") != f.has("sms"))
    f.fail(f.has("sms") ? "tf32_tflops" : "sms",
           "required with " + std::string(f.has("sms") ? "sms" : "tf32_tflops") +
               " (the GPU layer model takes both)");
  if (f.has("tf32_tflops")) {
    g.tf32_tflops = f.number("tf32_tflops", true);
    g.sms = f.positive_integer("sms", 100000);
  }
  g.active_watts = f.number("active_watts", true);
  g.idle_watts = f.number("idle_watts", false);
  if (g.idle_watts > g.active_watts)
    f.fail("idle_watts", "must not exceed active_watts (" + json(g.active_watts).dump() +
                             "), got " + json(g.idle_watts).dump());
  if (f.has("calibration")) {
    std::filesystem::path p(f.text("calibration"));
    if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
    g.calibration = p.lexically_normal().string();
  }
  if (f.has("compute_capability")) {
    g.compute_capability = f.text("compute_capability");
    if (const std::string problem = ComputeCapabilityProblem(g.compute_capability);
        !problem.empty())
      f.fail("compute_capability", problem);
  }
  return g;
}

// "partitions": a non-empty array of non-empty strings (Slurm partition names).
std::vector<std::string> ParsePartitions(const Fields& f) {
  const json& parts = f.array("partitions");
  std::vector<std::string> out;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string at = f.at("partitions") + "[" + std::to_string(i) + "]";
    if (!parts[i].is_string() || parts[i].get<std::string>().empty())
      Throw(f.origin(), at, "must be a non-empty string, got " + ShownJsonValue(parts[i]));
    out.push_back(parts[i].get<std::string>());
  }
  return out;
}

NodeType ParseNodeType(const json& j, const std::string& origin, const std::string& path) {
  Fields f(j, origin, path);
  f.only({"name", "description", "gpu", "gpus_per_node", "nodes", "node_base_watts", "intra_node",
          "partitions", "cpu_cores", "feature"});
  NodeType n;
  n.name = f.name("name");
  f.optional_string("description");
  n.gpu = f.text("gpu");
  n.gpus_per_node = f.positive_integer("gpus_per_node", kMaxGpusPerNode);
  n.nodes = f.positive_integer("nodes", kMaxNodesPerType);
  n.node_base_watts = f.number("node_base_watts", false);
  // A node with one GPU has no GPU-to-GPU link: intra_node may be left out.
  if (n.gpus_per_node > 1 || f.has("intra_node"))
    n.intra_node = ParseLink(f.required("intra_node"), origin, f.at("intra_node"));
  if (f.has("partitions")) n.partitions = ParsePartitions(f);
  if (f.has("cpu_cores")) n.cpu_cores = f.positive_integer("cpu_cores");
  if (f.has("feature")) n.feature = f.name("feature");
  return n;
}

// cpu_node_types[i]: nodes whose processors train (the CPU engine). One entry becomes a device
// type (GpuType, cpu) and a node type of the same name, so that the recommender plans it as it
// plans a GPU type: a "GPU" is one MPI rank, and a node runs 1, 2, 4, ... up to `cores` of
// them, each with cores / ranks threads. The figures are the whole node's.
void ParseCpuNodeType(const json& j, const std::string& origin, const std::string& path,
                      const std::string& base_dir, GpuType* g, NodeType* n) {
  Fields f(j, origin, path);
  // No peaks: they serve to move a calibration to another type, and a CPU node type is timed
  // by its own (below).
  f.only({"name", "description", "nodes", "cores", "memory_gb", "active_watts", "idle_watts",
          "node_base_watts", "calibration", "intra_node", "partitions", "feature"});
  f.optional_string("description");
  g->cpu = n->cpu = true;
  g->name = n->name = n->gpu = f.name("name");
  n->nodes = f.positive_integer("nodes", kMaxNodesPerType);
  n->cpu_cores = n->gpus_per_node = f.positive_integer("cores", kMaxGpusPerNode);
  g->memory_gb = f.number("memory_gb", true);
  g->active_watts = f.number("active_watts", true);
  g->idle_watts = f.number("idle_watts", false);
  if (g->idle_watts > g->active_watts)
    f.fail("idle_watts", "must not exceed active_watts (" + json(g->active_watts).dump() +
                             "), got " + json(g->idle_watts).dump());
  n->node_base_watts = f.has("node_base_watts") ? f.number("node_base_watts", false) : 0;
  // Required: a CPU's speed depends on its cores, caches and memory far more than its peak
  // says, and no GPU calibration transfers to it (dlh-estimate calibrate on one such node).
  std::filesystem::path p(f.text("calibration"));
  if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
  g->calibration = p.lexically_normal().string();
  // Ranks of one node reduce through shared memory: the test host's measured MPI_Allreduce
  // (share/cluster/local.json's regimes, middle regime) unless the file says otherwise.
  if (f.has("intra_node"))
    n->intra_node = ParseLink(f.required("intra_node"), origin, f.at("intra_node"));
  else
    n->intra_node = Link(kDefaultSharedMemoryGbs, kDefaultSharedMemoryLatencyUs);
  if (f.has("partitions")) n->partitions = ParsePartitions(f);
  if (f.has("feature")) n->feature = f.name("feature");
}

Runtime ParseRuntime(const json& j, const std::string& origin) {
  Fields f(j, origin, "runtime");
  f.only({"description", "startup_s", "launch_s", "read_gbs", "write_gbs", "stage_gbs",
          "local_read_gbs", "shared_host_cores"});
  f.optional_string("description");
  Runtime r;
  if (f.has("startup_s")) r.startup_s = f.number("startup_s", false);
  if (r.startup_s > 86400) f.fail("startup_s", "must be at most 86400 seconds");
  if (f.has("launch_s")) r.launch_s = f.number("launch_s", false);
  if (r.launch_s > r.startup_s)
    f.fail("launch_s", "must be at most startup_s (it is a part of it)");
  if (f.has("read_gbs")) r.read_gbs = f.number("read_gbs", true);
  if (f.has("write_gbs")) r.write_gbs = f.number("write_gbs", true);
  if (f.has("stage_gbs")) r.stage_gbs = f.number("stage_gbs", true);
  if (f.has("local_read_gbs")) r.local_read_gbs = f.number("local_read_gbs", true);
  if (f.has("shared_host_cores")) r.shared_host_cores = f.positive_integer("shared_host_cores");
  return r;
}

}  // namespace

const GpuType* Cluster::gpu(const std::string& type_name) const {
  for (const GpuType& g : gpu_types)
    if (g.name == type_name) return &g;
  return nullptr;
}

const NodeType* Cluster::node_type(const std::string& node_name) const {
  for (const NodeType& n : node_types)
    if (n.name == node_name) return &n;
  return nullptr;
}

Cluster ParseCluster(const std::string& json_text, const std::string& origin,
                     const std::string& base_dir) {
  json root;
  JsonProblem problem;
  if (!ParseJsonStrict(json_text, &root, &problem)) Throw(origin, problem.path, problem.message);
  if (!root.is_object()) Throw(origin, "", "must be a JSON object, got " + ShownJsonValue(root));

  Fields top(root, origin, "");
  top.only({"name", "description", "gpu_types", "node_types", "cpu_node_types", "inter_node",
            "runtime", "observations", "observations_limit"});
  Cluster c;
  c.name = top.text("name");
  c.origin = origin;
  top.optional_string("description");

  // A cluster of CPU nodes alone needs no GPU types.
  static const json kNone = json::array();
  const bool cpus_only =
      top.has("cpu_node_types") && !top.has("gpu_types") && !top.has("node_types");
  const json& gpus = cpus_only ? kNone : top.array("gpu_types");
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::string path = "gpu_types[" + std::to_string(i) + "]";
    GpuType g = ParseGpuType(gpus[i], origin, path, base_dir);
    if (c.gpu(g.name)) Throw(origin, path + ".name", "duplicate GPU type " + Quote(g.name));
    c.gpu_types.push_back(std::move(g));
  }

  const json& nodes = cpus_only ? kNone : top.array("node_types");
  int64_t gpus_in_all = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::string path = "node_types[" + std::to_string(i) + "]";
    NodeType n = ParseNodeType(nodes[i], origin, path);
    for (const NodeType& other : c.node_types)
      if (other.name == n.name)
        Throw(origin, path + ".name", "duplicate node type " + Quote(n.name));
    if (!c.gpu(n.gpu)) Throw(origin, path + ".gpu", "unknown GPU type " + Quote(n.gpu));
    // Every GPU count of a plan (a job's, a mix's, the recommender's bound) is at most this.
    gpus_in_all += int64_t(n.nodes) * n.gpus_per_node;  // each factor bounded: no overflow
    if (gpus_in_all > kMaxGpus)
      Throw(origin, path + ".nodes",
            std::to_string(gpus_in_all) + " GPUs in all is more than DLH plans for (at most " +
                std::to_string(kMaxGpus) + ")");
    c.node_types.push_back(std::move(n));
  }

  if (top.has("cpu_node_types")) {
    const json& cpus = top.array("cpu_node_types");
    for (size_t i = 0; i < cpus.size(); ++i) {
      std::string path = "cpu_node_types[" + std::to_string(i) + "]";
      GpuType g;
      NodeType n;
      ParseCpuNodeType(cpus[i], origin, path, base_dir, &g, &n);
      // One name space: types= and the plan name a CPU node type as they name a GPU type.
      if (c.gpu(n.name) || c.node_type(n.name))
        Throw(origin, path + ".name",
              "duplicate name " + Quote(n.name) + " (already a GPU type or node type)");
      gpus_in_all += int64_t(n.nodes) * n.gpus_per_node;
      if (gpus_in_all > kMaxGpus)
        Throw(origin, path + ".nodes",
              std::to_string(gpus_in_all) + " ranks in all is more than DLH plans for (at most " +
                  std::to_string(kMaxGpus) + ")");
      c.gpu_types.push_back(std::move(g));
      c.node_types.push_back(std::move(n));
    }
  }

  c.inter_node = ParseLink(top.required("inter_node"), origin, "inter_node");
  if (top.has("runtime")) c.runtime = ParseRuntime(root.at("runtime"), origin);
  // The observation store (docs/reference/observations.md): a folder, relative to this file's.
  if (top.has("observations")) {
    std::filesystem::path p(top.text("observations"));
    if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
    c.observations = p.lexically_normal().string();
  }
  if (top.has("observations_limit"))
    c.observations_limit = top.positive_integer("observations_limit");
  return c;
}

Cluster LoadCluster(const std::string& path) {
  std::string text, why;
  if (!ReadFileText(path, kMaxClusterBytes, &text, &why)) {
    if (why.rfind("larger than", 0) == 0) why += ", not a cluster description";
    Throw(path, "", "cannot read: " + why);
  }
  return ParseCluster(text, path, std::filesystem::path(path).parent_path().string());
}

std::vector<std::string> ResolveTypeNames(const std::vector<std::string>& given,
                                          const Cluster& cluster, const std::string& prefix) {
  std::vector<std::string> out;
  auto add = [&](const std::string& name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  const std::string file = cluster.origin.empty() ? cluster.name : cluster.origin;
  for (const std::string& t : given) {
    if (cluster.gpu(t)) {
      add(t);
      continue;
    }
    if (t != "cpu" && t != "gpu")
      throw UsageError(prefix + ": " + file + " has no GPU type or CPU node type '" + t + "'");
    const bool want_cpu = t == "cpu";
    const size_t before = out.size();
    for (const GpuType& g : cluster.gpu_types)
      if (g.cpu == want_cpu) add(g.name);
    if (out.size() == before && std::none_of(cluster.gpu_types.begin(), cluster.gpu_types.end(),
                                             [&](const GpuType& g) { return g.cpu == want_cpu; }))
      throw UsageError(prefix + ": " + file + " has no " +
                       (want_cpu ? "CPU node type" : "GPU type") + " for '" + t + "'");
  }
  return out;
}

}  // namespace dlh
