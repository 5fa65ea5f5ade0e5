// DLH — the training spec: what to train, on what data, with which optimizer.
// Parsed from JSON (nlohmann-json); every error names the file and the field, e.g.
//   spec.json: layers[2].kernel: must be a positive integer, got -3
// The format is documented in docs/reference/training-spec.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlh {

// Per-sample tensor shape: channels x height x width. Flat vectors are {features, 1, 1}.
struct Shape3 {
  int channels = 0;
  int height = 0;
  int width = 0;
  int64_t elements() const { return int64_t(channels) * height * width; }
  bool operator==(const Shape3& o) const {
    return channels == o.channels && height == o.height && width == o.width;
  }
};

// Residual holds two lists of layers of its own (LayerSpec::layers, the main path, and
// LayerSpec::shortcut, empty for the identity) whose outputs are added.
enum class LayerKind {
  Conv2d,
  MaxPool2d,
  Dense,
  Relu,
  Flatten,
  Dropout,
  BatchNorm,
  AvgPool2d,
  GlobalAvgPool2d,
  Gelu,
  Silu,
  Residual
};

const char* LayerKindName(LayerKind kind);

// How a conv2d or dense layer's weights start (fan_in = inputs per output, fan_out = outputs
// per input; a conv's both count its kernel taps):
//   he_normal      N(0, sqrt(2 / fan_in))             Kaiming, for ReLU networks
//   he_uniform     U(-sqrt(6 / fan_in), +)            the same variance, bounded
//   glorot_normal  N(0, sqrt(2 / (fan_in + fan_out))) Xavier
//   glorot_uniform U(-sqrt(6 / (fan_in + fan_out)), +)  Keras' default
//   torch_default  U(-1 / sqrt(fan_in), +)            PyTorch's (Kaiming-uniform, a = sqrt 5)
// and its bias: zeros, or torch_default, U(-1 / sqrt(fan_in), +).
enum class WeightInit { HeNormal, HeUniform, GlorotNormal, GlorotUniform, TorchDefault };
enum class BiasInit { Zeros, TorchDefault };
const char* WeightInitName(WeightInit init);
const char* BiasInitName(BiasInit init);

// The arithmetic of the GPU engine (the CPU engine computes in fp32 only and refuses bf16:
// common/cuda_support.hpp). bf16: convolutions and GEMMs take bf16 operands and accumulate
// in fp32, everything else (activations between layers, normalisation, loss, master weights,
// optimizer state, gradients, checkpoints) stays fp32, so a run resumes in either precision.
enum class Precision { Fp32, Bf16 };
// Where fp32 arithmetic may use TF32 tensor cores (PyTorch's allow_tf32 switches). The
// default is PyTorch's: convolutions (cuDNN's default math) but not GEMMs.
enum class Tf32Use { Convolutions, All, None };
const char* PrecisionName(Precision p);
const char* Tf32UseName(Tf32Use t);

struct LayerSpec {
  LayerKind kind = LayerKind::Relu;
  int filters = 0;        // conv2d: output channels
  int kernel = 0;         // conv2d, maxpool2d, avgpool2d: square window side
  int stride = 1;         // conv2d, maxpool2d, avgpool2d (the pools' default: kernel)
  int padding = 0;        // conv2d, maxpool2d, avgpool2d: zero padding on each side
  int units = 0;          // dense: output features
  double rate = 0;        // dropout: probability of dropping an element, in [0, 1)
  double momentum = 0.1;  // batchnorm: running-statistics update weight
  double epsilon = 1e-5;  // batchnorm: variance floor
  // conv2d, dense: the layer's "init" (default: the spec's) and "bias_init" (default:
  // torch_default after a torch_default init, zeros after any other).
  WeightInit init = WeightInit::TorchDefault;
  BiasInit bias_init = BiasInit::TorchDefault;
  // residual: the main path ("layers", at least one) and the shortcut ("shortcut"; empty:
  // the block's input itself). Both take the block's input; their outputs must have the
  // same shape, and the block outputs their sum.
  std::vector<LayerSpec> layers;
  std::vector<LayerSpec> shortcut;
};

