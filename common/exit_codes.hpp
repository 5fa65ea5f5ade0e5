// DLH — the exit codes of every DLH command-line tool, in one place (the EXIT STATUS
// sections of docs/man/*.md; docs/reference/run-folder.md, "Exit codes"; dlh-data's usage
// text).
//
// 0, 1 and 2 mean the same in every tool. 3 does not: dlh-launch's 3 is a checkpoint
// problem, dlh-estimate's 3 is the answer "no allocation meets the deadline". Both names
// exist so that each main says which one it means; they must keep the same value, since
// job scripts test the number.
#pragma once

namespace dlh {

constexpr int kExitOk = 0;  // done (dlh-launch: also stopped by --max-steps)

// A runtime failure: I/O, MPI, internal. dlh-data also uses it for a data set that is
// malformed or cannot be read or written (its 2 is for the command line alone).
constexpr int kExitFailure = 1;

// Bad input, named in one line: an option (every tool); dlh-launch: a training spec or data
// set; dlh-estimate: a spec, cluster description or calibration file.
constexpr int kExitBadInput = 2;

// dlh-launch: a checkpoint cannot be read or written, or does not fit the spec.
constexpr int kExitCheckpoint = 3;

// dlh-estimate recommend: no allocation meets the deadline (the fastest one is printed).
constexpr int kExitInfeasible = 3;

// dlh-estimate cluster --from-slurm: nodes with GPUs are missing from the description
// written (GPU types without datasheet figures, each named on stderr), or none could be.
constexpr int kExitIncomplete = 3;

// dlh-estimate calibrate --slurm: some GPU types were not calibrated (each named on stderr
// with its reason) or are missing from the --cluster file; the others were kept.
constexpr int kExitSomeFailed = 3;

// dlh-launch: a peer rank stopped answering (frozen, gone, or cut off by the network) for
// --comm-timeout seconds; every live rank printed why and the job was aborted.
constexpr int kExitStalled = 4;

// dlh-launch: stopped by signal N (SIGTERM, SIGINT) after writing a checkpoint exits with
// kExitSignalBase + N, the shell's convention for a death by signal.
constexpr int kExitSignalBase = 128;

}  // namespace dlh
