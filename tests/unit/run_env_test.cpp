// run_env_test - Unit tests for launcher/run/: the environment of the program `dlh-launch run`
// starts (run_env.cpp, a pure function), the run folder (run_dir.cpp), the argument split
// (run_command.cpp), the pure helpers of child.cpp and the rendezvous port (rendezvous.cpp). The
// processes themselves run in tests/scripts/run_cmd.sh (mpirun).
#include "launcher/run/run_env.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <map>

#include "common/error.hpp"
#include "launcher/run/child.hpp"
#include "launcher/run/rendezvous.hpp"
#include "launcher/run/run_command.hpp"
#include "launcher/run/run_dir.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

using Vars = std::map<std::string, std::string>;

// NAME -> value; a duplicate name fails the test (the program would see one of them).
Vars AsMap(const std::vector<std::string>& env) {
  Vars out;
  for (const std::string& e : env) {
    const size_t eq = e.find('=');
    EXPECT_NE(eq, std::string::npos) << e;
    const std::string name = e.substr(0, eq);
    EXPECT_EQ(out.count(name), 0u) << "twice: " << name;
    out[name] = e.substr(eq + 1);
  }
  return out;
}

// Rank 1 of 4 on the first of two nodes, as mpirun would start it.
RunEnvInputs Inputs() {
  RunEnvInputs in;
  in.parent = {"PATH=/usr/bin:/bin",
               "HOME=/home/u",
               "SLURM_JOB_ID=77",
               "SLURM_PROCID=1",
               "OMPI_COMM_WORLD_RANK=1",
               "OMPI_MCA_btl=self,vader",
               "PMIX_RANK=1",
               "PMIX_SERVER_URI21=pmix-server.1;tcp4://127.0.0.1:4242",
               "PMI_FD=5",
               "PMIXED=kept",  // not a launcher variable: no underscore after PMIX
               "OMPIX=kept"};
  in.rank = 1;
  in.world_size = 4;
  in.local_rank = 1;
  in.local_world_size = 2;
  in.node = 0;
  in.num_nodes = 2;
  in.master_addr = "node1";
  in.master_port = 29511;
  in.run_id = "77";
  in.run_dir = "/work/runs/train";
  return in;
}

