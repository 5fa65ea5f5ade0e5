// DLH — the spec as a PyTorch program (see pytorch_program.hpp).
#include "launcher/export/pytorch_program.hpp"

#include <map>
#include <stdexcept>

#include "launcher/export/python_text.hpp"
#include "launcher/export/pytorch_model.hpp"

namespace dlh {
namespace {

const char kTemplate[] =
#include "launcher/export/pytorch_template.inc"
    ;

// The schedule after the warm-up, as common/learning_rate.cpp computes it: (the body of
// learning_rate() after its warm-up branch, its docstring's words).
std::pair<std::string, std::string> Schedule(const ScheduleSpec& s) {
  switch (s.decay) {
    case ScheduleSpec::Decay::Constant:
      return {"    return peak\n", "constant"};
    case ScheduleSpec::Decay::Step:
      return {"    period = " + PythonFloat(s.step_epochs) +
                  " * spe  # counted from step 0, not from the warm-up's end\n"
                  "    return peak * " +
                  PythonFloat(s.gamma) + " ** math.floor(step / period)\n",
              "multiplied by " + PythonFloat(s.gamma) + " every " + PythonFloat(s.step_epochs) +
                  " epochs"};
    case ScheduleSpec::Decay::Cosine:
      return {"    min_lr = " + PythonFloat(s.min_lr) +
                  "\n"
                  "    t, T = step - warmup, max(1, total - warmup)\n"
                  "    return min_lr + (peak - min_lr) * 0.5 * (1 + math.cos(math.pi * min(t, T) "
                  "/ T))\n",
              "a cosine decay to " + PythonFloat(s.min_lr) + " at the last step"};
    case ScheduleSpec::Decay::OneCycle:
      return {
          "    # PyTorch's OneCycleLR (cosine, two phases); it is its own warm-up.\n"
          "    lo = peak / " +
              PythonFloat(s.div_factor) +
              "\n"
              "    end = lo / " +
              PythonFloat(s.final_div_factor) +
              "\n"
              "    up, last = " +
              PythonFloat(s.pct_start) +
              " * total - 1, total - 1.0\n\n"
              "    def anneal(a, b, x):\n"
              "        return b + (a - b) * 0.5 * (1 + math.cos(math.pi * x))\n\n"
              "    if step <= up:\n"
              "        return anneal(lo, peak, step / up if up > 0 else 1.0)\n"
              "    if not last > up:\n"
              "        return end\n"
              "    return anneal(peak, end, min(1.0, (step - up) / (last - up)))\n",
          "one cycle (PyTorch's OneCycleLR: up from peak / " + PythonFloat(s.div_factor) +
              " over the first " + PythonFloat(100 * s.pct_start) + "% of the steps, then down)"};
  }
  throw std::logic_error("unknown decay");
}

// (the optimizer's constructor call, its docstring's first sentence)
std::pair<std::string, std::string> Optimizer(const OptimizerSpec& o) {
  if (o.kind == OptimizerSpec::Kind::Adam)
    return {"torch.optim.AdamW(groups, lr=lr, betas=(" + PythonFloat(o.beta1) + ", " +
                PythonFloat(o.beta2) + "), eps=" + PythonFloat(o.epsilon) + ")",
            "Adam with decoupled weight decay (AdamW), as the spec's adam."};
  std::string sgd = "torch.optim.SGD(groups, lr=lr";
  std::string doc = "SGD";
  if (o.momentum != 0) {
    sgd += ", momentum=" + PythonFloat(o.momentum);
    doc += " with momentum " + PythonFloat(o.momentum);
  }
  if (o.nesterov) {
    sgd += ", nesterov=True";
    doc += " (Nesterov)";
  }
  return {sgd + ")", doc + ", weight decay as L2 in the gradient, as the spec's sgd."};
}

// The template with every @@FIELD@@ replaced, in one pass (a value is never read again, so
// a spec whose text holds "@@NET@@" stays as it is).
std::string FillTemplate(const std::string& text,
                         const std::map<std::string, std::string>& fields) {
  std::string out;
  size_t at = 0;
  for (size_t open; (open = text.find("@@", at)) != std::string::npos;) {
    const size_t close = text.find("@@", open + 2);
    if (close == std::string::npos) break;
    const auto field = fields.find(text.substr(open + 2, close - open - 2));
    if (field == fields.end())
      throw std::logic_error("export template: no value for " +
                             text.substr(open, close + 2 - open));
    out += text.substr(at, open - at) + field->second;
    at = close + 2;
  }
  return out + text.substr(at);
}

// The spec's text as the user wrote it, in a raw triple-quoted string (JSON's escapes are
// then json.loads's to read), or one escaped line where the text would end that string.
std::string SpecLiteral(const std::string& json) {
  std::string text = json;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.find("\"\"\"") != std::string::npos ||
      (!text.empty() && (text.back() == '"' || text.back() == '\\')))
    return PythonString(json);
  return "r\"\"\"" + text + "\"\"\"";
}

}  // namespace

std::string WritePyTorchProgram(const TrainSpec& spec, const PyTorchProgramOptions& options) {
  const PyTorchModelCode model = WritePyTorchModel(spec);
  const auto [schedule, schedule_doc] = Schedule(spec.schedule);
  const auto [optimizer, optimizer_doc] = Optimizer(spec.optimizer);
  const std::map<std::string, std::string> fields = {
      {"NAME", spec.name.empty() ? "model" : spec.name},
      {"ORIGIN", spec.origin},
      {"VERSION", DLH_VERSION},
      {"SUMMARY", model.summary},
      {"FILE", options.file_name},
      {"DATA", options.data.empty() ? "None" : PythonString(options.data)},
      {"INPUT", std::to_string(spec.input.channels) + ", " + std::to_string(spec.input.height) +
                    ", " + std::to_string(spec.input.width)},
      {"CLASSES", std::to_string(spec.classes)},
      {"EPOCHS", std::to_string(spec.epochs)},
      {"BATCH", std::to_string(spec.batch_size)},
      {"LR", PythonFloat(spec.optimizer.lr)},
      {"WARMUP", PythonFloat(spec.schedule.warmup_epochs)},
      {"SEED", std::to_string(spec.seed)},
      {"SMOOTHING", PythonFloat(spec.label_smoothing)},
      {"CROP", std::to_string(spec.augment.crop_padding)},
      {"FLIP", PythonBool(spec.augment.flip)},
      {"BF16", PythonBool(spec.precision == Precision::Bf16)},
      {"TF32",
       PythonBool(spec.tf32 != Tf32Use::None) + ", " + PythonBool(spec.tf32 == Tf32Use::All)},
      {"SPEC", SpecLiteral(spec.json)},
      {"NET", model.net_class},
      {"DLH_NAMES", model.dlh_names},
      {"OPTIMIZER_DOC", optimizer_doc},
      {"OPTIMIZER", optimizer},
      {"WEIGHT_DECAY", PythonFloat(spec.optimizer.weight_decay)},
      {"SCHEDULE_DOC", schedule_doc},
      {"SCHEDULE", schedule},
  };
  return FillTemplate(kTemplate, fields);
}

}  // namespace dlh
