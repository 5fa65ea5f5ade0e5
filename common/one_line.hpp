// DLH — making a message safe to print as one line.
#pragma once

#include <string>

namespace dlh {

// `text` with every control character written out ("\n", "\t", "\x1b"): a value the user
// gave (a spec path, a --dlh-auto item) can then neither break a message into several
// lines nor send escape sequences to a terminal or a log.
std::string OneLine(const std::string& text);

}  // namespace dlh
