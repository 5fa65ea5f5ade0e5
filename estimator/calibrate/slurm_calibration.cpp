// DLH estimator — the pure part of `dlh-estimate calibrate --slurm` (see slurm_calibration.hpp).
#include "estimator/calibrate/slurm_calibration.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "estimator/cluster/cluster.hpp"

namespace dlh {

namespace fs = std::filesystem;

namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// "12" -> 12; false for anything but a plain non-negative number.
bool ParseInt(const std::string& s, long* out) {
  if (s.empty() || s.size() > 9) return false;
  for (unsigned char c : s)
    if (!std::isdigit(c)) return false;
  *out = std::strtol(s.c_str(), nullptr, 10);
  return true;
}

// Words of `scontrol show job -o` that start a field: "Key=" with a key of letters (and
// the ':' or '/' of "Socks/Node", "OverSubscribe" style keys). A word without one is the
// continuation of the previous value (a job name or command with spaces).
bool StartsField(const std::string& word, std::string* key, std::string* value) {
  const size_t eq = word.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  for (size_t i = 0; i < eq; ++i) {
    const unsigned char c = static_cast<unsigned char>(word[i]);
    if (!(std::isalnum(c) || c == '/' || c == ':' || c == '_')) return false;
  }
  *key = word.substr(0, eq);
  *value = word.substr(eq + 1);
  return true;
}

}  // namespace

bool ValidGpuTypeName(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;
  for (unsigned char c : name)
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

CalibrationTypes PickCalibrationTypes(const std::vector<SinfoNode>& nodes,
                                      const std::vector<std::string>& wanted,
                                      const std::string& partition) {
  CalibrationTypes out;
  std::vector<std::string> seen;
  for (const SinfoNode& n : nodes) {
    if (!partition.empty() && !Contains(n.partitions, partition)) continue;
    for (const auto& [type, count] : GpusOfGres(n.gres)) {
      if (type.empty() || count <= 0) continue;
      if (!Contains(seen, type)) seen.push_back(type);
      out.nodes[type].push_back(n.name);
    }
  }
  const std::string where = partition.empty() ? "" : " in partition " + partition;
  for (const std::string& type : wanted.empty() ? seen : wanted) {
    if (Contains(out.types, type)) continue;  // --types alpha,alpha
    if (!ValidGpuTypeName(type))
      out.failed.emplace_back(type, "not a valid GPU type name (letters, digits, '-', '_', '.')");
    else if (!Contains(seen, type))
      out.failed.emplace_back(type, "no node" + where + " offers GRES gpu:" + type + " (sinfo)");
    else
      out.types.push_back(type);
  }
  for (auto it = out.nodes.begin(); it != out.nodes.end();)
    it = Contains(out.types, it->first) ? std::next(it) : out.nodes.erase(it);
  return out;
}

std::string ShellQuote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::vector<std::string> TypeJobSbatchArgs(const TypeJobRequest& job, const std::string& command) {
  // sbatch expands %j, %N, ... in --output; "%%" is a literal '%'.
  std::string log;
  for (char c : job.log) log += c == '%' ? std::string("%%") : std::string(1, c);
  std::vector<std::string> args = {"sbatch",
                                   "--parsable",
                                   "--gres=gpu:" + job.type + ":1",
                                   "--exclusive",
                                   "-N",
                                   "1",
                                   "-n",
                                   "1",
                                   "--job-name=" + job.job_name,
                                   "--time=" + job.time_limit};
  if (!job.partition.empty()) args.push_back("--partition=" + job.partition);
  args.push_back("--output=" + log);
  args.push_back("--wrap=" + command);
  return args;
}

std::vector<std::string> CalibrationSbatchArgs(const CalibrationJob& job) {
  std::string command = ShellQuote(job.estimate) + " calibrate --device " + ShellQuote(job.device) +
                        " --out " + ShellQuote(job.out);
  if (job.quick) command += " --quick";
  return TypeJobSbatchArgs(
      {job.type, "dlh-calibrate-" + job.type, job.log, job.time_limit, job.partition}, command);
}

SlurmJobState ParseScontrolJob(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::string last;
  std::istringstream in(text.substr(0, text.find('\n')));
  for (std::string word; in >> word;) {
    std::string key, value;
    if (StartsField(word, &key, &value)) {
      last = key;
      fields[key] = value;
    } else if (!last.empty()) {
      fields[last] += " " + word;
    }
  }
  SlurmJobState s;
  auto get = [&](const char* key) {
    auto it = fields.find(key);
    return it == fields.end() ? std::string() : it->second;
  };
  s.state = get("JobState");
  s.reason = get("Reason");
  if (s.reason == "None") s.reason.clear();
  s.nodes = get("NodeList");
  if (s.nodes == "(null)") s.nodes.clear();
  const std::string exit_code = get("ExitCode");  // "STATUS:SIGNAL"
  const size_t colon = exit_code.find(':');
  long status = 0, signal = 0;
  if (colon != std::string::npos && ParseInt(exit_code.substr(0, colon), &status) &&
      ParseInt(exit_code.substr(colon + 1), &signal)) {
    s.exit_status = int(status);
    s.signal = int(signal);
  }
  s.run_s = ParseSlurmElapsed(get("RunTime"));
  s.finished = JobStateFinished(s.state);
  return s;
}

bool JobStateFinished(const std::string& state) {
  static const std::set<std::string> kFinal = {
      "COMPLETED", "FAILED",   "CANCELLED", "TIMEOUT",      "NODE_FAIL", "OUT_OF_MEMORY",
      "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT", "REVOKED"};
  return kFinal.count(state) > 0;
}

double ParseSlurmElapsed(const std::string& text) {
  long days = 0;
  std::string rest = text;
  if (const size_t dash = text.find('-'); dash != std::string::npos) {
    if (!ParseInt(text.substr(0, dash), &days)) return -1;
    rest = text.substr(dash + 1);
  }
  std::vector<long> parts;
  std::stringstream ss(rest);
  for (std::string p; std::getline(ss, p, ':');) {
    long v = 0;
    if (!ParseInt(p, &v)) return -1;
    parts.push_back(v);
  }
  if (parts.size() == 2) parts.insert(parts.begin(), 0);  // MM:SS
  if (parts.size() != 3) return -1;
  return double(days * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]);
}

