// DLH estimator — the whole-job time model: what a job spends besides its training steps,
// and how ranks that share a node's CPU cores slow each other down. The recommender adds
// these to steps x step time, so that the Slurm time limit covers the job, not its loop.
//
//   total = startup                       runtime.startup_s: srun, MPI/NCCL, CUDA context
//         + staging                       only a job that stages its data set onto its nodes
//                                         (dlh-data stage): bytes / stage_gbs to copy it, and
//                                         bytes / local_read_gbs to read the copy back
//         + data                          every rank reads the data set: bytes / read_gbs
//                                         (staged: / local_read_gbs, from the node's copy)
//         + warm-up                       the first steps' extra cost (allocations, thread
//                                         pools, autotuning): kWarmupSteps x step
//         + steps x step
//         + evaluations                   one test-set pass after every epoch (the
//                                         launcher's default): forward only, split evenly
//         + checkpoints                   one after every epoch plus one per 30 min of
//                                         training (the launcher's defaults), rank 0 writes
//                                         parameters, buffers and optimizer state
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "estimator/cluster/cluster.hpp"
#include "estimator/model/features.hpp"

namespace dlh {

// Measured on this project's test machine (share/cluster/local.json, BENCHMARKS.md "Whole
// jobs"): the first step of a run costs about this many steady steps more.
constexpr double kWarmupSteps = 3;
// The launcher's defaults (launcher/main_launch.cpp): checkpoint every 30 min of training
// and after every epoch; evaluate after every epoch in chunks of 256 samples.
constexpr double kCheckpointEverySeconds = 1800;
constexpr int64_t kEvalChunk = 256;
// A checkpoint's cost besides its bytes (create, fsync, rename, keep the last three).
constexpr double kCheckpointFixedSeconds = 0.05;
// The launcher writes all but the run's last checkpoint in the background
// (launcher/storage/checkpoint_writer.hpp): the loop is held up only while rank 0 copies the
// state to host memory, at about this rate (a copy into freshly allocated memory, page
// faults included; measured: BENCHMARKS.md "Checkpoints in the background"), and when the
// previous write outlasts the interval, for the rest of it.
constexpr double kSnapshotGbs = 2;

// What the job does, from the spec and the request.
struct JobWork {
  int64_t samples = 0;       // training samples per epoch
  int64_t eval_samples = 0;  // test samples evaluated after every epoch (0: none)
  int epochs = 0;
  double data_bytes = 0;        // the data set as read (train and test)
  bool staged = false;          // copied onto every node before the training step
  double checkpoint_bytes = 0;  // parameters, buffers and optimizer state
  double forward_fraction = 0;  // forward FLOPs / training FLOPs per sample (an eval sample)
};
// samples/eval_samples/epochs as given; data bytes: one byte per input element (uint8
// images, as dlh-data writes them) plus a label; checkpoint: 4 bytes per parameter and
// buffer, times 1 + optimizer slots.
JobWork WorkOf(const ModelFeatures& f, int64_t samples, int64_t eval_samples, int epochs,
               int optimizer_slots);

// One candidate allocation's step, as the recommender predicts it.
struct StepShape {
  int64_t steps = 0;
  double step_s = 0;
  int gpus = 0;
  // The slowest rank's training time per sample and fixed time per step: an evaluation
  // chunk costs forward_fraction of a training step of its size.
  double per_sample_s = 0, fixed_s = 0;
};

struct JobPhases {
  double startup_s = 0, stage_s = 0, data_s = 0, warmup_s = 0, steps_s = 0, eval_s = 0,
         checkpoint_s = 0;
  int64_t evaluations = 0, checkpoints = 0;
  // What a clean stop mid-run costs (not part of total_s): the step under way, then one
  // checkpoint written whole (the launcher's --stop-on-usr1). The time limit keeps this much
  // room before the signal a job script asks for (estimator/model/prediction_band.hpp).
  double stop_s = 0;
  double total_s() const {
    return startup_s + stage_s + data_s + warmup_s + steps_s + eval_s + checkpoint_s;
  }
};

// `startup_s`: the runtime's, or a site's override (the plugin's startup=).
JobPhases PredictJobPhases(const JobWork& work, const StepShape& step, const Runtime& runtime,
                           double startup_s);

// How a CPU process's speed grows with its threads, as measured: gflops[t - 1] is the sgemm
// GFLOP/s and gbs[t - 1] the bandwidth at t threads (a calibration's probe,
// "sgemm_gflops_by_threads" and "cache_gbs_by_threads": the cache triad sized as a step's
// activations are, which is what the engine's memory-bound passes run from; the memory
// triad's "memory_gbs_by_threads" for a probe without it); either may be empty (not
// measured). compute_fraction: the share of the per-sample time that runs at the GEMM rate
// (the time model's compute terms, wave_scaling.hpp), the rest at the memory rate.
struct ThreadScaling {
  std::vector<double> gflops, gbs;
  double compute_fraction = 1;
  // By the count of ranks that share a node's cores (CpuRankShare's `ranks`): ln of the
  // step time factor the observation store measured on top of the curves
  // (estimator/observe/correction.hpp). Side by side, ranks contend for more than GEMM
  // throughput and bandwidth (caches, a host's siblings); a measurement says how much.
  std::map<int, double> learned_log_by_ranks;
  // The calibration's whole training steps timed one process at a time at each thread count
  // (Calibration::thread_scaling): threads -> step time over the calibration's own count.
  // Where it holds both counts, ThreadTimeRatio goes by it rather than by the curves: a whole
  // step gains less from a second thread than its GEMMs do (per-layer passes, the engine's
  // own serial parts). Empty: not measured.
  std::map<int, double> measured_step_ratio;
};

// Without a probe: per-sample time at t threads goes as t^-kThreadScalingExponent. Measured
// on the project's usual host (AMD EPYC, 2 cores; BENCHMARKS.md "a calibration moved to
// another device", `dlh-estimate validate` at 1 and at 2 threads): the seven validation
// models took 1.81-1.95x as long at 1 thread as at 2, the example CNN 1.84x. Exponent
// log2(1.84) = 0.88, not 1 (perfect scaling). A second measurement, on a loaded host, is
// in job_time.cpp with why it is not used.
constexpr double kThreadScalingExponent = 0.88;

// Per-sample time at `to` threads, with `sharing` such processes running at once on the node,
// over that of one process at `from` threads (counts >= 1). Where the calibration timed whole
// steps at both counts (measured_step_ratio): their ratio, times what the curves below say
// `sharing` processes add over one alone (at least 1: neighbours never speed a rank up).
// Otherwise, with the probe's measurements:
//   compute_fraction x gflops(from) / gflops(to)
//   + (1 - compute_fraction) x gbs(from) / (gbs(to x sharing) / sharing)
// (cores are each rank's own, memory bandwidth is the node's: the ranks running at once
// split what all their threads reach together); only one curve: that one for all of it. A
// count beyond what the probe measured: sgemm grows in proportion from its last count (an
// optimistic bound), bandwidth stays at its last (it saturates). Without a usable probe:
// (from / to)^kThreadScalingExponent, which was measured one process at a time.
double ThreadTimeRatio(const ThreadScaling& scaling, int from, int to, int sharing = 1);

// ln of the step factor learned_log_by_ranks carries at `ranks` ranks side by side: the
// count itself where measured, else the largest measured count of 2 or more below it; 0
// where none applies.
double LearnedLogAt(const std::map<int, double>& learned, int ranks);

// How much slower a rank runs than its CPU calibration when `ranks` ranks share `cores`
// cores: the launcher gives each max(1, cores / ranks) OpenBLAS threads, and the
// calibration timed one process with `calibration_threads`. Work per sample changes by the
// measured ThreadTimeRatio (not in proportion to the threads: GEMMs scale almost
// perfectly, memory passes do not, and the ranks running at once share the node's memory
// bandwidth). A node with more ranks than cores (o = ranks / cores > 1): the ranks take
// turns on the cores, so the compute costs o times, the fixed per-step part included; and
// every step waits a little in its allreduce for peers the scheduler is not running,
// wait_s = (o - 1) x kOversubscribedWaitS, which the plan counts with the allreduce. A
// little because dlh-launch has its ranks yield their core while they wait there
// (launcher/watch/core_yield.hpp; on a cluster whose nodes are one machine the plan tells it
// so, allocation.shared_host_cores); Open MPI's default, polling, cost 15-20 times more. Where the
// observation store measured `ranks` side by side (scaling.learned_log_by_ranks), the compute
// carries it; a count it did not measure carries the largest measured count of 2 or more below it.
struct CpuShare {
  double per_sample = 1, fixed = 1;
  double wait_s = 0;          // seconds per step, added to the allreduce
  double oversubscribed = 1;  // o: the node's busy threads over its cores, at least 1
};

// The wait per step of 2 ranks per core, measured on the local cluster (2026-11-30, AMD
// EPYC, 2 cores; srun --mpi=pmix, 1 thread a rank, mean step over 180-380 steps): 4 ranks on
// two fake nodes against 2 ranks on one, yielding: the example CNN 32.8 against 30.7 ms
// (+2.1), the bench MLP 5.87 against 2.58 ms (+3.3, of which the model charges the 2-node
// allreduce about 1 ms). Polling, as Open MPI does by default: 76.1 against 29.5 ms (+47)
// and 43.3 against 2.57 ms (+41); this constant was 34 ms while the ranks polled.
constexpr double kOversubscribedWaitS = 0.0022;
// threads_per_rank > 0: each rank computes with that many threads whatever the cores
// (OPENBLAS_NUM_THREADS in the job's environment, which dlh-launch train takes before the
// node's cores over its ranks, or an observed job's own count): fewer leave cores idle, more
// oversubscribe them. 0: the node's cores over its ranks.
CpuShare CpuRankShare(int calibration_threads, int cores, int ranks,
                      const ThreadScaling& scaling = {}, int threads_per_rank = 0);

// The threads each of `ranks` ranks computes with on `cores` cores (threads_per_rank as
// CpuRankShare takes it), and how many times over they fill the cores (CpuShare::
// oversubscribed, at least 1). Counts >= 1.
int RankThreads(int cores, int ranks, int threads_per_rank);
double Oversubscription(int cores, int ranks, int threads_per_rank);

// "start-up 30s + data 0.2s + warm-up 0.4s + 936 steps 1m40s + 8 evaluations 5.1s + 8
// checkpoints 0.5s" (parts that cost nothing left out).
std::string PhasesText(const JobPhases& p, int64_t steps);

}  // namespace dlh
