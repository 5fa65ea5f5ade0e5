// duration_test - Unit tests for common/duration.cpp
#include "common/duration.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"

namespace dlh {
namespace {

TEST(DurationTest, UnitForms) {
  EXPECT_DOUBLE_EQ(ParseDuration("3h", "deadline"), 10800);
  EXPECT_DOUBLE_EQ(ParseDuration("90m", "deadline"), 5400);
  EXPECT_DOUBLE_EQ(ParseDuration("2h30m", "deadline"), 9000);
  EXPECT_DOUBLE_EQ(ParseDuration("45s", "deadline"), 45);
  EXPECT_DOUBLE_EQ(ParseDuration("1d12h", "deadline"), 129600);
  EXPECT_DOUBLE_EQ(ParseDuration("1.5h", "deadline"), 5400);
  EXPECT_DOUBLE_EQ(ParseDuration("5400", "deadline"), 5400);
}

TEST(DurationTest, SlurmForms) {
  EXPECT_DOUBLE_EQ(ParseDuration("10:30", "t"), 630);
  EXPECT_DOUBLE_EQ(ParseDuration("02:00:00", "t"), 7200);
  EXPECT_DOUBLE_EQ(ParseDuration("1-12", "t"), 129600);
  EXPECT_DOUBLE_EQ(ParseDuration("1-00:30", "t"), 88200);
  EXPECT_DOUBLE_EQ(ParseDuration("2-01:00:05", "t"), 2 * 86400 + 3605);
}

TEST(DurationTest, BadInputNamesTheOption) {
  for (const char* bad :
       {"", "h", "3x", "3h3h", "30m2h", "1:2:3:4", "a-01:00", "0", "0h", "-3h", "3 h", "1-2-3"}) {
    try {
      ParseDuration(bad, "--deadline");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--deadline: ", 0), 0u) << e.what();
    }
  }
}

TEST(DurationTest, Human) {
  EXPECT_EQ(HumanDuration(0.25), "250ms");
  EXPECT_EQ(HumanDuration(45), "45s");
  EXPECT_EQ(HumanDuration(750), "12m30s");
  EXPECT_EQ(HumanDuration(7500), "2h05m");
  EXPECT_EQ(HumanDuration(3 * 86400 + 4 * 3600), "3d04h");
}

}  // namespace
}  // namespace dlh
