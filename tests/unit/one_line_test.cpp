// DLH — OneLine: control characters written out.
#include "common/one_line.hpp"

#include <gtest/gtest.h>

namespace dlh {
namespace {

TEST(OneLineTest, WritesOutControlCharacters) {
  EXPECT_EQ(OneLine("plain text, ünïcode"), "plain text, ünïcode");
  EXPECT_EQ(OneLine("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(OneLine(std::string("\x1b[2J\x7f\0z", 7)), "\\x1b[2J\\x7f\\x00z");
}

}  // namespace
}  // namespace dlh
