// DLH — a training rank's default CPU engine threads (rank_threads.hpp).
#include "launcher/watch/rank_threads.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "launcher/comm/mpi.hpp"

namespace dlh {

RankThreads DefaultRankThreads(MPI_Comm world) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  RankThreads t;
  t.online = std::max(1, int(std::thread::hardware_concurrency()));
  t.cpus = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : 0;
  if (t.cpus <= 0) {  // no mask to read: the whole node, as every rank sees it
    t.cpus = t.online;
    for (int c = 0; c < t.online && c < CPU_SETSIZE; ++c) CPU_SET(c, &mine);
  }
  // Ranks of one node compare masks: those bound apart each own theirs, those let run
  // anywhere (or in one Slurm job's CPUs) share them.
  const mpi::Comm node = mpi::SplitShared(mpi::Comm(world));
  std::vector<cpu_set_t> masks(size_t(node.size()));
  MPI_CHECK(MPI_Allgather(&mine, int(sizeof mine), MPI_BYTE, masks.data(), int(sizeof mine),
                          MPI_BYTE, node.get()));
  t.sharing = int(std::count_if(masks.begin(), masks.end(), [&](const cpu_set_t& other) {
    return CPU_EQUAL(&other, &mine) != 0;
  }));
  t.threads = std::max(1, t.cpus / std::max(1, t.sharing));
  return t;
}

std::string RankThreadsText(const RankThreads& t) {
  std::string text =
      std::to_string(t.threads) + " CPU engine thread(s) per rank: " + std::to_string(t.cpus) +
      " CPU(s) in the rank's affinity mask (of the node's " + std::to_string(t.online) + ")";
  if (t.sharing > 1) text += ", shared by " + std::to_string(t.sharing) + " ranks";
  if (t.cpus < t.online)
    text += "; mpirun binds each rank to a core unless --bind-to none, srun to its CPUs";
  return text + " (--threads sets another count)";
}

}  // namespace dlh
