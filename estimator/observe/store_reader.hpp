// DLH estimator — the observation store read back (launcher/observe/store.hpp writes it).
//
// Each record's user is the owner of its file (stat), never the "user" field inside it:
// anyone may write any text, but only the kernel says whose file it is. A record that cannot
// be used is a problem, one line naming the file and the field, and is skipped: not JSON,
// another version or program, larger than kMaxObservationBytes, not a regular file, a field
// missing or wrong. A record whose writer had no plan carries its spec instead of its
// features: the reader computes them, and the key, from it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/observe/record.hpp"
#include "launcher/observe/store.hpp"

namespace dlh {

struct StoredObservation {
  Observation record;
  std::string path;
  uid_t owner = 0;
  double mtime = 0;  // seconds since the epoch
};

struct StoreContents {
  StoreCheck check;                        // when not kOk, nothing was read
  std::vector<StoredObservation> records;  // sorted by path (time of writing, by name)
  std::vector<std::string> problems;       // one line each
};

// The most records one read looks at: ten times the default limit of a store.
constexpr size_t kMaxRecordsRead = 100000;

// Reads every record of `dir` (the last kMaxRecordsRead by name when it holds more, with a
// problem line saying so).
StoreContents ReadStore(const std::string& dir);

// The same, kept for the process while the folder does not change (its modification time):
// a plan predicts every GPU type and every candidate from one read.
const StoreContents& ReadStoreCached(const std::string& dir);

}  // namespace dlh
