// batch_split_test — unit tests for launcher/train/batch_split.cpp and the plan parts it
// reads (launcher/train/plan.cpp): the even split, a rank's part by type or position, the
// offsets and their sum check, and checkpoints that record a split.
#include "launcher/train/batch_split.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/storage/checkpoint.hpp"
#include "launcher/storage/h5.hpp"
#include "launcher/train/plan.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "no error";
}

// Two parts: alpha (1 node x 2 GPUs, 40 each) and beta (1 node x 1 GPU, 20): global 100.
const char* kMixedPlan = R"({"format_version":1,"global_batch":100,"lr":0.1,
  "allocation":{"parts":[
    {"node_type":"big","gpu":"alpha","nodes":1,"gpus_per_node":2,"per_gpu_batch":40},
    {"node_type":"small","gpu":"beta","nodes":1,"gpus_per_node":1,"per_gpu_batch":20}],
    "gpus":3}})";

TEST(BatchSplitTest, EvenShareGivesTheFirstRanksOneMore) {
  // 25 over 3: 9, 8, 8 at offsets 0, 9, 17 (the split dlh-launch has always used).
  EXPECT_EQ(EvenShare(25, 0, 3).batch, 9);
  EXPECT_EQ(EvenShare(25, 1, 3).offset, 9);
  EXPECT_EQ(EvenShare(25, 1, 3).batch, 8);
  EXPECT_EQ(EvenShare(25, 2, 3).offset, 17);
  EXPECT_EQ(EvenShare(25, 2, 3).batch, 8);
  EXPECT_EQ(EvenShare(7, 0, 1).batch, 7);
}

TEST(BatchSplitTest, ParsesThePartsInOrder) {
  LaunchPlan p = ParsePlan(kMixedPlan, "DLH_PLAN");
  ASSERT_EQ(p.parts.size(), 2u);
  EXPECT_EQ(p.parts[0].gpu, "alpha");
  EXPECT_EQ(p.parts[0].node_type, "big");
  EXPECT_EQ(p.parts[0].gpus(), 2);
  EXPECT_EQ(p.parts[1].per_gpu_batch, 20);
  EXPECT_TRUE(PlanSplitsBatch(p, false));
  EXPECT_FALSE(PlanSplitsBatch(p, true)) << "--batch-size overrides the plan";
  p.parts.pop_back();
  EXPECT_FALSE(PlanSplitsBatch(p, false)) << "one part: the even split";
  EXPECT_FALSE(PlanSplitsBatch(LaunchPlan(), false));
}

// Parts with a compute capability are real GPUs: train must not fall back to the CPU there.
// A plan with any part without one (a local cluster's CPU-rank type) or without parts
// requires nothing.
TEST(BatchSplitTest, PlanForRealGpusRequiresThem) {
  const std::string a100 =
      R"({"gpu":"a100","nodes":1,"gpus_per_node":2,"per_gpu_batch":8,"compute_capability":"8.0"})";
  const std::string h100 =
      R"({"gpu":"h100","nodes":1,"gpus_per_node":2,"per_gpu_batch":8,"compute_capability":"9.0"})";
  const std::string alpha = R"({"gpu":"alpha","nodes":1,"gpus_per_node":2,"per_gpu_batch":8})";
  auto plan = [](const std::string& parts) {
    return ParsePlan(
        R"({"format_version":1,"global_batch":32,"lr":0.1,"allocation":{"parts":[)" + parts + "]}}",
        "DLH_PLAN");
  };
  EXPECT_EQ(plan(a100).parts[0].compute_capability, "8.0");
  EXPECT_EQ(PlanGpuRequirement(plan(a100), "DLH_PLAN"),
            "the plan (DLH_PLAN) put this job on a100 (compute capability 8.0) GPUs");
  EXPECT_EQ(PlanGpuRequirement(plan(a100 + "," + h100), "--plan p.json"),
            "the plan (--plan p.json) put this job on a100 (compute capability 8.0) and h100 "
            "(compute capability 9.0) GPUs");
  EXPECT_EQ(PlanGpuRequirement(plan(alpha), "DLH_PLAN"), "");
  EXPECT_EQ(PlanGpuRequirement(plan(a100 + "," + alpha), "DLH_PLAN"), "");
  EXPECT_EQ(PlanGpuRequirement(LaunchPlan(), "DLH_PLAN"), "");
}

