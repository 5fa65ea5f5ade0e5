// DLH estimator — the calibration runner: times real training steps with the launcher's
// engine (one process, no MPI), reads RAPL energy counters, and describes the CPU.

#include "estimator/calibrate/calibrate.hpp"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/energy.hpp"
#include "common/error.hpp"
#include "common/median.hpp"
#include "estimator/calibrate/spec_builders.hpp"
#include "estimator/model/features.hpp"
#include "launcher/nn/layer.hpp"
#include "launcher/nn/network.hpp"
#include "launcher/nn/optimizer.hpp"
#include "launcher/nn/tensor.hpp"
#include "launcher/nn/thread_pool.hpp"
#include "launcher/probe/host_probe.hpp"

namespace dlh {
namespace {

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

std::string CompilerDescription() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("gcc ") + __VERSION__;
#else
  return "unknown compiler";
#endif
}

std::string BlasDescription() {
  const char* config = openblas_get_config();
  return config ? Trim(config) : "OpenBLAS";
}

// One description for calibrations and probes alike, so that their hosts compare.
std::string CpuDescription() { return HostCpuDescription(); }

TimingSample TimeTrainingStep(const SweepEntry& entry, const TimingOptions& options) {
  const TrainSpec& spec = entry.spec;
  auto bad = [&](const std::string& what, long long got) {
    throw UsageError("timing options: " + what + ", got " + std::to_string(got));
  };
  if (options.warmup < 0) bad("warm-up steps must be 0 or more", options.warmup);
  if (options.repeats < 1) bad("repeats must be at least 1", options.repeats);
  if (options.steps_per_repeat < 1)
    bad("steps per repeat must be at least 1", options.steps_per_repeat);
  const int64_t batch = entry.batch > 0 ? entry.batch : spec.batch_size;
  if (batch <= 0 || batch > INT_MAX)
    throw EstimateError(spec.name + ": batch must be a positive integer, got " +
                        std::to_string(batch));
  // The engine's own pool (thread_pool.hpp): it adopts OpenBLAS's count only where that is
  // above 1, so a timing at fewer threads than the one before must set the pool itself.
  if (options.threads > 0) SetCpuThreads(options.threads);

  TimingSample sample;
  sample.model = spec.name;
  sample.features = ComputeFeatures(spec);  // also checks the shapes
  sample.batch = batch;

  Network net(spec);
  net.init(spec.seed);
  std::unique_ptr<Optimizer> opt = MakeOptimizer(spec.optimizer);

  // Random data of the entry's shape: the step's cost does not depend on the values.
  std::mt19937_64 rng(spec.seed ^ 0x444c4843414cull);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor input({int(batch), spec.input.channels, spec.input.height, spec.input.width});
  for (float& v : input) v = normal(rng);
  std::vector<int32_t> labels(size_t(batch), 0);
  for (int32_t& l : labels) l = int32_t(rng() % uint64_t(std::max(1, spec.classes)));

  // The launcher's step (trainer_step.cpp) minus the data loader and MPI: forward, loss,
  // backward, batchnorm statistics commit, optimizer update.
  Tensor grad_logits;
  const float loss_scale = 1.0f / float(batch);
  uint64_t step = 0;
  double loss_sink = 0;
  auto train_step = [&] {
    ForwardContext ctx;
    ctx.training = true;
    ctx.seed = spec.seed;
    ctx.step = step;
    const Tensor& logits = net.forward(input, ctx);
    int64_t correct = 0;
    loss_sink += SoftmaxCrossEntropy(logits, labels.data(), loss_scale, &grad_logits, &correct);
    net.backward(grad_logits, nullptr);
    for (size_t i = 0; i < net.num_layers(); ++i)
      if (net.layer(i).batch_stats()) net.layer(i).commit_batch_stats();
    opt->update(net.params(), spec.optimizer.lr, int64_t(step));
    ++step;
  };

  for (int i = 0; i < options.warmup; ++i) train_step();

  using Clock = std::chrono::steady_clock;
  std::vector<double> block_seconds, block_joules;
  // The packages' counter, where readable; a block it could not measure leaves the sample
  // without joules rather than with a partial figure.
  std::unique_ptr<EnergyMeter> meter = MakeCpuEnergyMeter(nullptr);
  bool energy_ok = meter != nullptr;
  for (int r = 0; r < options.repeats; ++r) {
    const double j0 = energy_ok ? meter->joules() : 0;
    const auto t0 = Clock::now();
    for (int s = 0; s < options.steps_per_repeat; ++s) train_step();
    const auto t1 = Clock::now();
    block_seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
    if (energy_ok) {
      const double j = meter->joules() - j0;
      energy_ok = j > 0;
      block_joules.push_back(j);
    }
  }
  (void)loss_sink;
  sample.seconds = Median(block_seconds) / options.steps_per_repeat;
  sample.joules =
      energy_ok && !block_joules.empty() ? Median(block_joules) / options.steps_per_repeat : -1;
  return sample;
}

OptimizerUpdateCost MeasureOptimizerUpdate(int threads, bool quick) {
  if (threads > 0) SetCpuThreads(threads);
  // One dense layer of about a million weights: the update is a pass over them (and their
  // state), so its cost per weight is what matters; a million is past the caches of the
  // project's hosts, as the parameters of the models that train long are.
  TrainSpec spec =
      spec_builders::BaseSpec("optimizer-update", Shape3{1, 32, 32}, 1, "optimizer timing");
  spec.layers = {spec_builders::Simple(LayerKind::Flatten), spec_builders::Dense(1024),
                 spec_builders::Dense(spec_builders::kClasses)};
  Network net(spec);
  net.init(spec.seed);
  OptimizerUpdateCost cost;
  for (const NamedParam& p : net.params()) cost.params += int64_t(p.ref.value->size());
  OptimizerSpec sgd = spec.optimizer;  // the sweep's: SGD with momentum
  sgd.momentum = 0;
  OptimizerSpec adam = spec.optimizer;
  adam.kind = OptimizerSpec::Kind::Adam;
  adam.momentum = 0;
  std::unique_ptr<Optimizer> kinds[] = {MakeOptimizer(sgd), MakeOptimizer(spec.optimizer),
                                        MakeOptimizer(adam)};
  // The three kinds in turn, update after update, rather than each kind's updates back to
  // back: a slow spell of a shared machine then hits every kind alike, and a kind's median
  // spans the whole measurement (2026-12-02, a 2-core VM, each kind's updates back to back: one
  // calibration read momentum's update at 0.55 ns a parameter, four others at 0.11-0.22).
  const int warmup = 2, repeats = quick ? 3 : 15;
  std::vector<double> seconds[3];
  for (int i = 0; i < warmup + repeats; ++i)
    for (int j = 0; j < 3; ++j) {
      const int k = (i + j) % 3;  // who goes first turns each update
      const auto t0 = std::chrono::steady_clock::now();
      kinds[k]->update(net.params(), 1e-9, i);
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= warmup) seconds[k].push_back(std::chrono::duration<double>(t1 - t0).count());
    }
  cost.sgd_s = Median(seconds[0]) / double(cost.params);
  cost.momentum_s = Median(seconds[1]) / double(cost.params);
  cost.adam_s = Median(seconds[2]) / double(cost.params);
  return cost;
}

