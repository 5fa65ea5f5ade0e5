// DLH — values written as Python source text, for the programs `dlh-launch export` writes.
#pragma once

#include <string>

namespace dlh {

// A double-quoted Python string literal of UTF-8 text: backslash, quote and control
// characters escaped, other bytes as they are (Python source is UTF-8).
std::string PythonString(const std::string& text);

// The shortest decimal that reads back as the same double, always with a '.' or an
// exponent, so Python reads a float: 0.05, 1e-05, 2.0.
std::string PythonFloat(double value);

// True or False.
inline std::string PythonBool(bool value) { return value ? "True" : "False"; }

}  // namespace dlh
