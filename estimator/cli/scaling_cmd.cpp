// DLH — `dlh-estimate scaling` (see scaling_cmd.hpp).
#include "estimator/cli/scaling_cmd.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>

#include "common/cuda_support.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/spec.hpp"
#include "estimator/cli/command_line.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/model/comm_model.hpp"
#include "estimator/model/features.hpp"
#include "estimator/recommend/recommender.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

using cli::Printf;
using cli::Str;

// 1, 2, 4, ... GPUs inside one node, then 2, 4, 8, ... whole nodes, up to `max_gpus`.
std::vector<int> GpuCounts(int gpus_per_node, int max_gpus) {
  std::vector<int> out;
  for (int p = 1; p < gpus_per_node && p <= max_gpus; p *= 2) out.push_back(p);
  for (int nodes = 1; nodes * gpus_per_node <= max_gpus; nodes *= 2)
    out.push_back(nodes * gpus_per_node);
  return out;
}

std::string Ms(double s) { return Printf("%.2f", s * 1e3); }

}  // namespace

int ScalingCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate scaling SPEC: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("cluster", po::value<std::string>(), "cluster description (default: $DLH_CLUSTER)")
    ("node-type", po::value<std::string>(), "the node type to scale on (required)")
    ("max-gpus", po::value<int>()->default_value(64), "up to this many GPUs")
    ("per-gpu-batch", po::value<int64_t>()->default_value(0),
        "samples per GPU and step (weak scaling; 0: the spec's batch)")
    ("gradient-mb", po::value<double>()->default_value(0),
        "gradient megabytes to sum instead of the spec's (1e6 bytes; 0: the spec's parameters)")
    ("host-copy-gbs", po::value<double>()->default_value(50),
        "the hybrid's staging copies, GB/s per direction (pinned memory over PCIe)")
    ("host-copy-us", po::value<double>()->default_value(10), "their latency per copy, us");
  // clang-format on
  po::variables_map vm;
  if (!cli::Parse("scaling", args, d, {"SPEC"}, vm)) return kExitOk;
  const std::string cluster_path = cli::ClusterPath(vm, "scaling");
  if (!vm.count("node-type")) throw UsageError("scaling: --node-type: required");
  const int max_gpus = vm["max-gpus"].as<int>();
  if (max_gpus < 1 || max_gpus > 100000) throw UsageError("--max-gpus: must be 1 to 100000");
  const double copy_gbs = vm["host-copy-gbs"].as<double>();
  const double copy_us = vm["host-copy-us"].as<double>();
  if (!(copy_gbs > 0)) throw UsageError("--host-copy-gbs: must be positive");
  if (!(copy_us >= 0)) throw UsageError("--host-copy-us: must not be negative");

  Job job;
  job.spec = LoadSpec(Str(vm, "SPEC"));
  job.features = ComputeFeatures(job.spec);
  job.epochs = std::max(job.spec.epochs, 1);
  job.samples = 1;
  const Cluster cluster = LoadCluster(cluster_path);
  const NodeType* node = cluster.node_type(Str(vm, "node-type"));
  if (node == nullptr)
    throw UsageError("--node-type: " + cluster_path + " has no node type '" + Str(vm, "node-type") +
                     "'");
  const int64_t per_gpu = vm["per-gpu-batch"].as<int64_t>() > 0 ? vm["per-gpu-batch"].as<int64_t>()
                                                                : int64_t(job.spec.batch_size);
  const std::map<std::string, DeviceSpeed> speeds = DeviceSpeeds(job, cluster);
  const DeviceSpeed& speed = speeds.at(node->gpu);
  const double compute_s = speed.fixed_s + speed.per_sample_s * double(per_gpu);
  const double gradient_mb = vm["gradient-mb"].as<double>();
  if (!(gradient_mb >= 0)) throw UsageError("--gradient-mb: must not be negative");
  const double bytes = gradient_mb > 0 ? gradient_mb * 1e6 : job.features.param_bytes();
  const AlphaBeta intra = AlphaBeta::from_link(node->intra_node);
  const AlphaBeta inter = AlphaBeta::from_link(cluster.inter_node);
  const AlphaBeta copy(copy_us * 1e-6, 1 / (copy_gbs * 1e9));
  const int g = std::max(node->gpus_per_node, 1);

  std::printf("%s on %s (%d %s per node), %lld samples per GPU and step, %.1f MB of gradients%s\n",
              job.spec.origin.c_str(), node->name.c_str(), g, node->gpu.c_str(), (long long)per_gpu,
              bytes / 1e6, gradient_mb > 0 ? " (--gradient-mb)" : "");
  std::printf("compute %s ms per step: %s\n", Ms(compute_s).c_str(), speed.source.c_str());
  for (const std::string& w : StaleCalibrationWarnings(speeds))
    if (w.find(node->gpu + "'s") == 0) std::printf("warning: %s\n", w.c_str());
  // On paper a spec the GPU engine cannot run yet is still timed (the layer model prices
  // every layer kind), but recommend and the plugin will not plan it on this node type.
  if (!node->cpu)
    if (const std::string unsupported = CudaEngineUnsupported(job.spec); !unsupported.empty())
      std::printf("warning: %s: on paper only: recommend and the plugin do not plan it on %s\n",
                  unsupported.c_str(), node->name.c_str());
  std::printf(
      "\n| GPUs | nodes | allreduce ms, flat NCCL | hybrid | step ms, flat | hybrid "
      "| efficiency, flat | hybrid | faster |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int p : GpuCounts(g, max_gpus)) {
    const int nodes = p <= g ? 1 : p / g, per_node = p <= g ? p : g;
    const double flat = FlatNcclAllreduceSeconds(bytes, per_node, nodes, intra, inter);
    const double hybrid = StagedHybridAllreduceSeconds(bytes, per_node, nodes, intra, inter, copy);
    // No overlap with backward: the communication fully exposed, the step's upper bound.
    const double step_flat = compute_s + flat, step_hybrid = compute_s + hybrid;
    const char* faster = p == 1                           ? "-"
                         : std::abs(flat - hybrid) < 1e-9 ? "same"
                         : flat < hybrid                  ? "flat"
                                                          : "hybrid";
    std::printf("| %d | %d | %s | %s | %s | %s | %.0f%% | %.0f%% | %s |\n", p, nodes,
                Ms(flat).c_str(), Ms(hybrid).c_str(), Ms(step_flat).c_str(),
                Ms(step_hybrid).c_str(), 100 * compute_s / step_flat, 100 * compute_s / step_hybrid,
                faster);
  }
  return kExitOk;
}

}  // namespace dlh