std::string CalibrationPathFor(const std::string& cluster_path,
                               const std::string& calibration_path) {
  const fs::path folder = fs::absolute(cluster_path).lexically_normal().parent_path();
  const fs::path file = fs::absolute(calibration_path).lexically_normal();
  // A path that climbs to '/' and down again names another tree; it breaks as soon as
  // either is moved, so the absolute path says more.
  auto f = folder.begin(), c = file.begin();
  int shared = 0;
  for (; f != folder.end() && c != file.end() && *f == *c; ++f, ++c) ++shared;
  if (shared < 2) return file.string();  // only the root in common
  return file.lexically_relative(folder).string();
}

ClusterCalibrationUpdate SetClusterCalibrations(
    const std::string& text, const std::string& cluster_path,
    const std::map<std::string, std::string>& calibration_of) {
  const std::string base_dir = fs::path(cluster_path).parent_path().string();
  // Validates first, so that the ordered parse below sees a well-formed description (no
  // duplicate keys, gpu_types an array of objects with names).
  ParseCluster(text, cluster_path, base_dir);
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
  ClusterCalibrationUpdate out;
  std::set<std::string> found;
  for (auto& g : j.at("gpu_types")) {
    const std::string name = g.at("name").get<std::string>();
    auto it = calibration_of.find(name);
    if (it == calibration_of.end()) continue;
    g["calibration"] = it->second;  // replaced in place, or added last
    out.updated.push_back(name);
    found.insert(name);
  }
  for (const auto& [type, path] : calibration_of)
    if (!found.count(type)) out.absent.push_back(type);
  out.text = j.dump(2) + "\n";
  ParseCluster(out.text, cluster_path, base_dir);
  return out;
}

}  // namespace dlh
