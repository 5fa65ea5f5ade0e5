// DLH — the dense layer's fused bias (cuBLASLt epilogues) and the layers whose output is
// their input (flatten, dropout at rate 0), in GpuStack as the engine runs them, against
// the CPU layers of launcher/nn/layers/.
#include "launcher/engine/cuda/gpu_stack.hpp"

#include <cstring>
#include <map>
#include <memory>

#include "launcher/nn/layer.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace dlh {
namespace cuda {
namespace {

constexpr double kTolerance = 1e-5;

// A network on both engines: the CPU layers (initialised from a fixed seed) and a GpuStack
// of GPU layers bound to copies of their parameters, with NaN-poisoned gradients.
struct Net {
  Net(const std::vector<LayerSpec>& specs, const Shape3& input, int max_batch)
      : gpu(max_batch), shapes{input} {
    std::vector<std::unique_ptr<GpuLayer>> layers;
    std::mt19937_64 rng(17);
    for (const LayerSpec& s : specs) {
      cpu.push_back(MakeLayer(s, shapes.back()));
      cpu.back()->init(rng);
      const Shape3 out = cpu.back()->output_shape();
      layers.push_back(MakeGpuLayer(s, shapes.back(), out, max_batch, &gpu.context));
      shapes.push_back(out);
    }
    stack = std::make_unique<GpuStack>(std::move(layers), shapes, max_batch);
    grads.resize(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      PointerMap values;
      for (ParamRef p : cpu[i]->params()) {
        keep.push_back(Upload(p.value->to_vector()));
        values[p.name] = keep.back().get();
        keep.push_back(Poisoned(p.grad->size()));
        grads[i][p.name] = keep.back().get();
      }
      stack->layer(i).bind(values, grads[i], {});
    }
  }
  TestGpu gpu;
  std::vector<Shape3> shapes;  // the input's, then each layer's output
  std::vector<std::unique_ptr<Layer>> cpu;
  std::unique_ptr<GpuStack> stack;
  std::vector<DeviceArray<float>> keep;
  std::vector<PointerMap> grads;  // per layer
};

Tensor Batch(const Shape3& s, int n, uint64_t seed) {
  Tensor t({n, s.channels, s.height, s.width});
  t.assign(RandomNormal(t.size(), seed));
  return t;
}

// Runs `specs` on both engines, training forward and backward, and compares the output,
// every parameter gradient and the first layer's output gradient; `alias` lists the
// layers that must have run in their input's memory.
void CompareStack(const std::vector<LayerSpec>& specs, const Shape3& input, int n,
                  const std::vector<size_t>& alias) {
  Net net(specs, input, n);
  ForwardContext ctx;
  ctx.training = true;
  ctx.seed = 3, ctx.step = 5, ctx.rank = 1;
  const size_t count = specs.size();

  // CPU: each layer's output, then the gradients back to the first layer's output.
  std::vector<Tensor> outs(count);
  const Tensor x = Batch(input, n, 1);
  for (size_t i = 0; i < count; ++i) {
    ctx.layer_index = int(i);
    net.cpu[i]->forward(i == 0 ? x : outs[i - 1], outs[i], ctx);
  }
  const Tensor g = Batch(net.shapes[count], n, 2);
  Tensor dy = g, dx;
  for (size_t k = count; k-- > 0;) {
    net.cpu[k]->backward(k == 0 ? x : outs[k - 1], outs[k], dy, k == 0 ? nullptr : &dx);
    if (k > 0) dy = dx;
  }  // dy: dLoss/d(output of layer 0)

  DeviceArray<float> dev_x = Upload(x.to_vector());
  net.stack->forward(dev_x.get(), n, ctx);
  EXPECT_TRUE(Near(Download(net.stack->output(), g.size()), outs.back().to_vector(), kTolerance))
      << "forward";
  for (size_t i : alias) {
    const float* in = i == 0 ? dev_x.get() : net.stack->output(i - 1);
    EXPECT_EQ(net.stack->output(i), in) << "layer " << i << " output is not its input";
  }
  CUDA_CHECK(cudaMemcpy(net.stack->output_gradient(), g.data(), g.size() * sizeof(float),
                        cudaMemcpyHostToDevice));
  std::vector<size_t> done;
  net.stack->backward(n, [&](size_t k) { done.push_back(k); });
  ASSERT_EQ(done.size(), count) << "layer_done calls";
  for (size_t k = 0; k < count; ++k) {
    EXPECT_EQ(done[k], count - 1 - k) << "layer_done order";
    for (ParamRef p : net.cpu[k]->params())
      EXPECT_TRUE(
          Near(Download(net.grads[k][p.name], p.grad->size()), p.grad->to_vector(), kTolerance))
          << "layer " << k << " " << p.name << " gradient";
  }
  EXPECT_TRUE(Near(Download(net.stack->gradient(0), dy.size()), dy.to_vector(), kTolerance))
      << "first layer's output gradient";
  for (size_t i : alias) {  // the layer's input gradient is its output gradient
    if (i > 0) {
      EXPECT_EQ(net.stack->gradient(i - 1), net.stack->gradient(i)) << "layer " << i;
    }
  }
}

TEST(GpuStack, FlattenAndDenseMatchCpu) {
  DLH_REQUIRE_GPU();
  // Flatten between layers, rate-0 dropout between dense layers, flatten as the last layer.
  CompareStack({Kind(LayerKind::Relu), Kind(LayerKind::Flatten), Dense(7), Drop(0.0), Dense(5),
                Kind(LayerKind::Flatten)},
               {3, 4, 5}, 6, {1, 3, 5});
  // Flatten first: its output is the caller's input array.
  CompareStack({Kind(LayerKind::Flatten), Dense(9), Kind(LayerKind::Relu), Dense(4)}, {2, 3, 3}, 5,
               {0});
  // Dropout at a positive rate keeps its own memory (and draws the CPU's masks).
  CompareStack({Kind(LayerKind::Flatten), Dense(16), Drop(0.25), Dense(3)}, {4, 2, 2}, 8, {0});
}

// Flatten and rate-0 dropout run nothing, so a caller that gives them memory of their own
// would read garbage after them: they refuse it instead.
TEST(GpuStack, OutputIsInputLayersRefuseOtherMemory) {
  DLH_REQUIRE_GPU();
  TestGpu gpu(2);
  DeviceArray<float> a(8), b(8);
  ForwardContext ctx;
  ctx.training = true;
  for (const LayerSpec& s : {Kind(LayerKind::Flatten), Drop(0.0)}) {
    SCOPED_TRACE(LayerKindName(s.kind));
    const Shape3 in{2, 2, 1}, out = s.kind == LayerKind::Flatten ? Shape3{4, 1, 1} : in;
    std::unique_ptr<GpuLayer> layer = MakeGpuLayer(s, in, out, 2, &gpu.context);
    ASSERT_TRUE(layer->output_is_input());
    EXPECT_THROW(layer->forward(a.get(), b.get(), 2, ctx), Error);
    EXPECT_THROW(layer->backward(a.get(), a.get(), a.get(), b.get(), 2), Error);
    EXPECT_NO_THROW(layer->forward(a.get(), a.get(), 2, ctx));
    EXPECT_NO_THROW(layer->backward(a.get(), a.get(), b.get(), b.get(), 2));
    EXPECT_NO_THROW(layer->backward(a.get(), a.get(), b.get(), nullptr, 2));
  }
  EXPECT_FALSE(MakeGpuLayer(Drop(0.5), {4, 1, 1}, {4, 1, 1}, 2, &gpu.context)->output_is_input());
}

// One dense layer on its own, x and dy at an offset of `shift` floats from their arrays'
// 256-byte-aligned start (cuBLASLt algorithms differ by alignment); the results on the host.
struct DenseResult {
  std::vector<float> y, dx, dw, db;
};
DenseResult RunDense(TestGpu* gpu, GpuLayer* layer, Layer* cpu, int n, size_t shift) {
  const Shape3 out = cpu->output_shape();
  std::vector<DeviceArray<float>> keep;
  PointerMap values, grads;
  for (ParamRef p : cpu->params()) {
    keep.push_back(Upload(p.value->to_vector()));
    values[p.name] = keep.back().get();
    keep.push_back(Poisoned(p.grad->size()));
    grads[p.name] = keep.back().get();
  }
  layer->bind(values, grads, {});
  const size_t in_count = size_t(n) * size_t(cpu->params()[0].value->dim(1));
  const size_t out_count = size_t(n) * size_t(out.channels);
  std::vector<float> x(shift, 0.0f), g(shift, 0.0f);
  for (float v : RandomNormal(in_count, 1)) x.push_back(v);
  for (float v : RandomNormal(out_count, 2)) g.push_back(v);
  DeviceArray<float> dev_x = Upload(x), dev_g = Upload(g);
  DeviceArray<float> y = Poisoned(out_count), dx = Poisoned(in_count);
  ForwardContext ctx;
  ctx.training = true;
  layer->forward(dev_x.get() + shift, y.get(), n, ctx);
  layer->backward(dev_x.get() + shift, y.get(), dev_g.get() + shift, dx.get(), n);
  gpu->sync();
  return DenseResult{Download(y.get(), out_count), Download(dx.get(), in_count),
                     Download(grads["weight"], cpu->params()[0].grad->size()),
                     Download(grads["bias"], cpu->params()[1].grad->size())};
}

// The same through the CPU layer.
DenseResult RunCpuDense(Layer* cpu, const Shape3& in, int n) {
  const Shape3 out = cpu->output_shape();
  Tensor x({n, in.channels, in.height, in.width}), y, g({n, out.channels, 1, 1}), dx;
  x.assign(RandomNormal(x.size(), 1));
  g.assign(RandomNormal(g.size(), 2));
  cpu->forward(x, y, ForwardContext{});
  cpu->backward(x, y, g, &dx);
  return DenseResult{y.to_vector(), dx.to_vector(), cpu->params()[0].grad->to_vector(),
                     cpu->params()[1].grad->to_vector()};
}

// Both paths (the cuBLASLt epilogues and the plain GEMMs with the bias kernels) against the
// CPU layer, the bias gradient included, and the fused one must really have run.
TEST(GpuDense, FusedBiasMatchesCpu) {
  DLH_REQUIRE_GPU();
  struct Case {
    Shape3 in;
    int units, n;
    size_t shift;
  };
  // Odd sizes; one sample; a batch long enough that the bias gradient is a real reduction;
  // x and dy 4 bytes off alignment.
  for (const Case& c : {Case{{37, 1, 1}, 10, 6, 0}, Case{{3, 5, 5}, 64, 1, 0},
                        Case{{40, 1, 1}, 33, 300, 0}, Case{{29, 1, 1}, 12, 7, 1}}) {
    SCOPED_TRACE("in " + std::to_string(c.in.elements()) + ", units " + std::to_string(c.units) +
                 ", batch " + std::to_string(c.n) + ", shift " + std::to_string(c.shift));
    std::unique_ptr<Layer> cpu = MakeLayer(Dense(c.units), c.in);
    std::mt19937_64 rng(23);
    cpu->init(rng);
    for (ParamRef p : cpu->params())  // He init leaves the bias at 0: give it values
      if (p.name == "bias") p.value->assign(RandomNormal(p.value->size(), 29));
    const Shape3 out = cpu->output_shape();
    const DenseResult want = RunCpuDense(cpu.get(), c.in, c.n);
    for (bool fuse : {true, false}) {
      SCOPED_TRACE(fuse ? "fused" : "unfused");
      TestGpu gpu(c.n);
      gpu.context.fuse_dense_bias = fuse;
      std::unique_ptr<GpuLayer> layer = MakeGpuLayer(Dense(c.units), c.in, out, c.n, &gpu.context);
      const DenseResult got = RunDense(&gpu, layer.get(), cpu.get(), c.n, c.shift);
      EXPECT_TRUE(Near(got.y, want.y, kTolerance)) << "forward";
      EXPECT_TRUE(Near(got.dx, want.dx, kTolerance)) << "input gradient";
      EXPECT_TRUE(Near(got.dw, want.dw, kTolerance)) << "weight gradient";
      EXPECT_TRUE(Near(got.db, want.db, kTolerance)) << "bias gradient";
      // Forward's bias and backward's bias gradient, each counted once. A misaligned case
      // may find no cuBLASLt algorithm and run unfused; aligned ones must run fused.
      EXPECT_EQ(gpu.context.dense_bias_fused + gpu.context.dense_bias_unfused, 2);
      if (!fuse) {
        EXPECT_EQ(gpu.context.dense_bias_unfused, 2);
      } else if (c.shift == 0) {
        EXPECT_EQ(gpu.context.dense_bias_fused, 2)
            << "cuBLASLt offered no BIAS/BGRADB epilogue algorithm for this fp32 shape";
      }
    }
  }
}

// A layer run twice (its cached algorithms, bound to new arrays the second time) and a new
// layer (which chooses them afresh): the same bits, the fused bias gradient's reduction
// included.
TEST(GpuDense, RepeatsBitForBit) {
  DLH_REQUIRE_GPU();
  const Shape3 in{300, 1, 1};
  const int units = 128, n = 256;
  std::unique_ptr<Layer> cpu = MakeLayer(Dense(units), in);
  std::mt19937_64 rng(31);
  cpu->init(rng);
  for (ParamRef p : cpu->params())
    if (p.name == "bias") p.value->assign(RandomNormal(p.value->size(), 37));
  const Shape3 out = cpu->output_shape();
  TestGpu gpu(n);
  std::unique_ptr<GpuLayer> first = MakeGpuLayer(Dense(units), in, out, n, &gpu.context);
  std::unique_ptr<GpuLayer> second = MakeGpuLayer(Dense(units), in, out, n, &gpu.context);
  const DenseResult runs[] = {RunDense(&gpu, first.get(), cpu.get(), n, 0),
                              RunDense(&gpu, first.get(), cpu.get(), n, 0),
                              RunDense(&gpu, second.get(), cpu.get(), n, 0)};
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (size_t i = 1; i < 3; ++i) {
    SCOPED_TRACE(i == 1 ? "the same layer again" : "a new layer");
    EXPECT_TRUE(same_bits(runs[i].y, runs[0].y)) << "forward";
    EXPECT_TRUE(same_bits(runs[i].dx, runs[0].dx)) << "input gradient";
    EXPECT_TRUE(same_bits(runs[i].dw, runs[0].dw)) << "weight gradient";
    EXPECT_TRUE(same_bits(runs[i].db, runs[0].db)) << "bias gradient";
  }
  // Bit-equal and right: the repeats are of the values the CPU computes.
  const DenseResult want = RunCpuDense(cpu.get(), in, n);
  EXPECT_TRUE(Near(runs[0].y, want.y, kTolerance)) << "forward";
  EXPECT_TRUE(Near(runs[0].db, want.db, kTolerance)) << "bias gradient";
  EXPECT_EQ(gpu.context.dense_bias_fused, 6) << "not the fused path (see FusedBiasMatchesCpu)";
}

}  // namespace
}  // namespace cuda
}  // namespace dlh
