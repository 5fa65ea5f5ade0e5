// core_yield_test — launcher/watch/core_yield.hpp: this node's ranks from srun's and mpirun's
// environment, the threads by train's rule, when the node counts as oversubscribed, and that
// a user's own OMPI_MCA_mpi_yield_when_idle is left alone. The effect itself (a waiting rank
// giving its core back) is Open MPI's; make check runs every MPI test with it.
#include "launcher/watch/core_yield.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "launcher/train/plan.hpp"

namespace dlh {
namespace {

// Sets or unsets the variables for one test and puts them back after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      const char* old = getenv(name);
      saved_.push_back({name, old ? old : "", old != nullptr});
      if (value)
        setenv(name, value, 1);
      else
        unsetenv(name);
    }
  }
  ~ScopedEnv() {
    for (const auto& s : saved_) {
      if (s.was_set)
        setenv(s.name.c_str(), s.value.c_str(), 1);
      else
        unsetenv(s.name.c_str());
    }
  }

 private:
  struct Saved {
    std::string name, value;
    bool was_set;
  };
  std::vector<Saved> saved_;
};

TEST(CoreYield, SrunsTasksPerNodeIsReadAtThisNode) {
  EXPECT_EQ(TasksOnNode("4", 0), 4);
  EXPECT_EQ(TasksOnNode("2(x3),1", 0), 2);
  EXPECT_EQ(TasksOnNode("2(x3),1", 2), 2);
  EXPECT_EQ(TasksOnNode("2(x3),1", 3), 1);
  EXPECT_EQ(TasksOnNode("3,1,5(x2)", 3), 5);
  EXPECT_EQ(TasksOnNode("3,1,5(x2)", 4), 0);
  EXPECT_EQ(TasksOnNode("2(x3),1", 4), 0);  // no such node
  EXPECT_EQ(TasksOnNode("2(x3", 0), 0);     // malformed
  EXPECT_EQ(TasksOnNode("x,1", 0), 0);
  EXPECT_EQ(TasksOnNode("", 0), 0);
  EXPECT_EQ(TasksOnNode("2", -1), 0);
}

TEST(CoreYield, LocalRanksComeFromMpirunThenSrun) {
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                   {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                   {"SLURM_NODEID", "1"}});
    EXPECT_EQ(LocalRanksFromEnvironment(), 3);
  }
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_LOCAL_SIZE", nullptr},
                   {"SLURM_STEP_TASKS_PER_NODE", "4,2"},
                   {"SLURM_NODEID", "1"}});
    EXPECT_EQ(LocalRanksFromEnvironment(), 2);
  }
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_LOCAL_SIZE", nullptr},
                   {"SLURM_STEP_TASKS_PER_NODE", "4,2"},
                   {"SLURM_NODEID", "7"}});
    EXPECT_EQ(LocalRanksFromEnvironment(), 1);  // not said: one
  }
}

TEST(CoreYield, MoreBusyThreadsThanCpusIsOversubscribed) {
  // 4 ranks of 1 thread on 2 CPUs (make check's mpirun -np 4 here): yes.
  EXPECT_TRUE(NodeLoadOf(4, 1, 2, 2).oversubscribed());
  // 2 ranks on 2 CPUs, the threads by train's rule (2 / 2 = 1 each): no.
  NodeLoad two = NodeLoadOf(2, 0, 2, 2);
  EXPECT_EQ(two.threads, 1);
  EXPECT_FALSE(two.oversubscribed());
  // 1 rank with 4 threads on 2 CPUs: yes; with 2: no.
  EXPECT_TRUE(NodeLoadOf(1, 4, 2, 2).oversubscribed());
  EXPECT_FALSE(NodeLoadOf(1, 2, 2, 2).oversubscribed());
  // 8 ranks on 64 CPUs, threads by the rule: 8 each, 64 in all: no.
  EXPECT_FALSE(NodeLoadOf(8, 0, 64, 64).oversubscribed());
  // A lone rank bound to 1 of 2 CPUs (mpirun's default), the threads by the rule for every
  // command but train: the node's 2, so yes: it yields the core to what else runs there
  // (under `run`, the user's program).
  NodeLoad bound = NodeLoadOf(1, 0, 1, 2);
  EXPECT_EQ(bound.threads, 2);
  EXPECT_TRUE(bound.oversubscribed());
  // A rank bound to 1 of 2 CPUs (mpirun -np 2 binds to a core): that core is its own.
  EXPECT_FALSE(NodeLoadOf(2, 1, 1, 2).oversubscribed());
  // ...but not when it runs 2 threads there.
  EXPECT_TRUE(NodeLoadOf(2, 2, 1, 2).oversubscribed());
}