TEST(RunEnvTest, SetsTorchrunsVariables) {
  const Vars v = AsMap(BuildRunEnv(Inputs(), "DLH_PLAN"));
  EXPECT_EQ(v.at("RANK"), "1");
  EXPECT_EQ(v.at("WORLD_SIZE"), "4");
  EXPECT_EQ(v.at("LOCAL_RANK"), "1");
  EXPECT_EQ(v.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(v.at("GROUP_RANK"), "0");
  EXPECT_EQ(v.at("GROUP_WORLD_SIZE"), "2");
  EXPECT_EQ(v.at("ROLE_NAME"), "default");
  EXPECT_EQ(v.at("ROLE_RANK"), "1");
  EXPECT_EQ(v.at("ROLE_WORLD_SIZE"), "4");
  EXPECT_EQ(v.at("MASTER_ADDR"), "node1");
  EXPECT_EQ(v.at("MASTER_PORT"), "29511");
  EXPECT_EQ(v.at("TORCHELASTIC_RUN_ID"), "77");
  EXPECT_EQ(v.at("TORCHELASTIC_RESTART_COUNT"), "0");
  EXPECT_EQ(v.at("TORCHELASTIC_MAX_RESTARTS"), "0");
  EXPECT_EQ(v.at("TORCHELASTIC_USE_AGENT_STORE"), "False");
  EXPECT_EQ(v.at("DLH_RUN_DIR"), "/work/runs/train");
}

TEST(RunEnvTest, DropsTheMpiLaunchersVariablesAndKeepsTheRest) {
  const Vars v = AsMap(BuildRunEnv(Inputs(), "DLH_PLAN"));
  for (const auto& [name, value] : v) {
    EXPECT_NE(name.rfind("OMPI_", 0), 0u) << name;
    EXPECT_NE(name.rfind("PMIX_", 0), 0u) << name;
    EXPECT_NE(name.rfind("PMI_", 0), 0u) << name;
  }
  EXPECT_EQ(v.at("PATH"), "/usr/bin:/bin");
  EXPECT_EQ(v.at("HOME"), "/home/u");
  EXPECT_EQ(v.at("SLURM_JOB_ID"), "77");
  EXPECT_EQ(v.at("SLURM_PROCID"), "1");
  EXPECT_EQ(v.at("OMPIX"), "kept");
  EXPECT_EQ(v.at("PMIXED"), "kept");
}

TEST(RunEnvTest, NoCheckpointNoPlanMeansNoSuchVariablesEvenFromTheParent) {
  RunEnvInputs in = Inputs();
  // Left by an outer run (a nested dlh-launch run): another run's values.
  in.parent.push_back("DLH_CHECKPOINT=/old/ckpt.pt");
  in.parent.push_back("DLH_BATCH=7");
  in.parent.push_back("RANK=5");
  in.parent.push_back("TORCHELASTIC_USE_AGENT_STORE=True");
  const Vars v = AsMap(BuildRunEnv(in, "DLH_PLAN"));
  for (const char* name : {"DLH_CHECKPOINT", "DLH_BATCH", "DLH_GLOBAL_BATCH", "DLH_LR",
                           "DLH_WARMUP_EPOCHS", "DLH_RANK_BATCHES"})
    EXPECT_EQ(v.count(name), 0u) << name;
  EXPECT_EQ(v.at("RANK"), "1");
  EXPECT_EQ(v.at("TORCHELASTIC_USE_AGENT_STORE"), "False");
}

TEST(RunEnvTest, MallocKeepsFreedMemoryUnlessTheUserChoseOtherwise) {
  // By default: the tunables, after the parent's own (other) tunables.
  EXPECT_EQ(AsMap(BuildRunEnv(Inputs(), "DLH_PLAN")).at("GLIBC_TUNABLES"),
            kKeepFreedMemoryTunables);
  RunEnvInputs in = Inputs();
  in.parent.push_back("GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F");
  EXPECT_EQ(AsMap(BuildRunEnv(in, "DLH_PLAN")).at("GLIBC_TUNABLES"),
            std::string("glibc.cpu.hwcaps=-AVX512F:") + kKeepFreedMemoryTunables);
  // --malloc system: the parent's as it was, or none.
  in.keep_freed_memory = false;
  EXPECT_EQ(AsMap(BuildRunEnv(in, "DLH_PLAN")).at("GLIBC_TUNABLES"), "glibc.cpu.hwcaps=-AVX512F");
  RunEnvInputs plain = Inputs();
  plain.keep_freed_memory = false;
  EXPECT_EQ(AsMap(BuildRunEnv(plain, "DLH_PLAN")).count("GLIBC_TUNABLES"), 0u);
  // A threshold the user set, either way glibc reads it, stands and nothing is added
  // (a nested dlh-launch run sees its outer run's tunables and adds none twice).
  for (const char* own : {"GLIBC_TUNABLES=glibc.malloc.mmap_threshold=65536",
                          "MALLOC_TRIM_THRESHOLD_=0", "MALLOC_MMAP_THRESHOLD_=131072"}) {
    RunEnvInputs user = Inputs();
    user.parent.push_back(own);
    const Vars v = AsMap(BuildRunEnv(user, "DLH_PLAN"));
    const std::string entry = own, name = entry.substr(0, entry.find('='));
    EXPECT_EQ(v.at(name), entry.substr(entry.find('=') + 1)) << own;
    if (name != "GLIBC_TUNABLES") {
      EXPECT_EQ(v.count("GLIBC_TUNABLES"), 0u) << own;
    }
  }
  RunEnvInputs nested = Inputs();
  nested.parent.push_back(std::string("GLIBC_TUNABLES=") + kKeepFreedMemoryTunables);
  EXPECT_EQ(AsMap(BuildRunEnv(nested, "DLH_PLAN")).at("GLIBC_TUNABLES"), kKeepFreedMemoryTunables);
}

// The program gets the rank's share of its CPUs as OMP_NUM_THREADS unless the parent set one
// (torchrun sets 1: a CPU rank's other cores idle; unset, PyTorch takes every core in every
// rank), and the profile records what it was offered.
TEST(RunEnvTest, OmpThreadsAreTheRanksShareUnlessTheParentSetsThem) {
  RunEnvInputs in = Inputs();
  EXPECT_EQ(AsMap(BuildRunEnv(in, "DLH_PLAN")).count("OMP_NUM_THREADS"), 0u);
  EXPECT_EQ(OfferedThreads(in), 0);
  in.omp_threads = 3;
  EXPECT_EQ(AsMap(BuildRunEnv(in, "DLH_PLAN")).at("OMP_NUM_THREADS"), "3");
  EXPECT_EQ(OfferedThreads(in), 3);
  in.parent.push_back("OMP_NUM_THREADS=1");
  const std::vector<std::string> env = BuildRunEnv(in, "DLH_PLAN");
  EXPECT_EQ(std::count(env.begin(), env.end(), std::string("OMP_NUM_THREADS=1")), 1);
  EXPECT_EQ(AsMap(env).at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(OfferedThreads(in), 1);
  in.parent.back() = "OMP_NUM_THREADS=";  // set but empty: the program's own default
  EXPECT_EQ(OfferedThreads(in), 0);
}

TEST(RunEnvTest, CheckpointAndRestartCount) {
  RunEnvInputs in = Inputs();
  in.checkpoint = "/work/runs/train/checkpoints/step-900.pt";
  in.parent.push_back("SLURM_RESTART_COUNT=2");
  const Vars v = AsMap(BuildRunEnv(in, "DLH_PLAN"));
  EXPECT_EQ(v.at("DLH_CHECKPOINT"), "/work/runs/train/checkpoints/step-900.pt");
  EXPECT_EQ(v.at("TORCHELASTIC_RESTART_COUNT"), "2");
}

TEST(RunEnvTest, PlanGivesTheGlobalBatchThisRanksShareAndTheRate) {
  RunEnvInputs in = Inputs();
  in.plan = ParsePlan(R"({"format_version":1,"global_batch":30,"lr":0.1,"warmup_epochs":2.5})",
                      "DLH_PLAN");
  in.world_size = 2;
  for (int rank : {0, 1}) {
    in.rank = rank;
    const Vars v = AsMap(BuildRunEnv(in, "DLH_PLAN"));
    EXPECT_EQ(v.at("DLH_GLOBAL_BATCH"), "30");
    EXPECT_EQ(v.at("DLH_BATCH"), "15") << "rank " << rank;
    EXPECT_EQ(v.at("DLH_LR"), "0.1");
    EXPECT_EQ(v.at("DLH_WARMUP_EPOCHS"), "2.5");
  }
  // 31 on 4 ranks: the first 31 mod 4 = 3 ranks take one sample more.
  in.plan.global_batch = 31;
  in.world_size = 4;
  const int want[] = {8, 8, 8, 7};
  for (int rank = 0; rank < 4; ++rank) {
    in.rank = rank;
    EXPECT_EQ(AsMap(BuildRunEnv(in, "DLH_PLAN")).at("DLH_BATCH"), std::to_string(want[rank]));
  }
}

TEST(RunEnvTest, PlanOnTwoGpuTypesGivesThePartsBatch) {
  RunEnvInputs in = Inputs();
  in.plan = ParsePlan(R"({"format_version":1,"global_batch":96,"lr":0.05,
      "allocation":{"gpus":2,"parts":[
        {"gpu":"alpha","nodes":1,"gpus_per_node":1,"per_gpu_batch":64},
        {"gpu":"beta","nodes":1,"gpus_per_node":1,"per_gpu_batch":32}]}})",
                      "plan.json");
  in.world_size = 2;
  in.rank = 1;
  in.plan_part = 1;
  EXPECT_EQ(AsMap(BuildRunEnv(in, "plan.json")).at("DLH_BATCH"), "32");
  in.rank = 0;
  in.plan_part = 0;
  EXPECT_EQ(AsMap(BuildRunEnv(in, "plan.json")).at("DLH_BATCH"), "64");
}

