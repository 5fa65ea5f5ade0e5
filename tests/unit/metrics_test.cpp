// DLH — tests of the metrics log: appended JSON lines, and a failed write reported once.
#include "launcher/train/metrics.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

class MetricsLogTest : public ::testing::Test {
 protected:
  MetricsLog::Warn Capture() {
    return [this](const std::string& m) { warnings_.push_back(m); };
  }
  std::vector<std::string> Lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  test::TempDir tmp_{"dlh-metrics"};
  const std::string dir_ = tmp_.path();
  std::vector<std::string> warnings_;
};

TEST_F(MetricsLogTest, AppendsOneCompleteLinePerRecord) {
  const std::string path = dir_ + "/metrics.jsonl";
  {
    MetricsLog log(path, Capture());
    log.write({{"step", 1}});
  }
  {
    MetricsLog log(path, Capture());  // a resumed run appends
    log.write({{"step", 2}, {"loss", 0.5}});
    EXPECT_EQ(Lines(path), (std::vector<std::string>{R"({"step":1})", R"({"loss":0.5,"step":2})"}))
        << "each record is on disk as soon as write returns";
    EXPECT_FALSE(log.failed());
  }
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(MetricsLogTest, AFailedWriteIsReportedOnceAndTrainingGoesOn) {
  // /dev/full accepts the open and fails every write with ENOSPC, like a full disk.
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no writable /dev/full";
  MetricsLog log("/dev/full", Capture());
  EXPECT_NO_THROW(log.write({{"step", 1}}));
  EXPECT_NO_THROW(log.write({{"step", 2}}));
  EXPECT_NO_THROW(log.write({{"step", 3}}));
  EXPECT_TRUE(log.failed());
  EXPECT_EQ(warnings_, std::vector<std::string>{"/dev/full: cannot append (No space left on "
                                                "device); this and later records may be missing"});
}

TEST_F(MetricsLogTest, AFolderThatCannotBeOpenedThrows) {
  EXPECT_THROW(MetricsLog(dir_ + "/missing/metrics.jsonl"), Error);
}

}  // namespace
}  // namespace dlh
