// DLH — the node's device probe for an observation record (record.hpp, "where.probe").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dlh {

// The probe of `device` ("cpu", "cuda:0 ...") on this node as a record stores it; null when
// there is none. Never throws: a probe that cannot run leaves the record without one.
nlohmann::json NodeProbeForRecord(const std::string& device);

}  // namespace dlh
