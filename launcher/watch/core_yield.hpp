// DLH — a rank waiting in MPI yields its core when this node has more busy threads than CPUs.
//
// Open MPI polls for messages in a busy loop: a rank waiting for a slower peer keeps its core.
// That is right on a node with a core per thread, and wrong where ranks x threads exceed the
// CPUs: there the waiting rank takes the time the rank it waits for needs (the figures:
// docs/reference/dlh-launch.md, "A waiting rank and its core"). Open MPI 4.1 did not yield on its
// own there (mpirun -np 4 with rmaps_base_oversubscribe on 2 cores), and under srun it
// cannot know what else runs on the node. So dlh-launch asks for it
// (OMPI_MCA_mpi_yield_when_idle=1) before MPI_Init, from what the launcher says of this node,
// unless the user set it either way.
#pragma once

#include <string>

namespace dlh {

struct NodeLoad {
  int local_ranks = 1;  // this node's ranks in the job (the launcher's environment)
  int threads = 1;      // each rank's compute threads (--threads, the env, else cores/ranks)
  int cpus = 1;         // the CPUs this process may run on (its affinity mask)
  // The ranks that share those CPUs: all of the node's where the process may run anywhere;
  // where a launcher bound it to fewer CPUs than the node has, those are taken as its own.
  int sharing_ranks = 1;
  bool oversubscribed() const { return sharing_ranks * threads > cpus; }
};

// The ranks on this node from the launcher's environment: Open MPI's mpirun
// (OMPI_COMM_WORLD_LOCAL_SIZE), else srun (SLURM_STEP_TASKS_PER_NODE, "2(x3),1", at
// SLURM_NODEID); 1 when neither says.
int LocalRanksFromEnvironment();

// "2(x3),1" and node 4 -> 1; 0 when the text does not say (malformed, or too few nodes).
int TasksOnNode(const std::string& tasks_per_node, int node);

// Whose threads a rank's core runs: train's engine alone, or (every other command, `run`
// above all) the launcher beside a program of its own that may use the node's cores.
enum class RankWork { kTrain, kBesideProgram };

// This node's load as dlh-launch COMMAND ARGS will run it: threads from --threads N in argv,
// else OPENBLAS_NUM_THREADS, else the default for COMMAND (NodeLoadOf). Where the plan says
// the job's nodes are one host, all the job's ranks share its cores.
NodeLoad NodeLoadFromArguments(int argc, char** argv);
// The same from given parts: cpus of this process, online the node's, threads 0 for the
// default. For train, the default is train's own (rank_threads.hpp: the mask's CPUs over the
// ranks that have that mask) as well as it can be told before MPI_Init, when a rank knows
// only its own mask: a mask narrower than the node that the node's ranks could hold apart
// (its CPUs x the ranks <= the node's) is taken as this rank's own, else as shared by them
// all. For every other command, the node's cores over its ranks: under `run` the rank's core
// also runs the user's program, and a rank bound to 1 CPU must yield it.
NodeLoad NodeLoadOf(int local_ranks, int threads, int cpus, int online,
                    RankWork work = RankWork::kBesideProgram);

// The plan's allocation.shared_host_cores (plan.hpp, SharedHostCoresOfPlan) of the plan the
// trainer would read: DLH_PLAN, else SLURM_SPANK_DLH_PLAN; none under --no-plan or --plan.
int SharedHostCoresFromArguments(int argc, char** argv);

// The job's ranks from the launcher's environment (OMPI_COMM_WORLD_SIZE, SLURM_STEP_NUM_TASKS,
// SLURM_NTASKS), else `fallback`.
int JobRanksFromEnvironment(int fallback);

// Before MPI_Init: sets OMPI_MCA_mpi_yield_when_idle=1 when the node is oversubscribed and
// the variable is not set; returns the line to say so (empty when nothing was set).
std::string YieldCoresWhenOversubscribed(int argc, char** argv);

}  // namespace dlh