// Train's own default as seen before MPI_Init (rank_threads.hpp decides after it).
TEST(CoreYield, TrainsDefaultThreadsFollowTheMask) {
  // A lone rank bound to 1 of 2 CPUs: train runs 1 thread there, so no yield and no line.
  NodeLoad bound = NodeLoadOf(1, 0, 1, 2, RankWork::kTrain);
  EXPECT_EQ(bound.threads, 1);
  EXPECT_FALSE(bound.oversubscribed());
  // 2 ranks bound to a core each: 1 thread each on its own core.
  EXPECT_FALSE(NodeLoadOf(2, 0, 1, 2, RankWork::kTrain).oversubscribed());
  // A rank of 8 bound to its own 8 CPUs of 64: 8 threads there.
  EXPECT_EQ(NodeLoadOf(8, 0, 8, 64, RankWork::kTrain).threads, 8);
  // 4 ranks in a 2-CPU mask of a 4-CPU node cannot each have the mask to itself: shared,
  // 1 thread each, 4 on 2 CPUs: yes.
  NodeLoad shared = NodeLoadOf(4, 0, 2, 4, RankWork::kTrain);
  EXPECT_EQ(shared.sharing_ranks, 4);
  EXPECT_EQ(shared.threads, 1);
  EXPECT_TRUE(shared.oversubscribed());
  // Unbound, as before: the node's cores over its ranks.
  EXPECT_EQ(NodeLoadOf(2, 0, 2, 2, RankWork::kTrain).threads, 1);
  EXPECT_TRUE(NodeLoadOf(4, 0, 2, 2, RankWork::kTrain).oversubscribed());
}

TEST(CoreYield, ThreadsComeFromTheArgumentsThenOpenblasNumThreads) {
  char prog[] = "dlh-launch", train[] = "train", threads[] = "--threads", three[] = "3",
       spec[] = "spec.json", eq[] = "--threads=5", dashes[] = "--", other[] = "--threads=9";
  ScopedEnv env({{"OPENBLAS_NUM_THREADS", "2"}});
  char* a[] = {prog, train, threads, three, spec};
  EXPECT_EQ(NodeLoadFromArguments(5, a).threads, 3);
  char* b[] = {prog, train, eq};
  EXPECT_EQ(NodeLoadFromArguments(3, b).threads, 5);
  char* c[] = {prog, train, spec, dashes, other};  // a user program's own option
  EXPECT_EQ(NodeLoadFromArguments(5, c).threads, 2);
}

TEST(CoreYield, SetOnlyWhenOversubscribedAndNotSetByTheUser) {
  char prog[] = "dlh-launch", train[] = "train", threads[] = "--threads", many[] = "4096";
  char* argv[] = {prog, train, threads, many};
  {
    ScopedEnv env({{"OMPI_MCA_mpi_yield_when_idle", "0"}});  // the user's, kept
    EXPECT_EQ(YieldCoresWhenOversubscribed(4, argv), "");
    EXPECT_STREQ(getenv("OMPI_MCA_mpi_yield_when_idle"), "0");
  }
  {
    ScopedEnv env({{"OMPI_MCA_mpi_yield_when_idle", nullptr}});
    const std::string line = YieldCoresWhenOversubscribed(4, argv);  // 4096 threads: over
    EXPECT_NE(line.find("x 4096 thread(s)"), std::string::npos) << line;
    EXPECT_STREQ(getenv("OMPI_MCA_mpi_yield_when_idle"), "1");
  }
  {
    char one[] = "1";
    char* single[] = {prog, train, threads, one};
    ScopedEnv env({{"OMPI_MCA_mpi_yield_when_idle", nullptr}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}});
    EXPECT_EQ(YieldCoresWhenOversubscribed(4, single), "");
    EXPECT_EQ(getenv("OMPI_MCA_mpi_yield_when_idle"), nullptr);
  }
}

