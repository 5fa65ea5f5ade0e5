// DLH — reading an input file (spec, cluster description, calibration) whole.
#pragma once

#include <cstddef>
#include <string>

namespace dlh {

// Reads `path` into *text. On failure returns false and sets *why to the reason
// ("No such file or directory", "Is a directory", "not a regular file" for a FIFO, socket or
// device, which are refused without reading, "larger than 1 MiB"), for the caller to
// phrase as "<path>: cannot read: <why>". Files larger than max_bytes are refused: input
// files are small, and a huge one is a mistake (a data set passed as a spec).
bool ReadFileText(const std::string& path, size_t max_bytes, std::string* text, std::string* why);

}  // namespace dlh
