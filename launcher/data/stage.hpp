// DLH — staging a data set onto a node's local storage before a job trains from it
// (`dlh-data stage FILE --to DIR`, issue 19): every rank then reads its samples from a local
// disk instead of the shared file system, which thousands of ranks reading one file at start
// would saturate.
//
// The copy is written to a temporary file of unpredictable name in DIR (mkostemp: O_EXCL,
// mode 0600 until it is whole), its bytes summed (CRC-32) as they are read from the source,
// flushed to the disk (fsync), read back and summed again, given the source's mode, and only
// then renamed into place, followed by a record of what was staged (DIR/.NAME.stage.json:
// the source's absolute path, size, modification time and checksum). A later call finds that
// record and skips the copy when the source is unchanged and the copy is still there with
// its size; --verify re-reads the copy then. Whatever fails (the source unreadable or
// changing under the copy, the disk full, the read-back differing) leaves no file under
// NAME, a previous good copy untouched, and one line naming the file.
//
// Node-local folders such as /tmp are shared by every user of a node (issue 41). So the
// staging folder must belong to the user: owned by them, writable by nobody else, and every
// folder above it owned by them or root and, where others may write it, sticky (as /tmp is),
// with no symbolic link on the way that someone else owns. Anything else is refused before a
// byte is read or written. Within it, the record and the copy are trusted only when they are
// regular files of the user's own; a record that is not (or is damaged, deep or huge) is
// ignored and the data set copied again.
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
  std::string note;    // why a record found there was not trusted ("" when none was, or it was)
};

// What a record (DIR/.NAME.stage.json) says was staged.
struct StageRecord {
  std::string source;  // the source's absolute path
  int64_t size = -1, mtime_ns = -1;
  uint32_t crc32 = 0;
};

// Parses a record's text: strict JSON (no duplicate keys, nesting bounded), an object whose
// "source" is a string, "size" and "mtime_ns" integers >= 0, "crc32" an integer that fits 32
// bits. False for anything else: the record is then not trusted and the file staged again.
bool ParseStageRecord(const std::string& text, StageRecord* out);

// What a staging folder's name may refer to.
struct StageNames {
  std::string node;  // %n: SLURMD_NODENAME (several `slurmd -N` on one host each get their own)
  std::string user;  // %u: the user's name (their uid where it has none)
  std::string job;   // %j: SLURM_JOB_ID; empty outside a job
};

// This process's names: `node` as given, the effective user's name, SLURM_JOB_ID.
StageNames CurrentStageNames(const std::string& node);

// "%n", "%u" and "%j" in `dir` become the names; "%%" is a percent sign; any other "%" stays.
// Throws UsageError (naming `origin`) for "%j" outside a job.
std::string ExpandStageDir(const std::string& dir, const StageNames& names,
                           const std::string& origin = "--to");

// The same with this process's names and `node` for %n, as dlh-launch train --data expands
// its path on each rank (errors name --data).
std::string ExpandStageDir(const std::string& dir, const std::string& node);

// Where `dlh-data stage` copies without --to: a folder of the user's and, inside a job, of
// the job's on the node's /tmp, "/tmp/dlh-%u/job-%j" (outside a job "/tmp/dlh-%u/stage").
std::string DefaultStageDir(const StageNames& names);

// Stages `source` (a regular file) into `dir` (created, mode 0700, when missing). Throws
// DataError naming the file for anything that fails, after removing what it wrote, and for
// a folder that does not belong to the user (above).
StageResult StageFile(const std::string& source, const std::string& dir,
                      const StageOptions& options);

}  // namespace dlh
