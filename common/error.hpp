// DLH — Deep Learning Harness. Error types shared by every part.
#pragma once

#include <stdexcept>
#include <string>

namespace dlh {

// Base of every error DLH throws. The message is one line, ready for the user:
// it names the file and the field when input is at fault.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct UsageError : Error {  // bad command-line option
  using Error::Error;
};
struct SpecError : Error {  // bad training spec: "spec.json: layers[2].kernel: ..."
  using Error::Error;
};
struct DataError : Error {  // missing or malformed data set
  using Error::Error;
};
struct CheckpointError : Error {  // unreadable, corrupt or unwritable checkpoint
  using Error::Error;
};
struct EstimateError : Error {  // bad cluster description, calibration, or unfittable data
  using Error::Error;
};
// A file cannot be written (disk full, permissions, missing folder): "<path>: cannot write:
// <reason>". `reason` is the system's reason alone, for callers that word their own message.
struct IoError : Error {
  IoError(const std::string& path, const std::string& why)
      : Error(path + ": cannot write: " + why), reason(why) {}
  std::string reason;
};
struct MpiError : Error {
  using Error::Error;
};

}  // namespace dlh