ActivationCost MeasureActivationCost(int threads, bool quick) {
  if (threads > 0) SetCpuThreads(threads);
  // A hidden layer's activations at a training batch: 256 KB, in cache as a dense layer
  // leaves them; the functions' cost is their arithmetic, whatever the size.
  const Shape3 shape{512, 1, 1};
  const int batch = 128;
  std::unique_ptr<Layer> layers[] = {MakeLayer(spec_builders::Simple(LayerKind::Gelu), shape),
                                     MakeLayer(spec_builders::Simple(LayerKind::Silu), shape)};
  Tensor in({batch, shape.channels, shape.height, shape.width}), out, grad_out, grad_in;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : in) v = normal(rng);
  grad_out = in;
  ActivationCost cost;
  cost.values = int64_t(in.size());
  // The two kinds in turn, as the optimizer's updates are timed (MeasureOptimizerUpdate).
  const int warmup = 2, repeats = quick ? 3 : 15;
  std::vector<double> seconds[2][2];  // [kind][forward, backward]
  const ForwardContext training{true};
  for (int i = 0; i < warmup + repeats; ++i)
    for (int j = 0; j < 2; ++j) {
      const int k = (i + j) % 2;
      const auto t0 = std::chrono::steady_clock::now();
      layers[k]->forward(in, out, training);
      const auto t1 = std::chrono::steady_clock::now();
      layers[k]->backward(in, out, grad_out, &grad_in);
      const auto t2 = std::chrono::steady_clock::now();
      if (i < warmup) continue;
      seconds[k][0].push_back(std::chrono::duration<double>(t1 - t0).count());
      seconds[k][1].push_back(std::chrono::duration<double>(t2 - t1).count());
    }
  const double n = double(cost.values);
  cost.gelu_forward_s = Median(seconds[0][0]) / n;
  cost.gelu_backward_s = Median(seconds[0][1]) / n;
  cost.silu_forward_s = Median(seconds[1][0]) / n;
  cost.silu_backward_s = Median(seconds[1][1]) / n;
  return cost;
}

std::vector<TimingSample> RunSweep(
    const std::vector<SweepEntry>& entries, const TimingOptions& options,
    const std::function<void(size_t, size_t, const TimingSample&)>& progress) {
  std::vector<TimingSample> samples;
  samples.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    samples.push_back(TimeTrainingStep(entries[i], options));
    if (progress) progress(i + 1, entries.size(), samples.back());
  }
  return samples;
}

}  // namespace dlh