TEST(RunEnvTest, RankBatchesListEveryRanksBatchWithAPlanOnly) {
  RunEnvInputs in = Inputs();
  in.rank_batches = {64, 32};
  in.parent.push_back("DLH_RANK_BATCHES=1,1");  // an outer run's
  EXPECT_EQ(AsMap(BuildRunEnv(in, "plan.json")).count("DLH_RANK_BATCHES"), 0u);
  in.plan = ParsePlan(R"({"format_version":1,"global_batch":96,"lr":0.05})", "plan.json");
  in.world_size = 2;
  EXPECT_EQ(AsMap(BuildRunEnv(in, "plan.json")).at("DLH_RANK_BATCHES"), "64,32");
}

TEST(RunEnvTest, GlobalBatchSmallerThanTheRanksIsBadInput) {
  const LaunchPlan plan =
      ParsePlan(R"({"format_version":1,"global_batch":3,"lr":0.1})", "DLH_PLAN");
  try {
    PlanRankBatch(plan, "DLH_PLAN", -1, 0, 4);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "DLH_PLAN: global_batch: 3 is smaller than the number of ranks (4)");
  }
}

TEST(RunEnvTest, NarrowsCudaVisibleDevicesToTheRanksGpuOnlyWhenAsked) {
  RunEnvInputs in = Inputs();
  in.parent.push_back("CUDA_VISIBLE_DEVICES=2,3");
  in.binding.visible = "2,3";
  in.binding.device = 1;
  // As torchrun: every GPU of the node stays visible, the script picks cuda:LOCAL_RANK.
  EXPECT_EQ(AsMap(BuildRunEnv(in, "DLH_PLAN")).at("CUDA_VISIBLE_DEVICES"), "2,3");
  in.bind_gpu = true;  // --narrow-gpus
  EXPECT_EQ(AsMap(BuildRunEnv(in, "DLH_PLAN")).at("CUDA_VISIBLE_DEVICES"), "3");
}

