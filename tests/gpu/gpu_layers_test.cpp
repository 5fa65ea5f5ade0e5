// DLH — every GPU layer against the CPU layer of launcher/nn/layers/ on the same random input
// and parameters: forward output, input gradient and parameter gradients, at fp32
// tolerance. The CPU layers are themselves checked against finite differences
// (tests/unit/layers_test.cpp), so agreement here means the GPU layers are right.
#include <map>

#include "launcher/nn/layer.hpp"
#include "launcher/nn/random.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace dlh {
namespace cuda {
namespace {

constexpr double kTolerance = 1e-5;

struct Case {
  LayerSpec spec;
  Shape3 in;
  int batch;
};

LayerSpec Conv(int filters, int kernel, int stride, int padding) {
  LayerSpec s;
  s.kind = LayerKind::Conv2d;
  s.filters = filters, s.kernel = kernel, s.stride = stride, s.padding = padding;
  return s;
}
LayerSpec Pool(int kernel, int stride, int padding, LayerKind kind = LayerKind::MaxPool2d) {
  LayerSpec s;
  s.kind = kind;
  s.kernel = kernel, s.stride = stride, s.padding = padding;
  return s;
}
LayerSpec AvgPool(int kernel, int stride, int padding) {
  return Pool(kernel, stride, padding, LayerKind::AvgPool2d);
}

// The GPU's arithmetic for a comparison (GpuContext's switches) and what it must meet.
struct Arithmetic {
  bool bf16 = false;
  Tf32Use tf32 = Tf32Use::Convolutions;
  double tolerance = kTolerance;
  // The forward output must differ from the fp32 CPU by at least this much: bf16 operands
  // round every product's inputs, so a bf16 path that quietly ran in fp32 fails.
  double min_forward_error = 0;
};

// Runs one layer on both engines; checks training forward and backward, then (for
// batchnorm) the statistics commit and an inference forward.
void Compare(const Case& c, const Arithmetic& a = {}) {
  SCOPED_TRACE(std::string(LayerKindName(c.spec.kind)) + " batch " + std::to_string(c.batch) +
               (a.bf16 ? " bf16" : "") + " tf32 " + Tf32UseName(a.tf32));
  std::unique_ptr<Layer> cpu = MakeLayer(c.spec, c.in);
  std::mt19937_64 rng(11);
  cpu->init(rng);
  const Shape3 out = cpu->output_shape();
  TestGpu gpu(c.batch);
  gpu.context.bf16 = a.bf16;
  gpu.context.tf32_convolutions = a.tf32 != Tf32Use::None;
  gpu.context.tf32_gemms = a.tf32 == Tf32Use::All;
  const double tolerance = a.tolerance;  // every check below
  std::unique_ptr<GpuLayer> layer = MakeGpuLayer(c.spec, c.in, out, c.batch, &gpu.context);

  std::vector<DeviceArray<float>> keep;
  PointerMap values, grads, buffers;
  // Batchnorm starts at gamma 1, beta 0: random values test the affine part too.
  uint64_t seed = 100;
  for (ParamRef p : cpu->params()) {
    // (Also a batchnorm inside a residual block: "main.01.batchnorm/gamma".)
    const bool norm =
        p.name == "gamma" || p.name == "beta" || p.name.find("batchnorm/") != std::string::npos;
    if (norm) p.value->assign(RandomNormal(p.value->size(), ++seed));
    keep.push_back(Upload(p.value->to_vector()));
    values[p.name] = keep.back().get();
    keep.push_back(Poisoned(p.grad->size()));
    grads[p.name] = keep.back().get();
  }
  for (BufferRef b : cpu->buffers()) {
    keep.push_back(Upload(b.value->to_vector()));
    buffers[b.name] = keep.back().get();
  }
  layer->bind(values, grads, buffers);

  const size_t in_count = size_t(c.batch) * size_t(c.in.elements());
  const size_t out_count = size_t(c.batch) * size_t(out.elements());
  Tensor x({c.batch, c.in.channels, c.in.height, c.in.width});
  x.assign(RandomNormal(in_count, 1));
  ForwardContext ctx;
  ctx.training = true;
  ctx.seed = 3, ctx.step = 5, ctx.rank = 1, ctx.layer_index = 2;
  Tensor y;
  cpu->forward(x, y, ctx);
  DeviceArray<float> dx_in = Upload(x.to_vector()), dy_out = Poisoned(out_count);
  // A layer whose output is its input (flatten, dropout at rate 0) is given its input as
  // output and its output gradient as input gradient, as GpuStack does.
  const bool same = layer->output_is_input();
  float* y_dev = same ? dx_in.get() : dy_out.get();
  layer->forward(dx_in.get(), y_dev, c.batch, ctx);
  EXPECT_TRUE(Near(Download(y_dev, out_count), y.to_vector(), tolerance)) << "forward";
  if (a.min_forward_error > 0) {
    EXPECT_GT(RelativeL2(Download(y_dev, out_count), y.to_vector()), a.min_forward_error)
        << "forward: as exact as fp32, so the bf16 path did not run";
  }

  Tensor g({c.batch, out.channels, out.height, out.width}), grad_in;
  g.assign(RandomNormal(out_count, 2));
  cpu->backward(x, y, g, &grad_in);
  DeviceArray<float> dg = Upload(g.to_vector()), ddx = Poisoned(in_count);
  float* dx_dev = same ? dg.get() : ddx.get();
  layer->backward(dx_in.get(), y_dev, dg.get(), dx_dev, c.batch);
  EXPECT_TRUE(Near(Download(dx_dev, in_count), grad_in.to_vector(), tolerance)) << "input gradient";
  for (ParamRef p : cpu->params())
    EXPECT_TRUE(Near(Download(grads[p.name], p.grad->size()), p.grad->to_vector(), tolerance))
        << p.name << " gradient";

  if (Tensor* stats = cpu->batch_stats()) {
    EXPECT_TRUE(Near(Download(layer->batch_stats(), stats->size()), stats->to_vector(), tolerance))
        << "batch statistics";
    cpu->commit_batch_stats();
    layer->commit_batch_stats();
    for (BufferRef b : cpu->buffers())
      EXPECT_TRUE(Near(Download(buffers[b.name], b.value->size()), b.value->to_vector(), tolerance))
          << b.name;
    ctx.training = false;
    cpu->forward(x, y, ctx);
    layer->forward(dx_in.get(), dy_out.get(), c.batch, ctx);
    EXPECT_TRUE(Near(Download(dy_out.get(), out_count), y.to_vector(), tolerance)) << "inference";
  }
}

TEST(GpuLayers, Conv2dMatchesCpu) {
  DLH_REQUIRE_GPU();
  Compare({Conv(8, 3, 1, 1), {3, 12, 12}, 5});
  Compare({Conv(4, 5, 2, 0), {2, 13, 11}, 3});
  Compare({Conv(16, 1, 1, 0), {8, 7, 7}, 1});
}

TEST(GpuLayers, MaxPoolMatchesCpu) {
  DLH_REQUIRE_GPU();
  Compare({Pool(2, 2, 0), {3, 8, 8}, 4});
  Compare({Pool(3, 2, 1), {2, 9, 7}, 3});
}

// Windows that overlap and reach into the padding (divided by kernel * kernel all the
// same), windows that tile the plane, a last row and column no window covers (their
// gradient is 0), and stride 1.
TEST(GpuLayers, AvgPoolMatchesCpu) {
  DLH_REQUIRE_GPU();
  Compare({AvgPool(3, 2, 1), {3, 8, 8}, 4});
  Compare({AvgPool(3, 2, 1), {2, 9, 7}, 3});
  Compare({AvgPool(2, 2, 0), {3, 8, 8}, 4});
  Compare({AvgPool(2, 2, 0), {2, 9, 7}, 3});
  Compare({AvgPool(3, 1, 1), {2, 5, 6}, 2});
}

// Planes smaller than a warp, wider than one (each lane sums several values), and of one
// value; more planes than a block has warps.
TEST(GpuLayers, GlobalAvgPoolMatchesCpu) {
  DLH_REQUIRE_GPU();
  const LayerSpec gap = Kind(LayerKind::GlobalAvgPool2d);
  Compare({gap, {5, 4, 4}, 3});
  Compare({gap, {4, 20, 20}, 2});
  Compare({gap, {16, 7, 7}, 9});
  Compare({gap, {6, 1, 1}, 2});
}

TEST(GpuLayers, GeluAndSiluMatchCpu) {
  DLH_REQUIRE_GPU();
  Compare({Kind(LayerKind::Gelu), {4, 6, 6}, 3});
  Compare({Kind(LayerKind::Silu), {4, 6, 6}, 3});
  Compare({Kind(LayerKind::Gelu), {37, 1, 1}, 5});  // after a dense layer
  Compare({Kind(LayerKind::Silu), {37, 1, 1}, 5});
}

TEST(GpuLayers, DenseMatchesCpu) {
  DLH_REQUIRE_GPU();
  Compare({Dense(10), {37, 1, 1}, 6});
  Compare({Dense(64), {3, 5, 5}, 1});
}

TEST(GpuLayers, ElementwiseLayersMatchCpu) {
  DLH_REQUIRE_GPU();
  Compare({Kind(LayerKind::Relu), {4, 6, 6}, 3});
  Compare({Kind(LayerKind::Flatten), {4, 6, 6}, 3});
}

TEST(GpuLayers, DropoutDrawsTheCpuMasks) {
  DLH_REQUIRE_GPU();
  Compare({Drop(0.3), {5, 7, 7}, 4});
  Compare({Drop(0.0), {5, 1, 1}, 2});
}

TEST(GpuLayers, BatchNormMatchesCpu) {
  DLH_REQUIRE_GPU();
  LayerSpec bn = Kind(LayerKind::BatchNorm);
  Compare({bn, {6, 5, 5}, 4});
  Compare({bn, {20, 1, 1}, 7});  // after a dense layer: per feature
  Compare({bn, {3, 4, 4}, 1});   // one sample: the unbiased variance has no n-1
  // Several blocks per channel (parts of n * hw; kernels.cu): a plane wider than a block,
  // planes narrower than a block (a thread's step crosses samples), one value per plane.
  Compare({bn, {3, 20, 20}, 9});
  Compare({bn, {5, 3, 3}, 300});
  Compare({bn, {40, 1, 1}, 2000});
}

LayerSpec Block(std::vector<LayerSpec> main, std::vector<LayerSpec> shortcut = {}) {
  LayerSpec b = Kind(LayerKind::Residual);
  b.layers = std::move(main);
  b.shortcut = std::move(shortcut);
  return b;
}

// Residual blocks (gpu_residual.cpp): each path a stack of its own, their outputs added, the
// input gradients summed, batch statistics gathered and committed, nested dropout drawing
// the CPU's masks (nested layer indices).
TEST(GpuLayers, ResidualMatchesCpu) {
  DLH_REQUIRE_GPU();
  const LayerSpec bn = Kind(LayerKind::BatchNorm), relu = Kind(LayerKind::Relu);
  // ResNet's basic block with the identity, and with a stride-2 projection.
  Compare({Block({Conv(4, 3, 1, 1), bn, relu, Conv(4, 3, 1, 1), bn}), {4, 8, 8}, 3});
  Compare({Block({Conv(8, 3, 2, 1), bn, relu, Conv(8, 3, 1, 1), bn}, {Conv(8, 1, 2, 0), bn}),
           {4, 9, 9},
           2});
  // A block in a block, new kinds inside, dropout in a path.
  Compare(
      {Block({Block({Kind(LayerKind::Gelu), Conv(3, 3, 1, 1)}), Kind(LayerKind::Silu), Drop(0.3)},
             {AvgPool(3, 1, 1)}),
       {3, 6, 6},
       4});
  // On flat values, with a shortcut whose output is its input (a flatten): the block's input
  // gradient then gets a copy of the output gradient plus the main path's.
  Compare({Block({Dense(20), relu, Dense(20)}, {Kind(LayerKind::Flatten)}), {20, 1, 1}, 5});
}

// bf16 mixed precision (bf16.hpp): convolutions and dense layers on bf16 operands with fp32
// accumulation, alone and inside a residual block (whose paths share the transient arena).
// bf16 keeps 8 bits of mantissa: each operand is off by up to 2^-9 relative, so results
// are off by about 0.3% (relative L2); 2% bounds them, and fp32's exactness fails them.
TEST(GpuLayers, Bf16MatchesCpuWithinItsRounding) {
  DLH_REQUIRE_GPU();
  Arithmetic bf16;
  bf16.bf16 = true;
  bf16.tolerance = 2e-2;
  bf16.min_forward_error = 1e-4;
  Compare({Conv(8, 3, 1, 1), {3, 12, 12}, 5}, bf16);
  Compare({Conv(16, 3, 2, 1), {8, 9, 9}, 3}, bf16);
  Compare({Dense(10), {37, 1, 1}, 6}, bf16);
  Compare({Dense(64), {32, 4, 4}, 16}, bf16);
  const LayerSpec bn = Kind(LayerKind::BatchNorm), relu = Kind(LayerKind::Relu);
  Compare({Block({Conv(8, 3, 2, 1), bn, relu, Conv(8, 3, 1, 1), bn}, {Conv(8, 1, 2, 0), bn}),
           {4, 9, 9},
           2},
          bf16);
}

// The TF32 switches: "none" keeps convolutions in FMA math, as exact as the CPU; "all" lets
// the GEMMs use TF32 too (10 bits of mantissa: about 0.05%).
TEST(GpuLayers, Tf32SwitchesMatchCpu) {
  DLH_REQUIRE_GPU();
  Arithmetic none;
  none.tf32 = Tf32Use::None;
  Compare({Conv(32, 3, 1, 1), {16, 16, 16}, 8}, none);
  Compare({Dense(64), {32, 4, 4}, 16}, none);
  Arithmetic all;
  all.tf32 = Tf32Use::All;
  all.tolerance = 5e-3;
  Compare({Conv(32, 3, 1, 1), {16, 16, 16}, 8}, all);
  Compare({Dense(64), {32, 4, 4}, 16}, all);
}

// The algorithm choice of the convolution (host logic, no GPU needed): deterministic
// first, a non-deterministic one only when nothing else fits, and it says so.
TEST(GpuLayers, ConvAlgorithmPrefersDeterministic) {
  cudnnConvolutionBwdFilterAlgoPerf_t perf[3] = {};
  perf[0].algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
  perf[0].status = CUDNN_STATUS_SUCCESS;
  perf[0].determinism = CUDNN_NON_DETERMINISTIC;
  perf[0].memory = 0;
  perf[1].algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  perf[1].status = CUDNN_STATUS_SUCCESS;
  perf[1].determinism = CUDNN_DETERMINISTIC;
  perf[1].memory = 1000;
  perf[1].mathType = CUDNN_FMA_MATH;
  perf[2].algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
  perf[2].status = CUDNN_STATUS_NOT_SUPPORTED;
  perf[2].determinism = CUDNN_DETERMINISTIC;
  bool deterministic = false;
  auto got = PickAlgo(perf, 3, 1000, "backward-filter", &deterministic);
  EXPECT_EQ(got.algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
  EXPECT_EQ(got.mathType, CUDNN_FMA_MATH);  // the engine sets what the result says
  EXPECT_TRUE(deterministic);
  // The deterministic one needs too much workspace: the other, flagged.
  got = PickAlgo(perf, 3, 999, "backward-filter", &deterministic);
  EXPECT_EQ(got.algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0);
  EXPECT_FALSE(deterministic);
  perf[0].mathType = CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;  // fp32 to fp16: never
  EXPECT_THROW(PickAlgo(perf, 3, 999, "backward-filter", &deterministic), CudaError);
  perf[0].mathType = CUDNN_DEFAULT_MATH;
  perf[0].status = CUDNN_STATUS_NOT_SUPPORTED;
  EXPECT_THROW(PickAlgo(perf, 3, 999, "backward-filter", &deterministic), CudaError);
  // TF32 off ("tf32": "none"): a tensor-op result never qualifies, an FMA one does.
  perf[0].status = CUDNN_STATUS_SUCCESS;
  perf[0].mathType = CUDNN_TENSOR_OP_MATH;
  perf[1].mathType = CUDNN_TENSOR_OP_MATH;
  EXPECT_EQ(PickAlgo(perf, 3, 1000, "backward-filter", &deterministic).algo,
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
  EXPECT_THROW(PickAlgo(perf, 3, 1000, "backward-filter", &deterministic, false), CudaError);
  perf[0].mathType = CUDNN_FMA_MATH;
  EXPECT_EQ(PickAlgo(perf, 3, 1000, "backward-filter", &deterministic, false).algo,
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0);
  EXPECT_FALSE(deterministic);
}

}  // namespace
}  // namespace cuda
}  // namespace dlh