// How deep residual blocks may nest (a block inside a block is depth 2).
constexpr int kMaxResidualDepth = 4;

struct OptimizerSpec {
  enum class Kind { Sgd, Adam };
  Kind kind = Kind::Sgd;
  double lr = 0.01;         // peak learning rate (after warm-up)
  double momentum = 0.0;    // sgd
  bool nesterov = false;    // sgd
  double weight_decay = 0;  // L2 on weights (not biases or batchnorm); decoupled for adam
  double beta1 = 0.9;       // adam
  double beta2 = 0.999;     // adam
  double epsilon = 1e-8;    // adam
};

struct ScheduleSpec {
  enum class Decay { Constant, Step, Cosine, OneCycle };
  Decay decay = Decay::Constant;
  double warmup_epochs = 0;  // linear ramp up to lr over this many epochs (may be fractional)
  double step_epochs = 0;    // step: multiply by gamma every step_epochs
  double gamma = 0.1;        // step
  double min_lr = 0;         // cosine: floor reached at the last step
  // onecycle (PyTorch's OneCycleLR, cosine annealing, two phases): from lr / div_factor up to
  // lr over the first pct_start of the steps, then down to lr / (div_factor *
  // final_div_factor) at the last step. It is its own warm-up: no warmup_epochs with it.
  double pct_start = 0.3;
  double div_factor = 25;
  double final_div_factor = 1e4;
};

// Data augmentation of the training batches, on the loader's thread (launcher/data/augment):
// a random crop of the image padded by crop_padding on each side (the padding is 0, the data
// set's mean after the loader's normalisation), then a horizontal flip with probability 1/2.
// Each sample's draw is a function of (seed, epoch, sample), so a resume sees the same images.
struct AugmentSpec {
  int crop_padding = 0;
  bool flip = false;
  bool any() const { return crop_padding > 0 || flip; }
};

// How the ranks keep one model. Synchronous data parallelism sums every step's gradients
// across ranks. Local SGD (Stich, "Local SGD converges fast and communicates little", ICLR
// 2019; Lin et al., "Don't use large mini-batches, use local SGD", ICLR 2020) lets every rank
// take up to `period` steps on its own batch and then averages the models (parameters and
// optimizer state, weighted by each rank's share of the global batch); a period also ends at
// every epoch's end and at the run's last step, so that evaluations, checkpoints and the end
// see one model. warmup_steps synchronous steps come first (Lin et al.'s post-local SGD).
// Stale-synchronous training (Ho et al., "More effective distributed ML via a stale
// synchronous parallel parameter server", NIPS 2013, for the bound; Li et al., "Pipe-SGD: a
// decentralized pipelined SGD framework", NeurIPS 2018, for the scheme) sums every step's
// gradient with a non-blocking allreduce and applies it `staleness` steps later: a rank runs up
// to that many steps ahead of the slowest, and the update order is a function of the step
// counter (launcher/train/trainer_stale.cpp says why this and not a parameter server).
struct SyncSpec {
  enum class Mode { Sync, LocalSgd, StaleSync };
  Mode mode = Mode::Sync;
  int period = 1;        // local_sgd: the most steps between two averages
  int warmup_steps = 0;  // local_sgd: synchronous steps before the first local one
  int staleness = 0;     // stale_sync: steps between a gradient's step and its update
  // stale_sync: each rank steps with its own gradient at once and swaps in the ranks' sum when
  // it arrives (Delayed Gradient Averaging: trainer_stale.cpp); false: only the sums, late.
  bool own_gradient_first = true;
  static constexpr int kMaxStaleness = 64;
  bool local_sgd() const { return mode == Mode::LocalSgd; }
  bool stale_sync() const { return mode == Mode::StaleSync; }
};

