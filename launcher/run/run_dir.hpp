// DLH — the run folder of `dlh-launch run`: its default name and the checkpoint a program
// resumes from. No MPI: rank 0 calls these and broadcasts what they return.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// The default run folder's name for a command: the program's base name without its
// extension ("./train.sh" -> "train"), or, when the program is an interpreter (python*,
// bash, sh, ...), the script's (`python3 -u train.py` -> "train", `python3 -m pkg.main` ->
// "pkg.main"), so that two scripts run by one interpreter do not share checkpoints.
// `command` is CMD ARGS... (not empty).
std::string DefaultRunName(const std::vector<std::string>& command);

// The newest regular file directly in `dir` by modification time (ties: the greater name),
// as `dir`/NAME; "" when `dir` is missing or holds none. Hidden files (".name") and names
// ending in ".tmp" or ".partial" are skipped: a program writing a checkpoint to a temporary
// name and renaming it leaves such a file when it dies mid-write, and it must not be resumed
// from. Throws Error when `dir` exists but cannot be read.
std::string NewestCheckpoint(const std::string& dir);

}  // namespace dlh
