// DLH fuzz target — what the plugin reads from Slurm about its nodes: sinfo's lines
// (dlh::plan::LiveNodesFromSinfo, "NodeList|StateLong|Gres|GresUsed|Features|"), each node's GRES
// lists (ParseGres), and their overlay onto the example cluster and the local one (with a
// CPU node type, whose nodes are found by feature) (OverlayAvailability), which sets how many
// nodes of each type are free. None of these refuses input: a line it cannot
// read is skipped, so any exception is a finding; and no type may end with more free nodes
// than it has.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "estimator/cluster/cluster.hpp"
#include "estimator/plan/live_state.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Run from the repository's root (run.sh, replay.sh do).
  static const dlh::Cluster example = dlh::LoadCluster("share/cluster/example.json");
  static const dlh::Cluster local = dlh::LoadCluster("share/cluster/local.json");
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const std::vector<dlh::plan::LiveNode> nodes = dlh::plan::LiveNodesFromSinfo(text);
    for (const dlh::plan::LiveNode& n : nodes) {
      dlh::plan::ParseGres(n.gres);
      dlh::plan::ParseGres(n.gres_used);
    }
    for (const dlh::Cluster* base : {&example, &local}) {
      dlh::Cluster c = *base;
      dlh::plan::OverlayAvailability(c, nodes);
      for (const dlh::NodeType& nt : c.node_types)
        if (nt.available < 0 || nt.available > nt.nodes) {
          std::fprintf(stderr, "OverlayAvailability: %s has %d of %d nodes free\n", nt.name.c_str(),
                       nt.available, nt.nodes);
          std::abort();
        }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sinfo parsing threw: %s\n", e.what());
    std::abort();
  }
  return 0;
}
