// DLH estimator — `dlh-estimate profile`: a CPU training step, layer by layer, against this
// machine's roofline (see calibrate_profile.hpp).
#include "estimator/calibrate/calibrate_profile.hpp"

#include <cblas.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <climits>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/median.hpp"
#include "estimator/calibrate/calibrate_rates.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/time_model.hpp"
#include "launcher/nn/layer.hpp"
#include "launcher/nn/layers/columns.hpp"
#include "launcher/nn/layers/conv_tiles.hpp"
#include "launcher/nn/layers/fuse.hpp"
#include "launcher/nn/network.hpp"
#include "launcher/nn/optimizer.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One row-major product C (m x n) = op(A) op(B), op(A) m x k, as the engine calls OpenBLAS.
struct Product {
  bool trans_a, trans_b;
  int m, n, k;
  double flops() const { return 2.0 * m * n * k; }
};

// Seconds of `pass`, on the calling thread: median of 5 blocks of about 20 ms, after one
// untimed call that pages in.
template <typename Pass>
double TimePass(Pass&& pass) {
  double t = Now();
  pass();
  const int calls = std::max(1, int(0.02 / std::max(Now() - t, 1e-7)));
  std::vector<double> per_pass;
  for (int block = 0; block < 5; ++block) {
    t = Now();
    for (int i = 0; i < calls; ++i) pass();
    per_pass.push_back((Now() - t) / calls);
  }
  return Median(per_pass);
}

// Seconds of one call of each product in turn, on the calling thread with OpenBLAS set to
// one thread (as inside the engine): median of 5 blocks of about 20 ms, after one untimed
// pass that packs and pages in.
double TimeProducts(const std::vector<Product>& products) {
  size_t a_max = 0, b_max = 0, c_max = 0;
  for (const Product& p : products) {
    a_max = std::max(a_max, size_t(p.m) * p.k);
    b_max = std::max(b_max, size_t(p.k) * p.n);
    c_max = std::max(c_max, size_t(p.m) * p.n);
  }
  std::vector<float> a(a_max, 0.01f), b(b_max, 0.02f), c(c_max, 0.0f);
  auto pass = [&] {
    for (const Product& p : products)
      cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans,
                  p.trans_b ? CblasTrans : CblasNoTrans, p.m, p.n, p.k, 1.0f, a.data(),
                  p.trans_a ? p.m : p.k, b.data(), p.trans_b ? p.k : p.n, 0.0f, c.data(), p.n);
  };
  return TimePass(pass);
}

// The products the engine runs for a convolution (per sample and row tile: conv2d.cpp)
// or a dense layer (per batch), forward, weight gradient, and input gradient when wanted.
std::vector<Product> LayerProducts(const LayerSpec& spec, const LayerCost& cost, int batch,
                                   bool grad_in) {
  std::vector<Product> p;
  if (spec.kind == LayerKind::Conv2d) {
    // One set per tile of output rows (launcher/nn/layers/conv_tiles.hpp).
    const int f = cost.out.channels, rows = cost.out.height, width = cost.out.width;
    const int ckk = cost.in.channels * spec.kernel * spec.kernel;
    const int tile_rows = ConvTileRows(ckk, rows, width);
    for (int r0 = 0; r0 < rows; r0 += tile_rows) {
      const int pixels = (std::min(rows, r0 + tile_rows) - r0) * width;
      p.push_back({false, false, f, pixels, ckk});              // W x columns
      p.push_back({false, true, f, ckk, pixels});               // dW += dY x columns^T
      if (grad_in) p.push_back({true, false, ckk, pixels, f});  // dcolumns = W^T dY
    }
  } else if (spec.kind == LayerKind::Dense) {
    const int in = cost.in.channels * cost.in.height * cost.in.width, out = spec.units;
    p.push_back({false, true, batch, out, in});                // Y = X W^T
    p.push_back({true, false, out, in, batch});                // dW = dY^T X
    if (grad_in) p.push_back({false, false, batch, in, out});  // dX = dY W
  }
  return p;
}

}  // namespace

