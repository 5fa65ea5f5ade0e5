// DLH — what the CPU and GPU pipeline engines share (see pipeline_parts.hpp).
#include "launcher/engine/pipeline_parts.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "common/pipeline_stages.hpp"
#include "launcher/comm/mpi.hpp"

namespace dlh {

PipelinePlace PlaceInPipeline(const TrainSpec& spec, MPI_Comm comm) {
  PipelinePlace p;
  MPI_CHECK(MPI_Comm_rank(comm, &p.rank));
  MPI_CHECK(MPI_Comm_size(comm, &p.size));
  p.stages = spec.parallel.pipeline_stages;
  if (p.stages < 1 || p.size % p.stages != 0)
    throw UsageError(spec.origin + ": parallel.pipeline_stages " + std::to_string(p.stages) +
                     " does not divide the " + std::to_string(p.size) + " ranks");
  p.stage = p.rank % p.stages;
  p.replica = p.rank / p.stages;
  const std::vector<size_t> bounds = StageBounds(spec, p.stages);
  p.first = bounds[size_t(p.stage)];
  p.last = bounds[size_t(p.stage) + 1];
  return p;
}

void CheckMicroBatches(int n, int micro) {
  if (n < micro)
    throw Error("pipeline: a replica's batch of " + std::to_string(n) + " is smaller than " +
                std::to_string(micro) + " micro-batches");
}

void MicroBatchPiece(int n, int part, int parts, int* offset, int* count) {
  const int base = n / parts, extra = n % parts;
  *offset = part * base + std::min(part, extra);
  *count = base + (part < extra ? 1 : 0);
}

StatsPlacement PlaceStageStats(const PipelinePlace& place, size_t own, MPI_Comm comm) {
  const int64_t mine = int64_t(own);
  std::vector<int64_t> lengths(size_t(place.size), 0);
  MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT64_T, lengths.data(), 1, MPI_INT64_T, comm));
  StatsPlacement out;
  for (int s = 0; s < place.stages; ++s) {
    if (s < place.stage) out.offset += size_t(lengths[size_t(s)]);
    out.total += size_t(lengths[size_t(s)]);
  }
  return out;
}

size_t WholeNetworkValues(const PipelinePlace& place, size_t own, MPI_Comm comm) {
  int64_t values = int64_t(own), all = 0;
  MPI_CHECK(MPI_Allreduce(&values, &all, 1, MPI_INT64_T, MPI_SUM, comm));
  return size_t(all / (place.size / place.stages));
}

namespace {

void SendStageArrays(const std::vector<NamedArray>& arrays, MPI_Comm comm) {
  std::vector<int64_t> head{int64_t(arrays.size())};
  std::string names;
  std::vector<int64_t> dims;
  // Sized once: grown by doubling, it held up to twice the stage's arrays while it copied.
  size_t total = 0;
  for (const NamedArray& a : arrays) total += a.data.size();
  std::vector<float> values;
  values.reserve(total);
  for (const NamedArray& a : arrays) {
    head.push_back(int64_t(a.name.size()));
    head.push_back(int64_t(a.shape.size()));
    names += a.name;
    for (int d : a.shape) dims.push_back(d);
    values.insert(values.end(), a.data.begin(), a.data.end());
  }
  head.push_back(int64_t(names.size()));
  head.push_back(int64_t(dims.size()));
  head.push_back(int64_t(values.size()));
  const int64_t head_size = int64_t(head.size());
  const int tag = kPipelineGatherTag;
  MPI_CHECK(MPI_Send(&head_size, 1, MPI_INT64_T, 0, tag, comm));
  MPI_CHECK(MPI_Send(head.data(), int(head.size()), MPI_INT64_T, 0, tag, comm));
  MPI_CHECK(MPI_Send(names.data(), int(names.size()), MPI_CHAR, 0, tag, comm));
  MPI_CHECK(MPI_Send(dims.data(), int(dims.size()), MPI_INT64_T, 0, tag, comm));
  MPI_CHECK(MPI_Send(values.data(), int(values.size()), MPI_FLOAT, 0, tag, comm));
}

void ReceiveStageArrays(int from, MPI_Comm comm, std::vector<NamedArray>* out) {
  const int tag = kPipelineGatherTag;
  int64_t head_size = 0;
  MPI_CHECK(MPI_Recv(&head_size, 1, MPI_INT64_T, from, tag, comm, MPI_STATUS_IGNORE));
  std::vector<int64_t> head(static_cast<size_t>(head_size));
  MPI_CHECK(MPI_Recv(head.data(), int(head_size), MPI_INT64_T, from, tag, comm, MPI_STATUS_IGNORE));
  const size_t count = size_t(head[0]);
  std::string names(static_cast<size_t>(head[head.size() - 3]), '\0');
  std::vector<int64_t> dims(static_cast<size_t>(head[head.size() - 2]));
  std::vector<float> values(static_cast<size_t>(head[head.size() - 1]));
  MPI_CHECK(
      MPI_Recv(names.data(), int(names.size()), MPI_CHAR, from, tag, comm, MPI_STATUS_IGNORE));
  MPI_CHECK(
      MPI_Recv(dims.data(), int(dims.size()), MPI_INT64_T, from, tag, comm, MPI_STATUS_IGNORE));
  MPI_CHECK(
      MPI_Recv(values.data(), int(values.size()), MPI_FLOAT, from, tag, comm, MPI_STATUS_IGNORE));
  size_t at_name = 0, at_dim = 0, at_value = 0;
  for (size_t i = 0; i < count; ++i) {
    NamedArray a;
    const size_t name_len = size_t(head[1 + 2 * i]), rank = size_t(head[2 + 2 * i]);
    a.name = names.substr(at_name, name_len);
    at_name += name_len;
    size_t elements = 1;
    for (size_t d = 0; d < rank; ++d) {
      a.shape.push_back(int(dims[at_dim]));
      elements *= size_t(dims[at_dim++]);
    }
    a.data.assign(values.begin() + long(at_value), values.begin() + long(at_value + elements));
    at_value += elements;
    out->push_back(std::move(a));
  }
}

}  // namespace

void StageArraysGather::gather(const PipelinePlace& place, MPI_Comm comm, Engine& stage) {
  if (place.replica != 0) return;
  if (place.rank == 0) {
    params_.clear();
    buffers_.clear();
    state_.clear();
    for (int s = 1; s < place.stages; ++s) {
      ReceiveStageArrays(s, comm, &params_);
      ReceiveStageArrays(s, comm, &buffers_);
      ReceiveStageArrays(s, comm, &state_);
    }
    gathered_ = true;
    return;
  }
  SendStageArrays(stage.export_params(), comm);
  SendStageArrays(stage.export_buffers(), comm);
  SendStageArrays(stage.export_optimizer_state(), comm);
}

void StageArraysGather::append_to(const PipelinePlace& place, std::vector<NamedArray>* params,
                                  std::vector<NamedArray>* buffers,
                                  std::vector<NamedArray>* optimizer_state) const {
  if (place.rank != 0 || place.stages == 1) return;
  if (!gathered_) throw Error("pipeline: the other stages' arrays were not gathered (internal)");
  params->insert(params->end(), params_.begin(), params_.end());
  buffers->insert(buffers->end(), buffers_.begin(), buffers_.end());
  optimizer_state->insert(optimizer_state->end(), state_.begin(), state_.end());
}

}  // namespace dlh
