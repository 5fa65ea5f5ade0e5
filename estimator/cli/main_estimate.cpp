// DLH — dlh-estimate: the estimator's command line.
//   dlh-estimate features SPEC            what a model costs per sample
//   dlh-estimate calibrate --device cpu   run the benchmark sweep, fit, write a calibration
//                          --device cuda[:N]  the GPU sweep, timed by `dlh-launch time-steps`
//   dlh-estimate fit CALIBRATION          refit a calibration file and report its quality
//   dlh-estimate validate --calibration F predicted vs measured on models outside the sweep
//   dlh-estimate rates [--threads N]      sgemm FLOP/s and memory-copy bandwidth here
//   dlh-estimate predict SPEC --calibration F [--batch B]
//   dlh-estimate comm BENCH.json          fit the allreduce alpha-beta models to measurements
//   dlh-estimate recommend SPEC --samples N --deadline 3h [...]
//   dlh-estimate recommend --profile FILE --deadline 3h [...]
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/spec.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/calibrate/calibrate_launch.hpp"
#include "estimator/calibrate/calibrate_profile.hpp"
#include "estimator/calibrate/calibrate_rates.hpp"
#include "estimator/cli/calibrate_slurm_cmd.hpp"
#include "estimator/cli/cluster_cmd.hpp"
#include "estimator/cli/slurm_plan_cmd.hpp"
#include "estimator/model/comm_fit.hpp"
#include "estimator/model/comm_model.hpp"
#include "estimator/model/engine_fingerprint.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/time_model.hpp"
#include "estimator/model/wave_scaling.hpp"
#include "estimator/recommend/profile_speeds.hpp"
#include "estimator/recommend/recommend_html.hpp"
#include "estimator/recommend/recommender.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

constexpr const char* kUsage =
    "usage: dlh-estimate COMMAND [options]\n"
    "  features SPEC [--batch B]                   FLOPs, parameters, memory of a model\n"
    "  calibrate --device cpu|cuda[:N] [--out F]   benchmark sweep + fit -> calibration file\n"
    "  calibrate --slurm [--cluster FILE]          calibrate every GPU type in Slurm jobs\n"
    "  fit CALIBRATION [--folds K]                 refit a calibration, report R2 and MAPE\n"
    "  validate --calibration FILE [--device D]    predicted vs measured, models not in the sweep\n"
    "  predict SPEC --calibration FILE [--batch B] predicted seconds per step\n"
    "  check-calibration CALIBRATION               does it describe this machine and build?\n"
    "  rates [--threads N]                         this machine's sgemm FLOP/s and copy GB/s\n"
    "  profile SPEC [--threads N]                  where a CPU step goes, layer by layer\n"
    "  comm BENCH.json [--json]                    fit the allreduce models to measurements\n"
    "  recommend SPEC --samples N --deadline T     choose the allocation for a deadline\n"
    "  recommend --profile FILE --deadline T       the same for a program profiled by dlh-launch\n"
    "  cluster --from-slurm [--out FILE]           draft a cluster description from sinfo\n"
    "  slurm-plan --dlh-auto VALUE --options JSON  plan an sbatch job "
    "(share/slurm/cli_filter.lua)\n"
    "'dlh-estimate COMMAND --help' documents each command's options.\n";

// Parses `args` against `desc` (+ positional names, each required); prints help and returns
// false on --help.
bool Parse(const std::string& command, const std::vector<std::string>& args,
           const po::options_description& desc, const std::vector<std::string>& positional,
           po::variables_map& vm) {
  SubcommandSyntax syntax;
  for (const auto& name : positional) syntax.positional.push_back({name, "missing " + name});
  syntax.prefix = command + ": ";
  syntax.suffix = " (see dlh-estimate " + command + " --help)";
  if (ParseSubcommand(args, desc, syntax, &vm) == ParseResult::kStop) {
    std::cout << desc << "\n";
    return false;
  }
  return true;
}

std::string Str(const po::variables_map& vm, const char* name) {
  return vm[name].as<std::string>();
}

void WriteJson(const nlohmann::json& j) { std::cout << j.dump(2) << "\n"; }

// Engineering notation: 1.23 G, 456 M.
std::string Si(double v) {
  const char* units[] = {"", "k", "M", "G", "T", "P"};
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 5) v /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s", v, units[u]);
  return buf;
}

std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

// ---------------------------------------------------------------- features
int Features(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate features SPEC: options");
  int64_t batch = 0;
  d.add_options()("help,h", "show this help")("batch", po::value(&batch)->default_value(0),
                                              "local batch for the memory line (0: spec)")(
      "json", "print JSON");
  po::variables_map vm;
  if (!Parse("features", args, d, {"SPEC"}, vm)) return kExitOk;
  TrainSpec spec = LoadSpec(Str(vm, "SPEC"));
  ModelFeatures f = ComputeFeatures(spec);
  if (batch <= 0) batch = spec.batch_size;
  int slots = spec.optimizer.kind == OptimizerSpec::Kind::Adam ? 2
              : spec.optimizer.momentum > 0                    ? 1
                                                               : 0;
  double memory = TrainingMemoryBytes(f, batch, slots);
  if (vm.count("json")) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : f.layers)
      layers.push_back({{"kind", LayerKindName(l.kind)},
                        {"flops_fwd", l.flops_fwd},
                        {"flops_bwd", l.flops_bwd},
                        {"params", l.params},
                        {"out_elements", l.out_elements}});
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
               {"memory_bytes", memory}});
    return kExitOk;
  }
  std::printf("%s: %s\n", spec.origin.c_str(), spec.name.c_str());
  std::printf("  %-3s %-10s %-12s %12s %12s %10s %10s\n", "#", "layer", "output", "FLOP fwd",
              "FLOP bwd", "params", "outputs");
  for (size_t i = 0; i < f.layers.size(); ++i) {
    const auto& l = f.layers[i];
    char shape[48];
    std::snprintf(shape, sizeof shape, "%dx%dx%d", l.out.channels, l.out.height, l.out.width);
    std::printf("  %-3zu %-10s %-12s %12s %12s %10.0f %10.0f\n", i, LayerKindName(l.kind), shape,
                Si(l.flops_fwd).c_str(), Si(l.flops_bwd).c_str(), l.params, l.out_elements);
  }
  std::printf("  per sample: %sFLOP forward, %sFLOP forward+backward (conv %s, dense %s)\n",
              Si(f.flops_fwd()).c_str(), Si(f.flops_train()).c_str(),
              Si(f.conv_flops_fwd + f.conv_flops_bwd).c_str(),
              Si(f.dense_flops_fwd + f.dense_flops_bwd).c_str());
  std::printf("  %.0f parameters (%sB), %.0f activations per sample\n", f.params,
              Si(f.param_bytes()).c_str(), f.activation_elements);
  std::printf("  training memory at batch %lld: %sB per rank\n", (long long)batch,
              Si(memory).c_str());
  return kExitOk;
}

