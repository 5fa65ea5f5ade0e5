// Tests of GPU calibration's pure parts: the GPU sweep and validation models, the CPU sweep
// left as it was, specs written back as JSON, the files of `dlh-launch time-steps` and the
// device lines of a GPU calibration. (The end-to-end path: tests/scripts/calibrate_cuda.sh.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/spec.hpp"
#include "common/spec_json.hpp"
#include "common/time_steps_file.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/calibrate/calibrate_launch.hpp"
#include "estimator/model/features.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

using test::TempDir;

// FNV-1a: the same value on every platform, unlike std::hash.
uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t SweepHash(const std::vector<SweepEntry>& sweep) {
  std::string all;
  for (const SweepEntry& e : sweep)
    all += SpecToJson(e.spec, "").dump() + " " + std::to_string(e.batch) + "\n";
  return Fnv1a(all);
}

int MaxSide(const SweepEntry& e) { return std::max(e.spec.input.height, e.spec.input.width); }

std::string WriteText(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// The message of what `f` throws as E ("" when it throws nothing).
template <typename E, typename F>
std::string MessageOf(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

TEST(CalibrateCpuSweep, IsUnchangedByTheGpuSweep) {
  // share/calibration/cpu.json was measured on exactly these models: a change of the CPU
  // sweep (the GPU sweep shares its code) would make it describe another sweep. The quick
  // sweep gained a 4-conv model with the per-layer terms (9 terms need 18 samples) and four
  // with the per-sample convolution terms (11 need 22), the full one residual models (issue
  // 43: 4, its random part 4 fewer), and then four deep MLPs (2026-12-05) after its first 76,
  // which stay those of the calibrations made before (share/calibration's among them).
  EXPECT_EQ(CalibrationSweep(true).size(), 22u);
  const std::vector<SweepEntry> full = CalibrationSweep(false);
  ASSERT_EQ(full.size(), 80u);
  EXPECT_EQ(SweepHash(CalibrationSweep(true)), 0x30fe8af37a6579afull);
  EXPECT_EQ(SweepHash({full.begin(), full.begin() + 76}), 0x2dbb03d7ac4446f7ull);
  EXPECT_EQ(SweepHash(full), 0x56f0fe243c4cbea2ull);
}

TEST(CalibrateGpuSweep, HasGpuSizesAndDistinctValidModels) {
  for (bool quick : {true, false}) {
    const std::vector<SweepEntry> sweep = GpuCalibrationSweep(quick);
    EXPECT_EQ(sweep.size(), quick ? 19u : 96u);
    std::set<std::string> names;
    int widest = 0, largest_input = 0, largest_dense = 0;
    std::set<int> channels;
    for (const SweepEntry& e : sweep) {
      SCOPED_TRACE(e.spec.name);
      EXPECT_TRUE(names.insert(e.spec.name).second) << "duplicate";
      EXPECT_GE(e.batch, 64);
      EXPECT_LE(e.batch, 1024);
      EXPECT_EQ(e.batch, e.spec.batch_size);
      EXPECT_NO_THROW(ComputeFeatures(e.spec));
      channels.insert(e.spec.input.channels);
      largest_input = std::max(largest_input, MaxSide(e));
      for (const LayerSpec& l : e.spec.layers) {
        if (l.kind == LayerKind::Conv2d) widest = std::max(widest, l.filters);
        if (l.kind == LayerKind::Dense) largest_dense = std::max(largest_dense, l.units);
      }
    }
    EXPECT_EQ(channels, (std::set<int>{1, 3}));
    EXPECT_GE(largest_input, 224);
    if (!quick) {
      EXPECT_EQ(widest, 512);
      EXPECT_EQ(largest_dense, 4096);
    }
  }
}

TEST(CalibrateGpuSweep, IsDeterministicAndApartFromTheCpuSweep) {
  EXPECT_EQ(SweepHash(GpuCalibrationSweep(false)), SweepHash(GpuCalibrationSweep(false)));
  std::set<std::string> cpu;
  for (const SweepEntry& e : CalibrationSweep(false)) cpu.insert(e.spec.name);
  for (const SweepEntry& e : GpuCalibrationSweep(false)) EXPECT_EQ(cpu.count(e.spec.name), 0u);
}

TEST(CalibrateGpuSweep, ValidationModelsAreOutsideTheSweep) {
  const std::vector<SweepEntry> models = GpuValidationModels();
  ASSERT_GT(models.size(), ValidationModels().size());
  std::set<std::string> sweep;
  for (const SweepEntry& e : GpuCalibrationSweep(false)) sweep.insert(e.spec.name);
  bool large = false, small = false;
  for (const SweepEntry& e : models) {
    EXPECT_EQ(sweep.count(e.spec.name), 0u) << e.spec.name;
    EXPECT_NO_THROW(ComputeFeatures(e.spec));
    large = large || MaxSide(e) == 224;
    small = small || (MaxSide(e) == 32 && e.batch >= 256);
  }
  EXPECT_TRUE(large);
  EXPECT_TRUE(small);
}

TEST(CalibrateSpecJson, RoundTripsEverySweepAndValidationModel) {
  std::vector<SweepEntry> all = CalibrationSweep(false);
  for (auto more : {GpuCalibrationSweep(false), GpuValidationModels()})
    all.insert(all.end(), more.begin(), more.end());
  for (const SweepEntry& e : all) {
    const std::string text = SpecToJson(e.spec, "none").dump();
    const TrainSpec back = ParseSpec(text, "x", "");
    EXPECT_EQ(SpecToJson(back, "none").dump(), text) << e.spec.name;
  }
}

TEST(CalibrateSpecJson, RoundTripsOptimizerScheduleAndInits) {
  const std::string text = R"({"name": "m", "input": {"channels": 3, "height": 8, "width": 8},
    "classes": 4, "init": "he_normal",
    "layers": [{"type": "conv2d", "filters": 2, "kernel": 3, "bias_init": "torch_default"},
               {"type": "batchnorm", "momentum": 0.2, "epsilon": 0.001},
               {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"},
               {"type": "dropout", "rate": 0.3}, {"type": "dense", "units": 4,
                "init": "glorot_uniform"}],
    "optimizer": {"type": "adam", "lr": 0.003, "beta1": 0.8, "weight_decay": 0.01},
    "schedule": {"warmup_epochs": 0.5, "decay": "cosine", "min_lr": 0.0001},
    "batch_size": 12, "epochs": 3, "seed": 18446744073709551615, "dataset": "d.h5",
    "precision": "bf16", "tf32": "all"})";
  const TrainSpec a = ParseSpec(text, "a", "");
  const TrainSpec b = ParseSpec(SpecToJson(a, "unused").dump(), "b", "");
  EXPECT_EQ(SpecToJson(a, "").dump(), SpecToJson(b, "").dump());
  EXPECT_EQ(b.seed, 18446744073709551615ull);
  EXPECT_EQ(b.dataset, "d.h5");
  EXPECT_EQ(b.schedule.decay, ScheduleSpec::Decay::Cosine);
  EXPECT_EQ(b.layers[0].init, WeightInit::HeNormal);
  EXPECT_EQ(b.layers[5].init, WeightInit::GlorotUniform);
  EXPECT_EQ(b.precision, Precision::Bf16);
  EXPECT_EQ(b.tf32, Tf32Use::All);
  // The defaults are not written (the sweep's spec texts predate the fields).
  const nlohmann::ordered_json plain = SpecToJson(ParseSpec(R"({"name": "p",
    "input": {"channels": 1, "height": 4, "width": 4}, "classes": 2,
    "layers": [{"type": "flatten"}, {"type": "dense", "units": 2}],
    "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 2, "epochs": 1, "dataset": "d.h5",
    "precision": "fp32", "tf32": "convolutions"})",
                                                            "p", ""),
                                                  "");
  EXPECT_FALSE(plain.contains("precision"));
  EXPECT_FALSE(plain.contains("tf32"));
}