// How the network is laid over the ranks. Pipeline model parallelism (GPipe: Huang et al.,
// "GPipe: efficient training of giant neural networks using pipeline parallelism", NeurIPS
// 2019) splits the layers into `pipeline_stages` consecutive stages, one rank each, and each
// replica's batch into `micro_batches` that flow through them; the world's ranks are replicas
// of the pipeline, trained data-parallel (launcher/engine/pipeline_engine.cpp).
struct ParallelSpec {
  int pipeline_stages = 1;  // 1: every rank holds the whole network
  int micro_batches = 1;    // per replica and step
  bool pipelined() const { return pipeline_stages > 1; }
};

struct TrainSpec {
  std::string name;
  Shape3 input;
  int classes = 0;
  std::vector<LayerSpec> layers;
  OptimizerSpec optimizer;
  ScheduleSpec schedule;
  int batch_size = 0;  // global batch: the sum of all ranks' batches per step
  int epochs = 0;
  uint64_t seed = 0;
  WeightInit init = WeightInit::TorchDefault;  // the layers' default "init"
  // Label smoothing of the cross-entropy, in [0, 1): the target puts 1 - s + s/classes on
  // the label and s/classes on every other class (PyTorch's CrossEntropyLoss).
  double label_smoothing = 0;
  AugmentSpec augment;
  SyncSpec sync;
  ParallelSpec parallel;
  Precision precision = Precision::Fp32;
  Tf32Use tf32 = Tf32Use::Convolutions;
  std::string dataset;  // HDF5 data set; relative paths are resolved against the spec's folder
  std::string origin;   // file the spec came from, used in messages
  std::string json;     // the spec text as given, stored in checkpoints
};

// Parses and validates a spec. `origin` names the source in messages; relative
// dataset paths are resolved against `base_dir` (may be empty). Throws SpecError.
TrainSpec ParseSpec(const std::string& json_text, const std::string& origin,
                    const std::string& base_dir);

// Reads and parses a spec file. Throws SpecError (also for an unreadable file).
TrainSpec LoadSpec(const std::string& path);

// Per-sample output shape after each layer (size layers.size() + 1; [0] is the input).
// Throws SpecError when a layer cannot take its input (e.g. kernel larger than the image).
std::vector<Shape3> LayerShapes(const TrainSpec& spec);

// Per-sample output shapes of a list of layers given its input (size layers.size() + 1),
// for a residual block's paths; `path` names the list in messages ("layers[3].layers").
// Throws SpecError as LayerShapes does.
std::vector<Shape3> PathShapes(const std::vector<LayerSpec>& layers, const Shape3& in,
                               const std::string& origin, const std::string& path);

// Learning rate at a 0-based global step. With total = epochs * steps_per_epoch and
// warmup = round(warmup_epochs * steps_per_epoch) steps:
//   step < warmup: lr * (step + 1) / warmup   (linear ramp, reaches lr at step warmup-1)
//   otherwise, with t = step - warmup and T = max(1, total - warmup):
//     constant: lr
//     step:     lr * gamma^floor(step / (step_epochs * steps_per_epoch)), counted from
//               step 0 (not from the end of warm-up)
//     cosine:   min_lr + (lr - min_lr) * (1 + cos(pi * min(t, T) / T)) / 2, which is lr
//               right after warm-up and min_lr at step == total (one past the last step)
//     onecycle: with up = pct_start * total - 1, last = total - 1, lo = lr / div_factor and
//               end = lo / final_div_factor, and A(a, b, x) = b + (a - b) * (1 + cos(pi x)) / 2:
//               A(lo, lr, step / up) up to step up, then A(lr, end, (step - up) / (last -
//               up)), held at end after the last step (PyTorch's OneCycleLR)
// steps_per_epoch < 1 counts as 1 and a negative step as 0.
double LearningRate(const TrainSpec& spec, int64_t step, int64_t steps_per_epoch);

}  // namespace dlh
