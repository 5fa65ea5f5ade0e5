// DLH — the node's device probe for an observation record (see record_probe.hpp).
//
// The record's probe is the one a calibration records (launcher/probe/host_probe.hpp), taken
// short: half a second at the job's end, on rank 0's node, with the threads of rank 0's
// affinity mask. It tells a later reader which machine the measured times belong to
// (refit keeps the records whose probe agrees with the calibration's). Kept in a file of its
// own, in the launcher's library rather than the store's, because the probe runs the engine.
// A probe that cannot run leaves the field null: the training has succeeded, and its record
// is still worth keeping without it.
#include "launcher/observe/record_probe.hpp"

#include "common/error.hpp"
#include "launcher/probe/host_probe.hpp"

namespace dlh {

nlohmann::json NodeProbeForRecord(const std::string& device) {
  ProbeOptions options;
  options.budget_s = 0.5;
  try {
    return ProbeDevice(device.rfind("cuda", 0) == 0 ? device.substr(0, device.find(' ')) : "cpu",
                       options);
  } catch (const std::exception&) {
    return nullptr;
  }
}

}  // namespace dlh
