// Tests of the training spec: parsing, defaults, error messages, shapes, learning rate.
#include "common/spec.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.hpp"
#include "common/spec_json.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The Fashion-MNIST CNN, every field given.
json FullSpec() {
  return json::parse(R"({
    "name": "fashion-cnn",
    "input": {"channels": 1, "height": 28, "width": 28},
    "classes": 10,
    "layers": [
      {"type": "conv2d", "filters": 32, "kernel": 3, "stride": 1, "padding": 1},
      {"type": "batchnorm", "momentum": 0.2, "epsilon": 1e-3},
      {"type": "relu"},
      {"type": "maxpool2d", "kernel": 2, "stride": 2, "padding": 0},
      {"type": "conv2d", "filters": 64, "kernel": 3, "stride": 1, "padding": 1},
      {"type": "batchnorm"},
      {"type": "relu"},
      {"type": "maxpool2d", "kernel": 2},
      {"type": "flatten"},
      {"type": "dropout", "rate": 0.25},
      {"type": "dense", "units": 128},
      {"type": "relu"},
      {"type": "dropout", "rate": 0.3},
      {"type": "dense", "units": 10}
    ],
    "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": true, "weight_decay": 5e-4},
    "schedule": {"warmup_epochs": 1, "decay": "cosine", "min_lr": 0.001},
    "batch_size": 128,
    "epochs": 8,
    "seed": 42,
    "dataset": "fashion-mnist.h5"
  })");
}

// The smallest valid spec: only required fields.
json MinimalSpec() {
  return json::parse(R"({
    "input": {"channels": 3, "height": 8, "width": 8},
    "classes": 4,
    "layers": [{"type": "flatten"}, {"type": "dense", "units": 4}],
    "optimizer": {"type": "sgd", "lr": 0.1},
    "batch_size": 16,
    "epochs": 2,
    "dataset": "data.h5"
  })");
}

TrainSpec Parse(const json& j, const std::string& base = "") {
  return ParseSpec(j.dump(2), "spec.json", base);
}

// The SpecError message for a spec text (empty when it parses).
std::string ErrorOf(const std::string& text, const std::string& origin = "spec.json") {
  try {
    ParseSpec(text, origin, "");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}
std::string ErrorOf(const json& j) { return ErrorOf(j.dump()); }

// FullSpec() changed by `edit`.
json Edited(const std::function<void(json&)>& edit) {
  json j = FullSpec();
  edit(j);
  return j;
}

fs::path ExamplesDir() {
  return fs::path(__FILE__).parent_path() / ".." / ".." / "share" / "examples";
}

// ---------------------------------------------------------------- valid specs

TEST(SpecTest, FullSpecParsesEveryField) {
  const std::string text = FullSpec().dump(2);
  TrainSpec s = ParseSpec(text, "spec.json", "");
  EXPECT_EQ(s.name, "fashion-cnn");
  EXPECT_EQ(s.input, (Shape3{1, 28, 28}));
  EXPECT_EQ(s.classes, 10);
  ASSERT_EQ(s.layers.size(), 14u);

  const LayerSpec& c0 = s.layers[0];
  EXPECT_EQ(c0.kind, LayerKind::Conv2d);
  EXPECT_EQ(c0.filters, 32);
  EXPECT_EQ(c0.kernel, 3);
  EXPECT_EQ(c0.stride, 1);
  EXPECT_EQ(c0.padding, 1);

  EXPECT_EQ(s.layers[1].kind, LayerKind::BatchNorm);
  EXPECT_DOUBLE_EQ(s.layers[1].momentum, 0.2);
  EXPECT_DOUBLE_EQ(s.layers[1].epsilon, 1e-3);
  EXPECT_EQ(s.layers[2].kind, LayerKind::Relu);

  const LayerSpec& p3 = s.layers[3];
  EXPECT_EQ(p3.kind, LayerKind::MaxPool2d);
  EXPECT_EQ(p3.kernel, 2);
  EXPECT_EQ(p3.stride, 2);
  EXPECT_EQ(p3.padding, 0);

  EXPECT_EQ(s.layers[4].filters, 64);
  EXPECT_EQ(s.layers[8].kind, LayerKind::Flatten);
  EXPECT_EQ(s.layers[9].kind, LayerKind::Dropout);
  EXPECT_DOUBLE_EQ(s.layers[9].rate, 0.25);
  EXPECT_EQ(s.layers[10].kind, LayerKind::Dense);
  EXPECT_EQ(s.layers[10].units, 128);
  EXPECT_DOUBLE_EQ(s.layers[12].rate, 0.3);
  EXPECT_EQ(s.layers[13].units, 10);

  EXPECT_EQ(s.optimizer.kind, OptimizerSpec::Kind::Sgd);
  EXPECT_DOUBLE_EQ(s.optimizer.lr, 0.05);
  EXPECT_DOUBLE_EQ(s.optimizer.momentum, 0.9);
  EXPECT_TRUE(s.optimizer.nesterov);
  EXPECT_DOUBLE_EQ(s.optimizer.weight_decay, 5e-4);

  EXPECT_EQ(s.schedule.decay, ScheduleSpec::Decay::Cosine);
  EXPECT_DOUBLE_EQ(s.schedule.warmup_epochs, 1);
  EXPECT_DOUBLE_EQ(s.schedule.min_lr, 0.001);

  EXPECT_EQ(s.batch_size, 128);
  EXPECT_EQ(s.epochs, 8);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.dataset, "fashion-mnist.h5");
  EXPECT_EQ(s.origin, "spec.json");
  EXPECT_EQ(s.json, text);  // the text as given, byte for byte
}

TEST(SpecTest, AdamAndStepSchedule) {
  json j = FullSpec();
  j["optimizer"] = json::parse(
      R"({"type": "adam", "lr": 0.001, "beta1": 0.8, "beta2": 0.99, "epsilon": 1e-7, "weight_decay": 0.01})");
  j["schedule"] = json::parse(R"({"decay": "step", "step_epochs": 3, "gamma": 0.5})");
  TrainSpec s = Parse(j);
  EXPECT_EQ(s.optimizer.kind, OptimizerSpec::Kind::Adam);
  EXPECT_DOUBLE_EQ(s.optimizer.lr, 0.001);
  EXPECT_DOUBLE_EQ(s.optimizer.beta1, 0.8);
  EXPECT_DOUBLE_EQ(s.optimizer.beta2, 0.99);
  EXPECT_DOUBLE_EQ(s.optimizer.epsilon, 1e-7);
  EXPECT_DOUBLE_EQ(s.optimizer.weight_decay, 0.01);
  EXPECT_EQ(s.schedule.decay, ScheduleSpec::Decay::Step);
  EXPECT_DOUBLE_EQ(s.schedule.step_epochs, 3);
  EXPECT_DOUBLE_EQ(s.schedule.gamma, 0.5);
  EXPECT_DOUBLE_EQ(s.schedule.warmup_epochs, 0);
}

