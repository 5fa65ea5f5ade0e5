// DLH — each GPU rank on the CPUs nearest its GPU (see gpu_placement.hpp).
#include "launcher/engine/gpu_placement.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace dlh {
namespace {

// The first line of a small sysfs file, "" when it cannot be read.
std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return line;
}

}  // namespace

std::vector<int> ParseCpuList(const std::string& text, const std::string& origin) {
  static const std::regex range(R"(\s*(\d{1,5})(?:-(\d{1,5}))?\s*)");
  std::vector<int> cpus;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::smatch m;
    if (!std::regex_match(item, m, range))
      throw UsageError(origin + ": not a CPU list (such as 0-3,8): '" + text + "'");
    const int first = std::stoi(m[1]), last = m[2].matched ? std::stoi(m[2]) : first;
    if (last < first) throw UsageError(origin + ": range " + item + " runs backwards");
    for (int c = first; c <= last; ++c) cpus.push_back(c);
  }
  if (cpus.empty()) throw UsageError(origin + ": an empty CPU list");
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(cpus[i]) +
         (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return s;
}

std::string SysfsPciAddress(const std::string& bus_id) {
  static const std::regex form(R"(([0-9A-Fa-f]{1,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7]))");
  std::smatch m;
  if (!std::regex_match(bus_id, m, form)) return "";
  char out[32];
  std::snprintf(out, sizeof out, "%04lx:%02lx:%02lx.%lx",
                std::strtoul(m[1].str().c_str(), nullptr, 16) & 0xffff,
                std::strtoul(m[2].str().c_str(), nullptr, 16),
                std::strtoul(m[3].str().c_str(), nullptr, 16),
                std::strtoul(m[4].str().c_str(), nullptr, 16));
  return out;
}

GpuPlacement PlaceNearGpu(const std::string& bus_id, const std::vector<int>& allowed,
                          const std::string& sysfs_pci) {
  GpuPlacement p;
  const std::string address = SysfsPciAddress(bus_id);
  if (address.empty()) {
    p.note = "GPU " + bus_id + ": not a PCI address, CPUs left as they are";
    return p;
  }
  const std::string dir = sysfs_pci + "/" + address;
  const std::string list = FirstLine(dir + "/local_cpulist");
  if (list.empty()) {
    p.note = "GPU " + bus_id + ": no " + dir + "/local_cpulist, CPUs left as they are";
    return p;
  }
  std::vector<int> near;
  try {
    near = ParseCpuList(list, dir + "/local_cpulist");
  } catch (const UsageError& e) {
    p.note = std::string(e.what()) + ", CPUs left as they are";
    return p;
  }
  const std::string node = FirstLine(dir + "/numa_node");
  if (!node.empty() && std::regex_match(node, std::regex(R"(-?\d{1,4})")))
    p.numa_node = std::stoi(node);
  std::vector<int> both;
  std::set_intersection(allowed.begin(), allowed.end(), near.begin(), near.end(),
                        std::back_inserter(both));
  const std::string where =
      p.numa_node >= 0 ? " (NUMA node " + std::to_string(p.numa_node) + ")" : "";
  if (both.size() == allowed.size()) {
    p.note = "CPUs " + FormatCpuList(allowed) + " all near GPU " + bus_id + where;
  } else if (both.empty()) {
    p.far = true;
    p.note =
        "CPUs " + FormatCpuList(allowed) + " are all far from GPU " + bus_id + where +
        ", whose near CPUs are " + FormatCpuList(near) +
        ": left as the launcher bound them (srun --gpu-bind=closest places ranks near their GPUs)";
  } else {
    p.bind = true;
    p.cpus = both;
    p.note = "bound to CPUs " + FormatCpuList(both) + ", near GPU " + bus_id + where + ", of " +
             FormatCpuList(allowed);
  }
  return p;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

GpuPlacement ApplyGpuPlacement(const std::string& bus_id) {
  if (const char* env = std::getenv("DLH_GPU_BIND"); env && std::string(env) == "none") return {};
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.empty()) return {};
  GpuPlacement p = PlaceNearGpu(bus_id, allowed);
  if (!p.bind) return p;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : p.cpus)
    if (c < CPU_SETSIZE) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    p.note = "GPU " + bus_id + ": cannot bind to CPUs " + FormatCpuList(p.cpus) + " (" +
             std::strerror(errno) + "), left as they are";
    p.bind = false;
  }
  return p;
}

}  // namespace dlh
