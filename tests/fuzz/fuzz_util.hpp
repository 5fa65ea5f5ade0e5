// DLH fuzz targets — the rule every target checks besides "no crash": bad input is refused
// only with the error type the function documents (what main() and the SPANK facade turn
// into a clean message and exit code). Any other exception is a finding too: it reaches a
// catch-all with a library's message ("[json.exception.type_error.302] ...") or, inside
// dlh-launch, takes the job down through MPI_Abort.
#pragma once

#include <stdlib.h>  // mkdtemp

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>
#include <typeinfo>

namespace dlh::fuzz {

// A folder of the target's own under the temporary directory, named PREFIX-XXXXXX, removed
// when the process ends (every `make check` replays the corpora: each left one behind).
class ScratchFolder {
 public:
  explicit ScratchFolder(const char* prefix)
      : path_(
            (std::filesystem::temp_directory_path() / (std::string(prefix) + "-XXXXXX")).string()) {
    if (!mkdtemp(path_.data())) std::abort();
  }
  ~ScratchFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `body`; an `Expected` exception is a refusal and fine, any other aborts, naming it.
template <typename Expected, typename Body>
void RefusesOnlyWith(const char* what, Body&& body) {
  try {
    body();
  } catch (const Expected&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s threw %s, not its documented error type: %s\n", what, typeid(e).name(),
                 e.what());
    std::abort();
  }
}

}  // namespace dlh::fuzz
