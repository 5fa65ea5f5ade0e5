// DLH — every file DLH writes appears whole or not at all.
//
// A file is written under a temporary name in the same folder (rename(2) is atomic only
// within one file system), flushed to disk, then renamed into place, and the folder is
// synced so that the rename itself survives a crash. Readers (a job monitor, a resumed
// run, Slurm's epilog) therefore never see a half-written summary, calibration or data
// set. Every step is checked; a failure removes the temporary file and throws IoError
// naming the final path and the system's reason.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace dlh {

// Writes `text` to `path` atomically (temporary file, fsync, rename, folder fsync).
// Throws IoError "<path>: cannot write: <reason>".
void WriteFileAtomically(const std::string& path, std::string_view text);

// For writers that own their file handle (HDF5): `write(tmp)` creates and fills the
// temporary file `tmp` (and makes it durable: fsync or H5Fflush + fsync); then it is renamed
// onto `path` and the folder is synced. If `write` throws, the temporary file is removed
// and the exception propagates unchanged.
void CommitAtomically(const std::string& path,
                      const std::function<void(const std::string& tmp)>& write);

// A fresh temporary name beside `path`: "<path>.tmp.<pid>.<n>". Unique per process and call,
// so two writers of the same path never share a temporary file.
std::string TemporaryPathFor(const std::string& path);

// fsync of the folder that holds `path`, so a rename or unlink in it is durable. Best
// effort: some file systems refuse fsync on folders, and the file itself is complete.
void SyncFolderOf(const std::string& path);

}  // namespace dlh
