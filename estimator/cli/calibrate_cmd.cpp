// DLH — `dlh-estimate calibrate`, `fit`, `check-calibration` and `validate` (see
// calibrate_cmd.hpp).
#include "estimator/cli/calibrate_cmd.hpp"

#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "common/cli.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/median.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/calibrate/calibrate_launch.hpp"
#include "estimator/calibrate/calibrate_profile.hpp"
#include "estimator/cli/calibrate_slurm_cmd.hpp"
#include "estimator/cli/command_line.hpp"
#include "estimator/cli/validate_layers.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/model/engine_fingerprint.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/time_model.hpp"
#include "estimator/model/wave_scaling.hpp"
#include "estimator/recommend/recommender.hpp"
#include "launcher/probe/host_probe.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

using cli::Parse;
using cli::Printf;
using cli::Str;

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

// `entries` timed in `rounds` interleaved rounds: every entry once a round, all rounds in one
// request (in process or through dlh-launch alike), every other round in reverse order, and
// each entry's seconds and joules the median of its rounds'. A slow spell of a shared machine
// then hits one round of an entry, which the median leaves out, where one block of repeats
// back to back takes it whole: on a 2-core VM (2026-12-02) two calibrations of one round
// each timed the same sweep models 0.47x to 2.04x apart. An entry that some round could not
// time (dlh-launch leaves it out with a warning) is left out.
struct RoundsTiming {
  std::vector<TimingSample> samples;
  std::vector<std::vector<double>> per_round;  // [sample][round] seconds
  nlohmann::json description;                  // the child's device (null in process)
};

RoundsTiming TimeInRounds(const TimingDevice& device, const std::vector<SweepEntry>& entries,
                          const TimingOptions& timing, int rounds) {
  std::vector<SweepEntry> request;
  std::vector<size_t> entry_at;  // request[k] is entries[entry_at[k]]
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < entries.size(); ++i) {
      const size_t e = r % 2 == 0 ? i : entries.size() - 1 - i;
      request.push_back(entries[e]);
      entry_at.push_back(e);
    }
  ProgressBar bar(request.size());
  RoundsTiming out;
  std::vector<size_t> request_of;
  const std::vector<TimingSample> all =
      TimeEntries(device, request, timing, &bar, &out.description, &request_of);
  std::vector<std::vector<size_t>> of_entry(entries.size());
  for (size_t k = 0; k < all.size(); ++k) of_entry[entry_at[request_of[k]]].push_back(k);
  for (size_t e = 0; e < entries.size(); ++e) {
    if (of_entry[e].size() != size_t(rounds)) continue;
    std::vector<double> seconds, joules;
    for (size_t k : of_entry[e]) {
      seconds.push_back(all[k].seconds);
      joules.push_back(all[k].joules);
    }
    TimingSample s = all[of_entry[e].front()];
    s.seconds = Median(seconds);
    // A round without its energy (a counter that could not be read) leaves none.
    s.joules = *std::min_element(joules.begin(), joules.end()) < 0 ? -1 : Median(joules);
    out.samples.push_back(s);
    out.per_round.push_back(seconds);
  }
  return out;
}

