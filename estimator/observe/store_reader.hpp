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
// The most records of any one other user a read looks at, the newest by modification time.
// Every record costs its parse and, without features, a spec's (ms for a large one): 1,000
// planted records of 650-layer specs made another user's plan take 6 s. Others' records
// move a prediction by a capped amount, which this many already show.
constexpr size_t kMaxRecordsPerOtherUser = 300;

enum class StoreReading {
  // `dlh-estimate observations`, refit: the newest kMaxRecordsRead by name.
  kEveryRecord,
  // A plan: every record of the reading user's own, and at most kMaxRecordsPerOtherUser of
  // each other user's, kMaxRecordsRead in all. Chosen by owner, not by name: names are
  // whatever a writer makes them, and 100,000 files named to sort last hid a user's own
  // records.
  kForPlanning,
};

// Reads the records of `dir` as `how` says, with a problem line saying what was left out.
StoreContents ReadStore(const std::string& dir, StoreReading how = StoreReading::kEveryRecord);

// For planning (kForPlanning), kept for the process while the folder does not change (its
// modification time): a plan predicts every GPU type and every candidate from one read.
const StoreContents& ReadStoreCached(const std::string& dir);

}  // namespace dlh