TEST(SpecTest, Defaults) {
  TrainSpec s = ParseSpec(MinimalSpec().dump(), "runs/my-spec.json", "");
  EXPECT_EQ(s.name, "my-spec");  // the file stem
  EXPECT_EQ(s.seed, 0u);
  EXPECT_EQ(s.optimizer.kind, OptimizerSpec::Kind::Sgd);
  EXPECT_DOUBLE_EQ(s.optimizer.momentum, 0);
  EXPECT_FALSE(s.optimizer.nesterov);
  EXPECT_DOUBLE_EQ(s.optimizer.weight_decay, 0);
  EXPECT_EQ(s.schedule.decay, ScheduleSpec::Decay::Constant);
  EXPECT_DOUBLE_EQ(s.schedule.warmup_epochs, 0);
  EXPECT_DOUBLE_EQ(s.schedule.gamma, 0.1);
  EXPECT_DOUBLE_EQ(s.schedule.min_lr, 0);

  // Layer defaults: conv stride 1 padding 0; maxpool stride = kernel; batchnorm 0.1/1e-5.
  json j = MinimalSpec();
  j["layers"] = json::parse(R"([
      {"type": "conv2d", "filters": 2, "kernel": 3},
      {"type": "batchnorm"},
      {"type": "maxpool2d", "kernel": 3},
      {"type": "flatten"},
      {"type": "dense", "units": 4}])");
  s = Parse(j);
  EXPECT_EQ(s.layers[0].stride, 1);
  EXPECT_EQ(s.layers[0].padding, 0);
  EXPECT_DOUBLE_EQ(s.layers[1].momentum, 0.1);
  EXPECT_DOUBLE_EQ(s.layers[1].epsilon, 1e-5);
  EXPECT_EQ(s.layers[2].stride, 3);
  EXPECT_EQ(s.layers[2].padding, 0);
  EXPECT_EQ(LayerShapes(s)[3], (Shape3{2, 2, 2}));  // 8 -> conv3 -> 6 -> pool3/3 -> 2

  // Adam defaults.
  j = MinimalSpec();
  j["optimizer"] = json::parse(R"({"type": "adam", "lr": 0.001})");
  s = Parse(j);
  EXPECT_DOUBLE_EQ(s.optimizer.beta1, 0.9);
  EXPECT_DOUBLE_EQ(s.optimizer.beta2, 0.999);
  EXPECT_DOUBLE_EQ(s.optimizer.epsilon, 1e-8);
  EXPECT_DOUBLE_EQ(s.optimizer.weight_decay, 0);

  // Step decay: gamma defaults to 0.1.
  j = MinimalSpec();
  j["schedule"] = json::parse(R"({"decay": "step", "step_epochs": 1})");
  EXPECT_DOUBLE_EQ(Parse(j).schedule.gamma, 0.1);

  // No file name to take the stem of.
  EXPECT_EQ(ParseSpec(MinimalSpec().dump(), "", "").name, "spec");
}

TEST(SpecTest, SyncDefaultsToSynchronousAndLocalSgdRoundTrips) {
  EXPECT_FALSE(Parse(MinimalSpec()).sync.local_sgd());
  json j = MinimalSpec();
  j["sync"] = json::parse(R"({"mode": "local_sgd", "period": 8})");
  TrainSpec s = Parse(j);
  EXPECT_TRUE(s.sync.local_sgd());
  EXPECT_EQ(s.sync.period, 8);
  EXPECT_EQ(s.sync.warmup_steps, 0);
  j["sync"]["warmup_steps"] = 100;
  s = Parse(j);
  EXPECT_EQ(s.sync.warmup_steps, 100);
  const TrainSpec back = ParseSpec(SpecToJson(s, "d.h5").dump(), "back", "");
  EXPECT_TRUE(back.sync.local_sgd());
  EXPECT_EQ(back.sync.period, 8);
  EXPECT_EQ(back.sync.warmup_steps, 100);
  j["sync"] = json::parse(R"({"mode": "sync"})");
  EXPECT_FALSE(Parse(j).sync.local_sgd());
  EXPECT_FALSE(SpecToJson(Parse(j), "d.h5").contains("sync"));  // the default is not written
}

TEST(SpecTest, StaleSyncTakesItsStalenessAndRoundTrips) {
  json j = MinimalSpec();
  j["sync"] = json::parse(R"({"mode": "stale_sync", "staleness": 2})");
  TrainSpec s = Parse(j);
  EXPECT_TRUE(s.sync.stale_sync());
  EXPECT_FALSE(s.sync.local_sgd());
  EXPECT_EQ(s.sync.staleness, 2);
  const TrainSpec back = ParseSpec(SpecToJson(s, "d.h5").dump(), "back", "");
  EXPECT_TRUE(back.sync.stale_sync());
  EXPECT_EQ(back.sync.staleness, 2);
  j["sync"]["staleness"] = 0;  // synchronous training through the stale path
  EXPECT_EQ(Parse(j).sync.staleness, 0);
}

TEST(SpecTest, LargeSeed) {
  json j = MinimalSpec();
  j["seed"] = 18446744073709551615ull;
  EXPECT_EQ(Parse(j).seed, 18446744073709551615ull);
}