TimingOptions TimingFrom(const po::variables_map& vm, int default_repeats = 5) {
  TimingOptions t;
  t.threads = vm["threads"].as<int>();
  t.repeats = vm.count("repeats") ? vm["repeats"].as<int>() : default_repeats;
  if (t.threads < 0) throw UsageError("--threads: must not be negative");
  if (t.repeats < 1) throw UsageError("--repeats: must be at least 1");
  return t;
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

// The probe of the device just calibrated (launcher/probe/host_probe.hpp), which
// check-calibration compares with the host it runs on: at the calibration's threads, twice 3 s
// and the faster reading of each rate kept (FasterOfProbes; 1 s once for a quick sweep). A GPU that
// cannot be probed (a backend of an older build) leaves the calibration without one, with a
// warning: it is still a calibration.
nlohmann::json CalibrationProbe(const std::string& device, int threads, bool quick) {
  ProbeOptions o;
  o.threads = device == "cpu" ? threads : 0;
  o.budget_s = quick ? 1 : 3;
  try {
    nlohmann::json probe = ProbeDevice(device, o);
    if (!quick) probe = FasterOfProbes(probe, ProbeDevice(device, o));
    return probe;
  } catch (const std::exception& e) {  // the timing is done: never lose it to the probe
    std::fprintf(stderr, "dlh-estimate: warning: no probe recorded: %s\n", e.what());
    return nullptr;
  }
}

// The whole training step's thread scaling (Calibration::thread_scaling): every 8th sweep
// model (3 for a quick sweep), timed at each thread count below the calibration's and at the
// calibration's, side by side (the pair back to back, so that a slow spell of a noisy machine
// hits both); per count, the median of the models' time ratios, each its median of 3 rounds. Ranks
// that share a node's cores get fewer threads than the calibration timed, and a step does not scale
// with its threads as its GEMMs do (job_time.hpp, ThreadScaling).
nlohmann::json MeasureThreadScaling(const std::vector<SweepEntry>& sweep, int threads, bool quick) {
  if (threads < 2) return nullptr;
  std::vector<SweepEntry> models;
  for (size_t i = 0; i < sweep.size(); i += quick ? std::max<size_t>(1, sweep.size() / 3) : 8)
    models.push_back(sweep[i]);
  std::fprintf(stderr, "dlh-estimate: thread scaling: %zu models at 1-%d threads\n", models.size(),
               threads);
  nlohmann::json counts = nlohmann::json::array(), ratios = nlohmann::json::array();
  for (int t = 1; t <= threads; ++t) {
    counts.push_back(t);
    if (t == threads) {
      ratios.push_back(1.0);
      break;
    }
    // Each model's pair in 3 rounds over the whole phase, the pair's order swapped every
    // round: a spell in which a neighbour holds one of the cores slows the run at all the
    // threads alone, and one pair back to back took it whole (2026-12-02, a 2-core VM: one
    // calibration read 1.05x where five others read 1.57-1.88x).
    constexpr int kRounds = 3;
    std::vector<std::vector<double>> of_model(models.size());
    for (int round = 0; round < kRounds; ++round)
      for (size_t m = 0; m < models.size(); ++m) {
        TimingOptions at_t, at_all;
        at_t.repeats = at_all.repeats = 1;
        at_t.threads = t;
        at_all.threads = threads;
        double all = 0, few = 0;
        if (round % 2 == 0) {
          all = TimeTrainingStep(models[m], at_all).seconds;
          few = TimeTrainingStep(models[m], at_t).seconds;
        } else {
          few = TimeTrainingStep(models[m], at_t).seconds;
          all = TimeTrainingStep(models[m], at_all).seconds;
        }
        if (all > 0 && few > 0) of_model[m].push_back(few / all);
      }
    std::vector<double> r;
    for (const std::vector<double>& v : of_model)
      if (!v.empty()) r.push_back(Median(v));
    if (r.empty()) return nullptr;
    ratios.push_back(Median(r));
  }
  return {{"threads", counts}, {"step_time_ratio", ratios}, {"models", models.size()}};
}

// The layer rows and the layer model (layer_time_model.hpp): every sweep model's layers
// timed one by one at its batch, on the calibration's threads (a few steps each: the median
// of a layer is steadier than a whole step, and the fit has a row per layer). A failed fit
// leaves the calibration without a layer model (the recommender then divides a step by the
// step-time model) and says why.
void MeasureLayerModel(const std::vector<SweepEntry>& sweep, int threads, bool quick,
                       Calibration* c) {
  std::fprintf(stderr, "dlh-estimate: layers: %zu models, each layer timed alone\n", sweep.size());
  std::vector<LayerTimingSample> rows;
  for (const SweepEntry& e : sweep) {
    std::vector<LayerTimingSample> more =
        LayerTimingSamples(e.spec, int(e.batch), threads, quick ? 2 : 5, 1);
    rows.insert(rows.end(), more.begin(), more.end());
  }
  try {
    c->layer_model = FitLayerTimeModel(rows, true);
  } catch (const EstimateError& e) {
    std::fprintf(stderr, "dlh-estimate: warning: no layer model: %s\n", e.what());
    c->layer_model = LayerTimeModel{};
  }
}

void PrintParts(const Calibration& c) {
  if (!c.layer_model.empty())
    std::printf("layer model: %d layers of the sweep, mean error %.1f%% of their step\n",
                c.layer_model.samples, c.layer_model.step_error);
  if (!c.optimizer_update.empty())
    std::printf("optimizer update per parameter: SGD %.3g ns, momentum %.3g ns, Adam %.3g ns\n",
                1e9 * c.optimizer_update.sgd_s, 1e9 * c.optimizer_update.momentum_s,
                1e9 * c.optimizer_update.adam_s);
  if (!c.activation_cost.empty())
    std::printf("GELU per value: %.3g ns forward, %.3g ns backward; SiLU %.3g ns, %.3g ns\n",
                1e9 * c.activation_cost.gelu_forward_s, 1e9 * c.activation_cost.gelu_backward_s,
                1e9 * c.activation_cost.silu_forward_s, 1e9 * c.activation_cost.silu_backward_s);
  const nlohmann::json& t = c.thread_scaling;
  if (t.is_object() && t.contains("step_time_ratio") && !t["step_time_ratio"].empty())
    std::printf("a step at 1 thread: %.2fx the time at %d\n", t["step_time_ratio"][0].get<double>(),
                CalibrationThreads(c));
}

// The parts of a CPU calibration measured apart from its whole steps: the thread scaling,
// the layer model, the optimizer updates and the smooth activations.
void MeasureParts(const std::vector<SweepEntry>& sweep, bool quick, Calibration* c) {
  const int threads = CalibrationThreads(*c);
  if (!quick)  // recorded for the next model of shared cores (time_model.hpp)
    c->thread_scaling = MeasureThreadScaling(sweep, threads, quick);
  MeasureLayerModel(sweep, threads, quick, c);
  c->optimizer_update = MeasureOptimizerUpdate(threads, quick);
  c->activation_cost = MeasureActivationCost(threads, quick);
}

// calibrate --keep-steps: the parts of an existing CPU calibration of this build and host
// measured again (MeasureParts); its whole steps, probe and step-time model stay as they
// were (a calibration made before a part existed, or before a fix to it, gains it without a
// new step-time model). Nothing is written unless every part is measured.
int CalibrateKeepingSteps(const po::variables_map& vm, const std::string& out, bool quick) {
  if (vm.count("via-launch") || Str(vm, "device") != "cpu")
    throw UsageError("--keep-steps: a CPU calibration only (--device cpu)");
  if (!vm.count("out")) throw UsageError("--keep-steps: --out FILE: the calibration to update");
  Calibration c = LoadCalibration(out);
  if (c.device != "cpu")
    throw EstimateError(out + ": device: --keep-steps updates a CPU calibration, not " + c.device +
                        "'s");
  const std::string engine = EngineDifference("cpu", c.engine, c.engine_sources);
  if (!engine.empty())
    throw EstimateError(out + ": engine: made by another build of the CPU engine: " + engine +
                        ": calibrate it whole");
  if (c.host != CpuDescription())
    throw EstimateError(out + ": host: made on " + c.host + ", not on this machine (" +
                        CpuDescription() + "): calibrate it whole");
  MeasureParts(CalibrationSweep(quick), quick, &c);
  if (c.layer_model.empty()) throw EstimateError(out + ": no layer model could be fitted");
  SaveCalibration(out, c);
  PrintParts(c);
  std::printf("wrote %s\n", out.c_str());
  return kExitOk;
}

}  // namespace

