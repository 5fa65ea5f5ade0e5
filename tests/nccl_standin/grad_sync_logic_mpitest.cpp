// The GPU engine's gradient sync (launcher/engine/cuda/grad_sync_logic.hpp), the code the CUDA
// engine runs, on a host fake of the device (host_device.hpp) and the NCCL stand-in, under
// mpirun with 1 to 4 ranks (make check, no GPU): flat; hierarchical with nodes posed by name,
// its tail and its root path for unequal nodes; overlap on and off; buckets in backward's
// order; and faults, which must end every rank's wait with an error, not a hang.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

#include "launcher/engine/cuda/grad_sync_logic.hpp"
#include "tests/mpi/mpi_test_util.hpp"
#include "tests/nccl_standin/host_device.hpp"

extern "C" int dlhNcclStandinSetFault(const char* spec);

namespace dlh::cuda {
namespace {

using Sync = GradSyncLogic<test::HostDevice>;

using test::Rank;
using test::Size;

float Value(int rank, size_t i, int round) { return float(rank + 1 + int(i % 5) + round); }
float SumOfValues(int n, size_t i, int round) {
  return float(n * (n + 1) / 2 + n * (int(i % 5) + round));
}

// Tensors of awkward sizes, two a layer, fused into buckets as the engine fuses them: in
// backward's order (last layer first), a bucket closing once it holds `bucket_elems`.
struct Model {
  std::vector<size_t> sizes = {1, 7, 1000, 3, 65537, 13, 262147, 2, 5};
  std::vector<size_t> offset;
  size_t total = 0;
  size_t layers() const { return (sizes.size() + 1) / 2; }
  size_t layer_of(size_t t) const { return t / 2; }
  Model() {
    for (size_t s : sizes) {
      offset.push_back(total);
      total += s;
    }
  }
  std::vector<GradBucket> buckets(size_t bucket_elems) const {
    std::vector<GradBucket> out;
    size_t t = sizes.size();
    while (t > 0) {
      GradBucket b;
      size_t end = offset[t - 1] + sizes[t - 1], elems = 0;
      while (t > 0 && (elems == 0 || elems + sizes[t - 1] <= bucket_elems)) {
        elems += sizes[t - 1];
        b.min_layer = layer_of(t - 1);
        --t;
      }
      b.offset = end - elems;
      b.count = elems;
      out.push_back(b);
    }
    return out;
  }
};

// Runs two steps: "backward" writes each layer's gradients on the compute stream, last layer
// first, telling the sync after each; then finish(). Checks every element against the sum.
void TrainTwoSteps(const std::vector<std::string>& nodes, const std::string& kind,
                   size_t bucket_elems, bool overlap, const std::string& expect_name) {
  Model m;
  std::vector<float> grads(m.total, -1);
  test::HostDevice dev;
  auto compute = dev.make_stream();
  Sync sync(MPI_COMM_WORLD, nodes, kind, grads.data(), grads.size(), m.buckets(bucket_elems),
            overlap, compute.get(), /*timeout_s=*/60, /*peer_watch=*/false);
  EXPECT_NE(sync.name().find(expect_name), std::string::npos) << sync.name();
  for (int round = 0; round < 2; ++round) {
    for (size_t l = m.layers(); l-- > 0;) {
      for (size_t t = 0; t < m.sizes.size(); ++t) {
        if (m.layer_of(t) != l) continue;
        float* g = grads.data() + m.offset[t];
        const size_t n = m.sizes[t], at = m.offset[t];
        const int r = Rank();
        compute.get()->post([=] {
          for (size_t i = 0; i < n; ++i) g[i] = Value(r, at + i, round);
        });
      }
      sync.layer_done(l);
    }
    sync.finish();
    compute.get()->synchronize();
    for (size_t i = 0; i < grads.size(); ++i)
      ASSERT_EQ(grads[i], SumOfValues(Size(), i, round))
          << kind << " over " << nodes.size() << " ranks, round " << round << ", element " << i;
  }
}

// Node names: every rank alone, all on one node, two even nodes, and unequal nodes.
std::vector<std::string> Nodes(const std::string& layout) {
  const int n = Size();
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) {
    if (layout == "own")
      out.push_back("node" + std::to_string(r));
    else if (layout == "one")
      out.push_back("node0");
    else if (layout == "two")
      out.push_back("node" + std::to_string(r < (n + 1) / 2 ? 0 : 1));
    else  // "unequal": the last rank alone, the others together
      out.push_back(r == n - 1 ? "node1" : "node0");
  }
  return out;
}

class GpuSyncTest : public ::testing::TestWithParam<std::tuple<size_t, bool>> {};

TEST_P(GpuSyncTest, FlatSumsEveryBucket) {
  const auto [bucket, overlap] = GetParam();
  // auto across nodes says why it is flat.
  TrainTwoSteps(Nodes("own"), "auto", bucket, overlap, Size() > 1 ? "auto: NCCL's" : "flat");
  TrainTwoSteps(Nodes("two"), "flat", bucket, overlap, "flat (NCCL over");
}

TEST_P(GpuSyncTest, HierarchicalOnOneNodeSumsItsTailInTheNode) {
  const auto [bucket, overlap] = GetParam();
  TrainTwoSteps(Nodes("one"), "hierarchical", bucket, overlap, "hierarchical");
}

TEST_P(GpuSyncTest, HierarchicalAcrossNodesPipelinesThroughMpi) {
  const auto [bucket, overlap] = GetParam();
  TrainTwoSteps(Nodes("own"), "hierarchical", bucket, overlap, "hierarchical");
  TrainTwoSteps(Nodes("two"), "hierarchical", bucket, overlap, "hierarchical");
}

TEST_P(GpuSyncTest, HierarchicalOnUnequalNodesTakesTheRootPath) {
  if (Size() < 3) GTEST_SKIP() << "unequal nodes need 3 ranks";
  const auto [bucket, overlap] = GetParam();
  TrainTwoSteps(Nodes("unequal"), "hierarchical", bucket, overlap, "uneven");
}

// Buckets of one tensor, of about 300k elements, of everything; overlap on and off.
INSTANTIATE_TEST_SUITE_P(Buckets, GpuSyncTest,
                         ::testing::Combine(::testing::Values(size_t(1), size_t(300000),
                                                              size_t(1) << 30),
                                            ::testing::Bool()));

// A fault on the last rank at its second collective: every rank's finish() must end with
// GpuCommError within about the deadline (1 s here), the communicators aborted, and the
// process fit to go on (the next test uses MPI and the stand-in again).
void ExpectFaultEndsTheStep(const std::string& kind, const std::string& fault,
                            const std::vector<std::string>& nodes) {
  Model m;
  std::vector<float> grads(m.total, 1);
  test::HostDevice dev;
  auto compute = dev.make_stream();
  const std::string spec = fault + ":" + std::to_string(Size() - 1) + ":2";
  {
    Sync sync(MPI_COMM_WORLD, nodes, kind, grads.data(), grads.size(), m.buckets(1 << 30), true,
              compute.get(), /*timeout_s=*/1, /*peer_watch=*/false);
    ASSERT_EQ(dlhNcclStandinSetFault(spec.c_str()), 0);
    const auto start = std::chrono::steady_clock::now();
    std::string what;
    for (int step = 0; step < 3 && what.empty(); ++step) {
      for (size_t l = m.layers(); l-- > 0;) sync.layer_done(l);
      try {
        sync.finish();
      } catch (const GpuCommError& e) {
        what = e.what();
      }
    }
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_FALSE(what.empty()) << spec << ": no error on rank " << Rank();
    EXPECT_TRUE(what.find("NCCL reports") != std::string::npos ||
                what.find("did not finish within 1 s") != std::string::npos)
        << what;
    EXPECT_LT(took, 20.0) << spec;
  }
  ASSERT_EQ(dlhNcclStandinSetFault(""), 0);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(GpuSyncFault, AHungCollectiveEndsEveryRanksStep) {
  ExpectFaultEndsTheStep("auto", "hang", Nodes("two"));
}

TEST(GpuSyncFault, AFailedCollectiveEndsEveryRanksStep) {
  if (Size() < 2) GTEST_SKIP() << "needs a peer";
  ExpectFaultEndsTheStep("auto", "error", Nodes("two"));
}

TEST(GpuSyncFault, AHungCollectiveInTheNodeEndsTheHierarchicalStep) {
  ExpectFaultEndsTheStep("hierarchical", "hang", Nodes("one"));
}

}  // namespace
}  // namespace dlh::cuda
