// DLH — `dlh-estimate recommend`: the allocation for a deadline, from a spec or a program's
// profile, as a table, JSON or an HTML page.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// recommend SPEC --samples N --deadline T [...], or recommend --profile FILE --deadline T:
// exit 0 with the chosen allocation, 3 (kExitInfeasible) when none meets the deadline.
int RecommendCommand(const std::vector<std::string>& args);

}  // namespace dlh
