// DLH — duration parsing (see duration.hpp).
#include "common/duration.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/error.hpp"

namespace dlh {
namespace {

[[noreturn]] void Bad(const std::string& what, const std::string& text) {
  throw UsageError(what + ": expected a duration like 3h, 90m, 2h30m, 45s or D-HH:MM:SS, got '" +
                   text + "'");
}

bool AllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// Slurm: "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS".
double ParseSlurm(const std::string& text, const std::string& what) {
  double days = 0;
  std::string rest = text;
  size_t dash = text.find('-');
  if (dash != std::string::npos) {
    std::string d = text.substr(0, dash);
    if (!AllDigits(d)) Bad(what, text);
    days = std::atof(d.c_str());
    rest = text.substr(dash + 1);
  }
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t colon = rest.find(':', start);
    parts.push_back(
        rest.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  for (const auto& p : parts)
    if (!AllDigits(p)) Bad(what, text);
  std::vector<double> v;
  for (const auto& p : parts) v.push_back(std::atof(p.c_str()));
  double seconds = 0;
  if (dash != std::string::npos) {  // D-HH[:MM[:SS]]
    if (v.size() > 3) Bad(what, text);
    const double unit[3] = {3600, 60, 1};
    for (size_t i = 0; i < v.size(); ++i) seconds += v[i] * unit[i];
  } else if (v.size() == 2) {  // MM:SS
    seconds = v[0] * 60 + v[1];
  } else if (v.size() == 3) {  // HH:MM:SS
    seconds = v[0] * 3600 + v[1] * 60 + v[2];
  } else {
    Bad(what, text);
  }
  return days * 86400 + seconds;
}

}  // namespace

double ParseDuration(const std::string& text, const std::string& what) {
  double seconds = 0;
  if (text.find(':') != std::string::npos || text.find('-') != std::string::npos) {
    seconds = ParseSlurm(text, what);
  } else if (AllDigits(text)) {
    seconds = std::atof(text.c_str());
  } else {
    // Units: a sequence of <number><unit>, units d, h, m, s in decreasing order.
    size_t i = 0;
    int last_rank = 5;
    bool any = false;
    while (i < text.size()) {
      size_t j = i;
      while (j < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.'))
        ++j;
      if (j == i || j >= text.size()) Bad(what, text);
      char* end = nullptr;
      std::string num = text.substr(i, j - i);
      double value = std::strtod(num.c_str(), &end);
      if (*end != '\0') Bad(what, text);
      int rank = 0;
      double unit = 0;
      switch (text[j]) {
        case 'd':
          rank = 4, unit = 86400;
          break;
        case 'h':
          rank = 3, unit = 3600;
          break;
        case 'm':
          rank = 2, unit = 60;
          break;
        case 's':
          rank = 1, unit = 1;
          break;
        default:
          Bad(what, text);
      }
      if (rank >= last_rank) Bad(what, text);
      last_rank = rank;
      seconds += value * unit;
      any = true;
      i = j + 1;
    }
    if (!any) Bad(what, text);
  }
  if (!(seconds > 0) || !std::isfinite(seconds))
    throw UsageError(what + ": must be a positive duration, got '" + text + "'");
  return seconds;
}

std::string HumanDuration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "--";
  long s = std::lround(seconds);
  char buf[48];
  if (s >= 86400)
    std::snprintf(buf, sizeof buf, "%ldd%02ldh", s / 86400, (s / 3600) % 24);
  else if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else if (seconds >= 1)
    std::snprintf(buf, sizeof buf, "%lds", s);
  else
    std::snprintf(buf, sizeof buf, "%.0fms", seconds * 1000);
  return buf;
}

}  // namespace dlh
