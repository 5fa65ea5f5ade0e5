// DLH — data-parallel training over MPI: the run loop of `dlh-launch train`.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>

#include "launcher/comm/grad_sync.hpp"
#include "launcher/train/metrics.hpp"

namespace dlh {

struct TrainOptions {
  std::string spec_path;
  std::string run_dir;    // checkpoints/, metrics.jsonl, summary.json; default runs/<name>
  std::string data_path;  // overrides the spec's dataset when not empty
  // "memory": every rank loads the data set; "stream": samples are read from the file as
  // steps need them (launcher/data/file_source.hpp); "auto": stream when the loaded data of
  // this node's ranks would take more than half of the node's available memory.
  std::string data_mode = "auto";
  int epochs = 0;                    // overrides the spec when > 0
  int batch_size = 0;                // global batch; overrides the spec when > 0
  int64_t max_steps = 0;             // stop after this many global steps (0: train to the end)
  int64_t checkpoint_steps = 0;      // checkpoint every N steps (0: off)
  double checkpoint_seconds = 1800;  // and every T seconds of training (0: off)
  bool checkpoint_epochs = true;     // and at the end of every epoch
  int keep = 3;                      // checkpoints kept
  bool resume = true;                // resume from the newest valid checkpoint in run_dir
  bool stop_on_usr1 = false;         // SIGUSR1: checkpoint and stop (default: and continue)
  bool checkpoint_sync = false;      // write each one before going on (default: background)
  bool eval = true;                  // test-set evaluation after every epoch
  int threads = 0;                   // OpenBLAS threads per rank (0: cores / ranks on node)
  int prefetch = 2;                  // batches prepared ahead
  std::string plan_json;             // DLH_PLAN text (empty: none): global batch, lr, warm-up
  std::string plan_origin = "DLH_PLAN";
  // The peak rate found for a plan with "lr_source": "find" (lr_source.hpp), which replaces
  // the plan's; 0: none. `lr_source` says where it came from (start line, summary.json).
  double lr = 0;
  std::string lr_source;
  // This rank's GPU type (empty: not given), which picks its part of a plan on several
  // types and so its batch (batch_split.hpp); `gpu_type_origin` names it in errors.
  std::string gpu_type;
  std::string gpu_type_origin = "--gpu-type";
  bool gpu_type_given = false;  // --gpu-type was given (an empty one is an error)
  std::string node_name;        // SLURMD_NODENAME (empty: unset): a mix's part by node
  // How the per-rank batches move during the run (balancer.hpp): "off", "adaptive" or
  // "replay"; empty: the plan's "balance", else off. `balance_origin` names it in errors.
  std::string balance;
  std::string balance_origin = "--balance";
  int64_t balance_every = 20;   // adaptive: steps measured for each decision (>= 3)
  std::string balance_history;  // replay: summary.json or checkpoint (.h5) of the recorded run
  // Test hook, empty in production: the busy seconds of a step the balancer sees, given
  // those measured (tests make the ranks' rates exact with it; `step` counts from 0).
  std::function<double(int64_t step, int rank, int64_t batch, double measured_s)> balance_clock;
  GradSyncOptions sync;
  std::string allreduce = "auto";  // auto, flat or hierarchical (see allreduce.hpp)
  std::string device = "auto";     // auto, cpu or cuda (see device.hpp)
  double comm_timeout = 60;        // seconds a collective may wait for a stopped peer
  // --device was on the command line; --verbose: also the lines that report what is as
  // expected. Either makes --device auto say that it trains on the CPU (device.hpp,
  // DeviceNoteWanted).
  bool device_given = false;
  bool verbose = false;
  ProgressMode progress = ProgressMode::Auto;
  // --trace: the timeline of every rank, written by rank 0 at the end of the run (trace.hpp);
  // empty: none.
  std::string trace_path;
  // --observations DIR: the observation store this run's record goes to, over the plan's
  // (launcher/observe/store.hpp); empty: the plan's, else none.
  std::string observations;
};

struct TrainResult {
  int64_t steps = 0;          // global steps completed
  bool finished = false;      // all epochs done
  int stop_signal = 0;        // signal that stopped the run early (0: none)
  double test_accuracy = -1;  // last evaluation (-1: none)
  double test_loss = -1;
  uint32_t param_crc = 0;  // crc32 of every parameter and buffer, identical on all ranks
  std::string last_checkpoint;
};

// Runs (or resumes) training. Collective over `comm`. Throws dlh::Error; input errors
// (spec, data, checkpoint) are raised on every rank alike.
TrainResult Train(const TrainOptions& options, MPI_Comm comm);

}  // namespace dlh
