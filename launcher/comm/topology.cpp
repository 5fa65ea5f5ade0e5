// DLH — rank topology (see topology.hpp).
#include "launcher/comm/topology.hpp"

#include <algorithm>
#include <map>

namespace dlh {

Topology MakeTopology(const std::vector<std::string>& node_of_rank, int rank) {
  if (node_of_rank.empty()) throw Error("topology: no ranks");
  if (rank < 0 || size_t(rank) >= node_of_rank.size())
    throw Error("topology: rank " + std::to_string(rank) + " out of range for " +
                std::to_string(node_of_rank.size()) + " ranks");
  Topology t;
  std::map<std::string, int> index;  // node name -> node number
  for (size_t r = 0; r < node_of_rank.size(); ++r) {
    auto it = index.find(node_of_rank[r]);
    if (it == index.end()) {
      it = index.emplace(node_of_rank[r], int(t.ranks_per_node.size())).first;
      t.ranks_per_node.push_back(0);
    }
    if (int(r) == rank) {
      t.node = it->second;
      t.local_rank = t.ranks_per_node[size_t(it->second)];
    }
    ++t.ranks_per_node[size_t(it->second)];
  }
  t.num_nodes = int(t.ranks_per_node.size());
  t.local_size = t.ranks_per_node[size_t(t.node)];
  t.homogeneous = std::all_of(t.ranks_per_node.begin(), t.ranks_per_node.end(),
                              [&](int n) { return n == t.ranks_per_node[0]; });
  return t;
}

std::vector<std::string> GatherNodeNames(MPI_Comm comm) {
  return mpi::AllGatherStrings(comm, mpi::Hostname());
}

std::string DescribeTopology(const Topology& t) {
  int ranks = 0;
  for (int r : t.ranks_per_node) ranks += r;
  if (t.homogeneous && !t.ranks_per_node.empty())
    return std::to_string(t.num_nodes) + " nodes x " + std::to_string(t.ranks_per_node[0]) +
           " ranks";
  return std::to_string(t.num_nodes) + " nodes, " + std::to_string(ranks) + " ranks, uneven";
}

NodeComms BuildNodeComms(MPI_Comm comm, const std::vector<std::string>& node_of_rank) {
  int rank = 0, size = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  if (node_of_rank.size() != size_t(size))
    throw Error("topology: " + std::to_string(node_of_rank.size()) + " node names for " +
                std::to_string(size) + " ranks");
  Topology topo = MakeTopology(node_of_rank, rank);
  // Keys keep the rank order inside a node and the node order across nodes, so local rank
  // and node number are also the ranks in the split communicators.
  mpi::Comm local = mpi::Comm::split(comm, topo.node, rank);
  mpi::Comm cross = mpi::Comm::split(comm, topo.local_rank, topo.node);
  return NodeComms{std::move(local), std::move(cross), std::move(topo)};
}

}  // namespace dlh
