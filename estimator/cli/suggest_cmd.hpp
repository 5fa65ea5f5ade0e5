// DLH — `dlh-estimate suggest --data FILE --deadline T`: a spec for the data set, the network
// sized to the deadline by the recommender (estimator/recommend/suggest.hpp).
#pragma once

#include <string>
#include <vector>

namespace dlh {

// Exit 0 with the spec written; 3 (kExitInfeasible) when no member meets the deadline (the
// table and the reason are printed, nothing is written).
int SuggestCommand(const std::vector<std::string>& args);

}  // namespace dlh
