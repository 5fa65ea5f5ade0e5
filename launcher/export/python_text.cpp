// DLH — values as Python source text (see python_text.hpp).
#include "launcher/export/python_text.hpp"

#include <cstdio>
#include <cstdlib>

namespace dlh {

std::string PythonString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string PythonFloat(double value) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  std::string out = buf;
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";  // "n": inf and nan
  return out;
}

}  // namespace dlh