TEST(RunEnvTest, ProgressFdIsTheRanksPipeNeverTheParents) {
  RunEnvInputs in = Inputs();
  in.parent.push_back("DLH_PROGRESS_FD=9");  // an outer launch's pipe
  EXPECT_EQ(AsMap(BuildRunEnv(in, "DLH_PLAN")).count("DLH_PROGRESS_FD"), 0u);
  in.progress_fd = 5;
  EXPECT_EQ(AsMap(BuildRunEnv(in, "DLH_PLAN")).at("DLH_PROGRESS_FD"), "5");
}

TEST(RunEnvTest, OneOrNoVisibleGpuIsLeftAsItIs) {
  RunEnvInputs in = Inputs();
  in.parent.push_back("CUDA_VISIBLE_DEVICES=5");  // Slurm bound one GPU to the task
  in.binding.visible = "5";
  in.binding.device = 0;
  in.bind_gpu = true;
  EXPECT_EQ(AsMap(BuildRunEnv(in, "DLH_PLAN")).at("CUDA_VISIBLE_DEVICES"), "5");
  RunEnvInputs none = Inputs();
  EXPECT_EQ(AsMap(BuildRunEnv(none, "DLH_PLAN")).count("CUDA_VISIBLE_DEVICES"), 0u);
}

TEST(RunEnvTest, ShortestNumberReadsBackExactly) {
  EXPECT_EQ(ShortestNumber(0.1), "0.1");
  EXPECT_EQ(ShortestNumber(0.058), "0.058");
  EXPECT_EQ(ShortestNumber(1e-5), "1e-05");
  EXPECT_EQ(ShortestNumber(0), "0");
  EXPECT_EQ(ShortestNumber(2), "2");
  const double third = 1.0 / 3;
  EXPECT_EQ(std::stod(ShortestNumber(third)), third);
}

TEST(RunArgumentsTest, EverythingAfterTheFirstSeparatorIsTheCommand) {
  std::vector<std::string> options, command;
  SplitRunArguments({"--run-dir", "r", "--", "python3", "t.py", "--", "-x"}, &options, &command);
  EXPECT_EQ(options, (std::vector<std::string>{"--run-dir", "r"}));
  EXPECT_EQ(command, (std::vector<std::string>{"python3", "t.py", "--", "-x"}));
  SplitRunArguments({"--run-dir", "r"}, &options, &command);
  EXPECT_EQ(options.size(), 2u);
  EXPECT_TRUE(command.empty());
  SplitRunArguments({"--"}, &options, &command);
  EXPECT_TRUE(options.empty());
  EXPECT_TRUE(command.empty());
}

TEST(RunDirTest, DefaultNameIsTheProgramsOrTheScripts) {
  EXPECT_EQ(DefaultRunName({"./train.sh", "--epochs", "3"}), "train");
  EXPECT_EQ(DefaultRunName({"/opt/bin/trainer"}), "trainer");
  EXPECT_EQ(DefaultRunName({"python3", "-u", "models/resnet.py", "x.py"}), "resnet");
  EXPECT_EQ(DefaultRunName({"/usr/bin/python3.11", "-m", "pkg.main"}), "pkg.main");
  EXPECT_EQ(DefaultRunName({"python3", "-c", "print(1)"}), "python3");
  EXPECT_EQ(DefaultRunName({"bash", "job.sh"}), "job");
  EXPECT_EQ(DefaultRunName({"bash"}), "bash");
}