TEST(CalibrateTimeStepsFile, RequestRoundTrips) {
  TempDir dir("dlh-calib-gpu");
  std::vector<TimeStepsEntry> entries;
  for (const SweepEntry& e : GpuCalibrationSweep(true)) entries.push_back({e.spec, e.batch});
  const std::string path = WriteText(dir, "request.json", TimeStepsRequestText(entries));
  const std::vector<TimeStepsEntry> back = ReadTimeStepsRequest(path);
  ASSERT_EQ(back.size(), entries.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].batch, entries[i].batch);
    TrainSpec spec = back[i].spec;
    EXPECT_FALSE(spec.dataset.empty());  // a placeholder: ParseSpec requires one
    spec.dataset.clear();
    EXPECT_EQ(SpecToJson(spec, "").dump(), SpecToJson(entries[i].spec, "").dump());
  }
}

TEST(CalibrateTimeStepsFile, BadRequestNamesFileAndField) {
  TempDir dir("dlh-calib-gpu");
  std::vector<TimeStepsEntry> entries{{CalibrationSweep(true)[0].spec, 32}};
  std::string good = TimeStepsRequestText(entries);
  auto message = [&](const std::string& text) {
    const std::string path = WriteText(dir, "req.json", text);
    return MessageOf<SpecError>([&] { ReadTimeStepsRequest(path); });
  };
  const std::string where = dir.path() + "/req.json: ";
  EXPECT_EQ(message("[]"), where + "must be a JSON object, got an empty array");
  EXPECT_EQ(message(R"({"format": "x", "version": 1})"),
            where + "format: must be \"dlh-time-steps-request\", got \"x\"");
  std::string bad = good;
  bad.replace(bad.find("\"batch\": 32"), 11, "\"batch\": -1");
  EXPECT_EQ(message(bad), where + "entries[0].batch: must be an integer in [0, 2^30], got -1");
  bad = good;
  bad.replace(bad.find("\"kernel\": 3"), 11, "\"kernel\": 0");
  EXPECT_EQ(message(bad).rfind(where + "entries[0].spec: layers[0].kernel: ", 0), 0u)
      << message(bad);
  EXPECT_NE(MessageOf<SpecError>([&] {
              ReadTimeStepsRequest(dir.path() + "/none.json");
            }).find("none.json: cannot read"),
            std::string::npos);
}

