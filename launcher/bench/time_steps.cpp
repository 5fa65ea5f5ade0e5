// DLH — `dlh-launch time-steps` (see time_steps.hpp).
#include "launcher/bench/time_steps.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <random>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/energy.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/median.hpp"
#include "common/time_steps_file.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/engine/device.hpp"
#include "launcher/engine/layer_timing.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

struct Options {
  std::string kind;  // cpu or cuda
  int index = -1;    // GPU among the visible ones
  int warmup = 2, repeats = 5, steps_per_repeat = 3, threads = 0;
  double warmup_seconds = -1;  // as given; after parsing, -1 became the device's default
  int profile_steps = 0;       // --profile: steps timed layer by layer after the others
};

// A GPU idles at a low clock between entries (an H100 at 345 MHz) and takes a while to
// come up to speed: with 2 warm-up steps alone, an H100 timed the Fashion-MNIST CNN at
// 1.43 ms a step where training ran it at 0.97 ms. So the warm-up also lasts this long.
constexpr double kGpuWarmupSeconds = 0.3;

// The energy window of a timed entry: long against a GPU energy counter's increments (tens
// of milliseconds), short against the sweep (about a hundred entries).
constexpr double kEnergyWindowSeconds = 0.5;
constexpr int kMaxEnergyWindowSteps = 5000;

// ENERGY HOOK: the one place that chooses the meter of a timed entry (common/energy.hpp):
// the GPU's own counter by its PCI bus id, or the CPU packages' RAPL counters. nullptr (no
// joules in the samples) where neither can be read.
std::unique_ptr<EnergyMeter> OpenEnergyMeter(const Options& o, const Engine& engine) {
  std::string why_not;
  if (o.kind == "cuda") {
    const std::string bus = engine.gpu_pci_bus_id();
    return bus.empty() ? nullptr : MakeGpuEnergyMeter(bus, &why_not);
  }
  return MakeCpuEnergyMeter(&why_not);
}

// The entry's step timed pass by pass (launcher/engine/layer_timing.hpp): `profile_steps`
// steps, each pass's device and host time the median over them. Every step runs the same
// passes in the same order; a step that does not is an error, not a row.
// A step that could not be held (layer_timing.hpp) ends the held ones: from then on the steps
// are timed unheld, `profile_steps` of them, and *held says which the figures are.
std::vector<LayerPassTime> ProfileLayers(Engine* engine, const Options& o,
                                         const std::function<void()>& forward_backward,
                                         const std::function<void()>& rest_of_step, bool* held) {
  LayerTiming* timing = GpuLayerTiming(engine, o.kind);
  if (timing == nullptr) throw Error("--profile: this CUDA backend cannot time its layers");
  timing->set_layer_timing(true);
  std::vector<std::vector<LayerPassTime>> steps;
  *held = true;
  try {
    // Once a step is unheld every later one is (the timer stops holding): this ends.
    while (int(steps.size()) < o.profile_steps) {
      forward_backward();
      rest_of_step();
      std::vector<LayerPassTime> step = timing->last_step_layer_times();
      if (*held && !timing->last_step_held()) {  // the held steps so far are set aside
        *held = false;
        steps.clear();
      }
      steps.push_back(std::move(step));
    }
  } catch (...) {
    timing->set_layer_timing(false);
    throw;
  }
  timing->set_layer_timing(false);
  std::vector<LayerPassTime> out = steps.front();
  for (size_t k = 0; k < out.size(); ++k) {
    std::vector<double> device, host;
    for (const std::vector<LayerPassTime>& step : steps) {
      if (step.size() != out.size() || step[k].layer != out[k].layer || step[k].pass != out[k].pass)
        throw Error("--profile: the profiled steps ran different passes (internal)");
      device.push_back(step[k].device_s);
      host.push_back(step[k].host_s);
    }
    out[k].device_s = Median(device);
    out[k].host_s = Median(host);
  }
  return out;
}