TEST(BatchSplitTest, BadPartsNameTheField) {
  auto plan = [](const std::string& part) {
    return ErrorOf([&] {
      ParsePlan(R"({"format_version":1,"global_batch":100,"lr":0.1,"allocation":{"parts":[)" +
                    part + "]}}",
                "DLH_PLAN");
    });
  };
  const std::string ok = R"("gpu":"alpha","nodes":1,"gpus_per_node":2)";
  EXPECT_EQ(plan("{" + ok + R"(,"per_gpu_batch":12.5})"),
            "DLH_PLAN: allocation.parts[0].per_gpu_batch: must be a positive integer (at most "
            "1073741824), got 12.5");
  EXPECT_EQ(plan("{" + ok + R"(,"per_gpu_batch":0})"),
            "DLH_PLAN: allocation.parts[0].per_gpu_batch: must be a positive integer (at most "
            "1073741824), got 0");
  EXPECT_EQ(plan("{" + ok + R"(,"per_gpu_batch":"8"})"),
            "DLH_PLAN: allocation.parts[0].per_gpu_batch: must be a positive integer (at most "
            "1073741824), got \"8\"");
  EXPECT_EQ(plan("{" + ok + "}"),
            "DLH_PLAN: allocation.parts[0].per_gpu_batch: must be a positive integer (at most "
            "1073741824), got null");
  EXPECT_EQ(plan(R"({"nodes":1,"gpus_per_node":2,"per_gpu_batch":8})"),
            "DLH_PLAN: allocation.parts[0].gpu: missing");
  EXPECT_EQ(plan(R"({"gpu":"","nodes":1,"gpus_per_node":2,"per_gpu_batch":8})"),
            "DLH_PLAN: allocation.parts[0].gpu: must be a non-empty string, got \"\"");
  EXPECT_EQ(plan("3"), "DLH_PLAN: allocation.parts[0]: must be an object");
  EXPECT_EQ(
      plan("{" + ok + R"(,"per_gpu_batch":8,"compute_capability":8.0})"),
      "DLH_PLAN: allocation.parts[0].compute_capability: must be a non-empty string, got 8.0");
  EXPECT_EQ(ErrorOf([] {
              ParsePlan(R"({"format_version":1,"global_batch":1,"lr":1,"allocation":{"parts":{}}})",
                        "p.json");
            }),
            "p.json: allocation.parts: must be an array");
}

TEST(BatchSplitTest, TypeGivenPicksThePart) {
  const LaunchPlan p = ParsePlan(kMixedPlan, "DLH_PLAN");
  EXPECT_EQ(PartOfRank(p, "DLH_PLAN", "beta", "DLH_GPU_TYPE", "", 0, 3), 1);
  EXPECT_EQ(PartOfRank(p, "DLH_PLAN", "alpha", "--gpu-type", "", 2, 3), 0);
  EXPECT_EQ(PartOfRank(p, "DLH_PLAN", "small", "--gpu-type", "", 0, 3), 1) << "node_type";
  // A type works whatever the rank count: the sum check decides.
  EXPECT_EQ(PartOfRank(p, "DLH_PLAN", "beta", "--gpu-type", "", 4, 7), 1);
  EXPECT_EQ(ErrorOf([&] { PartOfRank(p, "DLH_PLAN", "gamma", "--gpu-type", "", 1, 3); }),
            "--gpu-type: 'gamma' (rank 1) is not a GPU type of DLH_PLAN allocation.parts "
            "(alpha, beta)");
  LaunchPlan same = p;
  same.parts[1].gpu = "alpha";
  EXPECT_EQ(ErrorOf([&] { PartOfRank(same, "DLH_PLAN", "alpha", "DLH_GPU_TYPE", "", 0, 3); }),
            "DLH_GPU_TYPE: 'alpha' (rank 0) matches 2 parts of DLH_PLAN allocation.parts; name "
            "the node_type instead");
  EXPECT_EQ(PartOfRank(same, "DLH_PLAN", "small", "DLH_GPU_TYPE", "", 0, 3), 1);
}

