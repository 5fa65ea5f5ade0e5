// DLH — a TrainSpec as spec JSON (see spec_json.hpp).
#include "common/spec_json.hpp"

namespace dlh {
namespace {

using ojson = nlohmann::ordered_json;

ojson LayerJson(const LayerSpec& l) {
  ojson j = {{"type", LayerKindName(l.kind)}};
  switch (l.kind) {
    case LayerKind::Conv2d:
      j["filters"] = l.filters;
      j["kernel"] = l.kernel;
      j["stride"] = l.stride;
      j["padding"] = l.padding;
      j["init"] = WeightInitName(l.init);
      j["bias_init"] = BiasInitName(l.bias_init);
      break;
    case LayerKind::MaxPool2d:
    case LayerKind::AvgPool2d:
      j["kernel"] = l.kernel;
      j["stride"] = l.stride;
      j["padding"] = l.padding;
      break;
    case LayerKind::Dense:
      j["units"] = l.units;
      j["init"] = WeightInitName(l.init);
      j["bias_init"] = BiasInitName(l.bias_init);
      break;
    case LayerKind::Dropout:
      j["rate"] = l.rate;
      break;
    case LayerKind::BatchNorm:
      j["momentum"] = l.momentum;
      j["epsilon"] = l.epsilon;
      break;
    case LayerKind::Residual: {
      ojson main = ojson::array(), shortcut = ojson::array();
      for (const LayerSpec& m : l.layers) main.push_back(LayerJson(m));
      for (const LayerSpec& m : l.shortcut) shortcut.push_back(LayerJson(m));
      j["layers"] = main;
      if (!shortcut.empty()) j["shortcut"] = shortcut;
      break;
    }
    case LayerKind::Relu:
    case LayerKind::Flatten:
    case LayerKind::GlobalAvgPool2d:
    case LayerKind::Gelu:
    case LayerKind::Silu:
      break;
  }
  return j;
}

ojson OptimizerJson(const OptimizerSpec& o) {
  if (o.kind == OptimizerSpec::Kind::Adam)
    return {{"type", "adam"},   {"lr", o.lr},           {"beta1", o.beta1},
            {"beta2", o.beta2}, {"epsilon", o.epsilon}, {"weight_decay", o.weight_decay}};
  ojson j = {{"type", "sgd"}, {"lr", o.lr}, {"momentum", o.momentum}};
  if (o.nesterov) j["nesterov"] = true;  // the parser refuses nesterov without momentum
  j["weight_decay"] = o.weight_decay;
  return j;
}

ojson ScheduleJson(const ScheduleSpec& s) {
  ojson j = {{"warmup_epochs", s.warmup_epochs}};
  switch (s.decay) {
    case ScheduleSpec::Decay::Constant:
      j["decay"] = "constant";
      break;
    case ScheduleSpec::Decay::Step:
      j["decay"] = "step";
      j["step_epochs"] = s.step_epochs;
      j["gamma"] = s.gamma;
      break;
    case ScheduleSpec::Decay::Cosine:
      j["decay"] = "cosine";
      j["min_lr"] = s.min_lr;
      break;
    case ScheduleSpec::Decay::OneCycle:
      j.erase("warmup_epochs");  // the parser refuses it with onecycle
      j["decay"] = "onecycle";
      j["pct_start"] = s.pct_start;
      j["div_factor"] = s.div_factor;
      j["final_div_factor"] = s.final_div_factor;
      break;
  }
  return j;
}

}  // namespace

nlohmann::ordered_json SpecToJson(const TrainSpec& spec, const std::string& dataset_if_empty) {
  ojson layers = ojson::array();
  for (const LayerSpec& l : spec.layers) layers.push_back(LayerJson(l));
  ojson j = {{"name", spec.name},
             {"input",
              {{"channels", spec.input.channels},
               {"height", spec.input.height},
               {"width", spec.input.width}}},
             {"classes", spec.classes},
             {"init", WeightInitName(spec.init)},
             {"layers", layers},
             {"optimizer", OptimizerJson(spec.optimizer)},
             {"schedule", ScheduleJson(spec.schedule)},
             {"batch_size", spec.batch_size},
             {"epochs", spec.epochs},
             {"seed", spec.seed},
             {"dataset", spec.dataset.empty() ? dataset_if_empty : spec.dataset}};
  // Written only when set (these five): the calibration sweeps' spec texts (and the hashes that pin
  // them, tests/unit/calibrate_gpu_test.cpp) stay those of the specs before the field existed.
  if (spec.label_smoothing > 0) j["label_smoothing"] = spec.label_smoothing;
  if (spec.augment.any())
    j["augment"] = {{"crop_padding", spec.augment.crop_padding}, {"flip", spec.augment.flip}};
  if (spec.sync.local_sgd())
    j["sync"] = {{"mode", "local_sgd"},
                 {"period", spec.sync.period},
                 {"warmup_steps", spec.sync.warmup_steps}};
  if (spec.sync.stale_sync()) {
    j["sync"] = {{"mode", "stale_sync"}, {"staleness", spec.sync.staleness}};
    if (!spec.sync.own_gradient_first) j["sync"]["own_gradient_first"] = false;
  }
  if (spec.parallel.pipelined())
    j["parallel"] = {{"pipeline_stages", spec.parallel.pipeline_stages},
                     {"micro_batches", spec.parallel.micro_batches}};
  if (spec.precision != Precision::Fp32) j["precision"] = PrecisionName(spec.precision);
  if (spec.tf32 != Tf32Use::Convolutions) j["tf32"] = Tf32UseName(spec.tf32);
  return j;
}

}  // namespace dlh
