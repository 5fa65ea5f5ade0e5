// DLH — what the CPU and GPU pipeline engines share (pipeline_engine.cpp, cuda/cuda_pipeline.cpp):
// where a rank sits in the pipeline, how a batch is cut into micro-batches, where a stage's
// batch statistics sit in the whole network's, and the gather of the stages' arrays to rank 0
// for a checkpoint.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "common/spec.hpp"
#include "launcher/engine/engine.hpp"
#include "launcher/nn/named_array.hpp"

namespace dlh {

// Message tags between the stages of a replica: activations of micro-batch m forward (tag
// kPipelineForwardTag + m), their gradients back, and the arrays a checkpoint gathers.
constexpr int kPipelineForwardTag = 0, kPipelineBackwardTag = 1 << 20, kPipelineGatherTag = 1 << 21;

// Rank r of the world is stage r % P of replica r / P and holds the spec's layers
// [first, last) (common/pipeline_stages.hpp cuts them). Throws UsageError naming the spec's
// field when P does not divide the ranks.
struct PipelinePlace {
  int rank = 0, size = 1, stages = 1, stage = 0, replica = 0;
  size_t first = 0, last = 0;
  bool first_stage() const { return stage == 0; }
  bool last_stage() const { return stage == stages - 1; }
};
PipelinePlace PlaceInPipeline(const TrainSpec& spec, MPI_Comm comm);

// The even split of n samples into `parts` contiguous pieces (the first n % parts one larger).
void MicroBatchPiece(int n, int part, int parts, int* offset, int* count);
// Throws Error when a replica's batch of n samples cannot be cut into `micro` micro-batches.
void CheckMicroBatches(int n, int micro);

// Where this stage's `own` batch-statistic values sit in the whole network's, stage after
// stage: the control allreduce needs one length everywhere. Collective over `comm`.
struct StatsPlacement {
  size_t offset = 0, total = 0;
};
StatsPlacement PlaceStageStats(const PipelinePlace& place, size_t own, MPI_Comm comm);

// The whole network's parameter values, from each rank's stage's `own`. Collective.
size_t WholeNetworkValues(const PipelinePlace& place, size_t own, MPI_Comm comm);

// A checkpoint's whole model on rank 0 (Engine::gather_state, export_state): replica 0's
// later stages send their arrays (three messages each: counts, names and dims, values), and
// rank 0 appends them to its own stage's, in layer order. Valid until the next update.
class StageArraysGather {
 public:
  // Collective over replica 0 of `place`: `stage` is this rank's engine.
  void gather(const PipelinePlace& place, MPI_Comm comm, Engine& stage);
  // Rank 0 of a pipeline: the gathered arrays after its own; throws Error when gather() has
  // not run since the last forget(). Other ranks and one stage: nothing appended.
  void append_to(const PipelinePlace& place, std::vector<NamedArray>* params,
                 std::vector<NamedArray>* buffers, std::vector<NamedArray>* optimizer_state) const;
  void forget() { gathered_ = false; }  // the parameters changed (update)

 private:
  bool gathered_ = false;
  std::vector<NamedArray> params_, buffers_, state_;
};

}  // namespace dlh