int CalibrateCommand(const std::vector<std::string>& args) {
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
    ("keep-steps", "instead: measure again the parts of the CPU calibration at --out (made by "
        "this build on this host) timed apart from its whole steps (thread scaling, layer model, "
        "optimizer updates, GELU and SiLU); its steps and step-time model are kept")
    ("threads", po::value<int>()->default_value(0), "OpenBLAS threads (0: OPENBLAS_NUM_THREADS or all cores)")
    ("repeats", po::value<int>(), "timed blocks per configuration and round; median (default: 2 "
        "in each of several rounds, 5 in one)")
    ("rounds", po::value<int>(),
        "time the sweep this many times, rounds interleaved (every other one in reverse order); "
        "each configuration's median over the rounds (default: 3 on a CPU, whose hosts are "
        "shared and noisy; 1 on a GPU and with --quick)")
    ("folds", po::value<int>()->default_value(5), "cross-validation folds");
  // clang-format on
  po::variables_map vm;
  if (!Parse("calibrate", args, d, {}, vm)) return kExitOk;
  const TimingDevice device = DeviceFrom(vm);
  const bool gpu = device.kind == "cuda";
  const std::string out = vm.count("out") ? Str(vm, "out") : "calibration-" + device.kind + ".json";
  CheckOutputFolder(out, "--out");
  const bool quick = vm.count("quick") > 0;
  if (vm.count("keep-steps")) return CalibrateKeepingSteps(vm, out, quick);
  // A CPU's rounds by default: the hosts it is calibrated on are shared and noisy. A GPU's one:
  // its sweep is long, its device its own, and a lent GPU's time short. Measured on a 2-core
  // VM (2026-12-02), each against the judged validation models timed apart in 7 interleaved
  // rounds: 1 round of 5 blocks, two calibrations at 21.0% and 11.3% MAPE, a model's step
  // 0.47x-2.04x between them; 3 rounds of 2 blocks, 8.2% and 7.7%, 0.72x-1.45x; 30% longer.
  const int rounds = vm.count("rounds") ? vm["rounds"].as<int>() : gpu || quick ? 1 : 3;
  if (rounds < 1 || rounds > 100) throw UsageError("--rounds: must be in [1, 100]");
  TimingOptions timing = TimingFrom(vm, rounds > 1 ? 2 : 5);
  std::vector<SweepEntry> sweep = gpu ? GpuCalibrationSweep(quick) : CalibrationSweep(quick);
  if (!device.launch)  // through dlh-launch, TimeEntries says it once the device is known
    std::fprintf(stderr, "dlh-estimate: calibrating %s (%s) with %zu configurations, %d round%s\n",
                 device.text.c_str(), CpuDescription().c_str(), sweep.size(), rounds,
                 rounds == 1 ? "" : "s");
  Calibration c;
  c.device = device.kind;
  c.host = CpuDescription();
  c.threads = timing.threads;
  c.created = NowIso();
  c.engine = EngineFingerprint(device.kind);
  c.engine_sources = EngineSources(device.kind);
  c.compiler = CompilerDescription();
  c.blas = BlasDescription();
  RoundsTiming timed = TimeInRounds(device, sweep, timing, rounds);
  c.samples = std::move(timed.samples);
  if (gpu) {  // what the GPU calibration was measured on, and with which libraries
    const nlohmann::json& description = timed.description;
    c.host = GpuHostLine(description);
    c.threads = 0;
    c.blas = GpuLibrariesLine(description);
    c.device_info = description;
  }
  c.probe = CalibrationProbe(device.text, timing.threads, quick);
  if (!device.launch && !gpu) MeasureParts(sweep, quick, &c);
  c.model = FitTimeModel(device.kind, c.samples, vm["folds"].as<int>());
  SaveCalibration(out, c);
  PrintQuality(c.model);
  PrintParts(c);
  std::printf("wrote %s\n", out.c_str());
  return kExitOk;
}

int FitCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate fit CALIBRATION: options");
  d.add_options()("help,h", "show this help")("folds", po::value<int>()->default_value(5),
                                              "cross-validation folds")(
      "out", po::value<std::string>(), "write the refitted calibration here");
  po::variables_map vm;
  if (!Parse("fit", args, d, {"CALIBRATION"}, vm)) return kExitOk;
  if (vm.count("out")) CheckOutputFolder(Str(vm, "out"), "--out");
  Calibration c = LoadCalibration(Str(vm, "CALIBRATION"));
  c.model = FitTimeModel(c.device, c.samples, vm["folds"].as<int>());
  PrintQuality(c.model);
  if (vm.count("out")) SaveCalibration(Str(vm, "out"), c);
  return kExitOk;
}

int ValidateCommand(const std::vector<std::string>& args) {
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
    ("set", po::value<std::string>()->default_value("judged"),
        "which validation models: judged (those that judge the time model: no part in choosing "
        "its terms), term (those its terms were chosen on) or all; with --measured, only those "
        "of the file in this set (default there: all of the file)")
    ("markdown", "print the table as Markdown (for BENCHMARKS.md)")
    ("save", po::value<std::string>(), "also write the measurements, in the calibration file format")
    ("measured", po::value<std::string>(), "time nothing: take the measurements from this file (written by --save)")
    ("scale-flops", po::value<double>()->default_value(1),
        "predict for a device with this times the calibrated one's FLOP/s (wave scaling, as "
        "recommend does for a GPU type without a calibration); the unscaled MAPE is reported too")
    ("scale-bandwidth", po::value<double>()->default_value(1),
        "the same for memory bandwidth")
    ("roofline", po::value<std::string>(),
        "TFLOPS,GBS: also report the roofline model's predictions for a device with these peaks")
    ("layers", "instead: how the calibration divides a step among its layers (a CPU calibration "
        "with a layer model): each model's layers timed one by one, and the largest error over "
        "its cuts by the step-time model and by the layer model");
  // clang-format on
  po::variables_map vm;
  if (!Parse("validate", args, d, {}, vm)) return kExitOk;
  if (vm.count("save")) CheckOutputFolder(Str(vm, "save"), "--save");
  Calibration c = LoadCalibration(Str(vm, "calibration"));
  const SpeedRatio ratio{vm["scale-flops"].as<double>(), vm["scale-bandwidth"].as<double>()};
  const bool scaled = ratio.flops != 1 || ratio.bandwidth != 1;
  if (!(ratio.flops > 0) || !(ratio.bandwidth > 0))
    throw UsageError("--scale-flops, --scale-bandwidth: must be positive");
  if (vm.count("layers")) {
    if (scaled || vm.count("roofline") || vm.count("measured") || vm.count("save") ||
        vm.count("via-launch") || Str(vm, "device") != "cpu")
      throw UsageError(
          "--layers: times the layers on this CPU; it takes no --scale-*, "
          "--roofline, --measured, --save, --via-launch or --device");
    const int threads =
        vm["threads"].as<int>() > 0 ? vm["threads"].as<int>() : CalibrationThreads(c);
    return ValidateLayers(c, ValidationSet(Str(vm, "set"), false), threads, vm["rounds"].as<int>(),
                          vm.count("markdown") > 0);
  }
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
  const std::string set = Str(vm, "set");
  const bool from_file = vm.count("measured") > 0;
  const bool whole_file = from_file && vm["set"].defaulted();
  const std::vector<SweepEntry> set_models =
      ValidationSet(whole_file ? "all" : set, from_file || timing_device.kind == "cuda");
  if (from_file) {
    measured = LoadMeasured(Str(vm, "measured"));
    if (!whole_file) {
      auto outside = [&](const TimingSample& m) {
        return std::none_of(set_models.begin(), set_models.end(),
                            [&](const SweepEntry& e) { return e.spec.name == m.model; });
      };
      measured.erase(std::remove_if(measured.begin(), measured.end(), outside), measured.end());
      if (measured.empty())
        throw UsageError("--measured: " + Str(vm, "measured") + ": no model of the " + set +
                         " set");
    }
  } else {
    RoundsTiming t = TimeInRounds(timing_device, set_models, timing, rounds);
    measured = std::move(t.samples);
    per_round = std::move(t.per_round);
    if (measured.empty()) throw Error("validate: no model could be timed on " + timing_device.text);
  }
  if (vm.count("save")) {
    Calibration saved = c;
    saved.model = unscaled;
    saved.samples = measured;
    saved.created = NowIso();
    SaveCalibration(Str(vm, "save"), saved);
  }
  const bool md = vm.count("markdown") > 0;
  if (whole_file)
    std::printf("validation set: the %zu models of %s\n", measured.size(),
                Str(vm, "measured").c_str());
  else
    std::printf("validation set: %s (%zu models%s)\n", set.c_str(), measured.size(),
                set == "judged" ? ": no part in choosing the time model's terms"
                : set == "term" ? ": the time model's terms were chosen on these"
                                : ", term and judged");
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
  // A model's GELUs and SiLUs beyond the step-time model's price (activation_cost.hpp), as
  // the recommender adds them: from its layers, which a --measured file does not keep.
  auto activations = [&](const TimingSample& m, const std::vector<double>& coef, double flops) {
    if (c.activation_cost.empty()) return 0.0;
    ModelFeatures f = m.features;
    for (const SweepEntry& e : set_models)
      if (e.spec.name == m.model) {
        f = ComputeFeatures(e.spec);
        break;
      }
    return CalibratedActivationSeconds(c, coef, f, double(m.batch), flops);
  };
  for (const auto& m : measured) {
    const double p =
        c.model.seconds(m.features, m.batch) + activations(m, c.model.coef, ratio.flops);
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
    if (scaled)
      column(unscaled.seconds(m.features, m.batch) + activations(m, unscaled.coef, 1),
             &sum_unscaled);
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

}  // namespace dlh