double FloorSeconds(const StepProfile& p) {
  double s = p.loss_s + p.update_s;
  for (const LayerProfile& l : p.layers)
    s += l.gemm_layer() ? l.gemm_alone_s + l.columns_s
                        : std::min(l.forward_s + l.backward_s, l.roofline_s);
  return s;
}

StepProfile ProfileStep(const TrainSpec& spec, const ProfileOptions& options) {
  auto bad = [](const std::string& what) { throw UsageError("profile: " + what); };
  if (options.threads < 1 || options.threads > 1024) bad("--threads: must be 1 to 1024");
  if (options.steps < 1) bad("--steps: must be at least 1");
  if (options.warmup < 0) bad("--warmup: must be 0 or more");
  if (options.batch < 0) bad("--batch: must be positive (0: the spec's)");
  const int64_t batch64 = options.batch > 0 ? options.batch : spec.batch_size;
  if (batch64 < 1 || batch64 > INT_MAX) bad("the batch must be a positive int");
  const int batch = int(batch64);

  StepProfile out;
  out.model = spec.name;
  out.batch = batch;
  out.threads = options.threads;
  out.steps = options.steps;
  out.warmup = options.warmup;
  const ModelFeatures features = ComputeFeatures(spec);  // also checks the shapes
  if (!options.layers_only) {
    const MachineRates rates = MeasureRates(options.threads, options.rate_blocks);
    out.sgemm_gflops = rates.sgemm_gflops;
    out.copy_gbs = rates.copy_gbs;
  }
  SetCpuThreads(options.threads);  // the engine's pool; OpenBLAS itself on one thread
  const char* core = openblas_get_corename();
  out.blas_core = core ? core : "unknown";

  Network net(spec);
  net.init(spec.seed);
  std::unique_ptr<Optimizer> opt = MakeOptimizer(spec.optimizer);
  const size_t n_layers = net.num_layers();

  std::mt19937_64 rng(spec.seed ^ 0x444c4850524full);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor input({batch, spec.input.channels, spec.input.height, spec.input.width});
  for (float& v : input) v = normal(rng);
  std::vector<int32_t> labels(static_cast<size_t>(batch), 0);
  for (int32_t& l : labels) l = int32_t(rng() % uint64_t(std::max(1, spec.classes)));

  // The layer loop of Network::forward and Network::backward, with a clock around every
  // call. It is repeated here rather than timed inside Network because launcher/nn/ is what
  // the engine fingerprint hashes: instrumenting it would void every shipped calibration.
  std::vector<bool> grad_in(n_layers);
  bool params_before = false;
  for (size_t i = 0; i < n_layers; ++i) {
    grad_in[i] = params_before;
    params_before = params_before || !net.layer(i).params().empty();
  }
  std::vector<Tensor> acts(n_layers), grads(n_layers);
  Tensor grad_logits;
  std::vector<std::vector<double>> fwd(n_layers), bwd(n_layers);
  std::vector<double> step_s, loss_s, update_s;
  double loss_sink = 0;
  auto train_step = [&](uint64_t step, bool keep) {
    const double t_step = Now();
    ForwardContext ctx;
    ctx.training = true;
    ctx.seed = spec.seed;
    ctx.step = step;
    const Tensor* x = &input;
    for (size_t i = 0; i < n_layers; ++i) {
      if (FusedIntoPrevious(net.layer(i))) continue;  // runs inside the layer before
      ctx.layer_index = int(i);
      const double t = Now();
      net.layer(i).forward(*x, acts[i], ctx);
      if (keep) fwd[i].push_back(Now() - t);
      x = &acts[i];
    }
    double t = Now();
    int64_t correct = 0;
    loss_sink +=
        SoftmaxCrossEntropy(*x, labels.data(), 1.0f / float(batch), &grad_logits, &correct);
    if (keep) loss_s.push_back(Now() - t);
    const Tensor* grad_out = &grad_logits;
    for (size_t k = n_layers; k-- > 0;) {
      if (FusedIntoPrevious(net.layer(k))) continue;
      size_t below = k;  // the nearest layer before k that runs gives k its input
      while (below > 0 && FusedIntoPrevious(net.layer(below - 1))) --below;
      const Tensor& in = below == 0 ? input : acts[below - 1];
      t = Now();
      net.layer(k).backward(in, acts[k], *grad_out, grad_in[k] ? &grads[k] : nullptr);
      if (keep) bwd[k].push_back(Now() - t);
      if (!grad_in[k]) break;  // nothing below has parameters
      grad_out = &grads[k];
    }
    for (size_t i = 0; i < n_layers; ++i)
      if (net.layer(i).batch_stats()) net.layer(i).commit_batch_stats();
    t = Now();
    opt->update(net.params(), spec.optimizer.lr, int64_t(step));
    if (keep) {
      update_s.push_back(Now() - t);
      step_s.push_back(Now() - t_step);
    }
  };
  uint64_t step = 0;
  for (int i = 0; i < options.warmup; ++i) train_step(step++, false);
  for (int i = 0; i < options.steps; ++i) train_step(step++, true);
  (void)loss_sink;

  out.step_s = Median(step_s);
  out.loss_s = Median(loss_s);
  out.update_s = Median(update_s);
  for (size_t i = 0; i < n_layers; ++i) {
    const LayerCost& c = features.layers[i];
    LayerProfile l;
    l.index = int(i);
    l.kind = c.kind;
    l.out = c.out;
    if (FusedIntoPrevious(net.layer(i))) {  // its time and tensors are its runner's
      l.fused_into = int(i) - 1;
      while (FusedIntoPrevious(net.layer(size_t(l.fused_into)))) --l.fused_into;
      out.layers.push_back(l);
      continue;
    }
    l.forward_s = Median(fwd[i]);
    l.backward_s = Median(bwd[i]);
    const bool backward_runs = !bwd[i].empty();
    // The GEMM layers' FLOPs are those of the products the engine runs (a dense layer right
    // after the input computes no input gradient, which ComputeFeatures counts); the other
    // layers' are ComputeFeatures' comparisons and adds.
    const std::vector<Product> products =
        LayerProducts(spec.layers[i], c, batch, backward_runs && grad_in[i]);
    const double calls = c.kind == LayerKind::Conv2d ? batch : 1;
    l.flops = (c.flops_fwd + (backward_runs ? c.flops_bwd : 0)) * batch;
    if (l.gemm_layer()) {
      l.flops = 0;
      for (const Product& p : products) l.flops += p.flops() * calls;
    }
    const double in_e = double(c.in.elements()), out_e = double(c.out.elements());
    l.bytes = 4.0 * (in_e + out_e) * batch + 4.0 * c.params;
    if (backward_runs)
      l.bytes += 4.0 * (out_e + in_e + (grad_in[i] ? in_e : 0)) * batch + 8.0 * c.params;
    if (options.layers_only) {
      out.layers.push_back(l);
      continue;
    }
    l.roofline_s = std::max(l.flops / (out.sgemm_gflops * 1e9), l.bytes / (out.copy_gbs * 1e9));
    if (l.gemm_layer()) {
      // A convolution runs its products once per sample, each sample on one thread; a dense
      // layer once per batch, cut into blocks over the threads. Both: ideal division.
      l.gemm_alone_s = TimeProducts(products) * calls / options.threads;
      l.gemm_alone_gflops = l.flops / l.gemm_alone_s / 1e9;
    }
    if (c.kind == LayerKind::Conv2d) {  // its column copies, per sample as well
      std::vector<float> sample(c.in.elements()), scratch, grad_sample;
      for (float& v : sample) v = normal(rng);
      l.columns_s = TimePass([&] {
                      RunColumnCopies(net.layer(i), sample.data(), backward_runs,
                                      backward_runs && grad_in[i], scratch, grad_sample);
                    }) *
                    batch / options.threads;
    }
    out.layers.push_back(l);
  }
  return out;
}

