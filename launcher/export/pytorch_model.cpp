// DLH — a spec's network as a PyTorch module (see pytorch_model.hpp).
#include "launcher/export/pytorch_model.hpp"

#include <cstdio>
#include <map>
#include <vector>

#include "launcher/export/python_text.hpp"

namespace dlh {
namespace {

std::string ShapeComment(const Shape3& s, bool flat) {
  if (flat) return std::to_string(s.elements());
  return std::to_string(s.channels) + " x " + std::to_string(s.height) + " x " +
         std::to_string(s.width);
}

std::string WeightInitLine(WeightInit init, const std::string& weight) {
  switch (init) {
    case WeightInit::HeNormal:  // N(0, sqrt(2 / fan_in))
      return "nn.init.kaiming_normal_(" + weight + ", mode=\"fan_in\", nonlinearity=\"relu\")";
    case WeightInit::HeUniform:
      return "nn.init.kaiming_uniform_(" + weight + ", mode=\"fan_in\", nonlinearity=\"relu\")";
    case WeightInit::GlorotNormal:
      return "nn.init.xavier_normal_(" + weight + ")";
    case WeightInit::GlorotUniform:
      return "nn.init.xavier_uniform_(" + weight + ")";
    case WeightInit::TorchDefault:
      break;
  }
  return "";  // PyTorch's own, drawn when the layer was made
}

// Walks a list of layers, writing the module's attributes (__init__), its forward() lines
// and the initialisation; `var` is the tensor the path transforms.
class Writer {
 public:
  explicit Writer(const TrainSpec& spec) : spec_(spec) {}

  void Path(const std::vector<LayerSpec>& layers, Shape3 shape, bool* flat,
            const std::string& dlh_prefix, const std::string& attr_prefix, const std::string& var,
            const std::string& indent, const std::string& where, int depth) {
    const std::vector<Shape3> shapes = PathShapes(layers, shape, spec_.origin, where);
    for (size_t i = 0; i < layers.size(); ++i) {
      const LayerSpec& l = layers[i];
      char index[24];
      std::snprintf(index, sizeof index, "%02zu", i);
      const std::string dlh_name = dlh_prefix + index + "." + LayerKindName(l.kind) + "/";
      const Shape3& in = shapes[i];
      const Shape3& out = shapes[i + 1];
      const std::string k = std::to_string(l.kernel), s = std::to_string(l.stride),
                        p = std::to_string(l.padding);
      auto forward = [&](const std::string& call, bool out_flat) {
        forward_ += indent + var + " = " + call + "  # " + ShapeComment(out, out_flat) + "\n";
      };
      auto flatten = [&]() {
        if (*flat) return;
        forward_ += indent + var + " = torch.flatten(" + var + ", 1)\n";
        *flat = true;
      };
      switch (l.kind) {
        case LayerKind::Conv2d: {
          const std::string attr = attr_prefix + "conv" + std::to_string(i);
          Attribute(attr, "nn.Conv2d(" + std::to_string(in.channels) + ", " +
                              std::to_string(l.filters) + ", kernel_size=" + k + ", stride=" + s +
                              ", padding=" + p + ")");
          forward("self." + attr + "(" + var + ")", false);
          Init(attr, l);
          Names(dlh_name, attr, {{"weight", "weight"}, {"bias", "bias"}});
          params_ += int64_t(l.filters) * in.channels * l.kernel * l.kernel + l.filters;
          ++counts_["conv2d"];
          break;
        }
        case LayerKind::MaxPool2d:  // padded cells never win, as in DLH
          forward("F.max_pool2d(" + var + ", " + k + ", stride=" + s + ", padding=" + p + ")",
                  false);
          break;
        case LayerKind::AvgPool2d:  // padded cells count as zeros in the mean, as in DLH
          forward("F.avg_pool2d(" + var + ", " + k + ", stride=" + s + ", padding=" + p + ")",
                  false);
          break;
        case LayerKind::GlobalAvgPool2d:
          forward("F.adaptive_avg_pool2d(" + var + ", 1)", false);
          break;
        case LayerKind::Dense: {
          flatten();  // a dense layer takes a flat view of any input, as in DLH
          const std::string attr = attr_prefix + "fc" + std::to_string(i);
          Attribute(attr, "nn.Linear(" + std::to_string(in.elements()) + ", " +
                              std::to_string(l.units) + ")");
          forward("self." + attr + "(" + var + ")", true);
          Init(attr, l);
          Names(dlh_name, attr, {{"weight", "weight"}, {"bias", "bias"}});
          params_ += in.elements() * l.units + l.units;
          ++counts_["dense"];
          break;
        }
        case LayerKind::Relu:
          forward("F.relu(" + var + ")", *flat);
          break;
        case LayerKind::Gelu:  // the exact GELU, x * Phi(x) with erf, as DLH computes it
          forward("F.gelu(" + var + ")", *flat);
          break;
        case LayerKind::Silu:
          forward("F.silu(" + var + ")", *flat);
          break;
        case LayerKind::Flatten:
          if (!*flat) forward("torch.flatten(" + var + ", 1)", true);
          *flat = true;
          break;
        case LayerKind::Dropout:  // inverted dropout: kept values scaled by 1 / (1 - p)
          forward("F.dropout(" + var + ", p=" + PythonFloat(l.rate) + ", training=self.training)",
                  *flat);
          break;
        case LayerKind::BatchNorm: {
          // momentum: the weight of the new batch, and the running variance the unbiased
          // one, in DLH as in PyTorch.
          const std::string attr = attr_prefix + "bn" + std::to_string(i);
          const int64_t features = *flat ? in.elements() : in.channels;
          Attribute(attr, std::string(*flat ? "nn.BatchNorm1d(" : "nn.BatchNorm2d(") +
                              std::to_string(features) + ", eps=" + PythonFloat(l.epsilon) +
                              ", momentum=" + PythonFloat(l.momentum) + ")");
          forward("self." + attr + "(" + var + ")", *flat);
          Names(dlh_name, attr,
                {{"gamma", "weight"},
                 {"beta", "bias"},
                 {"running_mean", "running_mean"},
                 {"running_var", "running_var"}});
          params_ += 2 * features;
          ++counts_["batchnorm"];
          break;
        }
        case LayerKind::Residual: {
          const std::string block = attr_prefix + "res" + std::to_string(i) + "_";
          const std::string shortcut = "shortcut" + (depth > 0 ? std::to_string(depth + 1) : "");
          forward_ += indent + "# residual block " + where + "[" + std::to_string(i) +
                      "]: the main path plus " +
                      (l.shortcut.empty() ? "the block's input" : "the shortcut path") + "\n";
          forward_ += indent + shortcut + " = " + var + "\n";
          bool main_flat = *flat, short_flat = *flat;
          const std::string at = where + "[" + std::to_string(i) + "]";
          Path(l.layers, in, &main_flat, dlh_name + "main.", block, var, indent, at + ".layers",
               depth + 1);
          if (!l.shortcut.empty())
            Path(l.shortcut, in, &short_flat, dlh_name + "shortcut.", block + "short_", shortcut,
                 indent, at + ".shortcut", depth + 1);
          // A path that ends flat and one that ends C x 1 x 1 hold the same values in the
          // same order: the shortcut is then viewed in the main path's shape.
          forward(var + " + " + shortcut +
                      (main_flat == short_flat ? "" : ".reshape(" + var + ".shape)"),
                  main_flat);
          *flat = *flat || main_flat;
          ++counts_["residual"];
          break;
        }
      }
    }
  }

