// DLH — the observation store: a folder on shared storage holding one record file per job
// (record.hpp), named in the cluster description ("observations") or by --observations.
//
// Rules (docs/reference/observations.md):
//  - a record is written under a hidden temporary name in the store itself (O_EXCL, mode
//    0644), made durable, then renamed to its final name without replacing any file: a
//    reader sees a whole record or none, and no writer overwrites another's;
//  - a record is at most kMaxObservationBytes;
//  - a store that group or others may write without the sticky bit is refused: anyone could
//    then delete or replace a user's records (mkdir -m 1777 makes a shared one);
//  - a store holding more than its limit of records gets no more (one warning); `dlh-estimate
//    observations prune` makes room.
// Writing never throws: a job that trained must not fail for its record.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "launcher/observe/record.hpp"

namespace dlh {

enum class StoreState { kOk, kMissing, kNotFolder, kUnsafe };

struct StoreCheck {
  StoreState state = StoreState::kOk;
  // One line naming the folder when not kOk, e.g. "observation store /x: group or others
  // can write it without the sticky bit: others could replace a user's records; chmod +t /x".
  std::string message;
};

// Whether `dir` may hold records (follows a symbolic link to the folder).
StoreCheck CheckStore(const std::string& dir);

// A record's file name: ends in ".json" and does not start with "." (temporary files do).
bool IsRecordName(const std::string& name);

// Record files in `dir` (names only; 0 when it cannot be read).
int64_t CountRecords(const std::string& dir);
// Record files in `dir` that `owner` owns (not following links). The store's limit counts a
// user's own records: in a folder everyone writes, 10,000 empty files of one user stopped
// every other user's records.
int64_t CountRecordsOf(const std::string& dir, uid_t owner);

struct StoreWrite {
  bool written = false;
  std::string path;     // the record's file when written
  std::string warning;  // one line when not written: why
};

// Writes `o` into the store `dir` (see the rules above); `limit` <= 0: kDefaultObservationLimit.
StoreWrite WriteObservation(const std::string& dir, const Observation& o,
                            int64_t limit = kDefaultObservationLimit);

}  // namespace dlh