TEST(CalibrateTimeStepsFile, ResultRoundTripsWithFailuresAndEnergy) {
  TempDir dir("dlh-calib-gpu");
  TimeStepsResult r;
  r.device = {{"kind", "cuda"}, {"name", "NVIDIA H100"}};
  r.options = {{"repeats", 5}};
  r.complete = true;
  r.samples.push_back({"a", 64, 0.0125, 3.5, "", {}});
  r.samples.push_back({"b", 1024, -1, -1, "out of memory", {}});
  const std::string path = WriteText(dir, "result.json", TimeStepsResultText(r));
  const TimeStepsResult back = ReadTimeStepsResult(path);
  EXPECT_TRUE(back.complete);
  EXPECT_EQ(back.device, r.device);
  ASSERT_EQ(back.samples.size(), 2u);
  EXPECT_EQ(back.samples[0].seconds, 0.0125);
  EXPECT_EQ(back.samples[0].joules, 3.5);
  EXPECT_EQ(back.samples[0].error, "");
  EXPECT_EQ(back.samples[1].seconds, -1);
  EXPECT_EQ(back.samples[1].joules, -1);
  EXPECT_EQ(back.samples[1].error, "out of memory");
}

TEST(CalibrateTimeStepsFile, BadResultNamesFileAndField) {
  TempDir dir("dlh-calib-gpu");
  TimeStepsResult r;
  r.samples.push_back({"a", 64, 0.01, -1, "", {}});
  const std::string good = TimeStepsResultText(r);
  auto message = [&](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    const std::string path = WriteText(dir, "res.json", text);
    return MessageOf<EstimateError>([&] { ReadTimeStepsResult(path); });
  };
  const std::string where = dir.path() + "/res.json: ";
  EXPECT_EQ(message(good, "\"seconds\": 0.01", "\"seconds\": -2"),
            where + "samples[0].seconds: must be a positive number or null, got -2");
  EXPECT_EQ(message(good, "\"seconds\": 0.01", "\"seconds\": null"),
            where + "samples[0].seconds: null without an \"error\" saying why");
  EXPECT_EQ(message(good, "\"batch\": 64", "\"batch\": \"64\""),
            where + "samples[0].batch: must be a positive integer, got \"64\"");
  EXPECT_EQ(message(good, "\"model\": \"a\",", ""), where + "samples[0].model: required");
  EXPECT_EQ(message(good, "\"version\": 1", "\"version\": 2"), where + "version: must be 1, got 2");
}