TEST(SpecTest, InitDefaultsAndOverrides) {
  // No "init": PyTorch's convention for weights and biases.
  json j = MinimalSpec();
  j["layers"] = json::parse(R"([
      {"type": "conv2d", "filters": 2, "kernel": 3},
      {"type": "flatten"},
      {"type": "dense", "units": 4}])");
  TrainSpec s = Parse(j);
  EXPECT_EQ(s.init, WeightInit::TorchDefault);
  for (int i : {0, 2}) {
    EXPECT_EQ(s.layers[i].init, WeightInit::TorchDefault);
    EXPECT_EQ(s.layers[i].bias_init, BiasInit::TorchDefault);
  }
  // The spec's "init" is every layer's default, with zero biases; a layer's own wins.
  j["init"] = "glorot_uniform";
  j["layers"][2]["init"] = "he_normal";
  s = Parse(j);
  EXPECT_EQ(s.layers[0].init, WeightInit::GlorotUniform);
  EXPECT_EQ(s.layers[0].bias_init, BiasInit::Zeros);
  EXPECT_EQ(s.layers[2].init, WeightInit::HeNormal);
  EXPECT_EQ(s.layers[2].bias_init, BiasInit::Zeros);
  j["layers"][0]["bias_init"] = "torch_default";
  j["layers"][2]["init"] = "torch_default";
  j["layers"][2]["bias_init"] = "zeros";
  s = Parse(j);
  EXPECT_EQ(s.layers[0].bias_init, BiasInit::TorchDefault);
  EXPECT_EQ(s.layers[2].init, WeightInit::TorchDefault);
  EXPECT_EQ(s.layers[2].bias_init, BiasInit::Zeros);
  for (const char* name :
       {"he_normal", "he_uniform", "glorot_normal", "glorot_uniform", "torch_default"}) {
    j["init"] = name;
    EXPECT_STREQ(WeightInitName(Parse(j).layers[0].init), name);
  }
  EXPECT_STREQ(BiasInitName(BiasInit::Zeros), "zeros");
  EXPECT_STREQ(BiasInitName(BiasInit::TorchDefault), "torch_default");
}

TEST(SpecTest, InitErrorsNameTheField) {
  const std::string choices =
      "must be one of \"he_normal\", \"he_uniform\", \"glorot_normal\", \"glorot_uniform\", "
      "\"torch_default\"";
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["init"] = "kaiming"; })),
            "spec.json: init: " + choices + ", got \"kaiming\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][10]["init"] = 3; })),
            "spec.json: layers[10].init: " + choices + ", got 3");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][0]["bias_init"] = "ones"; })),
            "spec.json: layers[0].bias_init: must be one of \"zeros\", \"torch_default\", got "
            "\"ones\"");
  // Layers without weights have nothing to initialise.
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][2]["init"] = "he_normal"; })),
            "spec.json: layers[2]: unknown key \"init\"");
}

TEST(SpecTest, LayerKindNames) {
  EXPECT_STREQ(LayerKindName(LayerKind::Conv2d), "conv2d");
  EXPECT_STREQ(LayerKindName(LayerKind::MaxPool2d), "maxpool2d");
  EXPECT_STREQ(LayerKindName(LayerKind::Dense), "dense");
  EXPECT_STREQ(LayerKindName(LayerKind::Relu), "relu");
  EXPECT_STREQ(LayerKindName(LayerKind::Flatten), "flatten");
  EXPECT_STREQ(LayerKindName(LayerKind::Dropout), "dropout");
  EXPECT_STREQ(LayerKindName(LayerKind::BatchNorm), "batchnorm");
}

// ---------------------------------------------------------------- dataset paths

TEST(SpecTest, DatasetPathResolution) {
  json j = MinimalSpec();
  j["dataset"] = "sub/data.h5";
  EXPECT_EQ(ParseSpec(j.dump(), "spec.json", "").dataset, "sub/data.h5");
  EXPECT_EQ(ParseSpec(j.dump(), "spec.json", "/srv/specs").dataset, "/srv/specs/sub/data.h5");
  EXPECT_EQ(ParseSpec(j.dump(), "spec.json", "/srv/specs/").dataset, "/srv/specs/sub/data.h5");
  EXPECT_EQ(ParseSpec(j.dump(), "spec.json", "specs").dataset, "specs/sub/data.h5");
  j["dataset"] = "/abs/data.h5";
  EXPECT_EQ(ParseSpec(j.dump(), "spec.json", "/srv/specs").dataset, "/abs/data.h5");
}

TEST(SpecTest, LoadSpecResolvesAgainstTheFilesFolder) {
  test::TempDir dir("dlh-spec-test");
  json j = MinimalSpec();
  j["dataset"] = "train.h5";
  const std::string p = dir.Write("run.json", j.dump());
  TrainSpec s = LoadSpec(p);
  EXPECT_EQ(s.dataset, dir / "train.h5");
  EXPECT_EQ(s.origin, p);
  EXPECT_EQ(s.name, "run");
  EXPECT_EQ(s.json, j.dump());
}

TEST(SpecTest, LoadSpecInCurrentFolderKeepsRelativePath) {
  test::TempDir dir("dlh-spec-test");
  dir.Write("here.json", MinimalSpec().dump());
  fs::path old = fs::current_path();
  fs::current_path(dir.path());
  TrainSpec s = LoadSpec("here.json");
  fs::current_path(old);
  EXPECT_EQ(s.dataset, "data.h5");
  EXPECT_EQ(s.origin, "here.json");
}

// ---------------------------------------------------------------- example specs

TEST(SpecTest, FashionMnistExample) {
  fs::path p = ExamplesDir() / "fashion-mnist.json";
  TrainSpec s = LoadSpec(p.string());
  EXPECT_EQ(s.classes, 10);
  EXPECT_EQ(s.input, (Shape3{1, 28, 28}));
  EXPECT_EQ(s.dataset, (p.parent_path() / "fashion-mnist.h5").string());
  std::vector<Shape3> shapes = LayerShapes(s);
  ASSERT_EQ(shapes.size(), s.layers.size() + 1);
  const std::vector<Shape3> want = {
      {1, 28, 28},                               // input
      {32, 28, 28}, {32, 28, 28}, {32, 28, 28},  // conv, batchnorm, relu
      {32, 14, 14},                              // maxpool
      {64, 14, 14}, {64, 14, 14}, {64, 14, 14},  // conv, batchnorm, relu
      {64, 7, 7},                                // maxpool
      {3136, 1, 1}, {3136, 1, 1},                // flatten, dropout
      {128, 1, 1},  {128, 1, 1},  {128, 1, 1},   // dense, relu, dropout
      {10, 1, 1}};                               // dense
  EXPECT_EQ(shapes, want);
}

TEST(SpecTest, SyntheticSmallExample) {
  TrainSpec s = LoadSpec((ExamplesDir() / "synthetic-small.json").string());
  EXPECT_EQ(s.classes, 4);
  EXPECT_EQ(s.batch_size, 24);
  EXPECT_EQ(s.epochs, 2);
  EXPECT_EQ(s.seed, 7u);
  std::vector<Shape3> shapes = LayerShapes(s);
  ASSERT_EQ(shapes.size(), 10u);
  EXPECT_EQ(shapes[1], (Shape3{4, 8, 8}));
  EXPECT_EQ(shapes[4], (Shape3{4, 4, 4}));
  EXPECT_EQ(shapes[5], (Shape3{64, 1, 1}));
  EXPECT_EQ(shapes.back(), (Shape3{4, 1, 1}));
}

