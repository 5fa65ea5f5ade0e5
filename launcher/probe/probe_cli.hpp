// DLH — `dlh-launch probe` and `dlh-estimate probe`: the device probe (host_probe.hpp) as one
// JSON object on stdout.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// probe [--device cpu|cuda[:N]] [--threads N] [--seconds S]: prints the probe and returns 0.
// Throws UsageError for a bad option and Error (one line) when the probe cannot run; `tool`
// ("dlh-launch") words the --help pointer.
int ProbeCommand(const std::vector<std::string>& args, const std::string& tool);

}  // namespace dlh
