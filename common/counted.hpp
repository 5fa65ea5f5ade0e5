// DLH — a count and its noun in a message: "1 rank", "2 ranks", "1 record", "0 records".
#pragma once

#include <string>

namespace dlh {

// `n` followed by `one` for 1 and by `many` (default: `one` + "s") otherwise.
inline std::string Counted(long long n, const std::string& one, const std::string& many = "") {
  return std::to_string(n) + " " + (n == 1 ? one : many.empty() ? one + "s" : many);
}

}  // namespace dlh
