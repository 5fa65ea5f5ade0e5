// DLH tests — a file of the source tree by its path from the top, found from the working
// folder or the test binary upwards, so that a test runs from any folder (make check runs
// them from the top, a developer from build/). Header only: tests/util has no library.
#pragma once

#include <filesystem>
#include <string>

namespace dlh::test {

inline std::string RepoFile(const std::string& relative) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::path p : {fs::current_path(ec), fs::read_symlink("/proc/self/exe", ec)})
    for (; !p.empty() && p != p.parent_path(); p = p.parent_path())
      if (fs::exists(p / relative)) return (p / relative).string();
  return relative;
}

}  // namespace dlh::test
