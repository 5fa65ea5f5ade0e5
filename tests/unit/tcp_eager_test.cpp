// tcp_eager_test — launcher/comm/tcp_eager.hpp before MPI: the bucket read from dlh-launch's
// arguments as train reads --bucket-mb, and the eager limit set only where the environment
// leaves it unset (tests/mpi/tcp_eager_mpitest.cpp checks that Open MPI takes it).
#include "launcher/comm/tcp_eager.hpp"

#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <string>
#include <vector>

namespace dlh {
namespace {

size_t BucketOf(std::vector<std::string> args) {
  args.insert(args.begin(), "dlh-launch");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return BucketBytesFromArguments(int(argv.size()), argv.data());
}

TEST(TcpEager, TheBucketAsTrainReadsIt) {
  EXPECT_EQ(BucketOf({"train", "spec.json"}), size_t(4) << 20);
  EXPECT_EQ(BucketOf({"train", "spec.json", "--bucket-mb", "16"}), size_t(16) << 20);
  EXPECT_EQ(BucketOf({"train", "--bucket-mb=0.5", "spec.json"}), size_t(512) << 10);
  // What the option parser will refuse, and what belongs to a program after "--".
  EXPECT_EQ(BucketOf({"train", "--bucket-mb", "-3"}), size_t(4) << 20);
  EXPECT_EQ(BucketOf({"train", "--bucket-mb", "8x"}), size_t(4) << 20);
  EXPECT_EQ(BucketOf({"train", "--bucket-mb"}), size_t(4) << 20);
  EXPECT_EQ(BucketOf({"run", "--", "prog", "--bucket-mb", "32"}), size_t(4) << 20);
}

#ifdef OPEN_MPI
TEST(TcpEager, SetOnlyWhereTheEnvironmentLeavesItUnset) {
  const char* name = "OMPI_MCA_btl_tcp_eager_limit";
  const char* old = getenv(name);
  const std::string saved = old ? old : "";
  setenv(name, "100000", 1);
  EXPECT_EQ(RaiseTcpEagerLimit(size_t(4) << 20), 0u);
  EXPECT_STREQ(getenv(name), "100000");
  unsetenv(name);
  EXPECT_EQ(RaiseTcpEagerLimit(size_t(4) << 20), (size_t(4) << 20) + kTcpEagerHeaderRoom);
  EXPECT_EQ(std::string(getenv(name)), std::to_string((size_t(4) << 20) + kTcpEagerHeaderRoom));
  EXPECT_EQ(TcpEagerLimitRaised(), (size_t(4) << 20) + kTcpEagerHeaderRoom);
  if (old)
    setenv(name, saved.c_str(), 1);
  else
    unsetenv(name);
}
#endif

}  // namespace
}  // namespace dlh
