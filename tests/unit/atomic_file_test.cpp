// atomic_file_test - Unit tests for common/atomic_file.cpp
#include "common/atomic_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

namespace fs = std::filesystem;

struct AtomicFileTest : ::testing::Test {
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  size_t Entries() { return tmp.Entries().size(); }
  test::TempDir tmp{"dlh-atomic"};
  const std::string dir = tmp.path();
};

TEST_F(AtomicFileTest, WritesAndReplacesWholeFiles) {
  const std::string path = dir + "/summary.json";
  WriteFileAtomically(path, "{\"a\": 1}\n");
  EXPECT_EQ(Read(path), "{\"a\": 1}\n");
  WriteFileAtomically(path, "{}\n");
  EXPECT_EQ(Read(path), "{}\n");
  EXPECT_EQ(Entries(), 1u) << "no temporary file is left behind";
}

TEST_F(AtomicFileTest, MissingFolderThrowsIoErrorNamingThePath) {
  const std::string path = dir + "/no/such/summary.json";
  try {
    WriteFileAtomically(path, "x");
    FAIL() << "no exception";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": cannot write: No such file"), std::string::npos)
        << e.what();
  }
}

TEST_F(AtomicFileTest, FailedWriterKeepsTheOldFileAndRemovesItsTemporary) {
  const std::string path = dir + "/data.h5";
  WriteFileAtomically(path, "old");
  EXPECT_THROW(CommitAtomically(path,
                                [](const std::string& tmp_path) {
                                  std::ofstream(tmp_path) << "half";
                                  throw DataError("disk full");
                                }),
               DataError);
  EXPECT_EQ(Read(path), "old");
  EXPECT_EQ(Entries(), 1u);
}

TEST_F(AtomicFileTest, TemporaryNamesAreUniqueAndBesideThePath) {
  const std::string a = TemporaryPathFor(dir + "/x"), b = TemporaryPathFor(dir + "/x");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind(dir + "/x.tmp.", 0), 0u);
}

}  // namespace
}  // namespace dlh
