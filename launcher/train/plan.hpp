// DLH — the plan a job was given (`DLH_PLAN`, written by the SPANK plugin or by
// `dlh-estimate recommend --json`), as far as the launcher uses it: the global batch, the
// learning rate for it and its warm-up, and the per-GPU batch of each part of a mix. The
// plan format is documented in docs/reference/plan.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/spec.hpp"

namespace dlh {

// One entry of allocation.parts[]: a group of nodes of one type. With two or more parts
// every GPU of a part trains per_gpu_batch samples a step (launcher/train/batch_split.hpp).
struct PlanPart {
  std::string node_type;  // may be empty
  std::string gpu;        // the Slurm GRES type, e.g. "a100"
  // "8.0": the type is a real GPU, as the cluster description says; empty: unknown, or a
  // local cluster's CPU-rank type.
  std::string compute_capability;
  int64_t nodes = 0, gpus_per_node = 0, per_gpu_batch = 0;
  // The names of the part's nodes (the plugin lists every node of the type): a rank on one
  // of them belongs to the part, whatever its position. Empty when the plan has none.
  std::vector<std::string> node_names;
  // A CPU node type's part ("device": "cpu"): gpus_per_node counts CPU engine ranks, each
  // with threads_per_rank threads (0: not said).
  bool cpu = false;
  int threads_per_rank = 0;
  int64_t gpus() const { return nodes * gpus_per_node; }
};

struct LaunchPlan {
  bool present = false;
  std::string spec;  // the spec file the plan was made for ("": not said; a program's plan)
  int64_t global_batch = 0;
  double lr = 0;
  // "find": the job finds its rate with the range test (lr_source.hpp) and `lr`, linear
  // scaling's, is only the fallback; "" or "linear": `lr` is the rate.
  std::string lr_source;
  double warmup_epochs = 0;
  int gpus = 0;                 // ranks the plan was made for
  int shared_host_cores = 0;    // allocation.shared_host_cores (SharedHostCoresOfPlan)
  std::vector<PlanPart> parts;  // allocation.parts[], in the plan's order (may be empty)
  // "balance": "off" or "adaptive" (empty: not in the plan), how the launcher balances the
  // per-rank batches unless --balance says otherwise (launcher/train/balancer.hpp).
  std::string balance;
  // "parallel" (a pipeline the estimator planned because the network fits no GPU whole): its
  // stages and micro-batches; 0: none. ApplyPlan gives them to a spec that asks for none.
  int pipeline_stages = 0, micro_batches = 0;
  std::string summary;  // "1 x 2 alpha, time 00:04:00, predicted 3m23s"
  // What the estimator predicted for the whole job (0: not in the plan): the end of the run
  // reports them against what it measured.
  double predicted_total_s = 0;  // start-up, data, steps, evaluations, checkpoints
  double predicted_step_s = 0;
  // predicted.upper_s: the band's 90% upper end of predicted_total_s (0: the plan predates
  // it); staging left out of both alike.
  double predicted_upper_s = 0;
  // predicted.phases (estimator/model/job_time.hpp), seconds: what the total is made of; 0 when
  // the plan predates them.
  double predicted_startup_s = 0, predicted_steps_s = 0, predicted_eval_s = 0,
         predicted_checkpoint_s = 0;
  int64_t predicted_steps = 0;
  double time_limit_s = 0;
  double predicted_compute_s = 0, predicted_comm_s = 0;  // the step's two parts
  // "observations" (docs/reference/observations.md): the store the job's record goes to
  // ("": none named), its limit of records (0: the default), the GPU type the plan chose,
  // the model's key and its features as JSON text ("": none), for the record.
  std::string observations_store;
  int64_t observations_limit = 0;
  std::string observations_gpu;
  std::string model_key;
  std::string model_features;
};

// Parses plan JSON; `origin` names it in errors ("DLH_PLAN: global_batch: must be a positive
// integer"). Throws UsageError.
LaunchPlan ParsePlan(const std::string& json_text, const std::string& origin);

// A plan is for the network it was made for: its batch, rate and time limit, and the model
// the job's observation record teaches the store. Throws UsageError when `trained` (the spec
// this run trains) is neither the plan's spec file nor a file of the same JSON; a plan that
// names no spec, or one whose file this node cannot read, passes (2026-12-07: train.sbatch
// trained its default spec under a plan for the user's spec=FILE, and said nothing).
void CheckPlannedSpec(const LaunchPlan& plan, const std::string& trained,
                      const std::string& origin);

// Where a launch (train, lr-find, run) takes its plan from, in order: --no-plan (none),
// --plan FILE (`*json` holds FILE's path on entry), DLH_PLAN, SLURM_SPANK_DLH_PLAN (the
// same plan through the SPANK job-control environment: it reaches the job even with sbatch
// --export=NONE, which drops DLH_PLAN). Sets `*json` (empty: no plan) and `*origin`.
// Throws UsageError "--plan: FILE: cannot read: ..." when FILE cannot be read.
void ResolvePlanSource(bool no_plan, bool plan_given, std::string* json, std::string* origin);

// This rank's GPU type: --gpu-type when given (`*given` set), else DLH_GPU_TYPE (an empty
// variable is unset). Each rank may have its own (an MPMD launch or a heterogeneous job
// component sets DLH_GPU_TYPE per rank), so it is checked collectively later.
void ResolveGpuType(bool option_given, std::string* type, std::string* origin, bool* given);

// The plan was made for GPUs: allocation.gpus or a part with GPUs (a plan of global batch and
// rate alone names none; a plan on CPU nodes has none either).
bool PlanHasGpus(const LaunchPlan& plan);

// A plan's allocation.shared_host_cores (docs/reference/plan.md): every rank of the job runs
// on one machine of that many cores (a demo or test cluster whose nodes are one host); 0 when
// the plan does not say so or is not JSON. Lenient, unlike ParsePlan: core_yield.hpp reads
// it before MPI_Init, where a bad plan is not yet anyone's to report.
int SharedHostCoresOfPlan(const std::string& plan_json);
// Each rank's threads where `job_ranks` ranks share one machine's `cores`: at least one.
int ThreadsOnSharedHost(int cores, int job_ranks);

// The CPU engine's threads per rank for `train` and `lr-find`: --threads (`*threads` > 0 on
// entry) wins, then OPENBLAS_NUM_THREADS, then a plan on CPU nodes (its parts'
// threads_per_rank: the plugin asked Slurm for that many CPUs per task), then a plan whose
// nodes are all one machine (allocation.shared_host_cores): those cores over the job's
// `job_ranks`, as the estimator planned it (job_time.hpp, CpuRankShare). Otherwise
// `*threads` stays 0 and the trainer shares the node's cores among its ranks. A plan that
// does not parse is left to the trainer, which reports it on every rank's behalf. Returns
// why the count was set ("" when it was not).
std::string ApplyPlannedThreads(const std::string& plan_json, const std::string& origin,
                                int job_ranks, int* threads);

// Why the plan forbids training on the CPU, "" when it does not: every part is a GPU type
// with a compute capability (real GPUs, as the cluster description says), e.g. "the plan
// (DLH_PLAN) put this job on a100 GPUs (compute capability 8.0)". A local cluster's CPU-rank
// types have none. --device auto then never falls back to the CPU (MakeEngine).
std::string PlanGpuRequirement(const LaunchPlan& plan, const std::string& origin);

// Applies the plan to the spec: global batch, learning rate, warm-up.
void ApplyPlan(const LaunchPlan& plan, TrainSpec* spec);

}  // namespace dlh
