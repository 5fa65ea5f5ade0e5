// DLH — node names as Slurm hostlist expressions ("alpha[001-512],beta7"), issue 41.
//
// A plan on a mix of GPU types lists each part's nodes, so that every rank finds its type by
// its node's name. Listed one by one, 10,000 nodes are over 100 KiB, more than a job's
// environment variable can carry; as hostlists they are a few bytes per run of numbered
// nodes. The grammar is the part of Slurm's that names nodes: items separated by commas,
// each a name or a prefix, one bracket of numbers and ranges ("[001-100,107]") and a suffix.
// A range's numbers are written with as many digits as its first (leading zeros kept).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dlh {

// Expansions beyond this many names are refused (the most nodes a plan may list).
constexpr size_t kMaxHostlistNames = size_t(1) << 20;

// The names of a hostlist expression, in its order. Throws UsageError naming `origin` (when
// not empty) and the fault ("alpha[3-1]: a range must not run backwards") for text that is not one,
// and for more than kMaxHostlistNames names.
std::vector<std::string> ExpandHostlist(const std::string& text, const std::string& origin);

// The names as few hostlist expressions: names that differ only in a trailing number of the
// same width become one bracket of ranges ("node001".."node512" -> "node[001-512]"); others
// stay as they are. Groups come in the order of their first name; ExpandHostlist of the
// results gives every name back once (duplicates are dropped).
std::vector<std::string> CompressHostlist(const std::vector<std::string>& names);

}  // namespace dlh
