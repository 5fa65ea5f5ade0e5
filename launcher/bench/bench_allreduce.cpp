// DLH — allreduce benchmark (see bench_allreduce.hpp).
#include "launcher/bench/bench_allreduce.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "launcher/comm/grad_sync.hpp"
#include "launcher/comm/mpi.hpp"

namespace dlh {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds per call of `op`: `repeats` blocks of `iters` calls; a block's time is the slowest
// rank's (that is when the collective is done for everyone); the median block is reported.
double TimeBlocks(MPI_Comm comm, int iters, int repeats, const std::function<void()>& op) {
  std::vector<double> blocks;
  for (int r = 0; r < repeats; ++r) {
    MPI_CHECK(MPI_Barrier(comm));
    double t0 = Now();
    for (int i = 0; i < iters; ++i) op();
    double mine = (Now() - t0) / iters, slowest = 0;
    MPI_CHECK(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm));
    blocks.push_back(slowest);
  }
  std::sort(blocks.begin(), blocks.end());
  return blocks[blocks.size() / 2];
}

// Calls per block so that a block lasts about `seconds` (agreed by all ranks).
int Calibrate(MPI_Comm comm, double seconds, const std::function<void()>& op) {
  op();  // warm-up: first-touch, connection setup
  double t = TimeBlocks(comm, 1, 1, op);
  int iters = int(std::clamp(seconds / std::max(t, 1e-7), 1.0, 100000.0));
  MPI_CHECK(MPI_Bcast(&iters, 1, MPI_INT, 0, comm));
  return iters;
}

// A model of `count` tensors of `floats` values each, all in layer i (one per layer).
struct Tensors {
  std::vector<std::unique_ptr<Tensor>> values, grads;
  std::vector<NamedParam> params;
  std::vector<size_t> layers;
  Tensors(int count, size_t floats) {
    for (int i = 0; i < count; ++i) {
      values.push_back(std::make_unique<Tensor>(std::vector<int>{int(floats)}));
      grads.push_back(std::make_unique<Tensor>(std::vector<int>{int(floats)}));
      std::fill(grads.back()->begin(), grads.back()->end(), 1.0f);
      params.push_back(
          {"t" + std::to_string(i), {"w", values.back().get(), grads.back().get(), true}});
      layers.push_back(size_t(i));
    }
  }
};

void RunSync(GradientSync& sync, size_t layers) {
  for (size_t l = layers; l-- > 0;) sync.layer_done(l);
  sync.finish();
}

}  // namespace

nlohmann::json RunAllreduceBench(MPI_Comm comm, const AllreduceBenchOptions& o) {
  int ranks = 0;
  MPI_CHECK(MPI_Comm_size(comm, &ranks));
  nlohmann::json sizes = nlohmann::json::array();
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= size_t(o.size_factor)) {
    const size_t floats = bytes / sizeof(float);
    // DLH's side is one fused bucket of four gradients, as training fuses a layer's weight
    // and bias with its neighbours': the bucket is summed in place in the flat gradient
    // array, so it should cost what MPI_Allreduce of the same bytes costs.
    const int parts = floats % 4 == 0 ? 4 : 1;
    Tensors model(parts, floats / size_t(parts));
    GradSyncOptions sync_options;
    sync_options.bucket_bytes = std::max(bytes, sync_options.bucket_bytes);
    GradientSync sync(comm, model.params, model.layers, sync_options);
    auto dlh_op = [&] { RunSync(sync, size_t(parts)); };
    // MPI's side sums the very same memory (the gradients are one flat array now): from 1 to
    // 8 MiB, where buffers straddle the caches, two separate buffers differed by up to 20%
    // either way from run to run with their physical placement, which hid what the two
    // code paths cost.
    float* const flat = model.grads.front()->data();
    auto mpi_op = [&] {
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, flat, int(floats), MPI_FLOAT, MPI_SUM, comm));
    };
    const int iters = Calibrate(comm, o.block_seconds, mpi_op);
    Calibrate(comm, o.block_seconds, dlh_op);  // warm-up only
    // Alternate the two methods block by block so that both see the same machine noise.
    std::vector<double> mpi_t, dlh_t;
    for (int r = 0; r < o.repeats; ++r) {
      mpi_t.push_back(TimeBlocks(comm, iters, 1, mpi_op));
      dlh_t.push_back(TimeBlocks(comm, iters, 1, dlh_op));
    }
    std::sort(mpi_t.begin(), mpi_t.end());
    std::sort(dlh_t.begin(), dlh_t.end());
    sizes.push_back({{"bytes", bytes},
                     {"mpi_s", mpi_t[mpi_t.size() / 2]},
                     {"dlh_s", dlh_t[dlh_t.size() / 2]},
                     {"mpi_min_s", mpi_t.front()},
                     {"mpi_max_s", mpi_t.back()},
                     {"dlh_min_s", dlh_t.front()},
                     {"dlh_max_s", dlh_t.back()}});
  }

  // Many small tensors: one MPI_Allreduce per tensor against DLH's fused bucket.
  const size_t floats = o.small_bytes / sizeof(float);
  Tensors model(o.small_tensors, floats);
  auto per_tensor = [&] {
    for (auto& g : model.grads)
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, g->data(), int(floats), MPI_FLOAT, MPI_SUM, comm));
  };
  GradientSync sync(comm, model.params, model.layers, GradSyncOptions{});
  auto fused = [&] { RunSync(sync, model.layers.size()); };
  const int iters = Calibrate(comm, o.block_seconds, per_tensor);
  Calibrate(comm, o.block_seconds, fused);
  std::vector<double> per_t, fused_t;
  for (int r = 0; r < o.repeats; ++r) {
    per_t.push_back(TimeBlocks(comm, iters, 1, per_tensor));
    fused_t.push_back(TimeBlocks(comm, iters, 1, fused));
  }
  std::sort(per_t.begin(), per_t.end());
  std::sort(fused_t.begin(), fused_t.end());
  return {{"ranks", ranks},
          {"sizes", sizes},
          {"small",
           {{"tensors", o.small_tensors},
            {"bytes_each", o.small_bytes},
            {"per_tensor_s", per_t[per_t.size() / 2]},
            {"fused_s", fused_t[fused_t.size() / 2]},
            {"per_tensor_min_s", per_t.front()},
            {"fused_min_s", fused_t.front()}}}};
}

}  // namespace dlh