TEST(SpecTest, LayerShapesStridePaddingAndFloor) {
  json j = MinimalSpec();  // 3x8x8
  j["input"]["height"] = 9;
  j["layers"] = json::parse(R"([
      {"type": "conv2d", "filters": 5, "kernel": 3, "stride": 2, "padding": 1},
      {"type": "maxpool2d", "kernel": 3, "stride": 2, "padding": 1},
      {"type": "flatten"},
      {"type": "dense", "units": 4}])");
  std::vector<Shape3> shapes = LayerShapes(Parse(j));
  EXPECT_EQ(shapes[1], (Shape3{5, 5, 4}));  // (9+2-3)/2+1 = 5, (8+2-3)/2+1 = 4
  EXPECT_EQ(shapes[2], (Shape3{5, 3, 2}));  // (5+2-3)/2+1 = 3, (4+2-3)/2+1 = 2
  EXPECT_EQ(shapes[3], (Shape3{30, 1, 1}));
}

TEST(SpecTest, LayerShapesChecksHandBuiltSpecs) {
  TrainSpec s = Parse(MinimalSpec());
  s.layers.back().units = 7;
  try {
    LayerShapes(s);
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(),
                 "spec.json: layers: the last layer must output 4 values (classes), it outputs 7");
  }
}

// ---------------------------------------------------------------- errors

TEST(SpecErrorTest, UnknownKey) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["layers"][1] = json::parse(R"({"type": "conv2d", "filter": 8, "kernel": 3})");
            })),
            "spec.json: layers[1]: unknown key \"filter\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["batchsize"] = 128; })),
            "spec.json: unknown key \"batchsize\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["input"]["depth"] = 1; })),
            "spec.json: input: unknown key \"depth\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["schedule"]["warmup"] = 1; })),
            "spec.json: schedule: unknown key \"warmup\"");
  // Keys of the other optimizer are unknown too.
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["optimizer"]["beta1"] = 0.9; })),
            "spec.json: optimizer: unknown key \"beta1\"");
  // ... and keys of other layer types.
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][2]["rate"] = 0.5; })),
            "spec.json: layers[2]: unknown key \"rate\"");
}

TEST(SpecErrorTest, WrongType) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["batch_size"] = "128"; })),
            "spec.json: batch_size: must be a positive integer, got \"128\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["classes"] = "10"; })),
            "spec.json: classes: must be an integer >= 2, got \"10\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["optimizer"]["nesterov"] = "yes"; })),
            "spec.json: optimizer.nesterov: must be true or false, got \"yes\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["optimizer"]["lr"] = "0.1"; })),
            "spec.json: optimizer.lr: must be a number, got \"0.1\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["dataset"] = 5; })),
            "spec.json: dataset: must be a string, got 5");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["name"] = json::array(); })),
            "spec.json: name: must be a string, got an empty array");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["input"] = 28; })),
            "spec.json: input: must be an object, got 28");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["optimizer"] = "sgd"; })),
            "spec.json: optimizer: must be an object, got \"sgd\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][3] = "relu"; })),
            "spec.json: layers[3]: must be an object, got \"relu\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"] = json::object(); })),
            "spec.json: layers: must be a non-empty array of layers, got an empty object");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"] = json::array(); })),
            "spec.json: layers: must be a non-empty array of layers, got an empty array");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["seed"] = -1; })),
            "spec.json: seed: must be a non-negative integer, got -1");
  EXPECT_EQ(ErrorOf(std::string("[1, 2]")),
            "spec.json: must be a JSON object, got an array of 2 items");
}

TEST(SpecErrorTest, FloatsAreNotIntegers) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][0]["kernel"] = 3.5; })),
            "spec.json: layers[0].kernel: must be a positive integer, got 3.5");
  // Strict: an integral float is not an integer either.
  std::string text = FullSpec().dump();
  const std::string from = "\"epochs\":8";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "\"epochs\":8.0");
  EXPECT_EQ(ErrorOf(text), "spec.json: epochs: must be a positive integer, got 8.0");
}

TEST(SpecErrorTest, IntegerOutOfRange) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][4]["kernel"] = -3; })),
            "spec.json: layers[4].kernel: must be a positive integer, got -3");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["batch_size"] = 0; })),
            "spec.json: batch_size: must be a positive integer, got 0");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["classes"] = 1; })),
            "spec.json: classes: must be an integer >= 2, got 1");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][0]["padding"] = -1; })),
            "spec.json: layers[0].padding: must be a non-negative integer, got -1");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["epochs"] = 3000000000u; })),
            "spec.json: epochs: must be at most 2147483647, got 3000000000");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["input"]["width"] = 0; })),
            "spec.json: input.width: must be a positive integer, got 0");
}

TEST(SpecErrorTest, MissingRequiredField) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j.erase("batch_size"); })),
            "spec.json: batch_size: required");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j.erase("dataset"); })), "spec.json: dataset: required");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j.erase("layers"); })), "spec.json: layers: required");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["input"].erase("channels"); })),
            "spec.json: input.channels: required");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][0].erase("type"); })),
            "spec.json: layers[0].type: required");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][0].erase("filters"); })),
            "spec.json: layers[0].filters: required");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][9].erase("rate"); })),
            "spec.json: layers[9].rate: required");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["optimizer"].erase("lr"); })),
            "spec.json: optimizer.lr: required");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["optimizer"].erase("type"); })),
            "spec.json: optimizer.type: required");
}

TEST(SpecErrorTest, BadChoices) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["optimizer"]["type"] = "rmsprop"; })),
            "spec.json: optimizer.type: must be one of \"sgd\", \"adam\", got \"rmsprop\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["schedule"]["decay"] = "linear"; })),
            "spec.json: schedule.decay: must be one of \"constant\", \"step\", \"cosine\", "
            "\"onecycle\", got \"linear\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][2]["type"] = "mish"; })),
            "spec.json: layers[2].type: must be one of \"conv2d\", \"maxpool2d\", \"dense\", "
            "\"relu\", \"flatten\", \"dropout\", \"batchnorm\", \"avgpool2d\", "
            "\"globalavgpool2d\", \"gelu\", \"silu\", \"residual\", got \"mish\"");
}

// The arithmetic: fp32 with TF32 convolutions unless said (PyTorch's defaults); written
// back by SpecToJson only when set, so older specs' texts (and hashes) stay as they were.
TEST(SpecErrorTest, Precision) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["precision"] = "fp16"; })),
            "spec.json: precision: must be one of \"fp32\", \"bf16\", got \"fp16\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["tf32"] = true; })),
            "spec.json: tf32: must be one of \"convolutions\", \"all\", \"none\", got true");
}

