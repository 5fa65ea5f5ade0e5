// DLH — a GPU step timed pass by pass (launcher/engine/cuda/step_timer.hpp): the passes come
// back in the order the stack ran them, each with its device and host time, the held stream
// lets nothing run before release(), and a convolution names the algorithms cuDNN chose.
#include <chrono>
#include <memory>
#include <thread>

#include "common/spec.hpp"
#include "launcher/engine/cuda/gpu_stack.hpp"
#include "launcher/engine/cuda/step_timer.hpp"
#include "launcher/nn/layer.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace dlh {
namespace cuda {
namespace {

LayerSpec Conv(int filters) {
  LayerSpec s = Kind(LayerKind::Conv2d);
  s.filters = filters;
  s.kernel = 3;
  s.padding = 1;
  return s;
}

TEST(GpuStepTimer, PassesInOrderWithTheirTimesAndAlgorithms) {
  DLH_REQUIRE_GPU();
  const int n = 32;
  TestGpu gpu(n);
  const std::vector<LayerSpec> specs = {Conv(16), Kind(LayerKind::Relu), Conv(16),
                                        Kind(LayerKind::Flatten), Dense(10)};
  std::vector<Shape3> shapes = {{3, 16, 16}};
  std::vector<std::unique_ptr<GpuLayer>> layers;
  std::vector<std::unique_ptr<Layer>> cpu;  // for the shapes and the initial parameters
  std::vector<DeviceArray<float>> keep;
  std::mt19937_64 rng(5);
  for (const LayerSpec& s : specs) {
    cpu.push_back(MakeLayer(s, shapes.back()));
    cpu.back()->init(rng);
    layers.push_back(MakeGpuLayer(s, shapes.back(), cpu.back()->output_shape(), n, &gpu.context));
    shapes.push_back(cpu.back()->output_shape());
  }
  GpuStack stack(std::move(layers), shapes, n);
  for (size_t i = 0; i < specs.size(); ++i) {
    PointerMap values, grads;
    for (ParamRef p : cpu[i]->params()) {
      keep.push_back(Upload(p.value->to_vector()));
      values[p.name] = keep.back().get();
      keep.push_back(Poisoned(p.grad->size()));
      grads[p.name] = keep.back().get();
    }
    stack.layer(i).bind(values, grads, {});
  }
  stack.plan(n);
  const DeviceArray<float> x = Upload(RandomNormal(size_t(n) * 3 * 16 * 16, 1));
  const DeviceArray<float> dy = Upload(RandomNormal(size_t(n) * 10, 2));  // before any hold

  GpuStepTimer timer(gpu.stream.get());
  gpu.context.timer = &timer;
  stack.set_timer(&timer);
  ForwardContext ctx;
  ctx.training = true;
  for (int step = 0; step < 2; ++step) {  // the second step reuses the first one's events
    timer.hold();
    stack.forward(x.get(), n, ctx);
    CUDA_CHECK(cudaMemcpyAsync(stack.output_gradient(), dy.get(), size_t(n) * 10 * sizeof(float),
                               cudaMemcpyDeviceToDevice, gpu.stream.get()));
    stack.backward(n, nullptr);
    timer.close();
    // Held: nothing of the step has run while the host waits here.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(cudaStreamQuery(gpu.stream.get()), cudaErrorNotReady);
    timer.release();
    const std::vector<GpuStepTimer::Segment> passes = timer.collect();
    EXPECT_TRUE(timer.held());
    // 5 forward; backward: dense (weights, data), flatten, conv (weights, data), relu, and
    // the first conv's weights alone.
    const std::vector<std::pair<int, std::string>> want = {
        {0, "forward"},  {1, "forward"},       {2, "forward"},       {3, "forward"},
        {4, "forward"},  {4, "backward"},      {4, "backward-data"}, {3, "backward"},
        {2, "backward"}, {2, "backward-data"}, {1, "backward"},      {0, "backward"}};
    ASSERT_EQ(passes.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(passes[k].layer, want[k].first) << k;
      EXPECT_EQ(passes[k].pass, want[k].second) << k;
      EXPECT_GE(passes[k].device_s, 0) << k;
      EXPECT_LT(passes[k].device_s, 0.02) << k << ": the host's wait is not the device's time";
      EXPECT_GE(passes[k].host_s, 0) << k;
    }
    EXPECT_GT(passes[0].device_s, 0);  // the first convolution's forward ran kernels
  }
  const std::vector<GpuLayer::PassChoice> conv = stack.layer(2).choices(n);
  ASSERT_EQ(conv.size(), 3u);
  EXPECT_EQ(conv[0].pass, "forward");
  EXPECT_EQ(conv[2].pass, "backward-data");
  for (const GpuLayer::PassChoice& c : conv) {
    EXPECT_FALSE(c.algorithm.empty() || c.algorithm == "?") << c.pass;
    EXPECT_FALSE(c.math.empty() || c.math == "?") << c.pass;
  }
  EXPECT_TRUE(stack.layer(1).choices(n).empty());  // ReLU: the engine's own call
  gpu.context.timer = nullptr;
}

}  // namespace
}  // namespace cuda
}  // namespace dlh
