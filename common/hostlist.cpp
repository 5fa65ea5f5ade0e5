// DLH — node names as Slurm hostlist expressions (see hostlist.hpp).
#include "common/hostlist.hpp"

#include <cctype>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "common/error.hpp"

namespace dlh {
namespace {

bool AllDigits(const std::string& s) {
  if (s.empty() || s.size() > 18) return false;  // 18 digits fit int64
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// "<origin>: <what>", or <what> alone without an origin.
[[noreturn]] void Bad(const std::string& origin, const std::string& what) {
  throw UsageError(origin.empty() ? what : origin + ": " + what);
}

std::string Padded(int64_t v, size_t width) {
  std::string s = std::to_string(v);
  return s.size() < width ? std::string(width - s.size(), '0') + s : s;
}

// Splits at commas outside brackets.
std::vector<std::string> Items(const std::string& text, const std::string& origin) {
  std::vector<std::string> items;
  std::string item;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) Bad(origin, text + ": unbalanced or nested brackets");
    if (c == ',' && depth == 0) {
      items.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  if (depth != 0) Bad(origin, text + ": a bracket is not closed");
  items.push_back(item);
  return items;
}

}  // namespace

std::vector<std::string> ExpandHostlist(const std::string& text, const std::string& origin) {
  std::vector<std::string> names;
  for (const std::string& item : Items(text, origin)) {
    if (item.empty()) Bad(origin, text + ": an empty name");
    const size_t open = item.find('[');
    if (open == std::string::npos) {
      if (item.find(']') != std::string::npos) Bad(origin, item + ": unbalanced brackets");
      names.push_back(item);
    } else {
      const size_t close = item.find(']', open);
      const std::string prefix = item.substr(0, open), suffix = item.substr(close + 1);
      if (suffix.find_first_of("[]") != std::string::npos)
        Bad(origin, item + ": one bracket per name");
      const std::string inside = item.substr(open + 1, close - open - 1);
      size_t at = 0;
      for (;;) {
        const size_t comma = inside.find(',', at);
        const std::string range =
            inside.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        const size_t dash = range.find('-');
        const std::string lo = range.substr(0, dash);
        const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
        if (!AllDigits(lo) || !AllDigits(hi))
          Bad(origin, item + ": '" + range + "' is not a number or a range of numbers");
        const int64_t a = std::stoll(lo), b = std::stoll(hi);
        if (b < a) Bad(origin, item + ": a range must not run backwards");
        if (uint64_t(b - a) >= kMaxHostlistNames - names.size())
          Bad(origin, item + ": more than " + std::to_string(kMaxHostlistNames) + " names");
        for (int64_t v = a; v <= b; ++v) names.push_back(prefix + Padded(v, lo.size()) + suffix);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    }
    if (names.size() > kMaxHostlistNames)
      throw UsageError(origin + ": more than " + std::to_string(kMaxHostlistNames) + " names");
  }
  return names;
}

std::vector<std::string> CompressHostlist(const std::vector<std::string>& names) {
  // Group by (prefix, width of the trailing number); a name without one is its own group.
  std::vector<std::pair<std::string, size_t>> order;  // groups in order of first appearance
  std::map<std::pair<std::string, size_t>, std::set<int64_t>> numbers;
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) continue;
    size_t digits = 0;
    while (digits < name.size() && digits < 18 &&
           std::isdigit(static_cast<unsigned char>(name[name.size() - 1 - digits])))
      ++digits;
    // A name that a bracket could not give back as written stays whole: no trailing number,
    // or one with a leading zero where its width is not fixed.
    const std::string prefix = name.substr(0, name.size() - digits);
    const bool bracketable = digits > 0 && prefix.find_first_of("[],") == std::string::npos;
    const std::pair<std::string, size_t> key =
        bracketable ? std::make_pair(prefix, digits) : std::make_pair(name, size_t(0));
    if (!numbers.count(key)) order.push_back(key);
    if (bracketable)
      numbers[key].insert(std::stoll(name.substr(prefix.size())));
    else
      numbers[key];
  }
  std::vector<std::string> out;
  for (const auto& key : order) {
    const std::set<int64_t>& values = numbers[key];
    if (key.second == 0) {
      out.push_back(key.first);
      continue;
    }
    if (values.size() == 1) {
      out.push_back(key.first + Padded(*values.begin(), key.second));
      continue;
    }
    std::string ranges;
    for (auto it = values.begin(); it != values.end();) {
      const int64_t start = *it;
      int64_t end = start;
      for (++it; it != values.end() && *it == end + 1; ++it) end = *it;
      ranges += (ranges.empty() ? "" : ",") + Padded(start, key.second) +
                (end > start ? "-" + Padded(end, key.second) : "");
    }
    out.push_back(key.first + "[" + ranges + "]");
  }
  return out;
}

}  // namespace dlh