TEST(SpecErrorTest, OptimizerRanges) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["optimizer"]["momentum"] = 0; })),
            "spec.json: optimizer.nesterov: requires momentum > 0, got momentum 0");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["optimizer"].erase("momentum"); })),
            "spec.json: optimizer.nesterov: requires momentum > 0, got no momentum");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["optimizer"]["lr"] = 0; })),
            "spec.json: optimizer.lr: must be a positive number, got 0");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["optimizer"]["weight_decay"] = -0.1; })),
            "spec.json: optimizer.weight_decay: must be a non-negative number, got -0.1");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["optimizer"]["momentum"] = 1; })),
            "spec.json: optimizer.momentum: must be in [0, 1), got 1");
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["optimizer"] = {{"type", "adam"}, {"lr", 0.001}, {"beta2", 1.0}};
            })),
            "spec.json: optimizer.beta2: must be in [0, 1), got 1.0");
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["optimizer"] = {{"type", "adam"}, {"lr", 0.001}, {"epsilon", 0}};
            })),
            "spec.json: optimizer.epsilon: must be a positive number, got 0");
}

TEST(SpecErrorTest, LayerRanges) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][9]["rate"] = 1; })),
            "spec.json: layers[9].rate: must be in [0, 1), got 1");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][9]["rate"] = -0.5; })),
            "spec.json: layers[9].rate: must be in [0, 1), got -0.5");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][3]["padding"] = 2; })),
            "spec.json: layers[3].padding: must be at most kernel/2 (1), got 2");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][0]["padding"] = 3; })),
            "spec.json: layers[0].padding: must be less than kernel (3), got 3");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][1]["momentum"] = 0; })),
            "spec.json: layers[1].momentum: must be in (0, 1], got 0");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][1]["epsilon"] = -1e-5; })),
            "spec.json: layers[1].epsilon: must be a positive number, got -1e-05");
}

TEST(SpecErrorTest, ScheduleRanges) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["schedule"] = {{"decay", "step"}};
            })),
            "spec.json: schedule.step_epochs: required for \"step\" decay");
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["schedule"] = {{"decay", "step"}, {"step_epochs", 0}};
            })),
            "spec.json: schedule.step_epochs: must be a positive number, got 0");
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["schedule"] = {{"decay", "step"}, {"step_epochs", 2}, {"gamma", 1.5}};
            })),
            "spec.json: schedule.gamma: must be in (0, 1], got 1.5");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["schedule"]["min_lr"] = 0.05; })),
            "spec.json: schedule.min_lr: must be less than optimizer.lr (0.05), got 0.05");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["schedule"]["warmup_epochs"] = -1; })),
            "spec.json: schedule.warmup_epochs: must be a non-negative number, got -1");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["schedule"]["warmup_epochs"] = 9; })),
            "spec.json: schedule.warmup_epochs: must not exceed epochs (8), got 9");
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["schedule"]["gamma"] = 0.5; })),
            "spec.json: schedule.gamma: only used with \"decay\": \"step\", got decay \"cosine\"");
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["schedule"] = {{"min_lr", 0.001}};
            })),
            "spec.json: schedule.min_lr: only used with \"decay\": \"cosine\", got decay "
            "\"constant\"");
}

TEST(SpecErrorTest, KernelDoesNotFit) {
  json small = MinimalSpec();
  small["input"] = {{"channels", 1}, {"height", 4}, {"width", 4}};
  small["layers"] = json::parse(R"([
      {"type": "conv2d", "filters": 2, "kernel": 5},
      {"type": "flatten"}, {"type": "dense", "units": 4}])");
  EXPECT_EQ(ErrorOf(small),
            "spec.json: layers[0].kernel: 5 does not fit the 4x4 input (padding 0)");

  // After two poolings the 28x28 image is 7x7; a third conv with kernel 9 does not fit.
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["layers"].insert(j["layers"].begin() + 8,
                                 json{{"type", "conv2d"}, {"filters", 8}, {"kernel", 9}});
            })),
            "spec.json: layers[8].kernel: 9 does not fit the 7x7 input (padding 0)");
  // With padding it fits: 7 + 2*1 = 9.
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["layers"].insert(
                  j["layers"].begin() + 8,
                  json{{"type", "conv2d"}, {"filters", 8}, {"kernel", 9}, {"padding", 1}});
            })),
            "");
}

TEST(SpecErrorTest, LastLayer) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"][13]["units"] = 128; })),
            "spec.json: layers: the last layer must output 10 values (classes), it outputs 128");
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["layers"].push_back({{"type", "relu"}});
            })),
            "spec.json: layers: the last layer must be dense (softmax cross-entropy follows it), "
            "it is relu");
}

TEST(SpecErrorTest, SpatialLayerAfterFlatten) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["layers"].insert(j["layers"].begin() + 9,
                                 json{{"type", "conv2d"}, {"filters", 8}, {"kernel", 1}});
            })),
            "spec.json: layers[9]: conv2d needs a spatial input, but its input is flat (3136 "
            "values) after flatten at layers[8]");
  EXPECT_EQ(
      ErrorOf(Edited([](json& j) {
        j["layers"].insert(j["layers"].begin() + 11, json{{"type", "maxpool2d"}, {"kernel", 1}});
      })),
      "spec.json: layers[11]: maxpool2d needs a spatial input, but its input is flat (128 "
      "values) after dense at layers[10]");
}

TEST(SpecErrorTest, DenseNeedsFlatInput) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["layers"].erase(8); })),
            "spec.json: layers[9]: dense needs a flat input: add a flatten layer before it (its "
            "input is 64x7x7)");
  // A 1x1 image needs no flatten.
  json j = MinimalSpec();
  j["input"] = {{"channels", 3}, {"height", 1}, {"width", 1}};
  j["layers"] = json::array({json{{"type", "dense"}, {"units", 4}}});
  EXPECT_EQ(ErrorOf(j), "");
}

TEST(SpecErrorTest, InvalidJson) {
  EXPECT_EQ(ErrorOf(std::string("{\"name\": }")),
            "spec.json: not valid JSON: parse error at line 1, column 10: syntax error while "
            "parsing value - unexpected '}'; expected '[', '{', or a literal");
  std::string e = ErrorOf(std::string("{\n  \"classes\": 10,\n}"));
  EXPECT_EQ(e.rfind("spec.json: not valid JSON: parse error at line 3, column 1:", 0), 0u) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  e = ErrorOf(std::string(""));
  EXPECT_EQ(e.rfind("spec.json: not valid JSON: ", 0), 0u) << e;
  EXPECT_EQ(ErrorOf(std::string(R"({"epochs": 1e999})")),
            "spec.json: not valid JSON: number overflow parsing '1e999'");
  // Invalid UTF-8 is quoted as '?', keeping the message printable.
  EXPECT_EQ(ErrorOf(std::string("{\"name\": \"\xff\"}")),
            "spec.json: not valid JSON: parse error at line 1, column 11: syntax error while "
            "parsing value - invalid string: ill-formed UTF-8 byte; last read: '\"?'");
}