  PyTorchModelCode Finish() {
    PyTorchModelCode code;
    const std::string in = ShapeComment(spec_.input, false);
    code.net_class =
        "class Net(nn.Module):\n"
        "    \"\"\"The spec's layers, each layer with parameters an attribute named by its\n"
        "    index in the spec's \"layers\" (conv0, bn1, ..., fc10; res3_conv0 inside the\n"
        "    residual block layers[3], res3_short_conv0 on its shortcut).\n"
        "    Input: N x " +
        in + " images; output: N x " + std::to_string(spec_.classes) +
        " logits, for the softmax cross-entropy.\"\"\"\n\n"
        "    def __init__(self):\n"
        "        super().__init__()\n" +
        init_ +
        "        self.reset_parameters()\n\n"
        "    def reset_parameters(self):\n"
        "        \"\"\"The spec's initialisation of the conv2d and dense layers (those not\n"
        "        named keep PyTorch's default, U(+-1/sqrt(fan_in)), which is the spec's\n"
        "        torch_default).\"\"\"\n" +
        reset_ +
        "\n"
        "    def forward(self, x):  # " +
        in + "\n" + forward_ + "        return x\n";
    code.dlh_names =
        "# A DLH checkpoint's arrays (HDF5 /params and /buffers) and where they go in this\n"
        "# module's state_dict.\n"
        "DLH_NAMES = {\n" +
        names_ + "}\n";
    for (const auto& [kind, n] : counts_)
      code.summary += (code.summary.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
    code.summary += " (" + std::to_string(params_) + " parameters)";
    return code;
  }

 private:
  void Attribute(const std::string& attr, const std::string& module) {
    init_ += "        self." + attr + " = " + module + "\n";
  }

  void Init(const std::string& attr, const LayerSpec& l) {
    const std::string line = WeightInitLine(l.init, "self." + attr + ".weight");
    if (!line.empty()) reset_ += "        " + line + "\n";
    if (l.bias_init == BiasInit::Zeros)
      reset_ += "        nn.init.zeros_(self." + attr + ".bias)\n";
  }

  void Names(const std::string& dlh_name, const std::string& attr,
             const std::vector<std::pair<std::string, std::string>>& arrays) {
    for (const auto& [dlh_array, torch_name] : arrays)
      names_ += "    " + PythonString(dlh_name + dlh_array) + ": " +
                PythonString(attr + "." + torch_name) + ",\n";
  }

  const TrainSpec& spec_;
  std::string init_, reset_, forward_, names_;
  std::map<std::string, int> counts_;
  int64_t params_ = 0;
};

}  // namespace

PyTorchModelCode WritePyTorchModel(const TrainSpec& spec) {
  Writer w(spec);
  bool flat = false;
  w.Path(spec.layers, spec.input, &flat, "", "", "x", "        ", "layers", 0);
  return w.Finish();
}

}  // namespace dlh