// One entry: the engine the trainer would build, random data of the entry's shape, and the
// trainer's step (trainer_step.cpp) minus the data loader and the cross-rank averages.
//
// Synchronisation: the GPU engine's forward_backward() returns only when backward has run
// on the device (it reads the loss sums back), while finish_gradients() and update() may
// return with kernels still queued. So the clock is read right after forward_backward():
// from one such mark to the next lies exactly one whole step (the previous step's
// allreduce, statistics and update, then this one's forward and backward), whatever the
// device queues. A block of S steps is the time between marks S apart; one step more than
// the blocks need gives the last mark.
TimeStepsSample TimeEntry(const TimeStepsEntry& entry, const Options& o) {
  TimeStepsSample sample;
  sample.model = entry.spec.name;
  TrainSpec spec = entry.spec;
  const int64_t batch = entry.batch > 0 ? entry.batch : spec.batch_size;
  if (batch <= 0 || batch > INT_MAX)
    throw SpecError(spec.name + ": batch must be a positive integer, got " + std::to_string(batch));
  sample.batch = batch;
  spec.batch_size = int(batch);

  EngineConfig ec;
  ec.spec = &spec;
  ec.comm = MPI_COMM_WORLD;
  ec.node_of_rank = {mpi::Hostname()};
  ec.device = o.index;
  ec.max_batch = int(batch);
  std::string note;
  std::unique_ptr<Engine> engine = MakeEngine(o.kind, ec, &note);

  std::mt19937_64 rng(spec.seed ^ 0x444c4843414cull);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Batch data;
  data.images.resize({int(batch), spec.input.channels, spec.input.height, spec.input.width});
  for (float& v : data.images) v = normal(rng);
  data.labels.resize(size_t(batch));
  for (int32_t& l : data.labels) l = int32_t(rng() % uint64_t(std::max(1, spec.classes)));
  // Each step's "next" batch is this one again, so that the GPU engine copies it during
  // backward as it does a loader's batches in training, and the steps are timed with that.
  data.serial = NewBatchSerial();

  const float loss_scale = 1.0f / float(batch);
  int64_t step = 0;
  double loss_sink = 0;
  auto forward_backward = [&] {
    ForwardContext ctx;
    ctx.training = true;
    ctx.seed = spec.seed;
    ctx.step = uint64_t(step);
    loss_sink += engine->forward_backward(data, ctx, loss_scale, [&] { return &data; }).loss;
  };
  auto rest_of_step = [&] {
    engine->finish_gradients();
    const std::vector<float> stats = engine->batch_stats();  // one rank: its own are the mean
    if (!stats.empty()) engine->commit_batch_stats(stats);
    engine->update(spec.optimizer.lr, step);
    ++step;
  };
  using Clock = std::chrono::steady_clock;
  const auto warmup_start = Clock::now();
  for (int i = 0;
       i < o.warmup ||
       std::chrono::duration<double>(Clock::now() - warmup_start).count() < o.warmup_seconds;
       ++i)
    forward_backward(), rest_of_step();

  std::vector<Clock::time_point> marks;
  const int steps = o.repeats * o.steps_per_repeat;
  for (int s = 0; s <= steps; ++s) {
    forward_backward();
    marks.push_back(Clock::now());
    if (s < steps) rest_of_step();
  }
  std::vector<double> block_seconds;
  for (int r = 0; r < o.repeats; ++r) {
    const size_t a = size_t(r * o.steps_per_repeat), b = a + size_t(o.steps_per_repeat);
    block_seconds.push_back(std::chrono::duration<double>(marks[b] - marks[a]).count());
  }
  sample.seconds = Median(block_seconds) / o.steps_per_repeat;

  // Energy apart from the timing, over one window of steps read at its two ends. A GPU's
  // counter must stay out of the timed steps: on an H100, reading NVML every step made the
  // sweep's small steps about 4 ms where the same model trained at 1.3 ms a step. And the
  // counter moves in coarse increments, so a window of a few short steps would measure its
  // granularity, not the steps: the window is long enough to hold many increments.
  if (std::unique_ptr<EnergyMeter> meter = OpenEnergyMeter(o, *engine)) {
    rest_of_step();  // the last timed step's update
    const int window =
        std::clamp(int(std::ceil(kEnergyWindowSeconds / std::max(sample.seconds, 1e-6))),
                   o.steps_per_repeat, kMaxEnergyWindowSteps);
    const double j0 = meter->joules();
    for (int s = 0; s < window; ++s) {
      forward_backward();
      if (s + 1 < window) rest_of_step();
    }
    const double j = meter->joules() - j0;
    sample.joules = j > 0 ? j / window : -1;  // a counter that did not move measured nothing
  }
  if (o.profile_steps > 0) {
    rest_of_step();  // the last step's update, outside the profile
    sample.layers =
        ProfileLayers(engine.get(), o, forward_backward, rest_of_step, &sample.layers_held);
  }
  (void)loss_sink;
  return sample;
}

