// DLH estimator — which engine a calibration timed (see engine_fingerprint.hpp). The two
// values come from estimator/module.mk, which recompiles this file when the sources change.
#include "estimator/model/engine_fingerprint.hpp"

#ifndef DLH_CPU_ENGINE_FINGERPRINT
#error "estimator/module.mk defines DLH_CPU_ENGINE_FINGERPRINT"
#endif
#ifndef DLH_CUDA_ENGINE_FINGERPRINT
#error "estimator/module.mk defines DLH_CUDA_ENGINE_FINGERPRINT"
#endif

namespace dlh {

bool CpuEngineDevice(const std::string& device) { return device.rfind("cuda", 0) != 0; }

std::string EngineFingerprint(const std::string& device) {
  return CpuEngineDevice(device) ? DLH_CPU_ENGINE_FINGERPRINT : DLH_CUDA_ENGINE_FINGERPRINT;
}

}  // namespace dlh
