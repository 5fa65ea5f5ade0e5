// DLH estimator — the cluster description: node types, GPU types, power and interconnect.
// JSON, documented in docs/reference/cluster-description.md, example in
// share/cluster/example.json.
// The SPANK plugin overlays live availability from Slurm (Cluster::node_types[i].available).
#pragma once

#include <string>
#include <vector>

#include "common/error.hpp"

namespace dlh {

// One message-size regime of a link ("regimes" in the cluster description): messages of at
// most up_to_bytes (bytes on the wire, one ring step; see comm_model.hpp) cost
// latency + bytes / bandwidth.
struct LinkRegime {
  double up_to_bytes = 0;  // inclusive; 0 in the last regime: every larger message
  double bandwidth_gbs = 0;
  double latency_us = 0;
};

struct Link {
  Link() = default;
  Link(double bandwidth, double latency) : bandwidth_gbs(bandwidth), latency_us(latency) {}
  double bandwidth_gbs = 0;  // GB/s (1e9 bytes/s), per direction, per GPU
  double latency_us = 0;     // microseconds per message
  // Optional piecewise model, sorted by up_to_bytes. When given, it replaces the pair above
  // (both 0 then): shared memory and networks switch protocols with the message size.
  std::vector<LinkRegime> regimes;
};

struct GpuType {
  std::string name;                 // "a100", also Slurm's GRES type
  double memory_gb = 0;             // usable device memory, GB (1e9 bytes)
  double peak_tflops = 0;           // fp32 peak, TFLOP/s (roofline fallback)
  double memory_bandwidth_gbs = 0;  // GB/s (roofline fallback)
  // Optional (0: not given): the TF32 tensor-core peak, dense, TFLOP/s (a type without TF32:
  // its fp32 peak) and the SM count, which with the two above are the peaks the GPU layer
  // model carries a calibration's stored model by (gpu_layer_params.hpp, device_speeds.cpp).
  double tf32_tflops = 0;
  int sms = 0;
  double active_watts = 0;  // board power while training
  double idle_watts = 0;    // allocated but waiting (communication, stragglers)
  std::string calibration;  // calibration file (resolved path), empty: roofline
  // "8.0", "9.0" (optional; empty: unknown, as for the local cluster's CPU-rank types). A
  // type this build's GPU engine cannot run is left out of every plan (cuda_targets.hpp).
  std::string compute_capability;
  // A CPU node type's processors (cpu_node_types[] in the file, issue 46): the job's "GPUs"
  // are then MPI ranks of the CPU engine, each with cores / ranks-per-node threads, and
  // memory_gb, the peaks and the watts are the whole node's, shared by its ranks. The name is
  // the node type's; it has a CPU calibration (required) and no compute capability.
  bool cpu = false;
};

struct NodeType {
  std::string name;  // "gpu-a100"
  std::string gpu;   // a GpuType name
  int gpus_per_node = 0;
  int nodes = 0;                        // nodes of this type in the cluster
  int available = -1;                   // nodes free now (-1: unknown, treat as `nodes`)
  double node_base_watts = 0;           // CPU, memory, NIC... per node, whatever the GPUs do
  Link intra_node;                      // GPU to GPU inside a node (NVLink, PCIe, shared memory)
  std::vector<std::string> partitions;  // Slurm partitions holding these nodes (optional)
  int cpu_cores = 0;    // cores per node (optional, 0: unknown). Matters only for GPU types timed
                        // by a CPU calibration, whose ranks on one node share these cores.
  std::string feature;  // the Slurm node feature of these nodes (optional, default: the GPU
                        // type): a job on two types asks for --constraint=[f1*n1&f2*n2]
  const std::string& slurm_feature() const { return feature.empty() ? gpu : feature; }
  // A CPU node type (cpu_node_types[]): no GPUs; gpus_per_node is the most ranks a node runs
  // (its cores), cpu_cores its cores, and a job asks for it by its feature
  // (--constraint=FEATURE, --cpus-per-task, no --gres).
  bool cpu = false;
};

// What a job costs besides its training steps (the optional "runtime" object; these
// defaults when absent). Used by the whole-job time model (estimator/model/job_time.hpp).
struct Runtime {
  double startup_s = 30;  // job start to the first step: srun, MPI/NCCL set-up, CUDA context
  // The part of startup_s outside the launcher's own clock (srun's step launch before the
  // process starts, the step's end after its summary). An observation record cannot see it,
  // so what records teach replaces the rest of the start-up and keeps this
  // (estimator/observe/phases.hpp). 0: not measured.
  double launch_s = 0;
  double read_gbs = 1;     // reading the data set, GB/s per rank (shared file system)
  double write_gbs = 0.5;  // writing a checkpoint (rank 0), GB/s
  // A job that stages its data set (dlh-data stage, one task per node) copies it from the
  // shared file system at stage_gbs per node, reads the copy back to check it and then reads
  // it from node-local storage, both at local_read_gbs.
  double stage_gbs = 0.5;
  double local_read_gbs = 2;
  // A test cluster whose nodes are all one machine (share/cluster/local.json): its cores,
  // shared by every rank of a job whatever node Slurm gives it. 0: real, separate nodes.
  int shared_host_cores = 0;
};

struct Cluster {
  std::string name;
  // GPU types, then one entry per CPU node type (GpuType::cpu): every part of the estimator
  // plans a "device type" the same way, and the few that differ ask `cpu`.
  std::vector<GpuType> gpu_types;
  std::vector<NodeType> node_types;  // likewise: GPU node types, then CPU node types
  Link inter_node;                   // between nodes (per node NIC)
  Runtime runtime;
  // The site's observation store (issue 40): a folder on shared storage where every job
  // writes one record of what it measured; resolved against the file's folder. "": none.
  std::string observations;
  int64_t observations_limit = 10000;  // records the store holds before jobs skip theirs
  std::string origin;  // the file it was read from ("" when built in code), for messages
  const GpuType* gpu(const std::string& type_name) const;         // nullptr if unknown
  const NodeType* node_type(const std::string& node_name) const;  // nullptr if unknown
};

// Parses and validates (unknown keys, missing fields, non-positive values, node types
// naming unknown GPU types, duplicate names) with errors naming the file and field:
//   cluster.json: node_types[1].gpu: unknown GPU type "h200"
// Relative calibration paths are resolved against the file's folder. Throws EstimateError.
Cluster ParseCluster(const std::string& json_text, const std::string& origin,
                     const std::string& base_dir);
Cluster LoadCluster(const std::string& path);

// Type names as a user writes them (--dlh-auto types=, recommend --types): each a GPU type or
// a CPU node type of `cluster`, and two words for groups unless a type has that very name:
// `cpu` every CPU node type, `gpu` every GPU type. In the cluster's order, no duplicates.
// Throws UsageError "<prefix>: <cluster's file> has no GPU type or CPU node type 'x'".
std::vector<std::string> ResolveTypeNames(const std::vector<std::string>& given,
                                          const Cluster& cluster, const std::string& prefix);

}  // namespace dlh
