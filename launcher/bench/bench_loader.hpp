// DLH — `dlh-launch bench-loader`: the data loader's rate on its own, from memory or from the
// file (launcher/data/file_source.hpp), and whether a training step of a given length would
// wait on it. `make bench` sets it beside dd of the same file.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// The command line: `dlh-launch bench-loader --data FILE [options]` (arguments after the
// command name). Rank 0 measures. Returns the exit code; throws UsageError for bad options,
// DataError for a bad data set.
int RunBenchLoaderCommand(const std::vector<std::string>& args, int rank);

}  // namespace dlh
