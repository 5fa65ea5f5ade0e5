// binding_test - Unit tests for launcher/comm/binding.cpp and launcher/train/plan.cpp
#include "launcher/comm/binding.hpp"

#include <gtest/gtest.h>

#include <map>

#include "common/error.hpp"
#include "launcher/train/plan.hpp"

namespace dlh {
namespace {

std::function<const char*(const char*)> Env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(BindingTest, SlurmLocalIdPicksItsGpu) {
  Binding b = BindRank(Env({{"SLURM_LOCALID", "1"}, {"CUDA_VISIBLE_DEVICES", "2,3"}}), 0);
  EXPECT_EQ(b.local_rank, 1);
  EXPECT_EQ(b.local_rank_source, "SLURM_LOCALID");
  EXPECT_EQ(b.device, 1);
  EXPECT_EQ(b.describe(), "local rank 1 (SLURM_LOCALID), GPU 3 of CUDA_VISIBLE_DEVICES=2,3");
}

TEST(BindingTest, OneVisibleGpuPerTask) {
  Binding b = BindRank(Env({{"SLURM_LOCALID", "3"}, {"CUDA_VISIBLE_DEVICES", "3"}}), 0);
  EXPECT_EQ(b.device, 0);
}

TEST(BindingTest, MpirunLocalRankAndNoGpu) {
  Binding b = BindRank(Env({{"OMPI_COMM_WORLD_LOCAL_RANK", "2"}}), 7);
  EXPECT_EQ(b.local_rank, 2);
  EXPECT_EQ(b.device, -1);
  EXPECT_EQ(b.describe(), "local rank 2 (OMPI_COMM_WORLD_LOCAL_RANK), CUDA_VISIBLE_DEVICES unset");
  Binding none = BindRank(Env({{"SLURM_LOCALID", "0"}, {"CUDA_VISIBLE_DEVICES", "NoDevFiles"}}), 0);
  EXPECT_EQ(none.device, -1);
  EXPECT_EQ(none.describe(),
            "local rank 0 (SLURM_LOCALID), no GPU visible (CUDA_VISIBLE_DEVICES=NoDevFiles)");
  Binding c = BindRank(Env({{"SLURM_LOCALID", "x"}}), 5);
  EXPECT_EQ(c.local_rank, 5);
  EXPECT_EQ(c.local_rank_source, "node communicator");
}

TEST(BindingTest, MoreRanksThanGpusIsAnError) {
  EXPECT_THROW(BindRank(Env({{"SLURM_LOCALID", "2"}, {"CUDA_VISIBLE_DEVICES", "0,1"}}), 0),
               UsageError);
}

// What makes a rank expect a GPU (device.hpp: --device auto then says when it trains on the
// CPU): GPUs in CUDA_VISIBLE_DEVICES first, then Slurm's gres variables; nothing otherwise.
TEST(BindingTest, GpusGivenByTheEnvironment) {
  EXPECT_EQ(BindRank(Env({}), 0).gpus_given, "");
  EXPECT_EQ(BindRank(Env({{"CUDA_VISIBLE_DEVICES", ""}}), 0).gpus_given, "");
  EXPECT_EQ(BindRank(Env({{"CUDA_VISIBLE_DEVICES", "NoDevFiles"}}), 0).gpus_given, "");
  EXPECT_EQ(BindRank(Env({{"SLURM_GPUS_ON_NODE", "0"}, {"SLURM_JOB_GPUS", ""}}), 0).gpus_given, "");
  EXPECT_EQ(
      BindRank(Env({{"CUDA_VISIBLE_DEVICES", "2,3"}, {"SLURM_JOB_GPUS", "2,3"}}), 1).gpus_given,
      "CUDA_VISIBLE_DEVICES=2,3");
  EXPECT_EQ(BindRank(Env({{"SLURM_STEP_GPUS", "1"}, {"SLURM_JOB_GPUS", "0,1"}}), 0).gpus_given,
            "SLURM_STEP_GPUS=1");
  EXPECT_EQ(BindRank(Env({{"SLURM_JOB_GPUS", "0,1"}}), 0).gpus_given, "SLURM_JOB_GPUS=0,1");
  EXPECT_EQ(BindRank(Env({{"SLURM_GPUS_ON_NODE", "4"}}), 0).gpus_given, "SLURM_GPUS_ON_NODE=4");
  // NoDevFiles (Slurm's "none of this node's GPUs") still leaves the job's allocation.
  EXPECT_EQ(BindRank(Env({{"CUDA_VISIBLE_DEVICES", "NoDevFiles"}, {"SLURM_JOB_GPUS", "0"}}), 0)
                .gpus_given,
            "SLURM_JOB_GPUS=0");
}

TEST(PlanTest, HasGpusWhenItsAllocationNamesThem) {
  EXPECT_FALSE(PlanHasGpus(LaunchPlan()));
  EXPECT_FALSE(PlanHasGpus(ParsePlan(R"({"format_version":1,"global_batch":16,"lr":0.1})", "p")));
  EXPECT_TRUE(PlanHasGpus(ParsePlan(
      R"({"format_version":1,"global_batch":16,"lr":0.1,"allocation":{"gpus":2}})", "p")));
  EXPECT_TRUE(PlanHasGpus(ParsePlan(R"({"format_version":1,"global_batch":16,"lr":0.1,
      "allocation":{"parts":[{"gpu":"alpha","nodes":1,"gpus_per_node":2,"per_gpu_batch":8}]}})",
                                    "p")));
}

