// DLH estimator — which GPUs this build's CUDA engine can run (see cuda_targets.hpp).
#include "estimator/model/cuda_targets.hpp"

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"

#ifndef DLH_CUDA_TARGETS
#error "DLH_CUDA_TARGETS must name the CUDA engine's targets (estimator/module.mk)"
#endif

namespace dlh {
namespace {

struct Target {
  bool ptx = false;       // compute_XY: any capability >= X.Y
  bool specific = false;  // sm_90a: X.Y alone
  ComputeCapability cc;
};

bool ParseTarget(const std::string& text, Target* t) {
  static const std::regex form(R"((sm|compute)_(\d+)(\d)([af]?))");
  std::smatch m;
  if (!std::regex_match(text, m, form)) return false;
  t->ptx = m[1] == "compute";
  t->cc.major = std::stoi(m[2]);
  t->cc.minor = std::stoi(m[3]);
  t->specific = m[4].length() > 0;
  return true;
}

bool AtLeast(ComputeCapability a, ComputeCapability b) {
  return a.major != b.major ? a.major > b.major : a.minor >= b.minor;
}

std::string TargetsText(const std::vector<std::string>& targets) {
  std::vector<std::string> parts;
  for (const std::string& t : targets) {
    Target parsed;
    if (!ParseTarget(t, &parsed)) continue;
    parts.push_back(parsed.ptx ? "PTX " + t : t);
  }
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i)
    s += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return s.empty() ? "no GPU target" : s;
}

}  // namespace

namespace {
const std::regex& CapabilityForm() {
  static const std::regex form(R"(([1-9]\d?)\.(\d))");
  return form;
}
}  // namespace

std::string ComputeCapabilityProblem(const std::string& text) {
  if (std::regex_match(text, CapabilityForm())) return "";
  return "must be MAJOR.MINOR such as \"8.0\" or \"9.0\", got \"" + text + "\"";
}

ComputeCapability ParseComputeCapability(const std::string& text, const std::string& what) {
  std::smatch m;
  if (!std::regex_match(text, m, CapabilityForm()))
    throw EstimateError(what + ": " + ComputeCapabilityProblem(text));
  return ComputeCapability{std::stoi(m[1]), std::stoi(m[2])};
}

const std::vector<std::string>& BuiltCudaTargets() {
  static const std::vector<std::string> targets = [] {
    std::vector<std::string> out;
    std::istringstream in(DLH_CUDA_TARGETS);
    for (std::string t; in >> t;) out.push_back(t);
    return out;
  }();
  return targets;
}

bool CudaTargetsRun(const std::vector<std::string>& targets, ComputeCapability cc) {
  for (const std::string& text : targets) {
    Target t;
    if (!ParseTarget(text, &t)) continue;
    if (t.specific) {
      if (cc.major == t.cc.major && cc.minor == t.cc.minor) return true;
    } else if (t.ptx) {
      if (AtLeast(cc, t.cc)) return true;
    } else if (cc.major == t.cc.major && cc.minor >= t.cc.minor) {
      return true;
    }
  }
  return false;
}

std::string WhyEngineCannotRun(const std::string& compute_capability) {
  if (compute_capability.empty()) return "";
  const ComputeCapability cc = ParseComputeCapability(compute_capability, "compute_capability");
  if (CudaTargetsRun(BuiltCudaTargets(), cc)) return "";
  return "compute capability " + compute_capability + ": DLH's GPU engine is built for " +
         TargetsText(BuiltCudaTargets());
}

}  // namespace dlh
