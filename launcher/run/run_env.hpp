// DLH — the environment of the program `dlh-launch run` starts on each rank (issue 18): the
// variables torchrun gives its workers, so that a PyTorch DDP script (init_method "env://")
// or any trainer written for torchrun runs unchanged, plus DLH's own (run folder, checkpoint
// to resume from, the plan's batch and learning rate). docs/reference/run.md has the
// table.
//
// A pure function of its inputs, so it is unit-tested without MPI: run_command.cpp gathers
// the inputs collectively and passes them here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/comm/binding.hpp"
#include "launcher/train/plan.hpp"

namespace dlh {

struct RunEnvInputs {
  std::vector<std::string> parent;  // the rank's environment, "NAME=value" entries (environ)
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;  // on this node (launcher/comm/topology.hpp)
  int node = 0, num_nodes = 1;               // GROUP_RANK, GROUP_WORLD_SIZE
  std::string master_addr;                   // rank 0's host, or --master-addr
  int master_port = 0;                       // free on rank 0's host, or --master-port
  std::string run_id;                        // the same on every rank
  std::string run_dir;                       // DLH_RUN_DIR
  std::string checkpoint;                    // newest file in run_dir/checkpoints; "": none
  LaunchPlan plan;                           // plan.present false: no plan
  int plan_part = -1;  // with a plan on two or more GPU types: this rank's part (PartOfRank)
  // With a plan: every rank's PlanRankBatch, in rank order (gathered), for DLH_RANK_BATCHES.
  std::vector<int64_t> rank_batches;
  Binding binding;        // this rank's GPU (BindRank)
  bool bind_gpu = false;  // true (--narrow-gpus): CUDA_VISIBLE_DEVICES narrowed, see below
  int progress_fd = -1;   // >= 0: DLH_PROGRESS_FD, the progress pipe (progress.hpp)
  // DLH_DATA as this rank's program gets it: the parent's with %n, %u and %j expanded
  // (ExpandStageDir: a data set staged to each node's own folder); "": the parent's as is.
  std::string data;
  // --malloc keep (the default): glibc's malloc keeps the memory the program frees, see
  // kKeepFreedMemoryTunables; false (--malloc system): glibc's own defaults.
  bool keep_freed_memory = true;
  // > 0: OMP_NUM_THREADS for the program where the parent sets none: the rank's share of its
  // CPUs (launcher/watch/rank_threads.hpp), the count dlh-launch train computes with and the
  // plan assumes. torchrun sets 1, which leaves a CPU rank's other cores idle; unset,
  // PyTorch takes every core of the node in every rank, and ranks sharing a node fight for
  // them.
  int omp_threads = 0;
};

// The threads the program is offered: the parent's OMP_NUM_THREADS (its leading digits,
// when positive), else omp_threads (0: none). A profile records it (threads_offered).
int OfferedThreads(const RunEnvInputs& in);

// What `dlh-launch run --malloc keep` adds to the program's GLIBC_TUNABLES. By default glibc
// serves a block of 128 KiB or more with its own mmap, unmaps it when it is freed, and gives
// the top of the heap back to the system once 128 KiB of it is free (both thresholds move
// with what is freed, but not far enough for a training step's pattern). A PyTorch step
// allocates and frees its activations and gradients, megabytes each, so every step faults
// its pages in afresh, which where a fault is dear makes it several times slower (measured in
// docs/reference/run.md, "Memory the program frees stays with it"). Freed memory
// below 1 GiB at the heap's top stays with the process, and blocks up to 32 MiB (the most
// glibc allows) come from the heap: the pages of one step serve the next. This is what
// PyTorch's performance guide asks of an allocator (it names jemalloc and tcmalloc, which
// keep freed memory too); the cost is that the process holds its peak, which a training
// step reaches every step anyway.
inline constexpr const char* kKeepFreedMemoryTunables =
    "glibc.malloc.trim_threshold=1073741824:glibc.malloc.mmap_threshold=33554432";

// This rank's share of the plan's global batch: with two or more parts its part's
// per_gpu_batch, else the even split (the first global mod size ranks one sample more,
// launcher/train/batch_split.hpp EvenShare). Throws UsageError naming `plan_origin` when the
// global batch is smaller than the number of ranks (a rank would train nothing).
int64_t PlanRankBatch(const LaunchPlan& plan, const std::string& plan_origin, int part, int rank,
                      int size);

// The child's environment, "NAME=value" entries: the parent's, less the MPI launcher's own
// variables (names starting OMPI_, PMIX_ or PMI_: a nested launcher or an MPI library in the
// program would take them for its own) and less every variable set here, then:
//   RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE ROLE_NAME
//   ROLE_RANK ROLE_WORLD_SIZE MASTER_ADDR MASTER_PORT TORCHELASTIC_RUN_ID
//   TORCHELASTIC_RESTART_COUNT (the parent's SLURM_RESTART_COUNT, else 0)
//   TORCHELASTIC_MAX_RESTARTS (0) TORCHELASTIC_USE_AGENT_STORE (False: rank 0 serves the
//   store) DLH_RUN_DIR, and when present DLH_CHECKPOINT; with a plan DLH_GLOBAL_BATCH
//   DLH_BATCH DLH_LR DLH_WARMUP_EPOCHS and DLH_RANK_BATCHES (every rank's batch, "12,4",
//   when rank_batches is given) (none of these without one, nor DLH_CHECKPOINT
//   without a checkpoint, even if the parent had them: they would be another run's),
//   DLH_PROGRESS_FD when progress_fd >= 0 (never the parent's: a nested launch's pipe),
//   DLH_DATA when `data` is given (in place of the parent's).
// With keep_freed_memory, GLIBC_TUNABLES gains kKeepFreedMemoryTunables (after the parent's
// own tunables), unless the parent already chose either threshold (in GLIBC_TUNABLES or as
// MALLOC_TRIM_THRESHOLD_ / MALLOC_MMAP_THRESHOLD_): the user's choice stands.
// With bind_gpu, CUDA_VISIBLE_DEVICES is narrowed to the rank's GPU when it lists several
// and the binding gave this rank one of them; else it is left as the parent had it, as
// torchrun leaves it: the usual DDP script picks cuda:LOCAL_RANK itself.
// `plan_origin` names the plan in errors (PlanRankBatch).
std::vector<std::string> BuildRunEnv(const RunEnvInputs& in, const std::string& plan_origin);

// The shortest decimal text that reads back as `value` ("0.1", not "0.10000000000000001").
std::string ShortestNumber(double value);

}  // namespace dlh