TEST(SpecErrorTest, DuplicateKey) {
  std::string text = FullSpec().dump();
  const std::string from = "\"kernel\":2,";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "\"kernel\":2,\"kernel\":3,");
  EXPECT_EQ(ErrorOf(text), "spec.json: layers[3]: duplicate key \"kernel\"");
  EXPECT_EQ(ErrorOf(std::string(R"({"epochs": 1, "epochs": 2})")),
            "spec.json: duplicate key \"epochs\"");
}

TEST(SpecErrorTest, LongValuesAreShortened) {
  std::string e = ErrorOf(Edited([](json& j) { j["batch_size"] = std::string(500, 'x'); }));
  EXPECT_EQ(e.rfind("spec.json: batch_size: must be a positive integer, got \"xxx", 0), 0u) << e;
  EXPECT_EQ(e.substr(e.size() - 3), "...");
  EXPECT_LT(e.size(), 160u);
}

TEST(SpecErrorTest, ArraysAndObjectsAreShownByKindNotContent) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["dataset"] = std::vector<int>(100, 7); })),
            "spec.json: dataset: must be a string, got an array of 100 items");
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["dataset"] = json{{"secret", 1}};
            })),
            "spec.json: dataset: must be a string, got an object of 1 key");
}

TEST(SpecErrorTest, DeepNestingIsRefusedWhileParsing) {
  // 100,000 levels crashed every tool through recursive printing; 64 levels are the limit.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(ErrorOf(deep),
            "spec.json: not valid JSON: arrays and objects nested deeper than 64 levels");
  const std::string at_limit = std::string(64, '[') + std::string(64, ']');
  EXPECT_EQ(ErrorOf(at_limit), "spec.json: must be a JSON object, got an array of 1 item");
}

// Seen under tests/fuzz/spec_fuzz (UBSan): three dimensions near INT_MAX overflowed even
// the int64 product of Shape3::elements() (undefined behaviour), and a conv2d output height
// above INT_MAX became negative in an int and passed the size check.
TEST(SpecErrorTest, HugeShapesAreRefusedWithoutOverflow) {
  const std::string big = std::to_string(INT_MAX);
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["input"] = {{"channels", INT_MAX}, {"height", INT_MAX}, {"width", INT_MAX}};
              j["layers"] = json::parse(R"([{"type": "flatten"}, {"type": "dense", "units": 10}])");
            })),
            "spec.json: input: " + big + "x" + big + "x" + big +
                " is too large: more than 2147483647 values per sample");
  EXPECT_EQ(ErrorOf(Edited([](json& j) {
              j["input"] = {{"channels", 1}, {"height", INT_MAX}, {"width", 1}};
              j["layers"] = json::parse(R"([{"type": "conv2d", "filters": 1, "kernel": 3,
                  "padding": 2}, {"type": "flatten"}, {"type": "dense", "units": 10}])");
            })),
            "spec.json: layers[0]: output 1x2147483649x3 is too large: more than 2147483647 "
            "values per sample");
}

TEST(SpecErrorTest, OriginNamesTheSource) {
  EXPECT_EQ(ErrorOf(Edited([](json& j) { j["batch_size"] = 0; }).dump(), "runs/a.json"),
            "runs/a.json: batch_size: must be a positive integer, got 0");
}

TEST(SpecErrorTest, UnreadableFile) {
  test::TempDir dir("dlh-spec-test");
  const std::string missing = dir / "missing.json";
  try {
    LoadSpec(missing);
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_EQ(std::string(e.what()), missing + ": cannot read: No such file or directory");
  }
  try {
    LoadSpec(dir.path());
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_EQ(std::string(e.what()), dir.path() + ": cannot read: Is a directory");
  }
  // A FIFO with no writer would block the reader forever (inside sbatch, or a daemon): it is
  // refused at once, before any read. /dev/null: a device, not a spec either.
  const std::string fifo = dir / "fifo.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/null")}) {
    try {
      LoadSpec(path);
      FAIL() << "no error for " << path;
    } catch (const SpecError& e) {
      EXPECT_EQ(std::string(e.what()), path + ": cannot read: not a regular file");
    }
  }
  // A bad file names itself in every message.
  const std::string bad = dir.Write("bad.json", "{\"epochs\": 0}");
  try {
    LoadSpec(bad);
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_EQ(std::string(e.what()), bad + ": input: required");
  }
}

// ---------------------------------------------------------------- learning rate

TrainSpec LrSpec(const char* schedule) {
  json j = MinimalSpec();
  j["optimizer"] = {{"type", "sgd"}, {"lr", 0.1}};
  j["epochs"] = 10;
  j["schedule"] = json::parse(schedule);
  return Parse(j);
}

TEST(LearningRateTest, ConstantWithoutWarmup) {
  TrainSpec s = LrSpec("{}");
  EXPECT_DOUBLE_EQ(LearningRate(s, 0, 10), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(s, 57, 10), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(s, 1000, 10), 0.1);
}

TEST(LearningRateTest, Warmup) {
  // 10 steps per epoch, 1 warm-up epoch: steps 0..9 ramp 0.01, 0.02, ..., 0.1.
  TrainSpec s = LrSpec(R"({"warmup_epochs": 1})");
  EXPECT_DOUBLE_EQ(LearningRate(s, 0, 10), 0.01);
  EXPECT_DOUBLE_EQ(LearningRate(s, 4, 10), 0.05);
  EXPECT_DOUBLE_EQ(LearningRate(s, 9, 10), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(s, 10, 10), 0.1);
  // Fractional: round(0.25 * 10) = 3 warm-up steps.
  s = LrSpec(R"({"warmup_epochs": 0.25})");
  EXPECT_DOUBLE_EQ(LearningRate(s, 0, 10), 0.1 / 3);
  EXPECT_DOUBLE_EQ(LearningRate(s, 1, 10), 0.2 / 3);
  EXPECT_DOUBLE_EQ(LearningRate(s, 2, 10), 0.1);
  // Less than half a step of warm-up rounds to none.
  s = LrSpec(R"({"warmup_epochs": 0.04})");
  EXPECT_DOUBLE_EQ(LearningRate(s, 0, 10), 0.1);
}