nlohmann::json DeviceDescription(const Options& o) {
  if (o.kind == "cuda") return nlohmann::json::parse(DescribeCudaDevice(o.index));
  return {{"kind", "cpu"}, {"threads", CpuThreads()}};
}

}  // namespace

void ParseTimingDevice(const std::string& text, std::string* kind, int* index) {
  if (text == "cpu") {
    *kind = "cpu";
    *index = -1;
    return;
  }
  const std::string cuda = "cuda";
  if (text == cuda) {
    *kind = cuda;
    *index = 0;
    return;
  }
  if (text.rfind(cuda + ":", 0) == 0 && text.size() > cuda.size() + 1 &&
      text.size() <= cuda.size() + 4 &&
      std::all_of(text.begin() + long(cuda.size() + 1), text.end(),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    *kind = cuda;
    *index = std::stoi(text.substr(cuda.size() + 1));
    return;
  }
  throw UsageError("--device: must be cpu, cuda or cuda:N (N: a visible GPU's index), got '" +
                   text + "'");
}

int RunTimeStepsCommand(const std::vector<std::string>& args, int rank, int size) {
  Options o;
  std::string device = "cpu", in, out;
  po::options_description d("dlh-launch time-steps: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("device", po::value(&device)->default_value(device), "cpu, cuda (GPU 0) or cuda:N")
    ("in", po::value(&in), "request: the models and batches to time (dlh-estimate writes it; "
        "common/time_steps_file.hpp)")
    ("out", po::value(&out), "result: seconds per step of each entry, rewritten after each one")
    ("warmup", po::value(&o.warmup)->default_value(o.warmup), "steps before the timing")
    ("warmup-seconds", po::value(&o.warmup_seconds),
        "and at least this long (default: 0.3 on a GPU, whose clock ramps up; 0 on the CPU)")
    ("repeats", po::value(&o.repeats)->default_value(o.repeats), "timed blocks; the median")
    ("steps-per-repeat", po::value(&o.steps_per_repeat)->default_value(o.steps_per_repeat),
        "steps in each block")
    ("threads", po::value(&o.threads)->default_value(o.threads),
        "CPU engine threads (0: OPENBLAS_NUM_THREADS or all cores)")
    ("profile", po::value(&o.profile_steps)->default_value(o.profile_steps),
        "then time this many steps layer by layer (GPU only; each pass's median goes into the "
        "sample's \"layers\")");
  // clang-format on
  SubcommandSyntax syntax;
  syntax.prefix = "time-steps: ";
  syntax.suffix = " (see dlh-launch time-steps --help)";
  po::variables_map vm;
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    if (rank == 0) std::cout << d << "\n";
    return kExitOk;
  }
  if (size != 1)
    throw UsageError("time-steps: run it as one process (not under mpirun or srun), got " +
                     std::to_string(size) + " ranks");
  if (in.empty()) throw UsageError("time-steps: --in is required");
  if (out.empty()) throw UsageError("time-steps: --out is required");
  ParseTimingDevice(device, &o.kind, &o.index);
  if (o.warmup < 0 || o.warmup > 1000) throw UsageError("--warmup: must be 0 to 1000");
  if (vm.count("warmup-seconds") && !(o.warmup_seconds >= 0 && o.warmup_seconds <= 60))
    throw UsageError("--warmup-seconds: must be 0 to 60");
  if (o.warmup_seconds < 0) o.warmup_seconds = o.kind == "cuda" ? kGpuWarmupSeconds : 0.0;
  if (o.repeats < 1 || o.repeats > 1000) throw UsageError("--repeats: must be 1 to 1000");
  if (o.steps_per_repeat < 1 || o.steps_per_repeat > 1000)
    throw UsageError("--steps-per-repeat: must be 1 to 1000");
  if (o.threads < 0) throw UsageError("--threads: must not be negative");
  if (o.profile_steps < 0 || o.profile_steps > 1000)
    throw UsageError("--profile: must be 0 to 1000");
  if (o.profile_steps > 0 && o.kind != "cuda")
    throw UsageError(
        "--profile: times the GPU engine's layers (--device cuda); the CPU engine's: "
        "dlh-estimate profile SPEC");
  if (o.threads > 0) SetCpuThreads(o.threads);

  std::vector<TimeStepsEntry> entries;
  try {
    entries = ReadTimeStepsRequest(in);
  } catch (const SpecError& e) {
    // One process: a bad request is reported like a bad option, without MPI_Abort's noise.
    throw UsageError(e.what());
  }
  TimeStepsResult result;
  result.device = DeviceDescription(o);  // fails here, once, on a machine without the GPU
  result.options = {{"warmup", o.warmup},
                    {"warmup_seconds", o.warmup_seconds},
                    {"repeats", o.repeats},
                    {"steps_per_repeat", o.steps_per_repeat},
                    {"threads", o.kind == "cpu" ? CpuThreads() : 0},
                    {"profile_steps", o.profile_steps}};
  WriteFileAtomically(out, TimeStepsResultText(result));  // an unwritable --out fails first
  // The header names the device: dlh-estimate announces the calibration with it.
  const int threads = CpuThreads();
  const std::string on =
      o.kind == "cuda"
          ? result.device.value("name", "?") + " (GPU " + std::to_string(o.index) + ")"
          : "cpu (" + std::to_string(threads) + (threads == 1 ? " thread)" : " threads)");
  std::printf("time-steps: %zu entries on %s\n", entries.size(), on.c_str());
  std::fflush(stdout);
  for (size_t i = 0; i < entries.size(); ++i) {
    TimeStepsSample s;
    try {
      s = TimeEntry(entries[i], o);
      std::printf("[%zu/%zu] %s b%lld: %.3f ms\n", i + 1, entries.size(), s.model.c_str(),
                  (long long)s.batch, s.seconds * 1e3);
    } catch (const std::exception& e) {  // dlh::Error, or std::bad_alloc on the host
      // Too large for the GPU's memory, a layer cuDNN refuses: the other entries still count.
      s.model = entries[i].spec.name;
      s.batch = entries[i].batch > 0 ? entries[i].batch : entries[i].spec.batch_size;
      s.seconds = s.joules = -1;
      s.error = e.what();
      std::replace(s.error.begin(), s.error.end(), '\n', ' ');
      std::printf("[%zu/%zu] %s b%lld: failed: %s\n", i + 1, entries.size(), s.model.c_str(),
                  (long long)s.batch, s.error.c_str());
    }
    std::fflush(stdout);
    result.samples.push_back(s);
    result.complete = result.samples.size() == entries.size();
    WriteFileAtomically(out, TimeStepsResultText(result));
  }
  return kExitOk;
}

}  // namespace dlh