TEST(PlanTest, ParsesAndApplies) {
  LaunchPlan p = ParsePlan(
      R"({"format_version":1,"global_batch":256,"lr":0.1,"warmup_epochs":2,
          "allocation":{"gpus":4},"why":"least energy"})",
      "DLH_PLAN");
  EXPECT_EQ(p.global_batch, 256);
  EXPECT_EQ(p.gpus, 4);
  TrainSpec s;
  s.epochs = 1;
  s.batch_size = 128;
  ApplyPlan(p, &s);
  EXPECT_EQ(s.batch_size, 256);
  EXPECT_DOUBLE_EQ(s.optimizer.lr, 0.1);
  EXPECT_DOUBLE_EQ(s.schedule.warmup_epochs, 1);  // capped at the epochs
}

TEST(PlanTest, BadPlansNameTheField) {
  auto msg = [](const std::string& text) {
    try {
      ParsePlan(text, "DLH_PLAN");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(msg("{"),
            "DLH_PLAN: not valid JSON: parse error at line 1, column 2: syntax error "
            "while parsing object key - unexpected end of input; expected string literal");
  EXPECT_EQ(msg(R"({"format_version":2})"), "DLH_PLAN: format_version: must be 1");
  EXPECT_EQ(msg(R"({"format_version":1,"global_batch":-4,"lr":1})"),
            "DLH_PLAN: global_batch: must be a positive integer, got -4");
  EXPECT_EQ(msg(R"({"format_version":1,"global_batch":4,"lr":"x"})"),
            "DLH_PLAN: lr: must be a positive number, got \"x\"");
}

// Found by tests/fuzz/plan_fuzz: allocation.gpus and why were read with nlohmann's value(),
// which converted 3.1e+301 to int (undefined behaviour, UBSan) and threw its own type_error
// for a string where a number was wanted and the reverse (not a UsageError: in dlh-launch,
// MPI_Abort of the whole job with a library message).
TEST(PlanTest, InformationalFieldsAreCheckedToo) {
  auto msg = [](const std::string& text) {
    try {
      ParsePlan(text, "DLH_PLAN");
    } catch (const UsageError& e) {
      return std::string(e.what());
    } catch (const std::exception& e) {
      return std::string("not a UsageError: ") + e.what();
    }
    return std::string("no error");
  };
  const std::string plan = R"({"format_version":1,"global_batch":48,"lr":0.05,)";
  EXPECT_EQ(msg(plan + R"("allocation":{"gpus":31e300},"why":"1 x 2 13s"})"),
            "DLH_PLAN: allocation.gpus: must be a non-negative integer, got 3.1e+301");
  EXPECT_EQ(msg(plan + R"("allocation":{"gpus":"2"}})"),
            "DLH_PLAN: allocation.gpus: must be a non-negative integer, got \"2\"");
  EXPECT_EQ(msg(plan + R"("allocation":{"gpus":-2}})"),
            "DLH_PLAN: allocation.gpus: must be a non-negative integer, got -2");
  EXPECT_EQ(msg(plan + R"("why":3})"), "DLH_PLAN: why: must be a string, got 3");
  EXPECT_EQ(ParsePlan(plan + R"("allocation":{"gpus":2},"why":"w"})", "DLH_PLAN").gpus, 2);
}

}  // namespace
}  // namespace dlh
