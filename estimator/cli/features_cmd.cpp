// DLH — `dlh-estimate features` and `predict` (see features_cmd.hpp).
#include "estimator/cli/features_cmd.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda_support.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/spec.hpp"
#include "estimator/cli/command_line.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/gpu_layer_model.hpp"
#include "estimator/model/time_model.hpp"
#include "estimator/recommend/recommend_detail.hpp"
#include "estimator/recommend/recommender.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

// One layer's JSON; a residual block's carries its paths' layers ("layers", "shortcut").
nlohmann::json LayerJson(const LayerCost& l) {
  nlohmann::json j{{"kind", LayerKindName(l.kind)},
                   {"flops_fwd", l.flops_fwd},
                   {"flops_bwd", l.flops_bwd},
                   {"params", l.params},
                   {"out_elements", l.out_elements}};
  if (l.kind == LayerKind::Residual) {
    const std::pair<const char*, const std::vector<LayerCost>*> paths[] = {
        {"layers", &l.layers}, {"shortcut", &l.shortcut}};
    for (const auto& [key, path] : paths) {
      nlohmann::json list = nlohmann::json::array();
      for (const LayerCost& n : *path) list.push_back(LayerJson(n));
      j[key] = list;
    }
  }
  return j;
}

// One table row per layer; a residual block's paths follow it, indented, numbered "3.0" (main
// path) and "3.s0" (shortcut).
void PrintLayers(const std::vector<LayerCost>& layers, const std::string& prefix, int depth) {
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerCost& l = layers[i];
    char shape[48];
    std::snprintf(shape, sizeof shape, "%dx%dx%d", l.out.channels, l.out.height, l.out.width);
    const std::string index = prefix + std::to_string(i);
    const std::string kind = std::string(size_t(2 * depth), ' ') + LayerKindName(l.kind);
    std::printf("  %-7s %-17s %-12s %12s %12s %10.0f %10.0f\n", index.c_str(), kind.c_str(), shape,
                Si(l.flops_fwd).c_str(), Si(l.flops_bwd).c_str(), l.params, l.out_elements);
    PrintLayers(l.layers, index + ".", depth + 1);
    PrintLayers(l.shortcut, index + ".s", depth + 1);
  }
}

}  // namespace

using cli::Parse;
using cli::Str;
using cli::WriteJson;

int FeaturesCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate features SPEC: options");
  int64_t batch = 0;
  std::string engine_name;
  d.add_options()("help,h", "show this help")("batch", po::value(&batch)->default_value(0),
                                              "local batch for the memory line (0: spec)")(
      "engine", po::value(&engine_name)->default_value("gpu"),
      "whose memory --json's memory_bytes is: gpu (a GPU's, or a profiled program's) or cpu "
      "(the built-in CPU engine's)")(
      "pipeline-stages", po::value<int>()->default_value(0),
      "also each stage's memory, the network cut as recommend cuts it (0: the spec's "
      "parallel.pipeline_stages)")(
      "micro-batches", po::value<int>()->default_value(0),
      "micro-batches of --batch for the stages (0: the spec's parallel.micro_batches)")(
      "json", "print JSON");
  po::variables_map vm;
  if (!Parse("features", args, d, {"SPEC"}, vm)) return kExitOk;
  if (engine_name != "gpu" && engine_name != "cpu")
    throw UsageError("features: --engine must be gpu or cpu, got '" + engine_name + "'");
  if (batch < 0)
    throw UsageError("--batch: must not be negative (0: the spec's), got " + std::to_string(batch));
  TrainSpec spec = LoadSpec(Str(vm, "SPEC"));
  ModelFeatures f = ComputeFeatures(spec);
  if (batch <= 0) batch = spec.batch_size;
  int slots = spec.optimizer.kind == OptimizerSpec::Kind::Adam ? 2
              : spec.optimizer.momentum > 0                    ? 1
                                                               : 0;
  const double gpu_memory = TrainingMemoryBytes(f, batch, slots, MemoryEngine::kDevice);
  const double cpu_memory = TrainingMemoryBytes(f, batch, slots, MemoryEngine::kCpu);
  // A pipeline's stages: a replica of `batch` samples in micro-batches.
  int stages = vm["pipeline-stages"].as<int>(), micro = vm["micro-batches"].as<int>();
  if (stages == 0) stages = spec.parallel.pipeline_stages;
  if (micro == 0) micro = spec.parallel.micro_batches;
  if (stages < 1 || stages > int(spec.layers.size()))
    throw UsageError("features: --pipeline-stages must be 1 to the spec's " +
                     std::to_string(spec.layers.size()) + " layers, got " + std::to_string(stages));
  if (micro < 1 || micro > batch)
    throw UsageError("features: --micro-batches must be 1 to the batch (" + std::to_string(batch) +
                     "), got " + std::to_string(micro));
  std::vector<double> gpu_stages, cpu_stages;
  if (stages > 1) {
    Job job;
    job.spec = spec;
    job.features = f;
    gpu_stages = PipelineStageMemoryBytes(job, stages, micro, batch, slots, MemoryEngine::kDevice);
    cpu_stages = PipelineStageMemoryBytes(job, stages, micro, batch, slots, MemoryEngine::kCpu);
  }
  if (vm.count("json")) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : f.layers) layers.push_back(LayerJson(l));
    WriteJson({{"spec", spec.origin},
               {"layers", layers},
               {"flops_fwd", f.flops_fwd()},
               {"flops_train", f.flops_train()},
               {"params", f.params},
               {"activation_elements", f.activation_elements},
               {"conv_layers", f.conv_layers},
               {"total_filters", f.total_filters},
               {"dense_layers", f.dense_layers},
               {"dense_nodes", f.dense_nodes},
               {"input_elements", f.input_elements},
               {"batch", batch},
               {"engine", engine_name},
               {"memory_bytes", engine_name == "cpu" ? cpu_memory : gpu_memory},
               {"stage_memory_bytes", engine_name == "cpu" ? cpu_stages : gpu_stages}});
    return kExitOk;
  }
  std::printf("%s: %s\n", spec.origin.c_str(), spec.name.c_str());
  std::printf("  %-7s %-17s %-12s %12s %12s %10s %10s\n", "#", "layer", "output", "FLOP fwd",
              "FLOP bwd", "params", "outputs");
  PrintLayers(f.layers, "", 0);
  std::printf("  per sample: %sFLOP forward, %sFLOP forward+backward (conv %s, dense %s)\n",
              Si(f.flops_fwd()).c_str(), Si(f.flops_train()).c_str(),
              Si(f.conv_flops_fwd + f.conv_flops_bwd).c_str(),
              Si(f.dense_flops_fwd + f.dense_flops_bwd).c_str());
  std::printf("  %.0f parameters (%sB), %.0f activations per sample\n", f.params,
              Si(f.param_bytes()).c_str(), f.activation_elements);
  std::printf("  training memory at batch %lld: %sB a GPU, %sB a rank of the CPU engine\n",
              (long long)batch, Si(gpu_memory).c_str(), Si(cpu_memory).c_str());
  for (size_t s = 0; s < gpu_stages.size(); ++s)
    std::printf("  pipeline stage %zu of %d (%d micro-batches): %sB a GPU, %sB a CPU rank\n", s,
                stages, micro, Si(gpu_stages[s]).c_str(), Si(cpu_stages[s]).c_str());
  return kExitOk;
}

int PredictCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate predict SPEC: options");
  d.add_options()("help,h", "show this help")("calibration", po::value<std::string>()->required(),
                                              "calibration file")(
      "batch", po::value<int64_t>()->default_value(0), "local batch (0: the spec's batch_size)");
  po::variables_map vm;
  if (!Parse("predict", args, d, {"SPEC"}, vm)) return kExitOk;
  TrainSpec spec = LoadSpec(Str(vm, "SPEC"));
  Calibration c = LoadCalibration(Str(vm, "calibration"));
  const std::string stale = CalibrationStaleness(c);
  if (!stale.empty())
    std::fprintf(stderr, "dlh-estimate: warning: %s: %s\n", Str(vm, "calibration").c_str(),
                 stale.c_str());
  int64_t batch = vm["batch"].as<int64_t>();
  if (batch < 0)
    throw UsageError("--batch: must not be negative (0: the spec's), got " + std::to_string(batch));
  if (batch == 0) batch = spec.batch_size;
  const ModelFeatures f = ComputeFeatures(spec);
  // The spec's optimizer beyond the sweep's (optimizer_cost.hpp) and its GELUs and SiLUs
  // beyond the model's price (activation_cost.hpp), as the recommender adds them.
  const double linear =
      std::max(0.0, c.model.seconds(f, batch) +
                        OptimizerExtraSeconds(c.optimizer_update, spec.optimizer, f.params) +
                        CalibratedActivationSeconds(c, f, batch));
  // A GPU calibration with a layer model is planned by it (recommend, the plugin), so the
  // figure here is that model's too, on the peaks it was fitted on; the linear model's beside
  // it. Before, this printed the linear model's alone, 14% from what recommend planned with.
  if (c.gpu_layer_model.present && CudaEngineUnsupported(spec).empty()) {
    const bool momentum = recommend_detail::OptimizerSlots(spec.optimizer) > 0;  // as recommend
    const double t = PredictGpuStep(GpuStepKernels(f, batch, momentum), c.gpu_layer_model.peaks,
                                    c.gpu_layer_model.params)
                         .seconds;
    std::printf(
        "%s at batch %lld on %s: %.2f ms per step, %.0f samples/s (the calibration's GPU layer "
        "model, which plans this type; its linear model: %.2f ms)\n",
        spec.name.c_str(), (long long)batch, c.device.c_str(), t * 1e3, double(batch) / t,
        linear * 1e3);
    return kExitOk;
  }
  std::printf("%s at batch %lld on %s: %.2f ms per step, %.0f samples/s\n", spec.name.c_str(),
              (long long)batch, c.device.c_str(), linear * 1e3, double(batch) / linear);
  return kExitOk;
}

}  // namespace dlh
