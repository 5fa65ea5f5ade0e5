// DLH — `dlh-launch run [options] -- CMD ARGS...` (issue 18): the user's own training program
// (a PyTorch DDP script, any trainer without MPI) launched by DLH under `srun --mpi=pmix` or
// `mpirun`, one MPI rank per task and one program per rank, with torchrun's environment
// (run_env.hpp).
//
// Each rank: the ranks agree on the rendezvous (rank 0's host and a free port, a run id), the
// run folder and the checkpoint to resume from; then each starts its program (child.hpp) and
// waits for it. A program that fails (non-zero exit, killed by a signal) ends the job: its
// rank prints one line and calls MPI_Abort with the program's status, and the launcher kills
// the other ranks, whose programs die with them. A program that exits 0 leaves its rank
// waiting for the others (a non-blocking barrier, so that an abort still reaches it); when all
// are done every rank exits 0. A stop signal (SIGTERM, SIGINT, SIGHUP) is passed on to the
// program, and the rank then exits with the program's status once every rank is done;
// SIGUSR1 and SIGUSR2 are passed on and change nothing else.
//
// The program may report its steps on DLH_PROGRESS_FD (progress.hpp). Once it has reported
// one, a program that reports none for --stall-timeout is stalled (a deadlocked collective, a
// frozen process): its rank kills it and ends every rank with exit code 4, the code the
// example job script requeues on, as it does for the built-in trainer's stalled peers.
// `--profile STEPS` (one rank) times STEPS steps after a warm-up, stops the program and
// writes the profile the estimator plans from (common/program_profile.hpp).
#pragma once

#include <string>
#include <vector>

namespace dlh {

// Splits the arguments after `run` at the first "--": the options before it, CMD ARGS after
// it. Without "--", everything is options and the command is empty.
void SplitRunArguments(const std::vector<std::string>& args, std::vector<std::string>* options,
                       std::vector<std::string>* command);

// The command line: `args` are the arguments after `run`. Collective over MPI_COMM_WORLD
// once the options are checked. Returns the exit code (0; with a stop signal the program's
// status) or does not return (MPI_Abort). Throws UsageError for bad options or a missing
// program (detected alike on every rank before any communication), CollectiveError (127)
// when the program cannot be executed on some rank.
int RunProgramCommand(const std::vector<std::string>& args, int rank, int size);

}  // namespace dlh