// ---------------------------------------------------------------- calibrate
class ProgressBar {
 public:
  explicit ProgressBar(size_t total) : total_(total), tty_(isatty(STDERR_FILENO)) {
    start_ = std::chrono::steady_clock::now();
  }
  void update(size_t done, const std::string& what) {
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    double eta = done ? elapsed / double(done) * double(total_ - done) : 0;
    const int width = 24;
    int filled = int(width * double(done) / double(total_));
    std::string bar(size_t(filled), '#');
    bar.resize(width, '.');
    if (tty_)
      std::fprintf(stderr, "\r[%s] %zu/%zu %-36.36s ETA %s\x1b[K", bar.c_str(), done, total_,
                   what.c_str(), HumanDuration(eta).c_str());
    else
      std::fprintf(stderr, "[%zu/%zu] %s (ETA %s)\n", done, total_, what.c_str(),
                   HumanDuration(eta).c_str());
    if (tty_ && done == total_) std::fprintf(stderr, "\n");
  }

 private:
  size_t total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void PrintQuality(const TimeModel& m) {
  std::printf("fit (%s): %d samples, R2 %.4f, MAPE %.1f%%, %d-fold cross-validated MAPE %.1f%%\n",
              m.device.c_str(), m.quality.samples, m.quality.r2, m.quality.mape, m.quality.folds,
              m.quality.cv_mape);
  for (int i = 0; i < kTimeTerms; ++i)
    std::printf("  %-24s %.4g\n", TimeTermNames()[size_t(i)].c_str(), m.coef[size_t(i)]);
}

// --device of calibrate and validate: cpu (timed in this process, or through dlh-launch with
// --via-launch), cuda or cuda:N (always through dlh-launch time-steps, which has the GPU
// engine: dlh-estimate links no CUDA).
struct TimingDevice {
  std::string text;  // as given: cpu, cuda, cuda:1
  std::string kind;  // cpu or cuda
  bool launch = false;
};

TimingDevice DeviceFrom(const po::variables_map& vm) {
  TimingDevice d;
  d.text = Str(vm, "device");
  const std::string cuda = "cuda";
  const bool index = d.text.rfind(cuda + ":", 0) == 0 && d.text.size() > cuda.size() + 1 &&
                     d.text.size() <= cuda.size() + 4 &&
                     d.text.find_first_not_of("0123456789", cuda.size() + 1) == std::string::npos;
  if (d.text == "cpu")
    d.kind = "cpu";
  else if (d.text == cuda || index)
    d.kind = cuda;
  else
    throw UsageError("--device: must be cpu, cuda or cuda:N, got '" + d.text + "'");
  d.launch = d.kind == cuda || vm.count("via-launch") > 0;
  return d;
}

// Times `entries` on the device: in this process for the CPU, else through dlh-launch (whose
// failed entries, too large for the GPU, are left out with a warning each). `description`
// receives the child's device object (null in process).
std::vector<TimingSample> TimeEntries(const TimingDevice& device,
                                      const std::vector<SweepEntry>& entries,
                                      const TimingOptions& timing, ProgressBar* bar,
                                      nlohmann::json* description, std::vector<size_t>* entry_of) {
  if (!device.launch) {
    entry_of->clear();
    for (size_t i = 0; i < entries.size(); ++i) entry_of->push_back(i);
    return RunSweep(entries, timing, [&](size_t done, size_t, const TimingSample& s) {
      bar->update(done, s.model);
    });
  }
  LaunchedTiming t = TimeThroughLaunch(
      entries, device.text, timing, [&](size_t done, size_t total, const std::string& line) {
        if (done == 0)  // the device is there: only now is there something to announce
          std::fprintf(stderr, "dlh-estimate: timing %zu configurations on %s\n", total,
                       line.c_str());
        else
          bar->update(done, line.substr(line.find(']') + 2));
      });
  for (const std::string& f : t.failures)
    std::fprintf(stderr, "dlh-estimate: warning: not timed: %s\n", f.c_str());
  *description = t.device;
  *entry_of = t.entry_of;
  return t.samples;
}

TimingOptions TimingFrom(const po::variables_map& vm) {
  TimingOptions t;
  t.threads = vm["threads"].as<int>();
  t.repeats = vm["repeats"].as<int>();
  if (t.threads < 0) throw UsageError("--threads: must not be negative");
  if (t.repeats < 1) throw UsageError("--repeats: must be at least 1");
  return t;
}

int Calibrate(const std::vector<std::string>& args) {
  if (std::find(args.begin(), args.end(), "--slurm") != args.end())
    return CalibrateSlurmCommand(args);
  po::options_description d("dlh-estimate calibrate: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("slurm", "instead: one job per GPU type of the Slurm cluster (calibrate --slurm --help)")
    ("device", po::value<std::string>()->default_value("cpu"),
        "device to calibrate: cpu (timed in this process), cuda or cuda:N (GPU N, timed by "
        "`dlh-launch time-steps`, found beside dlh-estimate or at $DLH_LAUNCH, on the GPU sweep)")
    ("via-launch", "cpu: time through dlh-launch time-steps like a GPU (tests the GPU path)")
    ("out", po::value<std::string>(), "calibration file to write (default: calibration-<cpu|cuda>.json)")
    ("quick", "small sweep (seconds; for tests), not for real use")
    ("threads", po::value<int>()->default_value(0), "OpenBLAS threads (0: OPENBLAS_NUM_THREADS or all cores)")
    ("repeats", po::value<int>()->default_value(5), "timed blocks per configuration; median")
    ("folds", po::value<int>()->default_value(5), "cross-validation folds");
  // clang-format on
  po::variables_map vm;
  if (!Parse("calibrate", args, d, {}, vm)) return kExitOk;
  const TimingDevice device = DeviceFrom(vm);
  const bool gpu = device.kind == "cuda";
  const std::string out = vm.count("out") ? Str(vm, "out") : "calibration-" + device.kind + ".json";
  TimingOptions timing = TimingFrom(vm);
  const bool quick = vm.count("quick") > 0;
  std::vector<SweepEntry> sweep = gpu ? GpuCalibrationSweep(quick) : CalibrationSweep(quick);
  if (!device.launch)  // through dlh-launch, TimeEntries says it once the device is known
    std::fprintf(stderr, "dlh-estimate: calibrating %s (%s) with %zu configurations\n",
                 device.text.c_str(), CpuDescription().c_str(), sweep.size());
  ProgressBar bar(sweep.size());
  Calibration c;
  c.device = device.kind;
  c.host = CpuDescription();
  c.threads = timing.threads;
  c.created = NowIso();
  c.engine = EngineFingerprint(device.kind);
  c.compiler = CompilerDescription();
  c.blas = BlasDescription();
  nlohmann::json description;
  std::vector<size_t> entry_of;
  c.samples = TimeEntries(device, sweep, timing, &bar, &description, &entry_of);
  if (gpu) {  // what the GPU calibration was measured on, and with which libraries
    c.host = GpuHostLine(description);
    c.threads = 0;
    c.blas = GpuLibrariesLine(description);
    c.device_info = description;
  }
  c.model = FitTimeModel(device.kind, c.samples, vm["folds"].as<int>());
  SaveCalibration(out, c);
  PrintQuality(c.model);
  std::printf("wrote %s\n", out.c_str());
  return kExitOk;
}

int Fit(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate fit CALIBRATION: options");
  d.add_options()("help,h", "show this help")("folds", po::value<int>()->default_value(5),
                                              "cross-validation folds")(
      "out", po::value<std::string>(), "write the refitted calibration here");
  po::variables_map vm;
  if (!Parse("fit", args, d, {"CALIBRATION"}, vm)) return kExitOk;
  Calibration c = LoadCalibration(Str(vm, "CALIBRATION"));
  c.model = FitTimeModel(c.device, c.samples, vm["folds"].as<int>());
  PrintQuality(c.model);
  if (vm.count("out")) SaveCalibration(Str(vm, "out"), c);
  return kExitOk;
}

// Whether a calibration describes this machine and this build: `make demo` uses the shipped
// one only then, and calibrates this machine otherwise.
int CheckCalibration(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate check-calibration CALIBRATION: options");
  d.add_options()("help,h", "show this help");
  po::variables_map vm;
  if (!Parse("check-calibration", args, d, {"CALIBRATION"}, vm)) return kExitOk;
  const std::string path = Str(vm, "CALIBRATION");
  const Calibration c = LoadCalibration(path);
  std::vector<std::string> why;
  if (const std::string stale = CalibrationStaleness(c); !stale.empty()) why.push_back(stale);
  if (c.device == "cpu" && c.host != CpuDescription())
    why.push_back("measured on " + c.host + ", this machine is " + CpuDescription());
  if (why.empty()) {
    std::printf("%s: matches this machine and build (engine %s, %s)\n", path.c_str(),
                c.engine.c_str(), c.host.c_str());
    return kExitOk;
  }
  std::string text;
  for (const std::string& w : why) text += (text.empty() ? "" : "; ") + w;
  std::printf("%s: does not match: %s\n", path.c_str(), text.c_str());
  return kExitFailure;
}

int Predict(const std::vector<std::string>& args) {
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
  if (batch <= 0) batch = spec.batch_size;
  double t = c.model.seconds(ComputeFeatures(spec), batch);
  std::printf("%s at batch %lld on %s: %.2f ms per step, %.0f samples/s\n", spec.name.c_str(),
              (long long)batch, c.device.c_str(), t * 1e3, double(batch) / t);
  return kExitOk;
}

// "TFLOPS,GBS" of --roofline as a GPU type with those peaks.
GpuType RooflineDevice(const std::string& text) {
  GpuType g;
  g.name = "roofline";
  char comma = 0;
  std::istringstream in(text);
  if (!(in >> g.peak_tflops >> comma >> g.memory_bandwidth_gbs) || comma != ',' || !in.eof() ||
      !(g.peak_tflops > 0) || !(g.memory_bandwidth_gbs > 0))
    throw UsageError("--roofline: expected TFLOPS,GBS (two positive numbers), got '" + text + "'");
  return g;
}

// The validation models' measurements from a file written by `validate --save`, with the
// features recomputed from the models (the file keeps only their totals; the roofline also
// needs the layers).
std::vector<TimingSample> LoadMeasured(const std::string& path) {
  std::vector<TimingSample> out = LoadCalibration(path).samples;
  const std::vector<SweepEntry> models = GpuValidationModels();  // ValidationModels() and more
  for (TimingSample& s : out) {
    auto m = std::find_if(models.begin(), models.end(),
                          [&](const SweepEntry& e) { return e.spec.name == s.model; });
    if (m == models.end())
      throw UsageError("--measured: " + path + ": '" + s.model +
                       "' is not a validation model (write the file with validate --save)");
    s.features = ComputeFeatures(m->spec);
  }
  if (out.empty()) throw UsageError("--measured: " + path + ": no samples");
  return out;
}

int Validate(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate validate: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("calibration", po::value<std::string>()->required(), "calibration file to validate")
    ("device", po::value<std::string>()->default_value("cpu"),
        "where to time the models: cpu (in this process), cuda or cuda:N (through `dlh-launch "
        "time-steps`; adds GPU-sized models: VGG at 224 and 32 px, a wide MLP)")
    ("via-launch", "cpu: time through dlh-launch time-steps like a GPU (tests the GPU path)")
    ("threads", po::value<int>()->default_value(0), "OpenBLAS threads (use the calibration's)")
    ("repeats", po::value<int>()->default_value(5), "timed blocks per model; median")
    ("rounds", po::value<int>()->default_value(1),
        "time every model once per round, rounds interleaved; each model's median over the "
        "rounds (a slow spell of a noisy machine then hits every model alike)")
    ("markdown", "print the table as Markdown (for BENCHMARKS.md)")
    ("save", po::value<std::string>(), "also write the measurements, in the calibration file format")
    ("measured", po::value<std::string>(), "time nothing: take the measurements from this file (written by --save)")
    ("scale-flops", po::value<double>()->default_value(1),
        "predict for a device with this times the calibrated one's FLOP/s (wave scaling, as "
        "recommend does for a GPU type without a calibration); the unscaled MAPE is reported too")
    ("scale-bandwidth", po::value<double>()->default_value(1),
        "the same for memory bandwidth")
    ("roofline", po::value<std::string>(),
        "TFLOPS,GBS: also report the roofline model's predictions for a device with these peaks");
  // clang-format on
  po::variables_map vm;
  if (!Parse("validate", args, d, {}, vm)) return kExitOk;
  Calibration c = LoadCalibration(Str(vm, "calibration"));
  const SpeedRatio ratio{vm["scale-flops"].as<double>(), vm["scale-bandwidth"].as<double>()};
  const bool scaled = ratio.flops != 1 || ratio.bandwidth != 1;
  if (!(ratio.flops > 0) || !(ratio.bandwidth > 0))
    throw UsageError("--scale-flops, --scale-bandwidth: must be positive");
  const TimeModel unscaled = c.model;
  c.model.coef = ScaleCoefficients(c.model.coef, ratio);
  const bool roofline = vm.count("roofline") > 0;
  const GpuType device = roofline ? RooflineDevice(Str(vm, "roofline")) : GpuType{};
  TimingOptions timing = TimingFrom(vm);
  if (timing.threads == 0) timing.threads = c.threads;
  const int rounds = vm["rounds"].as<int>();
  if (rounds < 1 || rounds > 1000) throw UsageError("--rounds: must be in [1, 1000]");
  std::vector<TimingSample> measured;
  std::vector<std::vector<double>> per_round;  // [model][round] seconds
  const TimingDevice timing_device = DeviceFrom(vm);
  if (vm.count("measured")) {
    measured = LoadMeasured(Str(vm, "measured"));
  } else if (timing_device.launch) {
    // Every round's models in one request, rounds one after another (interleaved as below).
    const std::vector<SweepEntry> models =
        timing_device.kind == "cuda" ? GpuValidationModels() : ValidationModels();
    std::vector<SweepEntry> request;
    for (int r = 0; r < rounds; ++r) request.insert(request.end(), models.begin(), models.end());
    ProgressBar bar(request.size());
    nlohmann::json description;
    std::vector<size_t> entry_of;
    const std::vector<TimingSample> all =
        TimeEntries(timing_device, request, timing, &bar, &description, &entry_of);
    // A model counts when every round timed it (the rounds' median needs them all).
    std::vector<std::vector<size_t>> of_model(models.size());
    for (size_t k = 0; k < all.size(); ++k) of_model[entry_of[k] % models.size()].push_back(k);
    for (size_t m = 0; m < models.size(); ++m) {
      if (of_model[m].size() != size_t(rounds)) continue;
      std::vector<double> seconds;
      for (size_t k : of_model[m]) seconds.push_back(all[k].seconds);
      per_round.push_back(seconds);
      std::sort(seconds.begin(), seconds.end());
      measured.push_back(all[of_model[m].front()]);
      measured.back().seconds = seconds[seconds.size() / 2];  // as below
    }
    if (measured.empty()) throw Error("validate: no model could be timed on " + timing_device.text);
  } else {
    std::vector<SweepEntry> models = ValidationModels();
    ProgressBar bar(models.size() * size_t(rounds));
    for (int r = 0; r < rounds; ++r) {
      std::vector<TimingSample> round =
          RunSweep(models, timing, [&](size_t done, size_t, const TimingSample& s) {
            bar.update(size_t(r) * models.size() + done, s.model);
          });
      per_round.resize(round.size());
      for (size_t i = 0; i < round.size(); ++i) per_round[i].push_back(round[i].seconds);
      if (r == 0) measured = round;
    }
    for (size_t i = 0; i < measured.size(); ++i) {
      std::vector<double> v = per_round[i];
      std::sort(v.begin(), v.end());
      measured[i].seconds = v[v.size() / 2];  // median (the upper one for an even count)
    }
  }
  if (vm.count("save")) {
    Calibration saved = c;
    saved.model = unscaled;
    saved.samples = measured;
    saved.created = NowIso();
    SaveCalibration(Str(vm, "save"), saved);
  }
  const bool md = vm.count("markdown") > 0;
  std::string head = md ? "| model | batch | predicted ms | measured ms | error |"
                        : Printf("%-28s %6s %13s %13s %8s", "model (not in the sweep)", "batch",
                                 "predicted ms", "measured ms", "error");
  if (scaled) head += md ? " unscaled ms | error |" : Printf(" %13s %8s", "unscaled ms", "error");
  if (roofline) head += md ? " roofline ms | error |" : Printf(" %13s %8s", "roofline ms", "error");
  std::printf("%s\n", head.c_str());
  if (md)
    std::printf("|---|---|---|---|---|%s%s\n", scaled ? "---|---|" : "",
                roofline ? "---|---|" : "");
  double sum = 0, sum_unscaled = 0, sum_roofline = 0;
  auto error = [](double p, double m) { return 100.0 * (p - m) / m; };
  for (const auto& m : measured) {
    const double p = c.model.seconds(m.features, m.batch);
    sum += std::fabs(error(p, m.seconds));
    std::string row =
        md ? Printf("| %s | %lld | %.2f | %.2f | %+.1f%% |", m.model.c_str(), (long long)m.batch,
                    p * 1e3, m.seconds * 1e3, error(p, m.seconds))
           : Printf("%-28s %6lld %13.2f %13.2f %+7.1f%%", m.model.c_str(), (long long)m.batch,
                    p * 1e3, m.seconds * 1e3, error(p, m.seconds));
    auto column = [&](double q, double* total) {
      *total += std::fabs(error(q, m.seconds));
      row += md ? Printf(" %.2f | %+.1f%% |", q * 1e3, error(q, m.seconds))
                : Printf(" %13.2f %+7.1f%%", q * 1e3, error(q, m.seconds));
    };
    if (scaled) column(unscaled.seconds(m.features, m.batch), &sum_unscaled);
    if (roofline)
      column(RooflineSpeed(m.features, double(m.features.layers.size()), device)
                 .seconds(double(m.batch)),
             &sum_roofline);
    std::printf("%s\n", row.c_str());
  }
  const double n = double(measured.size());
  std::printf("%sMAPE over %zu models: %.1f%% (calibration %s%s: cross-validated MAPE %.1f%%)\n",
              md ? "\n" : "", measured.size(), sum / n, Str(vm, "calibration").c_str(),
              scaled ? (", scaled " + RatioText(ratio)).c_str() : "", c.model.quality.cv_mape);
  if (rounds > 1 && !per_round.empty()) {
    // Each round's own MAPE: how much the answer moves with the machine's noise.
    std::vector<double> mapes;
    for (int r = 0; r < rounds; ++r) {
      double total = 0;
      for (size_t i = 0; i < measured.size(); ++i)
        total += std::fabs(error(c.model.seconds(measured[i].features, measured[i].batch),
                                 per_round[i][size_t(r)]));
      mapes.push_back(total / n);
    }
    std::sort(mapes.begin(), mapes.end());
    std::printf("MAPE of single rounds (%d): min %.1f%%, median %.1f%%, max %.1f%%\n", rounds,
                mapes.front(), mapes[mapes.size() / 2], mapes.back());
  }
  if (scaled)
    std::printf("unscaled MAPE over %zu models: %.1f%%\n", measured.size(), sum_unscaled / n);
  if (roofline)
    std::printf("roofline MAPE over %zu models: %.1f%% (%g TFLOP/s, %g GB/s)\n", measured.size(),
                sum_roofline / n, device.peak_tflops, device.memory_bandwidth_gbs);
  return kExitOk;
}

// ---------------------------------------------------------------- comm
// The link as a cluster description writes it ("regimes" or the single pair), its keys in
// the README's order.
nlohmann::ordered_json LinkJson(const Link& link) {
  if (link.regimes.empty())
    return {{"bandwidth_gbs", link.bandwidth_gbs}, {"latency_us", link.latency_us}};
  nlohmann::ordered_json regimes = nlohmann::ordered_json::array();
  for (const LinkRegime& r : link.regimes) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    if (r.up_to_bytes > 0) j["up_to_bytes"] = uint64_t(r.up_to_bytes);  // whole bytes
    j["latency_us"] = r.latency_us;
    j["bandwidth_gbs"] = r.bandwidth_gbs;
    regimes.push_back(j);
  }
  return {{"regimes", regimes}};
}

// The (bytes, seconds) points of one method in a `dlh-launch bench-allreduce --json` file.
std::vector<AllreducePoint> ReadAllreduceBench(const std::string& path, const std::string& method,
                                               int* ranks) {
  std::ifstream in(path);
  if (!in) throw EstimateError(path + ": cannot read: " + std::strerror(errno));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw EstimateError(path + ": not valid JSON: " + e.what());
  }
  std::vector<AllreducePoint> points;
  try {
    *ranks = j.at("ranks").get<int>();
    for (const auto& s : j.at("sizes"))
      points.push_back({s.at("bytes").get<double>(), s.at(method + "_s").get<double>()});
  } catch (const nlohmann::json::exception& e) {
    throw EstimateError(path + ": not a dlh-launch bench-allreduce result: " + e.what());
  }
  return points;
}

