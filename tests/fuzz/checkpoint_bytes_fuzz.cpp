// DLH fuzz target — the checkpoint reader (dlh::LoadCheckpoint) on raw bytes: the input is
// written to a file and loaded. Mostly fuzzes HDF5's own parser of corrupt files, which has
// bugs of its own (tests/fuzz/README.md, "HDF5"), so it is not in the default `make fuzz`;
// checkpoint_fuzz fuzzes DLH's validation on files HDF5 itself wrote. Refusals are
// CheckpointError.
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

// One file per process, rewritten for every input, removed at exit. The name is never
// freed, so that the exit handler can still read it.
const std::string& ScratchPath() {
  static const std::string* const path = [] {
    auto* p = new std::string((std::filesystem::temp_directory_path() /
                               ("dlh-fuzz-ckpt-bytes-" + std::to_string(getpid()) + ".h5"))
                                  .string());
    std::atexit([] { unlink(ScratchPath().c_str()); });
    return p;
  }();
  return *path;
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
