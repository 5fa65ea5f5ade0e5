// DLH — `dlh-estimate comm`: the allreduce models fitted to a `dlh-launch bench-allreduce`
// measurement, printed as the link of a cluster description.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// comm BENCH.json [--method mpi|dlh] [--json]: the single alpha-beta pair and the piecewise
// model, their errors by message size, and the link to paste (intra_node or inter_node).
int CommCommand(const std::vector<std::string>& args);

}  // namespace dlh
