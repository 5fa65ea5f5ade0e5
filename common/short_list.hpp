// DLH — a list in a one-line message, shortened: "a", "a, b", "a, b, c and 13 more".
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace dlh {

// The first `shown` items, then how many more there are.
inline std::string ShortList(const std::vector<std::string>& items, size_t shown = 3) {
  std::string s;
  shown = std::min(items.size(), shown);
  for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + items[i];
  if (items.size() > shown) s += " and " + std::to_string(items.size() - shown) + " more";
  return s;
}

}  // namespace dlh