std::vector<LayerTimingSample> LayerTimingSamples(const TrainSpec& spec, int batch, int threads,
                                                  int steps, int warmup) {
  ProfileOptions o;
  o.batch = batch;
  o.threads = threads;
  o.steps = steps;
  o.warmup = warmup;
  o.layers_only = true;
  const StepProfile p = ProfileStep(spec, o);
  const std::vector<ModelFeatures> features = TopLevelLayerFeatures(spec);
  std::vector<LayerTimingSample> out;
  for (const LayerProfile& l : p.layers) {
    const double seconds = l.forward_s + l.backward_s;
    if (l.fused_into >= 0 || !(seconds > 0)) continue;  // inside the layer before
    LayerTimingSample s;
    s.model = spec.name;
    s.layer = l.index;
    s.batch = batch;
    s.seconds = seconds;
    s.forward_seconds = l.forward_s;
    s.features = features.at(size_t(l.index));
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// How a calibration divides the profiled step among its layers (profile --calibration): each
// layer's predicted share of the layers' time, beside the measured one.
struct Division {
  std::string file, by;          // the calibration, and which of its models divides
  std::vector<double> shares;    // per LayerProfile, of the predicted layers' time (0: fused)
  double largest_cut_error = 0;  // points of the layers' time (LargestCutError)
};

// The CPU calibration at `file`, read and checked before the profile's minutes of timing.
Calibration DividingCalibration(const std::string& file) {
  Calibration c = LoadCalibration(file);
  if (c.device != "cpu")
    throw UsageError("profile --calibration: a CPU calibration only (" + file + " is " + c.device +
                     "'s)");
  return c;
}

Division DivisionOf(const Calibration& c, const std::string& file, const TrainSpec& spec,
                    const StepProfile& p) {
  // The step-time model's layer terms where the file has no layer model of its own.
  LayerTimeModel divide = c.layer_model;
  if (divide.empty()) divide.coef = c.model.coef;
  const std::vector<ModelFeatures> features = TopLevelLayerFeatures(spec);
  Division d;
  d.file = file;
  d.by = c.layer_model.empty() ? "its step-time model's layer terms" : "its layer model";
  std::vector<double> predicted, measured;
  double all = 0;
  for (const LayerProfile& l : p.layers) {
    const bool runs = l.fused_into < 0;
    predicted.push_back(runs ? LayerSeconds(divide, features.at(size_t(l.index)), p.batch, true)
                             : 0.0);
    measured.push_back(runs ? l.forward_s + l.backward_s : 0.0);
    all += predicted.back();
  }
  for (double v : predicted) d.shares.push_back(all > 0 ? v / all : 0);
  d.largest_cut_error = LargestCutError(predicted, measured);
  return d;
}

nlohmann::json ToJson(const StepProfile& p, const Division* division) {
  const double floor = FloorSeconds(p);
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerProfile& l : p.layers) {
    nlohmann::json j{{"index", l.index},
                     {"kind", LayerKindName(l.kind)},
                     {"output", {l.out.channels, l.out.height, l.out.width}},
                     {"forward_s", l.forward_s},
                     {"backward_s", l.backward_s},
                     {"flops", l.flops},
                     {"bytes", l.bytes},
                     {"roofline_s", l.roofline_s}};
    if (l.fused_into >= 0) j["fused_into"] = l.fused_into;
    if (l.gemm_layer()) {
      j["gemm_alone_s"] = l.gemm_alone_s;
      j["gemm_alone_gflops"] = l.gemm_alone_gflops;
    }
    if (l.kind == LayerKind::Conv2d) j["columns_s"] = l.columns_s;
    if (division) j["predicted_share"] = division->shares[layers.size()];
    layers.push_back(j);
  }
  nlohmann::json out = {{"model", p.model},
                        {"batch", p.batch},
                        {"threads", p.threads},
                        {"blas_core", p.blas_core},
                        {"steps", p.steps},
                        {"warmup", p.warmup},
                        {"step_s", p.step_s},
                        {"samples_per_s", p.batch / p.step_s},
                        {"loss_s", p.loss_s},
                        {"update_s", p.update_s},
                        {"sgemm_gflops", p.sgemm_gflops},
                        {"copy_gbs", p.copy_gbs},
                        {"floor_s", floor},
                        {"floor_samples_per_s", p.batch / floor},
                        {"layers", layers}};
  if (division) {
    out["calibration"] = division->file;
    out["largest_cut_error"] = division->largest_cut_error;
  }
  return out;
}

void PrintText(const std::string& path, const StepProfile& p, const Division* division) {
  std::printf("%s: %s, batch %d, %d thread%s, OpenBLAS core %s\n", path.c_str(), p.model.c_str(),
              p.batch, p.threads, p.threads == 1 ? "" : "s", p.blas_core.c_str());
  std::printf(
      "step %.2f ms (%.0f samples/s): median of %d step%s after %d warm-up, without the data "
      "loader and MPI\n",
      p.step_s * 1e3, p.batch / p.step_s, p.steps, p.steps == 1 ? "" : "s", p.warmup);
  std::printf("this machine at %d thread%s: sgemm %.1f GFLOP/s, memory copy %.1f GB/s\n\n",
              p.threads, p.threads == 1 ? "" : "s", p.sgemm_gflops, p.copy_gbs);
  std::printf("  %-3s %-10s %-11s %8s %8s %6s %8s %7s %10s %9s %12s %9s%s\n", "#", "layer",
              "output", "fwd ms", "bwd ms", "share", "GFLOP/s", "GB/s", "roofline", "of it",
              "GEMMs alone", "copies", division ? "  predicted" : "");
  double layers_s = 0;  // the measured layers' time: the predicted shares are of it
  for (const LayerProfile& l : p.layers) layers_s += l.forward_s + l.backward_s;
  double gemm_s = 0, gemm_flops = 0, gemm_roof = 0, gemm_alone = 0, columns = 0;
  double other_s = 0, other_bytes = 0, other_roof = 0;
  for (const LayerProfile& l : p.layers) {
    const double s = l.forward_s + l.backward_s;
    char shape[48], alone[48] = "", copies[32] = "";
    std::snprintf(shape, sizeof shape, "%dx%dx%d", l.out.channels, l.out.height, l.out.width);
    if (l.fused_into >= 0) {
      std::printf("  %-3d %-10s %-11s   runs inside layer %d (fused: no pass of its own)\n",
                  l.index, LayerKindName(l.kind), shape, l.fused_into);
      continue;
    }
    if (l.gemm_layer()) {
      std::snprintf(alone, sizeof alone, "%.2f ms %4.0f", l.gemm_alone_s * 1e3,
                    l.gemm_alone_gflops);
      gemm_s += s, gemm_flops += l.flops, gemm_roof += l.roofline_s, gemm_alone += l.gemm_alone_s;
      columns += l.columns_s;
      if (l.kind == LayerKind::Conv2d)
        std::snprintf(copies, sizeof copies, "%.2f ms", l.columns_s * 1e3);
    } else {
      other_s += s, other_bytes += l.bytes, other_roof += l.roofline_s;
    }
    char predicted[32] = "";
    if (division)  // the same share of the step as the layers' measured time
      std::snprintf(predicted, sizeof predicted, "%10.1f%%",
                    100 * division->shares[size_t(&l - p.layers.data())] * layers_s / p.step_s);
    std::printf("  %-3d %-10s %-11s %8.3f %8.3f %5.1f%% %8.1f %7.1f %7.3f ms %8.0f%% %12s %9s%s\n",
                l.index, LayerKindName(l.kind), shape, l.forward_s * 1e3, l.backward_s * 1e3,
                100 * s / p.step_s, s > 0 ? l.flops / s / 1e9 : 0.0,
                s > 0 ? l.bytes / s / 1e9 : 0.0, l.roofline_s * 1e3,
                s > 0 ? 100 * l.roofline_s / s : 0.0, alone, copies, predicted);
  }
  const double rest = p.step_s - gemm_s - other_s - p.loss_s - p.update_s;
  std::printf("      %-22s %8.3f %8s %5.1f%%\n", "loss", p.loss_s * 1e3, "",
              100 * p.loss_s / p.step_s);
  std::printf("      %-22s %8.3f %8s %5.1f%%\n", "optimizer update", p.update_s * 1e3, "",
              100 * p.update_s / p.step_s);
  std::printf("      %-22s %8.3f %8s %5.1f%%\n\n", "rest of the step", rest * 1e3, "",
              100 * rest / p.step_s);
  if (gemm_s > 0)
    std::printf(
        "GEMM layers (conv2d, dense): %.2f ms, %.0f%% of the step, %.1f GFLOP/s = %.0f%% of "
        "sgemm; their GEMMs alone at OpenBLAS's rate for their shapes: %.2f ms (%.0f%% of "
        "the layers' time); the convolutions' column copies (im2col, col2im) alone: %.2f ms\n",
        gemm_s * 1e3, 100 * gemm_s / p.step_s, gemm_flops / gemm_s / 1e9,
        100 * gemm_flops / gemm_s / 1e9 / p.sgemm_gflops, gemm_alone * 1e3,
        100 * gemm_alone / gemm_s, columns * 1e3);
  if (other_s > 0)
    std::printf("other layers: %.2f ms, %.0f%% of the step, %.1f GB/s = %.0f%% of the copy rate\n",
                other_s * 1e3, 100 * other_s / p.step_s, other_bytes / other_s / 1e9,
                100 * other_bytes / other_s / 1e9 / p.copy_gbs);
  const double roof = gemm_roof + other_roof;
  std::printf("roofline of the layers: %.2f ms (%.0f samples/s); the step runs at %.0f%% of it\n",
              roof * 1e3, p.batch / roof, 100 * roof / p.step_s);
  const double floor = FloorSeconds(p);
  std::printf(
      "floor of this engine design with this OpenBLAS: %.2f ms (%.0f samples/s), every GEMM "
      "layer at its GEMMs and column copies alone, the other layers as measured or at the "
      "roofline where that is faster, loss and update as measured\n",
      floor * 1e3, p.batch / floor);
  if (division)
    std::printf(
        "predicted: how %s divides the layers' time (%s), in shares of the step as above; its "
        "largest error over the cuts between layers (a pipeline's stage boundaries): %.1f "
        "points of the layers' time\n",
        division->file.c_str(), division->by.c_str(), division->largest_cut_error);
}

}  // namespace

int ProfileCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate profile SPEC: options");
  ProfileOptions o;
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("batch", po::value(&o.batch)->default_value(0), "batch of the step (0: the spec's)")
    ("threads", po::value(&o.threads)->default_value(1), "engine threads (as dlh-launch --threads)")
    ("steps", po::value(&o.steps)->default_value(20), "timed steps; each figure is their median")
    ("warmup", po::value(&o.warmup)->default_value(3), "untimed steps first")
    ("calibration", po::value<std::string>(), "also: how this CPU calibration divides the step "
        "among the layers (its layer model), beside the measured division")
    ("json", "print one JSON object");
  // clang-format on
  po::variables_map vm;
  SubcommandSyntax syntax;
  syntax.positional.push_back({"SPEC", "missing SPEC, the model to profile"});
  syntax.prefix = "profile: ";
  syntax.suffix = " (see dlh-estimate profile --help)";
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  const std::string path = vm["SPEC"].as<std::string>();
  const TrainSpec spec = LoadSpec(path);
  std::optional<Calibration> calibration;
  if (vm.count("calibration"))
    calibration = DividingCalibration(vm["calibration"].as<std::string>());
  const StepProfile p = ProfileStep(spec, o);
  std::optional<Division> division;
  if (calibration)
    division = DivisionOf(*calibration, vm["calibration"].as<std::string>(), spec, p);
  const Division* divided = division ? &*division : nullptr;
  if (vm.count("json")) {
    nlohmann::json j = ToJson(p, divided);
    j["spec"] = path;
    std::cout << j.dump(2) << "\n";
  } else {
    PrintText(path, p, divided);
  }
  return kExitOk;
}

}  // namespace dlh
