// DLH — where each rank runs. MakeTopology is a pure function of the node name of every
// rank, so it is unit-tested without MPI; the MPI helpers only all-gather the names and
// split the communicators the hierarchical allreduce needs.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "launcher/comm/mpi.hpp"

namespace dlh {

struct Topology {
  int node = 0;  // this rank's node, numbered in order of first appearance
  int num_nodes = 0;
  int local_rank = 0;               // position among the ranks of this node, in rank order
  int local_size = 0;               // ranks on this node
  bool homogeneous = true;          // every node has the same number of ranks
  std::vector<int> ranks_per_node;  // indexed by node
};

// "2 nodes x 2 ranks", or "2 nodes, 3 ranks, uneven".
std::string DescribeTopology(const Topology& topology);

// `node_of_rank[r]` names rank r's node. Throws dlh::Error on an empty list or a rank out
// of range.
Topology MakeTopology(const std::vector<std::string>& node_of_rank, int rank);

// Every rank's mpi::Hostname() (SLURMD_NODENAME first), in rank order. Collective.
std::vector<std::string> GatherNodeNames(MPI_Comm comm);

struct NodeComms {
  mpi::Comm local;  // the ranks of this node, ordered by rank
  mpi::Comm cross;  // the ranks with this local rank, one per node, ordered by node
  Topology topo;
};

// Splits `comm` by the given names (taken as a parameter so tests can pretend ranks sit on
// several nodes). Collective; `node_of_rank` must be the same on every rank.
NodeComms BuildNodeComms(MPI_Comm comm, const std::vector<std::string>& node_of_rank);

}  // namespace dlh
