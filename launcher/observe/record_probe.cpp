// DLH — the node's device probe for an observation record (see record_probe.hpp).
//
// Null for now: launcher/probe/ (ProbeDevice: sgemm at the engine's shapes, memory
// bandwidth, on a GPU a convolution, a GEMM and the clocks) is being written alongside this
// file, and the call is wired here when both are merged. Kept in a file of its own, in the
// launcher's library rather than the store's, because the probe runs the engine.
#include "launcher/observe/record_probe.hpp"

namespace dlh {

nlohmann::json NodeProbeForRecord(const std::string& device) {
  (void)device;
  return nullptr;
}

}  // namespace dlh
