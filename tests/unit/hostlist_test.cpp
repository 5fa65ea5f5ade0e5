// Node names as Slurm hostlist expressions (common/hostlist.hpp, issue 41), and a plan on a
// mix that lists 10,000 nodes of 4 types in a few bytes.
#include "common/hostlist.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/train/plan.hpp"

namespace dlh {
namespace {

using Names = std::vector<std::string>;

std::string ErrorOf(const std::string& text) {
  try {
    ExpandHostlist(text, "node_names[0]");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(HostlistTest, ExpandsAsSlurmDoes) {
  EXPECT_EQ(ExpandHostlist("beta7", ""), Names{"beta7"});
  EXPECT_EQ(ExpandHostlist("a[001-003,010],b2", ""), (Names{"a001", "a002", "a003", "a010", "b2"}));
  EXPECT_EQ(ExpandHostlist("n[9-11]", ""), (Names{"n9", "n10", "n11"}));  // width of the first
  EXPECT_EQ(ExpandHostlist("rack[1-2]-gpu", ""), (Names{"rack1-gpu", "rack2-gpu"}));
  EXPECT_EQ(ExpandHostlist("x[5]", ""), Names{"x5"});
}

TEST(HostlistTest, RefusesWhatIsNotOneWithOneLine) {
  EXPECT_EQ(ErrorOf("a[3-1]"), "node_names[0]: a[3-1]: a range must not run backwards");
  EXPECT_EQ(ErrorOf("a[1-2"), "node_names[0]: a[1-2: a bracket is not closed");
  EXPECT_EQ(ErrorOf("a[1-x]"),
            "node_names[0]: a[1-x]: '1-x' is not a number or a range of numbers");
  EXPECT_EQ(ErrorOf("a[[1]]"), "node_names[0]: a[[1]]: unbalanced or nested brackets");
  EXPECT_EQ(ErrorOf("a[1]b[2]"), "node_names[0]: a[1]b[2]: one bracket per name");
  EXPECT_EQ(ErrorOf("a,,b"), "node_names[0]: a,,b: an empty name");
  EXPECT_EQ(ErrorOf("n[0-99999999999]"),
            "node_names[0]: n[0-99999999999]: more than 1048576 names");
  EXPECT_EQ(ErrorOf("n[1-1048576],m"), "node_names[0]: more than 1048576 names");
}

TEST(HostlistTest, CompressesAndExpandsBack) {
  Names many;
  for (int i = 1; i <= 2500; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "alpha%04d", i);
    if (i != 1234) many.push_back(name);  // a hole
  }
  many.push_back("login");
  many.push_back("beta7");
  many.push_back("alpha0002");  // a duplicate
  const Names compressed = CompressHostlist(many);
  EXPECT_EQ(compressed, (Names{"alpha[0001-1233,1235-2500]", "login", "beta7"}));
  Names back;
  for (const std::string& h : compressed)
    for (const std::string& n : ExpandHostlist(h, "")) back.push_back(n);
  Names want(many.begin(), many.end() - 1);
  EXPECT_EQ(back, want);
  // Different widths stay apart, so each expands as written ("08" keeps its zero).
  EXPECT_EQ(CompressHostlist({"n9", "n10", "n11", "n08"}), (Names{"n9", "n[08,10-11]"}));
}

// A plan names each part's nodes as hostlists; dlh-launch reads them back, and says which
// entry is wrong.
TEST(HostlistTest, PlansCarryHostlistsToTheLauncher) {
  const std::string plan = R"({"format_version": 1, "global_batch": 512, "lr": 0.1,
    "allocation": {"gpus": 16, "nodes": 4, "tasks_per_node": 4, "parts": [
      {"gpu": "a100", "nodes": 2, "gpus_per_node": 4, "per_gpu_batch": 40,
       "node_names": ["a100-[001-002]"]},
      {"gpu": "v100", "nodes": 2, "gpus_per_node": 4, "per_gpu_batch": 24,
       "node_names": ["v[7,9]"]}]}})";
  const LaunchPlan p = ParsePlan(plan, "DLH_PLAN");
  ASSERT_EQ(p.parts.size(), 2u);
  EXPECT_EQ(p.parts[0].node_names, (Names{"a100-001", "a100-002"}));
  EXPECT_EQ(p.parts[1].node_names, (Names{"v7", "v9"}));
  std::string bad = plan;
  bad.replace(bad.find("v[7,9]"), 6, "v[9-7]");
  try {
    ParsePlan(bad, "DLH_PLAN");
    FAIL() << "a backward range was taken";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "DLH_PLAN: allocation.parts[1].node_names[0]: v[9-7]: a range must not run "
                 "backwards");
  }
}

}  // namespace
}  // namespace dlh
