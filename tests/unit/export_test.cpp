// A spec written as a PyTorch program (launcher/export): Python literals, the network's
// attributes, forward() and checkpoint names, the schedule and optimizer chosen by the spec.
// That the program runs, trains and loads DLH's weights is tests/scripts/export.sh's.
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/spec.hpp"
#include "launcher/export/python_text.hpp"
#include "launcher/export/pytorch_model.hpp"
#include "launcher/export/pytorch_program.hpp"

namespace dlh {
namespace {

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PythonTextTest, StringsEscapeWhatWouldEndOrBreakThem) {
  EXPECT_EQ(PythonString("plain"), "\"plain\"");
  EXPECT_EQ(PythonString("a\"b\\c\nd\te\x01"), "\"a\\\"b\\\\c\\nd\\te\\x01\"");
  EXPECT_EQ(PythonString("caf\xc3\xa9"), "\"caf\xc3\xa9\"");  // UTF-8 as it is
}

TEST(PythonTextTest, FloatsAreShortestAndReadAsFloats) {
  EXPECT_EQ(PythonFloat(0.05), "0.05");
  EXPECT_EQ(PythonFloat(2), "2.0");
  EXPECT_EQ(PythonFloat(1e-5), "1e-05");
  EXPECT_EQ(PythonFloat(0.1 + 0.2), "0.30000000000000004");
  for (double v : {1.0 / 3, 5e-4, 123456789.125, -0.0})
    EXPECT_EQ(std::strtod(PythonFloat(v).c_str(), nullptr), v) << PythonFloat(v);
}

TrainSpec ResidualSpec() {
  return ParseSpec(R"({
    "name": "t", "input": {"channels": 3, "height": 8, "width": 8}, "classes": 5,
    "init": "he_normal",
    "layers": [
      {"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1},
      {"type": "residual", "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1,
                                       "bias_init": "zeros"}, {"type": "batchnorm"}]},
      {"type": "residual", "layers": [{"type": "flatten"}, {"type": "dense", "units": 4}],
       "shortcut": [{"type": "conv2d", "filters": 4, "kernel": 8, "init": "torch_default"}]},
      {"type": "batchnorm"},
      {"type": "dense", "units": 5}
    ],
    "optimizer": {"type": "adam", "lr": 0.001, "weight_decay": 0.01},
    "schedule": {"decay": "onecycle"}, "batch_size": 16, "epochs": 2, "dataset": "d.h5"})",
                   "t.json", "");
}

TEST(PyTorchModelTest, AttributesForwardAndCheckpointNames) {
  const PyTorchModelCode code = WritePyTorchModel(ResidualSpec());
  // Named by the spec's index; inside a block by the block's index.
  EXPECT_TRUE(
      Has(code.net_class, "self.conv0 = nn.Conv2d(3, 4, kernel_size=3, stride=1, padding=1)"));
  EXPECT_TRUE(Has(code.net_class, "self.res1_conv0 = nn.Conv2d(4, 4,"));
  EXPECT_TRUE(Has(code.net_class, "self.res1_bn1 = nn.BatchNorm2d(4, eps=1e-05, momentum=0.1)"));
  EXPECT_TRUE(Has(code.net_class, "self.res2_fc1 = nn.Linear(256, 4)"));
  EXPECT_TRUE(Has(code.net_class, "self.res2_short_conv0 = nn.Conv2d(4, 4, kernel_size=8"));
  EXPECT_TRUE(Has(code.net_class, "self.bn3 = nn.BatchNorm1d(4,"));  // after a flat block
  // The identity shortcut adds as it is; a flat main path views a spatial shortcut.
  EXPECT_TRUE(Has(code.net_class, "x = x + shortcut  # 4 x 8 x 8"));
  EXPECT_TRUE(Has(code.net_class, "x = x + shortcut.reshape(x.shape)  # 4\n"));
  // The spec's inits; torch_default layers keep PyTorch's own.
  EXPECT_TRUE(Has(code.net_class, "nn.init.kaiming_normal_(self.conv0.weight, mode=\"fan_in\""));
  EXPECT_TRUE(Has(code.net_class, "nn.init.zeros_(self.res1_conv0.bias)"));
  EXPECT_FALSE(Has(code.net_class, "self.res2_short_conv0.weight"));
  EXPECT_TRUE(Has(code.dlh_names,
                  "\"02.residual/shortcut.00.conv2d/weight\": \"res2_short_conv0.weight\""));
  EXPECT_TRUE(Has(code.dlh_names, "\"01.residual/main.01.batchnorm/gamma\": \"res1_bn1.weight\""));
  EXPECT_TRUE(Has(code.dlh_names, "\"03.batchnorm/running_var\": \"bn3.running_var\""));
  // 3*4*9+4 + 4*4*9+4 + 8 + 256*4+4 + 4*4*64+4 + 8 + 4*5+5
  EXPECT_TRUE(Has(code.summary, "(2357 parameters)")) << code.summary;
}

TEST(PyTorchProgramTest, SettingsScheduleAndOptimizerFromTheSpec) {
  PyTorchProgramOptions o;
  o.file_name = "t.py";
  o.data = "/data/x \"y\".h5";
  const std::string p = WritePyTorchProgram(ResidualSpec(), o);
  EXPECT_EQ(p.rfind("#!/usr/bin/env python3\n", 0), 0u);
  EXPECT_FALSE(Has(p, "@@"));
  EXPECT_TRUE(Has(p, "DATA = \"/data/x \\\"y\\\".h5\"\n"));
  EXPECT_TRUE(Has(p, "INPUT_SHAPE = (3, 8, 8)"));
  EXPECT_TRUE(Has(p, "GLOBAL_BATCH = 16 "));
  EXPECT_TRUE(Has(p, "torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-08)"));
  EXPECT_TRUE(Has(p, "\"weight_decay\": 0.01}"));
  EXPECT_TRUE(Has(p, "lo = peak / 25.0"));  // onecycle's defaults
  EXPECT_TRUE(Has(p, "python3 t.py --from-dlh RUN --evaluate"));
  EXPECT_TRUE(Has(p, "SPEC = json.loads(r\"\"\"{"));
}

// JSON's own escapes stay in the raw string for json.loads to read: quotes inside its strings
// are always escaped (\"), so valid JSON never holds the """ that would end it.
TEST(PyTorchProgramTest, TheSpecTextIsCarriedVerbatim) {
  TrainSpec spec = ResidualSpec();
  spec.json = R"({"name": "x\"\"\"y \\ z"})";
  const std::string p = WritePyTorchProgram(spec, PyTorchProgramOptions{});
  EXPECT_TRUE(Has(p, "SPEC = json.loads(r\"\"\"" + spec.json + "\"\"\")\n"));
}

}  // namespace
}  // namespace dlh
