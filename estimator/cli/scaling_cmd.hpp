// DLH — `dlh-estimate scaling`: on paper, how a spec scales on nodes of one type with the GPU
// engine's two allreduce algorithms (flat NCCL and the staged hybrid), from the type's
// calibrated step time and the communication model (comm_model.hpp).
#pragma once

#include <string>
#include <vector>

namespace dlh {

// scaling SPEC --cluster FILE --node-type NAME [--max-gpus N] [--per-gpu-batch B]
// [--host-copy-gbs G] [--host-copy-us U]: a Markdown table, one row per GPU count
// (1, 2, 4, ... within a node, then whole nodes).
int ScalingCommand(const std::vector<std::string>& args);

}  // namespace dlh