// Both fits of one measurement, as `comm` reports them.
struct CommReport {
  std::string path, method;
  int ranks = 0;
  std::vector<AllreducePoint> points;
  PiecewiseOptions options;
  AlphaBeta single;
  PiecewiseFit fit;
  Link link;            // the piecewise model as printed to paste (rounded)
  AlphaBeta piecewise;  // that link as the estimator reads it: what the errors score
};

void PrintCommJson(const CommReport& r) {
  nlohmann::ordered_json sizes = nlohmann::ordered_json::array(),
                         tried = nlohmann::ordered_json::array();
  for (const auto& p : r.points)
    sizes.push_back({{"bytes", p.bytes},
                     {"measured_s", p.seconds},
                     {"single_s", RingAllreduceSeconds(p.bytes, r.ranks, r.single)},
                     {"piecewise_s", RingAllreduceSeconds(p.bytes, r.ranks, r.piecewise)}});
  for (size_t k = 0; k < r.fit.best_mape.size(); ++k)
    if (r.fit.best_mape[k] >= 0)
      tried.push_back({{"regimes", k + 1}, {"mape", r.fit.best_mape[k]}});
  const nlohmann::ordered_json out = {
      {"file", r.path},
      {"method", r.method},
      {"ranks", r.ranks},
      {"single", LinkJson(LinkFromModel(r.single))},
      {"link", LinkJson(r.link)},
      {"mape_single", AllreduceMapePct(r.points, r.ranks, r.single)},
      {"mape_piecewise", AllreduceMapePct(r.points, r.ranks, r.piecewise)},
      {"penalty_pct", r.options.penalty_pct},
      {"tried", tried},
      {"sizes", sizes}};
  std::cout << out.dump(2) << "\n";
}