TEST(CoreYield, APlanOnOneHostCountsAllTheJobsRanks) {
  EXPECT_EQ(SharedHostCoresOfPlan(R"({"allocation": {"shared_host_cores": 2}})"), 2);
  EXPECT_EQ(SharedHostCoresOfPlan(R"({"allocation": {"tasks_per_node": 2}})"), 0);
  EXPECT_EQ(SharedHostCoresOfPlan(R"({"allocation": {"shared_host_cores": "2"}})"), 0);
  EXPECT_EQ(SharedHostCoresOfPlan(R"({"allocation": {"shared_host_cores": -1}})"), 0);
  EXPECT_EQ(SharedHostCoresOfPlan(R"({"allocation": 3})"), 0);
  EXPECT_EQ(SharedHostCoresOfPlan("not json"), 0);

  // Two fake nodes of one 2-core machine, 1 rank each with 2 threads: on its node, a rank
  // has its 2 cores; the plan says both ranks share them.
  char prog[] = "dlh-launch", train[] = "train", threads[] = "--threads", two[] = "2",
       no_plan[] = "--no-plan";
  char* argv[] = {prog, train, threads, two};
  {
    ScopedEnv env({{"DLH_PLAN", R"({"allocation": {"shared_host_cores": 2}})"},
                   {"SLURM_SPANK_DLH_PLAN", nullptr},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                   {"OMPI_COMM_WORLD_SIZE", "2"}});
    const NodeLoad load = NodeLoadFromArguments(4, argv);
    EXPECT_EQ(load.sharing_ranks, 2);
    EXPECT_LE(load.cpus, 2);
    EXPECT_TRUE(load.oversubscribed());
    char* ignored[] = {prog, train, threads, two, no_plan};
    EXPECT_EQ(SharedHostCoresFromArguments(5, ignored),
              0);  // --no-plan: the plan is not this job's
  }
  {
    ScopedEnv env({{"DLH_PLAN", R"({"allocation": {"tasks_per_node": 1}})"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                   {"OMPI_COMM_WORLD_SIZE", "2"}});
    EXPECT_EQ(NodeLoadFromArguments(4, argv).sharing_ranks, 1);  // real nodes: its own
  }
}

// Two fake nodes of one 2-core machine, one rank each and no thread count given: each rank
// gets 1 of the 2 cores (the plan's rule, which the estimator predicted the job with), not
// its node's 2 (measured 2026-12-03: 2 threads a rank ran an MLP 22% slower a step).
TEST(CoreYield, APlanOnOneHostGivesEachRankItsShareOfTheCores) {
  const std::string shared =
      R"({"format_version": 1, "global_batch": 128, "lr": 0.1,
          "allocation": {"gpus": 2, "shared_host_cores": 2}})";
  char prog[] = "dlh-launch", train[] = "train";
  char* argv[] = {prog, train};
  {
    ScopedEnv env({{"DLH_PLAN", shared.c_str()},
                   {"SLURM_SPANK_DLH_PLAN", nullptr},
                   {"OPENBLAS_NUM_THREADS", nullptr},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                   {"OMPI_COMM_WORLD_SIZE", "2"}});
    const NodeLoad load = NodeLoadFromArguments(2, argv);
    EXPECT_EQ(load.threads, 1);
    EXPECT_FALSE(load.oversubscribed());

    int threads = 0;
    EXPECT_NE(ApplyPlannedThreads(shared, "DLH_PLAN", 2, &threads), "");
    EXPECT_EQ(threads, 1);
    threads = 0;
    ApplyPlannedThreads(shared, "DLH_PLAN", 1, &threads);
    EXPECT_EQ(threads, 2);  // one rank has the machine
    threads = 0;
    ApplyPlannedThreads(shared, "DLH_PLAN", 4, &threads);
    EXPECT_EQ(threads, 1);  // never fewer than one
    threads = 3;
    EXPECT_EQ(ApplyPlannedThreads(shared, "DLH_PLAN", 2, &threads), "");
    EXPECT_EQ(threads, 3);  // --threads wins
    threads = 0;
    EXPECT_EQ(ApplyPlannedThreads(R"({"format_version": 1, "global_batch": 128, "lr": 0.1})",
                                  "DLH_PLAN", 2, &threads),
              "");
    EXPECT_EQ(threads, 0);  // real nodes: the trainer shares each node's own cores
  }
  {
    ScopedEnv env({{"OPENBLAS_NUM_THREADS", "2"}});
    int threads = 0;
    EXPECT_EQ(ApplyPlannedThreads(shared, "DLH_PLAN", 2, &threads), "");
    EXPECT_EQ(threads, 0);  // the user's environment wins
  }
}

}  // namespace
}  // namespace dlh
