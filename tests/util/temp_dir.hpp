// DLH tests — a scratch folder per test, removed with everything in it at the end of its
// scope. Shared by the unit and MPI tests (header only: tests/util has no library).
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlh::test {

class TempDir {
 public:
  // Creates $TMPDIR/<prefix>-XXXXXX (/tmp without TMPDIR); the prefix names the test in a
  // folder left behind by a crash. Throws std::runtime_error if it cannot, which fails
  // the test that asked.
  explicit TempDir(const std::string& prefix = "dlh-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!mkdtemp(tmpl.data()))
      throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;  // never throw from a destructor; a leftover folder is harmless
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` inside the folder.
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  // Writes `text` to `name` inside the folder and returns its path.
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string p = *this / name;
    std::ofstream out(p, std::ios::binary);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + p);
    return p;
  }
  // The names of the entries directly in the folder, sorted (to check, say, that a writer
  // left no temporary file behind).
  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

}  // namespace dlh::test