TEST(RunDirTest, NewestCheckpointByModificationTime) {
  test::TempDir dir("run-dir-test");
  namespace fs = std::filesystem;
  EXPECT_EQ(NewestCheckpoint(dir / "missing"), "");
  EXPECT_EQ(NewestCheckpoint(dir.path()), "");
  const auto now = fs::file_time_type::clock::now();
  auto write = [&](const std::string& name, int age_s) {
    fs::last_write_time(dir.Write(name, "x"), now - std::chrono::seconds(age_s));
  };
  write("b-older.pt", 30);
  write("a-newer.pt", 10);
  fs::create_directories(dir / "z-folder");  // not a file
  write(".hidden.pt", 1);                    // hidden
  write("ckpt.pt.tmp", 1);                   // being written, or torn
  write("ckpt.pt.partial", 1);               // the same
  EXPECT_EQ(NewestCheckpoint(dir.path()), dir / "a-newer.pt");
  write("c-same-age.pt", 10);  // a tie: the greater name
  EXPECT_EQ(NewestCheckpoint(dir.path()), dir / "c-same-age.pt");
}

TEST(ChildTest, ExecCandidatesFollowPath) {
  EXPECT_EQ(ExecCandidates("./t.sh", "/bin"), (std::vector<std::string>{"./t.sh"}));
  EXPECT_EQ(ExecCandidates("prog", "/a:/b/"), (std::vector<std::string>{"/a/prog", "/b//prog"}));
  EXPECT_EQ(ExecCandidates("prog", ":/a"), (std::vector<std::string>{"prog", "/a/prog"}));
  EXPECT_EQ(ExecCandidates("prog", nullptr),
            (std::vector<std::string>{"/bin/prog", "/usr/bin/prog"}));
  EXPECT_TRUE(ExecCandidates("", "/bin").empty());
}

TEST(ChildTest, EndsAreNamedAndCodedAsTheShellDoes) {
  EXPECT_EQ(DescribeEnd(W_EXITCODE(3, 0)), "exited with code 3");
  EXPECT_EQ(ExitCodeOfEnd(W_EXITCODE(3, 0)), 3);
  EXPECT_EQ(ExitCodeOfEnd(W_EXITCODE(0, 0)), 0);
  EXPECT_EQ(DescribeEnd(W_EXITCODE(0, SIGKILL)), "was killed by SIGKILL");
  EXPECT_EQ(ExitCodeOfEnd(W_EXITCODE(0, SIGKILL)), 137);
  EXPECT_EQ(DescribeEnd(W_EXITCODE(0, SIGSEGV) | WCOREFLAG), "was killed by SIGSEGV (core dumped)");
  EXPECT_EQ(ExitCodeOfEnd(W_EXITCODE(0, SIGTERM)), 143);
  EXPECT_EQ(SignalName(SIGUSR1), "SIGUSR1");
}

// The program's store port comes from just below the ephemeral range, where no bind(0) or
// connect() of another process can take it between the pick and the program's bind.
TEST(Rendezvous, TheMasterPortBandLiesBelowTheEphemeralRange) {
  EXPECT_EQ(MasterPortBand(32768).first, 24576);
  EXPECT_EQ(MasterPortBand(32768).last, 32767);
  EXPECT_EQ(MasterPortBand(5000).first, 1024);  // never a privileged port
  EXPECT_EQ(MasterPortBand(5000).last, 4999);
  EXPECT_EQ(MasterPortBand(1100).first, 0);  // too few below: the kernel picks
  EXPECT_EQ(MasterPortBand(1024).first, 0);
}

TEST(Rendezvous, AFreePortIsBelowThisHostsEphemeralRangeAndBindable) {
  const int low = EphemeralPortLow();
  const PortBand band = MasterPortBand(low);
  for (int i = 0; i < 20; ++i) {
    const int port = FreeTcpPort();
    ASSERT_GT(port, 0);
    ASSERT_LT(port, 65536);
    if (band.first > 0) {
      EXPECT_GE(port, band.first);
      EXPECT_LT(port, low);
    }
  }
}

}  // namespace
}  // namespace dlh