void PrintCommText(const CommReport& r) {
  std::printf("ring allreduce model fitted to %s (%s, %d ranks, %zu sizes)\n", r.path.c_str(),
              r.method.c_str(), r.ranks, r.points.size());
  std::printf("single pair: alpha %.2f us, beta %.3f ns/B (%.2f GB/s)\n", r.single.alpha_s * 1e6,
              r.single.beta_s_per_byte * 1e9, 1e-9 / r.single.beta_s_per_byte);
  std::printf("piecewise: best MAPE by number of regimes:");
  for (size_t k = 0; k < r.fit.best_mape.size(); ++k)
    if (r.fit.best_mape[k] >= 0) std::printf(" %zu: %.1f%%", k + 1, r.fit.best_mape[k]);
  std::printf("; chose %zu (an extra regime must gain > %g points)\n",
              std::max<size_t>(1, r.link.regimes.size()), r.options.penalty_pct);
  for (const LinkRegime& g : r.link.regimes) {
    if (g.up_to_bytes > 0)
      std::printf("  messages <= %-12.0f", g.up_to_bytes);
    else
      std::printf("  larger messages         ");
    std::printf(" alpha %.3g us, %.4g GB/s\n", g.latency_us, g.bandwidth_gbs);
  }
  std::printf("%12s %12s %12s %8s %12s %8s\n", "bytes", "measured us", "single us", "error",
              "piecewise us", "error");
  for (const auto& p : r.points) {
    const double s = RingAllreduceSeconds(p.bytes, r.ranks, r.single);
    const double m = RingAllreduceSeconds(p.bytes, r.ranks, r.piecewise);
    std::printf("%12.0f %12.1f %12.1f %+7.1f%% %12.1f %+7.1f%%\n", p.bytes, p.seconds * 1e6,
                s * 1e6, 100 * (s - p.seconds) / p.seconds, m * 1e6,
                100 * (m - p.seconds) / p.seconds);
  }
  std::printf("MAPE single %.1f%%, piecewise %.1f%%\n",
              AllreduceMapePct(r.points, r.ranks, r.single),
              AllreduceMapePct(r.points, r.ranks, r.piecewise));
  std::printf(
      "link for the cluster description (intra_node or inter_node; up_to_bytes counts the bytes "
      "of one ring message, allreduce bytes / ranks):\n%s\n",
      LinkJson(r.link).dump().c_str());
}