TEST(LearningRateTest, StepDecay) {
  // Period 3 epochs * 10 steps = 30 steps, counted from step 0 (warm-up included).
  TrainSpec s = LrSpec(R"({"warmup_epochs": 1, "decay": "step", "step_epochs": 3, "gamma": 0.5})");
  EXPECT_DOUBLE_EQ(LearningRate(s, 0, 10), 0.01);  // warm-up
  EXPECT_DOUBLE_EQ(LearningRate(s, 10, 10), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(s, 29, 10), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(s, 30, 10), 0.05);
  EXPECT_DOUBLE_EQ(LearningRate(s, 65, 10), 0.025);
  EXPECT_DOUBLE_EQ(LearningRate(s, 95, 10), 0.0125);
  // Fractional period: 1.5 epochs * 4 steps = 6 steps; default gamma 0.1.
  s = LrSpec(R"({"decay": "step", "step_epochs": 1.5})");
  EXPECT_DOUBLE_EQ(LearningRate(s, 5, 4), 0.1);
  EXPECT_NEAR(LearningRate(s, 6, 4), 0.01, 1e-15);
  EXPECT_NEAR(LearningRate(s, 12, 4), 0.001, 1e-15);
}

TEST(LearningRateTest, Cosine) {
  // total 100 steps, warm-up 10, T = 90, from 0.1 down to 0.01.
  TrainSpec s = LrSpec(R"({"warmup_epochs": 1, "decay": "cosine", "min_lr": 0.01})");
  EXPECT_DOUBLE_EQ(LearningRate(s, 4, 10), 0.05);       // warm-up
  EXPECT_DOUBLE_EQ(LearningRate(s, 10, 10), 0.1);       // t = 0
  EXPECT_NEAR(LearningRate(s, 40, 10), 0.0775, 1e-15);  // t = 30: cos(pi/3) = 0.5
  EXPECT_NEAR(LearningRate(s, 55, 10), 0.055, 1e-15);   // t = 45: cos(pi/2) = 0
  EXPECT_NEAR(LearningRate(s, 99, 10), 0.01 + 0.09 * 0.5 * (1 + std::cos(M_PI * 89 / 90)),
              1e-15);                                // last step
  EXPECT_DOUBLE_EQ(LearningRate(s, 100, 10), 0.01);  // t = T
  EXPECT_DOUBLE_EQ(LearningRate(s, 500, 10), 0.01);  // clamped
  // No warm-up, min_lr 0: halfway is lr/2.
  s = LrSpec(R"({"decay": "cosine"})");
  EXPECT_DOUBLE_EQ(LearningRate(s, 0, 10), 0.1);
  EXPECT_NEAR(LearningRate(s, 50, 10), 0.05, 1e-15);
  EXPECT_NEAR(LearningRate(s, 100, 10), 0.0, 1e-15);
}

TEST(LearningRateTest, WarmupAsLongAsTraining) {
  // warmup == total: T = max(1, 0) = 1, no division by zero.
  TrainSpec s = LrSpec(R"({"warmup_epochs": 10, "decay": "cosine"})");
  EXPECT_DOUBLE_EQ(LearningRate(s, 0, 10), 0.001);
  EXPECT_DOUBLE_EQ(LearningRate(s, 99, 10), 0.1);     // last step: end of warm-up
  EXPECT_DOUBLE_EQ(LearningRate(s, 100, 10), 0.1);    // t = 0
  EXPECT_NEAR(LearningRate(s, 101, 10), 0.0, 1e-15);  // t = T = 1
}

// ---------------------------------------------------------------- modern layers

// A small ResNet: stem, a basic block with the identity, a block with a projection, pooling.
json ResidualSpec() {
  return json::parse(R"({
    "input": {"channels": 3, "height": 16, "width": 16},
    "classes": 5,
    "label_smoothing": 0.1,
    "layers": [
      {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
      {"type": "residual", "layers": [
        {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
        {"type": "batchnorm"}, {"type": "gelu"},
        {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1}]},
      {"type": "silu"},
      {"type": "residual", "layers": [
        {"type": "conv2d", "filters": 16, "kernel": 3, "stride": 2, "padding": 1}],
       "shortcut": [{"type": "avgpool2d", "kernel": 2},
                    {"type": "conv2d", "filters": 16, "kernel": 1}]},
      {"type": "avgpool2d", "kernel": 3, "stride": 1, "padding": 1},
      {"type": "globalavgpool2d"},
      {"type": "dense", "units": 5}
    ],
    "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},
    "batch_size": 16,
    "epochs": 2,
    "dataset": "data.h5"
  })");
}

TEST(SpecModernLayers, ResidualBlocksPoolsAndActivationsParse) {
  const TrainSpec s = Parse(ResidualSpec());
  EXPECT_DOUBLE_EQ(s.label_smoothing, 0.1);
  ASSERT_EQ(s.layers.size(), 7u);
  EXPECT_EQ(s.layers[1].kind, LayerKind::Residual);
  EXPECT_EQ(s.layers[1].layers.size(), 4u);
  EXPECT_TRUE(s.layers[1].shortcut.empty());
  EXPECT_EQ(s.layers[3].shortcut.size(), 2u);
  EXPECT_EQ(s.layers[3].shortcut[0].stride, 2);  // a pool's stride defaults to its kernel
  const std::vector<Shape3> shapes = LayerShapes(s);
  EXPECT_EQ(shapes[2], (Shape3{8, 16, 16}));
  EXPECT_EQ(shapes[4], (Shape3{16, 8, 8}));
  EXPECT_EQ(shapes[5], (Shape3{16, 8, 8}));
  EXPECT_EQ(shapes[6], (Shape3{16, 1, 1}));
  EXPECT_EQ(shapes[7], (Shape3{5, 1, 1}));
  // Written back and read again, it is the same spec (nested paths included).
  const TrainSpec back = ParseSpec(SpecToJson(s, "").dump(), "back.json", "");
  EXPECT_EQ(SpecToJson(back, "").dump(), SpecToJson(s, "").dump());
  EXPECT_DOUBLE_EQ(back.label_smoothing, 0.1);
}

// The residual spec changed by `edit`.
json EditedResidual(const std::function<void(json&)>& edit) {
  json j = ResidualSpec();
  edit(j);
  return j;
}

TEST(SpecModernLayers, BadResidualBlocksNameTheField) {
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) { j["layers"][3].erase("shortcut"); })),
            "spec.json: layers[3]: the main path (\"layers\") outputs 16x8x8 but the identity "
            "shortcut passes the input, 8x16x16; add a \"shortcut\" that projects it (a conv2d "
            "with kernel 1)");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) { j["layers"][3]["shortcut"][1]["filters"] = 12; })),
            "spec.json: layers[3]: the main path (\"layers\") outputs 16x8x8 but the shortcut "
            "outputs 12x8x8");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) { j["layers"][1]["layers"] = json::array(); })),
            "spec.json: layers[1].layers: must be a non-empty array of layers, got an empty array");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) { j["layers"][1].erase("layers"); })),
            "spec.json: layers[1].layers: required");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) { j["layers"][1]["main"] = 1; })),
            "spec.json: layers[1]: unknown key \"main\"");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) { j["layers"][1]["layers"][2]["rate"] = 1; })),
            "spec.json: layers[1].layers[2]: unknown key \"rate\"");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) { j["layers"][3]["shortcut"][0]["kernel"] = 40; })),
            "spec.json: layers[3].shortcut[0].kernel: 40 does not fit the 16x16 input (padding 0)");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) { j["layers"][4]["padding"] = 2; })),
            "spec.json: layers[4].padding: must be at most kernel/2 (1), got 2");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) { j["label_smoothing"] = 1; })),
            "spec.json: label_smoothing: must be in [0, 1), got 1");
  // A flat input has no planes to pool.
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) {
              j["layers"][5] = {{"type", "flatten"}};
              j["layers"][6] = {{"type", "globalavgpool2d"}};
              j["layers"].push_back({{"type", "dense"}, {"units", 5}});
            })),
            "spec.json: layers[6]: globalavgpool2d needs a spatial input, but its input is flat "
            "(1024 values) after flatten at layers[5]");
  // Blocks nest, but not without end (the parser recurses).
  json deep = {{"type", "relu"}};
  for (int i = 0; i < kMaxResidualDepth + 1; ++i)
    deep = {{"type", "residual"}, {"layers", json::array({deep})}};
  const std::string error = ErrorOf(EditedResidual([&](json& j) { j["layers"][2] = deep; }));
  EXPECT_NE(error.find("residual blocks nest at most 4 deep"), std::string::npos) << error;
  json ok = {{"type", "relu"}};
  for (int i = 0; i < kMaxResidualDepth; ++i)
    ok = {{"type", "residual"}, {"layers", json::array({ok})}};
  EXPECT_EQ(ErrorOf(EditedResidual([&](json& j) { j["layers"][2] = ok; })), "");
}

