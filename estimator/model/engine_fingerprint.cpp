// DLH estimator — which engine a calibration timed (see engine_fingerprint.hpp). The two
// values come from estimator/module.mk, which recompiles this file when the sources change.
#include "estimator/model/engine_fingerprint.hpp"

#include <sstream>
#include <vector>

#include "common/short_list.hpp"

#ifndef DLH_CPU_ENGINE_FINGERPRINT
#error "estimator/module.mk defines DLH_CPU_ENGINE_FINGERPRINT"
#endif
#ifndef DLH_CPU_ENGINE_SOURCES
#error "estimator/module.mk defines DLH_CPU_ENGINE_SOURCES"
#endif
#ifndef DLH_CUDA_ENGINE_FINGERPRINT
#error "estimator/module.mk defines DLH_CUDA_ENGINE_FINGERPRINT"
#endif
#ifndef DLH_CUDA_ENGINE_SOURCES
#error "estimator/module.mk defines DLH_CUDA_ENGINE_SOURCES"
#endif

namespace dlh {

bool CpuEngineDevice(const std::string& device) { return device.rfind("cuda", 0) != 0; }

std::string EngineFingerprint(const std::string& device) {
  return CpuEngineDevice(device) ? DLH_CPU_ENGINE_FINGERPRINT : DLH_CUDA_ENGINE_FINGERPRINT;
}

namespace {

// "path=hash,path=hash,..." as estimator/module.mk writes it (no character the shell reads).
EngineSourceHashes ParseSources(const std::string& text) {
  EngineSourceHashes out;
  std::istringstream in(text);
  std::string entry;
  while (std::getline(in, entry, ',')) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos && eq > 0) out[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return out;
}

}  // namespace

const EngineSourceHashes& EngineSources(const std::string& device) {
  static const EngineSourceHashes cpu = ParseSources(DLH_CPU_ENGINE_SOURCES);
  static const EngineSourceHashes cuda = ParseSources(DLH_CUDA_ENGINE_SOURCES);
  return CpuEngineDevice(device) ? cpu : cuda;
}

std::string EngineDifference(const std::string& device, const std::string& engine,
                             const EngineSourceHashes& sources) {
  const std::string now = EngineFingerprint(device);
  if (engine == now) return "";
  const EngineSourceHashes& mine = EngineSources(device);
  std::string why = engine.empty() ? std::string("records no engine (made before fingerprints)")
                                   : "measured with engine " + engine;
  if (!sources.empty() && !mine.empty()) {  // judged file by file
    std::vector<std::string> differ;
    for (const auto& [path, hash] : mine) {
      const auto it = sources.find(path);
      if (it == sources.end() || it->second != hash) differ.push_back(path);
    }
    if (differ.empty()) return "";
    why += " (" + ShortList(differ) + (differ.size() == 1 ? " differs)" : " differ)");
  }
  return why + ", this build's engine is " + now;
}

}  // namespace dlh