int Comm(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate comm BENCH.json: options");
  d.add_options()("help,h", "show this help")(
      "method", po::value<std::string>()->default_value("mpi"),
      "which measurement to fit: mpi (MPI_Allreduce) or dlh (DLH's fused path)")(
      "json", "print JSON (both fits, the errors by size and the link)");
  po::variables_map vm;
  if (!Parse("comm", args, d, {"BENCH.json"}, vm)) return kExitOk;
  CommReport r;
  r.path = Str(vm, "BENCH.json");
  r.method = Str(vm, "method");
  if (r.method != "mpi" && r.method != "dlh")
    throw UsageError("--method: must be mpi or dlh, got '" + r.method + "'");
  r.points = ReadAllreduceBench(r.path, r.method, &r.ranks);
  r.single = FitAlphaBeta(r.points, r.ranks);
  r.fit = FitPiecewiseAlphaBeta(r.points, r.ranks, r.options);
  r.link = LinkFromModel(r.fit.model);
  r.piecewise = AlphaBeta::from_link(r.link);
  if (vm.count("json"))
    PrintCommJson(r);
  else
    PrintCommText(r);
  return kExitOk;
}

// ---------------------------------------------------------------- recommend
std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// An output file's folder must exist: checked before any work, so a typo costs nothing.
void CheckOutputFolder(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw UsageError(option + ": empty file name");
  if (fs::is_directory(path, ec)) throw UsageError(option + ": " + path + " is a folder");
  const fs::path folder = fs::path(path).parent_path();
  if (!folder.empty() && !fs::is_directory(folder, ec))
    throw UsageError(option + ": folder " + folder.string() + " does not exist");
}

