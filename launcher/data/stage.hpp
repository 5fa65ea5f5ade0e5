// DLH — staging a data set onto a node's local storage before a job trains from it
// (`dlh-data stage FILE --to DIR`, issue 19): every rank then reads its samples from a local
// disk instead of the shared file system, which thousands of ranks reading one file at start
// would saturate.
//
// The copy is written to a hidden temporary name in DIR, its bytes summed (CRC-32) as they
// are read from the source, flushed to the disk (fsync), read back and summed again, and only
// then renamed into place, followed by a record of what was staged (DIR/.NAME.stage.json:
// the source's absolute path, size, modification time and checksum). A later call finds that
// record and skips the copy when the source is unchanged and the copy is still there with
// its size; --verify re-reads the copy then. Whatever fails (the source unreadable or
// changing under the copy, the disk full, the read-back differing) leaves no file under
// NAME, a previous good copy untouched, and one line naming the file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace dlh {

struct StageOptions {
  bool verify = false;  // re-read an already staged copy and compare its checksum
  bool force = false;   // copy even when the record says the copy is current
  // Called about once a second while copying: bytes copied so far, bytes in all.
  std::function<void(int64_t, int64_t)> progress;
};

struct StageResult {
  std::string path;     // DIR/NAME, the copy
  bool copied = false;  // false: already staged and unchanged
  int64_t bytes = 0;
  uint32_t crc32 = 0;
  double seconds = 0;  // the copy, read-back included (0 when skipped)
};

// "%n" in `dir` becomes `node` (SLURMD_NODENAME: several `slurmd -N` on one host each get a
// folder of their own); "%%" is a percent sign.
std::string ExpandStageDir(const std::string& dir, const std::string& node);

// Stages `source` (a regular file) into `dir` (created when missing). Throws DataError
// naming the file for anything that fails, after removing what it wrote.
StageResult StageFile(const std::string& source, const std::string& dir,
                      const StageOptions& options);

}  // namespace dlh