// The plugin's mixes: Slurm lists the nodes in name order, so the node's name decides
// (a type, when given, still wins); a node in no part is one clear line.
TEST(BatchSplitTest, NodeNamePicksThePart) {
  LaunchPlan p = ParsePlan(kMixedPlan, "DLH_PLAN");
  p.parts[0].node_names = {"z1", "z2"};
  p.parts[1].node_names = {"a1"};
  EXPECT_EQ(PartOfRank(p, "DLH_PLAN", "", "--gpu-type", "a1", 0, 3), 1);
  EXPECT_EQ(PartOfRank(p, "DLH_PLAN", "", "--gpu-type", "z2", 2, 3), 0);
  EXPECT_EQ(PartOfRank(p, "DLH_PLAN", "alpha", "--gpu-type", "a1", 0, 3), 0);
  EXPECT_EQ(ErrorOf([&] { PartOfRank(p, "DLH_PLAN", "", "--gpu-type", "q9", 1, 3); }),
            "DLH_PLAN: allocation.parts: node 'q9' (rank 1, SLURMD_NODENAME) is in no part's "
            "node_names; give each rank its type with --gpu-type or DLH_GPU_TYPE");
  p.parts[1].node_names.push_back("z1");
  EXPECT_EQ(ErrorOf([&] { PartOfRank(p, "DLH_PLAN", "", "--gpu-type", "z1", 0, 3); }),
            "DLH_PLAN: allocation.parts: node 'z1' (rank 0, SLURMD_NODENAME) is in 2 parts' "
            "node_names; give each rank its type with --gpu-type or DLH_GPU_TYPE");
  // Outside Slurm (no node name) the position decides, as before.
  EXPECT_EQ(PartOfRank(p, "DLH_PLAN", "", "--gpu-type", "", 2, 3), 1);
  // Parsed from the plan, checked like the other fields.
  const std::string named =
      R"({"format_version":1,"global_batch":10,"lr":0.1,"allocation":{"parts":[
    {"gpu":"alpha","nodes":1,"gpus_per_node":1,"per_gpu_batch":5,"node_names":["n1"]},
    {"gpu":"beta","nodes":1,"gpus_per_node":1,"per_gpu_batch":5,"node_names":[7]}]}})";
  EXPECT_EQ(ErrorOf([&] { ParsePlan(named, "DLH_PLAN"); }),
            "DLH_PLAN: allocation.parts[1].node_names[0]: must be a non-empty string, got 7");
}

TEST(BatchSplitTest, PositionPicksThePartInPlanOrder) {
  const LaunchPlan p = ParsePlan(kMixedPlan, "DLH_PLAN");
  EXPECT_EQ(PartOfRank(p, "DLH_PLAN", "", "--gpu-type", "", 0, 3), 0);
  EXPECT_EQ(PartOfRank(p, "DLH_PLAN", "", "--gpu-type", "", 1, 3), 0);
  EXPECT_EQ(PartOfRank(p, "DLH_PLAN", "", "--gpu-type", "", 2, 3), 1);
  EXPECT_EQ(ErrorOf([&] { PartOfRank(p, "DLH_PLAN", "", "--gpu-type", "", 0, 2); }),
            "DLH_PLAN: allocation.parts: the plan is for 3 GPUs (alpha 2, beta 1) but 2 ranks "
            "run; give each rank its type with --gpu-type or DLH_GPU_TYPE");
}