int Recommend(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate recommend SPEC | --profile FILE: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("profile", po::value<std::string>(), "plan a program from its profile (dlh-launch run --profile) instead of SPEC")
    ("samples", po::value<int64_t>(), "training samples per epoch (default with --profile: the profile's)")
    ("eval-samples", po::value<int64_t>()->default_value(-1),
        "test samples evaluated after every epoch (-1: samples / 6; 0: none)")
    ("startup", po::value<double>()->default_value(-1),
        "seconds from job start to first step (-1: the cluster's runtime.startup_s)")
    ("epochs", po::value<int>()->default_value(0), "epochs (0: the spec's or the profile's)")
    ("stage", "the job stages its data set onto its nodes first (dlh-data stage): count the copy "
        "(runtime.stage_gbs) and read the copy at runtime.local_read_gbs")
    ("deadline", po::value<std::string>(), "wall-time deadline: 3h, 90m, 2h30m, 1-00:00:00 (none: no deadline)")
    ("objective", po::value<std::string>()->default_value("energy"), "energy, time or gpu-hours")
    ("cluster", po::value<std::string>(), "cluster description (default: $DLH_CLUSTER)")
    ("max-gpus", po::value<int>()->default_value(0), "at most this many GPUs (0: no limit)")
    ("types", po::value<std::string>(), "allowed GPU types, comma-separated (default: all)")
    ("mixed", "allow mixing two GPU types in one job (batches balanced by speed; one GPU count per node, as the plugin submits it)")
    ("per-gpu-batch", po::value<int64_t>()->default_value(0),
        "weak scaling: this batch per GPU, global batch and lr grow with the GPUs (0: keep the spec's global batch)")
    ("margin", po::value<double>()->default_value(0.10), "safety margin on predicted time")
    ("top", po::value<int>()->default_value(5), "rows in the table")
    ("json", "print the plan as JSON only")
    ("html", po::value<std::string>(), "also write the decision as one HTML page: the chosen allocation, the candidates' time and energy, each GPU type's step-time line");
  // clang-format on
  po::variables_map vm;
  SubcommandSyntax syntax;
  syntax.positional = {{"SPEC", ""}};  // or --profile: checked below
  syntax.prefix = "recommend: ";
  syntax.suffix = " (see dlh-estimate recommend --help)";
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  const bool profiled = vm.count("profile") > 0;
  if (profiled == (vm.count("SPEC") > 0))
    throw UsageError(std::string("recommend: give SPEC or --profile FILE") +
                     (profiled ? ", not both" : "") + syntax.suffix);
  const std::string html = vm.count("html") ? Str(vm, "html") : "";
  if (vm.count("html")) CheckOutputFolder(html, "--html");
  Job job;
  if (profiled) {
    job = JobFromProfile(LoadProgramProfile(Str(vm, "profile")));
  } else {
    job.spec = LoadSpec(Str(vm, "SPEC"));
    job.features = ComputeFeatures(job.spec);
    job.epochs = job.spec.epochs;
  }
  // What the program did not tell its profile (progress lines, README "The progress
  // channel") must come from the command line.
  const std::string unknown =
      profiled ? " (the profile " + Str(vm, "profile") + " does not say: the program writes '" : "";
  if (vm.count("samples")) {
    job.samples = vm["samples"].as<int64_t>();
    if (job.samples <= 0) throw UsageError("--samples: must be positive");
  } else if (!profiled || job.samples <= 0) {
    throw UsageError("--samples: required" +
                     (profiled ? unknown + "samples N' to DLH_PROGRESS_FD)" : std::string()));
  }
  if (vm["epochs"].as<int>() < 0) throw UsageError("--epochs: must be positive");
  if (vm["epochs"].as<int>() > 0) job.epochs = vm["epochs"].as<int>();
  if (job.epochs <= 0 && profiled)
    throw UsageError("--epochs: required" + unknown + "epochs N' to DLH_PROGRESS_FD)");
  job.deadline_s = vm.count("deadline") ? ParseDuration(Str(vm, "deadline"), "--deadline") : 0;
  job.eval_samples = vm["eval-samples"].as<int64_t>();
  job.stage = vm.count("stage") > 0;
  if (job.eval_samples < -1) throw UsageError("--eval-samples: must be -1, 0 or positive");
  job.startup_s = vm["startup"].as<double>();
  if (!(job.startup_s >= -1 && job.startup_s <= 86400))
    throw UsageError("--startup: must be seconds in [0, 86400] (or -1)");
  job.objective = ParseObjective(Str(vm, "objective"));
  job.max_gpus = vm["max-gpus"].as<int>();
  if (job.max_gpus < 0) throw UsageError("--max-gpus: must not be negative");
  if (vm.count("types")) job.allowed_types = SplitList(Str(vm, "types"));
  job.allow_mixed = vm.count("mixed") > 0;
  // As the plugin submits a mix: one job, one GPU count per node (README "Mixed GPU types").
  job.mixed_same_gpus_per_node = true;
  job.per_gpu_batch = vm["per-gpu-batch"].as<int64_t>();
  if (job.per_gpu_batch < 0) throw UsageError("--per-gpu-batch: must not be negative");
  job.margin = vm["margin"].as<double>();
  if (!(job.margin >= 0 && job.margin < 10)) throw UsageError("--margin: must be in [0, 10)");
  std::string cluster_path;
  if (vm.count("cluster"))
    cluster_path = Str(vm, "cluster");
  else if (const char* env = std::getenv("DLH_CLUSTER"))
    cluster_path = env;
  else
    throw UsageError("recommend: no cluster description: pass --cluster FILE or set DLH_CLUSTER");
  Cluster cluster = LoadCluster(cluster_path);
  for (const auto& t : job.allowed_types)
    if (!cluster.gpu(t))
      throw UsageError("--types: " + cluster_path + " has no GPU type '" + t + "'");

  if (!html.empty()) KeepCandidatesForPage(&job);

  auto t0 = std::chrono::steady_clock::now();
  Recommendation rec = dlh::Recommend(job, cluster);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Allocation& chosen = rec.feasible ? rec.ranked.front() : rec.fastest;
  nlohmann::json plan = PlanJson(job, rec, chosen);
  // A profile's speeds use no calibration file (profile_speeds.hpp).
  if (!html.empty())
    WriteFileAtomically(html, RecommendationHtml(job, cluster, rec,
                                                 profiled ? std::map<std::string, PageCalibration>()
                                                          : LoadSpeedCalibrations(cluster, rec)));
  std::vector<std::string> warnings = StaleCalibrationWarnings(rec.speeds);
  if (job.profile)
    for (const std::string& w : ProfileWarnings(*job.profile)) warnings.push_back(w);
  if (vm.count("json")) {
    for (const std::string& w : warnings)
      std::fprintf(stderr, "dlh-estimate: warning: %s\n", w.c_str());
    WriteJson(plan);
    return rec.feasible ? kExitOk : kExitInfeasible;
  }
  const std::string title = job.profile && !job.profile->program.empty()
                                ? job.spec.origin + " (profile of " + job.profile->program + ")"
                                : job.spec.origin;
  std::printf("%s: %lld samples x %d epochs, global batch %d, deadline %s, objective %s\n",
              title.c_str(), (long long)job.samples, job.epochs, job.spec.batch_size,
              job.deadline_s > 0 ? HumanDuration(job.deadline_s).c_str() : "none",
              ObjectiveName(job.objective));
  for (const auto& [gpu, speed] : rec.speeds)
    std::printf("  %s: %s, %.3f ms + %.4f ms/sample per step\n", gpu.c_str(), speed.source.c_str(),
                speed.fixed_s * 1e3, speed.per_sample_s * 1e3);
  for (const std::string& w : warnings) std::printf("  warning: %s\n", w.c_str());
  std::printf("%d allocations considered in %.1f ms\n\n", rec.candidates, took * 1e3);
  auto row = [](int rank, const Allocation& a) {
    std::string what;
    for (const auto& p : a.parts) {
      if (!what.empty()) what += " + ";
      what += std::to_string(p.nodes) + "x" + std::to_string(p.gpus_per_node) + " " + p.gpu +
              " (b" + std::to_string(p.per_gpu_batch) + ")";
    }
    std::printf("%3d  %-34s %5d %9s %10.3f %9.1f %8.2f  %s\n", rank, what.c_str(), a.gpus,
                HumanDuration(a.total_s).c_str(), a.energy_j / 3.6e6, a.gpu_hours, a.step_s * 1e3,
                a.why.c_str());
  };
  std::printf("%3s  %-34s %5s %9s %10s %9s %8s  %s\n", "#", "allocation (nodes x gpus, batch)",
              "GPUs", "time", "energy kWh", "GPU-h", "step ms", "why");
  if (rec.feasible) {
    int n = std::min<int>(vm["top"].as<int>(), int(rec.ranked.size()));
    for (int i = 0; i < n; ++i) row(i + 1, rec.ranked[size_t(i)]);
    std::printf("\nchosen: %s; time limit %s\n", chosen.why.c_str(),
                plan["time_limit"].get<std::string>().c_str());
    std::printf("predicted %s: %s\n", HumanDuration(chosen.total_s).c_str(),
                PhasesText(chosen.phases, chosen.steps).c_str());
    if (!html.empty()) std::printf("wrote %s\n", html.c_str());
    return kExitOk;
  }
  row(0, rec.fastest);
  std::printf(
      "\nno allocation meets the deadline of %s: the fastest (above) needs %s with the "
      "%.0f%% margin, missing it by %s\n",
      HumanDuration(job.deadline_s).c_str(),
      HumanDuration(rec.fastest.total_s * (1 + job.margin)).c_str(), job.margin * 100,
      HumanDuration(rec.miss_s).c_str());
  if (!html.empty()) std::printf("wrote %s\n", html.c_str());
  return kExitInfeasible;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return kExitBadInput;
  }
  if (args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (args[0] == "--version") {
    std::puts("dlh-estimate " DLH_VERSION);
    return kExitOk;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "features") return Features(args);
  if (command == "calibrate") return Calibrate(args);
  if (command == "fit") return Fit(args);
  if (command == "predict") return Predict(args);
  if (command == "check-calibration") return CheckCalibration(args);
  if (command == "validate") return Validate(args);
  if (command == "rates") return RatesCommand(args);
  if (command == "profile") return ProfileCommand(args);
  if (command == "comm") return Comm(args);
  if (command == "recommend") return Recommend(args);
  if (command == "cluster") return ClusterCommand(args);
  if (command == "slurm-plan") return SlurmPlanCommand(args);
  throw UsageError("unknown command '" + command + "' (see dlh-estimate --help)");
}

}  // namespace
}  // namespace dlh

int main(int argc, char** argv) {
  try {
    return dlh::Main(argc, argv);
  } catch (const dlh::UsageError& e) {
    std::fprintf(stderr, "dlh-estimate: %s\n", e.what());
    return dlh::kExitBadInput;
  } catch (const dlh::SpecError& e) {
    std::fprintf(stderr, "dlh-estimate: error: %s\n", e.what());
    return dlh::kExitBadInput;
  } catch (const dlh::EstimateError& e) {
    std::fprintf(stderr, "dlh-estimate: error: %s\n", e.what());
    return dlh::kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlh-estimate: error: %s\n", e.what());
    return dlh::kExitFailure;
  }
}