TEST(SpecModernLayers, ShippedResNetsParse) {
  for (const char* name : {"resnet18-cifar.json", "resnet50-imagenet.json"}) {
    const TrainSpec s = LoadSpec((ExamplesDir() / name).string());
    EXPECT_EQ(LayerShapes(s).back(), (Shape3{s.classes, 1, 1})) << name;
  }
}

TEST(SpecModernLayers, AugmentationParsesAndNamesItsFields) {
  const TrainSpec s = Parse(EditedResidual([](json& j) {
    j["augment"] = {{"crop_padding", 2}, {"flip", true}};
  }));
  EXPECT_EQ(s.augment.crop_padding, 2);
  EXPECT_TRUE(s.augment.flip);
  const TrainSpec back = ParseSpec(SpecToJson(s, "").dump(), "back.json", "");
  EXPECT_EQ(back.augment.crop_padding, 2);
  EXPECT_TRUE(back.augment.flip);
  EXPECT_FALSE(Parse(ResidualSpec()).augment.any());
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) {
              j["augment"] = {{"crop_padding", 16}};
            })),
            "spec.json: augment.crop_padding: must be less than the input's height and width "
            "(16x16), got 16");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) {
              j["augment"] = {{"crop_padding", -1}};
            })),
            "spec.json: augment.crop_padding: must be a non-negative integer, got -1");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) {
              j["augment"] = {{"rotate", 10}};
            })),
            "spec.json: augment: unknown key \"rotate\"");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) {
              j["augment"] = {{"flip", 1}};
            })),
            "spec.json: augment.flip: must be true or false, got 1");
}

// PyTorch's OneCycleLR(max_lr=0.1, total_steps=20, pct_start=0.25, div_factor=10,
// final_div_factor=100): up over steps 0..4, down over 4..19.
TEST(SpecModernLayers, OneCycleFollowsPyTorch) {
  const TrainSpec s = Parse(EditedResidual([](json& j) {
    j["epochs"] = 2;
    j["schedule"] = {
        {"decay", "onecycle"}, {"pct_start", 0.25}, {"div_factor", 10}, {"final_div_factor", 100}};
  }));
  EXPECT_EQ(s.schedule.decay, ScheduleSpec::Decay::OneCycle);
  const double lr = 0.1, lo = 0.01, end = 1e-4;
  auto anneal = [](double a, double b, double x) {
    return b + (a - b) * 0.5 * (1 + std::cos(M_PI * x));
  };
  for (int step = 0; step < 20; ++step) {
    const double want = step <= 4 ? anneal(lo, lr, step / 4.0) : anneal(lr, end, (step - 4) / 15.0);
    EXPECT_NEAR(LearningRate(s, step, 10), want, 1e-15) << "step " << step;
  }
  EXPECT_DOUBLE_EQ(LearningRate(s, 0, 10), lo);
  EXPECT_DOUBLE_EQ(LearningRate(s, 4, 10), lr);
  EXPECT_NEAR(LearningRate(s, 19, 10), end, 1e-18);
  EXPECT_NEAR(LearningRate(s, 25, 10), end, 1e-18);  // held after the last step
  const TrainSpec back = ParseSpec(SpecToJson(s, "").dump(), "back.json", "");
  EXPECT_EQ(SpecToJson(back, "").dump(), SpecToJson(s, "").dump());

  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) {
              j["schedule"] = {{"decay", "onecycle"}, {"warmup_epochs", 1}};
            })),
            "spec.json: schedule.warmup_epochs: not used with \"decay\": \"onecycle\", which "
            "warms up itself (pct_start)");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) {
              j["schedule"] = {{"decay", "onecycle"}, {"pct_start", 1}};
            })),
            "spec.json: schedule.pct_start: must be in (0, 1), got 1");
  EXPECT_EQ(ErrorOf(EditedResidual([](json& j) {
              j["schedule"] = {{"decay", "cosine"}, {"div_factor", 10}};
            })),
            "spec.json: schedule.div_factor: only used with \"decay\": \"onecycle\", got decay "
            "\"cosine\"");
}

}  // namespace
}  // namespace dlh
