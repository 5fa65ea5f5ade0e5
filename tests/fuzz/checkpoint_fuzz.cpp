// DLH fuzz target — the checkpoint reader (dlh::LoadCheckpoint): the input is written to a
// file and loaded, as dlh-launch does when it resumes from a checkpoint folder it does not
// control. Refusals are CheckpointError.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/error.hpp"
#include "launcher/storage/checkpoint.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {

// One file per process, rewritten for every input, removed at exit.
const std::string& ScratchPath() {
  static const std::string path = [] {
    std::string p = (std::filesystem::temp_directory_path() /
                     ("dlh-fuzz-ckpt-" + std::to_string(getpid()) + ".h5"))
                        .string();
    std::atexit([] { unlink(ScratchPath().c_str()); });
    return p;
  }();
  return path;
}

void WriteAll(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n <= 0) std::abort();
    data += n;
    size -= size_t(n);
  }
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = ScratchPath();
  WriteAll(path, data, size);
  dlh::fuzz::RefusesOnlyWith<dlh::CheckpointError>("LoadCheckpoint",
                                                   [&] { dlh::LoadCheckpoint(path); });
  return 0;
}
