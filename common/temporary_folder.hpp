// DLH — a private folder under $TMPDIR (else /tmp), removed with everything in it when its
// owner goes: dlh-launch run's profile folder, dlh-estimate's request and result files for
// its dlh-launch child.
#pragma once

#include <string>

namespace dlh {

class TemporaryFolder {
 public:
  // "PREFIX" + six random characters; throws dlh::Error naming the pattern and the reason.
  explicit TemporaryFolder(const std::string& prefix);
  ~TemporaryFolder();
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace dlh
