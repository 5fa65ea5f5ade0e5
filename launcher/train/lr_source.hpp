// DLH — the peak learning rate of a run whose plan says `"lr_source": "find"`
// (`sbatch --dlh-auto=...,lr=find`). The SPANK plugin plans inside sbatch and cannot train,
// so the job finds the rate itself, before training, at the global batch it trains with:
//   1. the run folder's record (RUN_DIR/lr.json), so that a resumed run keeps its rate;
//   2. else a stored range test for this spec and batch (lr_store.hpp: LR_CACHE/KEY.json,
//      from an earlier job or from `dlh-launch lr-find --store`);
//   3. else the range test itself, on every rank of the job, stored for the next time.
// A test that finds no clear minimum leaves the plan's linear-scaled rate, with a warning.
#pragma once

#include <mpi.h>

#include "launcher/train/trainer.hpp"

namespace dlh {

// Sets options->lr and options->lr_source when the plan (options->plan_json) asks for a
// found rate; does nothing otherwise. Collective over `comm`; rank 0 prints where the rate
// came from. Throws (the same on every rank) UsageError for a bad plan, stored result or
// record, SpecError / DataError as train would.
void ResolvePlanLr(TrainOptions* options, MPI_Comm comm);

}  // namespace dlh