TEST(BatchSplitTest, OffsetsFollowRankOrderAndMustSumToTheGlobalBatch) {
  const LaunchPlan p = ParsePlan(kMixedPlan, "DLH_PLAN");
  // beta first (an MPMD launch in another order): offsets are prefix sums in rank order.
  EXPECT_EQ(SplitOffsets({20, 40, 40}, {1, 0, 0}, p, "DLH_PLAN", 100),
            (std::vector<int64_t>{0, 20, 60}));
  EXPECT_EQ(ErrorOf([&] {
              SplitOffsets({40, 40, 40}, {0, 0, 0}, p, "DLH_PLAN", 100);
            }),
            "DLH_PLAN: allocation.parts: the per_gpu_batch of the 3 ranks sum to 120 (alpha: 3 "
            "x 40, beta: 0 x 20), not global_batch 100");
  EXPECT_EQ(FormatBatches({40, 40, 20}), "[40, 40, 20]");
}

// ---- checkpoints that record a split --------------------------------------------------

TrainState SplitState() {
  TrainState s;
  s.spec_json = "{}";
  s.step = 5;
  s.world_size = 4;
  s.optimizer = "sgd";
  s.rank_batches = {40, 40, 40, 20};
  s.params.push_back({"w", {2}, {1.5f, -2}});
  return s;
}

TEST(BatchSplitTest, CheckpointKeepsTheSplit) {
  test::TempDir dir("dlh-split");
  const std::string path = dir / "a.h5";
  SaveCheckpoint(path, SplitState());
  EXPECT_EQ(LoadCheckpoint(path).rank_batches, (std::vector<int64_t>{40, 40, 40, 20}));
  {
    h5::File f(path, h5::Mode::ReadOnly);
    EXPECT_EQ(h5::GetStringAttr(f.id(), ".", "rank_batches"), "40x3,20");
  }
  // The even split writes no attribute: such files are what they were before splits existed.
  TrainState even = SplitState();
  even.rank_batches.clear();
  SaveCheckpoint(dir / "b.h5", even);
  h5::File f(dir / "b.h5", h5::Mode::ReadOnly);
  EXPECT_FALSE(h5::HasAttr(f.id(), ".", "rank_batches"));
  EXPECT_TRUE(LoadCheckpoint(dir / "b.h5").rank_batches.empty());
}

TEST(BatchSplitTest, CheckpointSplitIsChecked) {
  test::TempDir dir("dlh-split");
  const std::string path = dir / "a.h5";
  auto with = [&](const std::string& text) {
    SaveCheckpoint(path, SplitState());
    {
      h5::Handle f(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
      h5::SetAttr(f.id(), ".", "rank_batches", text);
    }
    return ErrorOf([&] { LoadCheckpoint(path); });
  };
  const std::string bad = path + ": attribute rank_batches '";
  const std::string why = "' is not 4 positive batches, one per rank (\"96x2,32\")";
  EXPECT_EQ(with("40x3"), bad + "40x3" + why);
  EXPECT_EQ(with("40x3,20,1"), bad + "40x3,20,1" + why);
  EXPECT_EQ(with("40x3,0"), bad + "40x3,0" + why);
  EXPECT_EQ(with("40x3,-20"), bad + "40x3,-20" + why);
  EXPECT_EQ(with("40x99999999999"), bad + "40x99999999999" + why);
  EXPECT_EQ(with("40,,40,20"), bad + "40,,40,20" + why);
  // A well-formed but different split fails the checksum: the split is part of it.
  EXPECT_NE(with("20,40,40,40").find("checksum mismatch"), std::string::npos);
  TrainState wrong = SplitState();
  wrong.rank_batches.pop_back();
  EXPECT_EQ(ErrorOf([&] { SaveCheckpoint(path, wrong); }),
            path + ": rank_batches must hold world_size positive batches");
}

}  // namespace
}  // namespace dlh