// A profiled sample's passes (time-steps --profile) survive the file, and a damaged one is
// refused naming the pass and the field.
TEST(CalibrateTimeStepsFile, LayerPassesRoundTripAndAreChecked) {
  TempDir dir("dlh-calib-gpu");
  TimeStepsResult r;
  TimeStepsSample s{"a", 64, 0.002, -1, "", {}};
  s.layers.push_back(
      {0, "conv2d", "forward", 1.5e-4, 2e-5, "IMPLICIT_PRECOMP_GEMM", "tensor_op", 4096});
  s.layers.push_back({0, "conv2d", "backward-weights", 2.5e-4, 3e-5, "ALGO_1", "fma", 0});
  s.layers.push_back({1, "relu", "forward", 1e-5, 4e-6, "", "", 0});
  s.layers.push_back({-1, "loss", "loss", 8e-6, 1e-5, "", "", 0});
  r.samples.push_back(s);
  s.layers_held = false;  // the same passes, timed without the stream held
  r.samples.push_back(s);
  r.samples.push_back({"b", 64, 0.001, -1, "", {}});  // not profiled: no "layers"
  const std::string good = TimeStepsResultText(r);
  EXPECT_EQ(nlohmann::json::parse(good)["samples"][2].count("layers"), 0u);
  EXPECT_EQ(nlohmann::json::parse(good)["samples"][0].count("layers_held"), 0u);
  EXPECT_EQ(nlohmann::json::parse(good)["samples"][1]["layers_held"], false);
  const TimeStepsResult back = ReadTimeStepsResult(WriteText(dir, "result.json", good));
  ASSERT_EQ(back.samples[0].layers.size(), 4u);
  EXPECT_TRUE(back.samples[0].layers_held);
  EXPECT_FALSE(back.samples[1].layers_held);
  EXPECT_TRUE(back.samples[2].layers.empty());
  const LayerPassTime& conv = back.samples[0].layers[0];
  EXPECT_EQ(conv.layer, 0);
  EXPECT_EQ(conv.pass, "forward");
  EXPECT_EQ(conv.algorithm, "IMPLICIT_PRECOMP_GEMM");
  EXPECT_EQ(conv.math, "tensor_op");
  EXPECT_EQ(conv.workspace_bytes, 4096);
  EXPECT_DOUBLE_EQ(conv.device_s, 1.5e-4);
  EXPECT_DOUBLE_EQ(conv.host_s, 2e-5);
  EXPECT_EQ(back.samples[0].layers[2].algorithm, "");  // null: the engine's own kernel
  EXPECT_EQ(back.samples[0].layers[3].layer, -1);

  auto message = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    const std::string path = WriteText(dir, "res.json", text);
    return MessageOf<EstimateError>([&] { ReadTimeStepsResult(path); });
  };
  const std::string where = dir.path() + "/res.json: samples[0].layers";
  EXPECT_EQ(message("\"pass\": \"forward\"", "\"pass\": \"sideways\""),
            where +
                "[0].pass: must be forward, backward, backward-weights, backward-data, loss "
                "or update, got \"sideways\"");
  EXPECT_EQ(message("\"device_s\": 0.00015", "\"device_s\": -1"),
            where + "[0].device_s: must be a number of seconds, 0 or more, got -1");
  EXPECT_EQ(message("\"layer\": -1", "\"layer\": 3"),
            where + "[3].layer: must be -1 for the loss and the update only, got 3 for loss");
  EXPECT_EQ(message("\"workspace_bytes\": 4096", "\"workspace_bytes\": 1.5"),
            where + "[0].workspace_bytes: must be a whole number of bytes, 0 or more, got 1.5");
  EXPECT_EQ(message("\"kind\": \"relu\",", ""), where + "[2].kind: required");
}

TEST(CalibrateGpuDescription, MakesOneLineForTheCalibration) {
  const nlohmann::json d = {{"kind", "cuda"},
                            {"index", 1},
                            {"name", "NVIDIA H100 80GB HBM3"},
                            {"compute_capability", "9.0"},
                            {"multiprocessors", 132},
                            {"memory_bytes", 85899345920ull},
                            {"max_sm_clock_mhz", 1980},
                            {"driver_cuda", "13.0"},
                            {"cuda_runtime", "13.0"},
                            {"cudnn", "9.10.2"},
                            {"cublas", "13.0.0"},
                            {"nccl", "2.28.9"}};
  EXPECT_EQ(GpuHostLine(d),
            "NVIDIA H100 80GB HBM3 (GPU 1, sm_90, 132 SMs, 80.0 GiB, 1980 MHz), driver CUDA "
            "13.0, runtime 13.0");
  EXPECT_EQ(GpuLibrariesLine(d), "cuDNN 9.10.2, cuBLAS 13.0.0, NCCL 2.28.9");
}

TEST(CalibrateGpuDescription, RoundTripsInTheCalibrationFile) {
  Calibration c;
  c.device = "cuda";
  c.host = "NVIDIA H100 80GB HBM3 (GPU 0)";
  c.created = "2026-11-26T11:00:00Z";
  c.model.coef.assign(size_t(kTimeTerms), 0.0);
  c.device_info = {{"kind", "cuda"}, {"name", "NVIDIA H100 80GB HBM3"}, {"cudnn", "9.10.2"}};
  nlohmann::json j = CalibrationToJson(c);
  EXPECT_EQ(CalibrationFromJson(j, "c.json").device_info, c.device_info);
  j.erase("device_info");  // CPU calibrations and older files have none
  EXPECT_TRUE(CalibrationFromJson(j, "c.json").device_info.is_null());
  j["device_info"] = 3;
  EXPECT_EQ(MessageOf<EstimateError>([&] { CalibrationFromJson(j, "c.json"); }),
            "c.json: device_info: must be an object, got 3");
}

}  // namespace
}  // namespace dlh
