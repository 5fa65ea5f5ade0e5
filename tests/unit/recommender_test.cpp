// Tests of the recommender: batch balancing, device speeds, the ranking against a
// brute-force recomputation on small hand-made clusters, plans and time limits, and the
// time Recommend takes on a 1,000-node cluster (printed, not asserted).
#include "estimator/recommend/recommender.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <string>

#include "common/error.hpp"
#include "common/pipeline_stages.hpp"
#include "estimator/model/cuda_targets.hpp"
#include "estimator/model/engine_fingerprint.hpp"
#include "estimator/model/gpu_layer_model.hpp"
#include "estimator/model/wave_scaling.hpp"
#include "tests/util/repo_file.hpp"

namespace dlh {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- fixtures

using dlh::test::RepoFile;

TrainSpec SmallCnn() {
  return ParseSpec(R"({
    "name": "small",
    "input": {"channels": 1, "height": 28, "width": 28},
    "classes": 10,
    "layers": [
      {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
      {"type": "relu"},
      {"type": "maxpool2d", "kernel": 2},
      {"type": "flatten"},
      {"type": "dense", "units": 10}
    ],
    "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},
    "schedule": {"warmup_epochs": 0.5},
    "batch_size": 256,
    "epochs": 2,
    "dataset": "x.h5"
  })",
                   "small.json", "");
}

GpuType Gpu(const std::string& name, double memory_gb, double active, double idle) {
  GpuType g;
  g.name = name;
  g.memory_gb = memory_gb;
  g.peak_tflops = 10;
  g.memory_bandwidth_gbs = 500;
  g.active_watts = active;
  g.idle_watts = idle;
  return g;
}

NodeType Node(const std::string& name, const std::string& gpu, int gpn, int nodes, double base,
              Link intra) {
  NodeType n;
  n.name = name;
  n.gpu = gpu;
  n.gpus_per_node = gpn;
  n.nodes = nodes;
  n.node_base_watts = base;
  n.intra_node = intra;
  return n;
}

// "fast": 3 nodes x 4 GPUs; "slow": 4 nodes x 2 GPUs.
Cluster TwoTypes() {
  Cluster c;
  c.name = "two";
  c.gpu_types = {Gpu("fast", 16, 300, 50), Gpu("slow", 16, 200, 30)};
  c.node_types = {Node("nf", "fast", 4, 3, 200, Link{100, 5}),
                  Node("ns", "slow", 2, 4, 150, Link{16, 10})};
  c.inter_node = Link{10, 20};
  return c;
}

DeviceSpeed Speed(double fixed, double per) {
  DeviceSpeed s;
  s.fixed_s = fixed;
  s.per_sample_s = per;
  s.source = "test";
  return s;
}

std::map<std::string, DeviceSpeed> TwoSpeeds() {
  return {{"fast", Speed(0.004, 0.0004)}, {"slow", Speed(0.006, 0.0010)}};
}

Job SmallJob() {
  Job job;
  job.spec = SmallCnn();
  job.features = ComputeFeatures(job.spec);
  job.samples = 60000;
  job.epochs = 2;
  job.top = 0;  // keep every feasible allocation
  return job;
}

// ---------------------------------------------------------------- brute force

// Every candidate the documentation describes, computed the plain way.
struct Ref {
  std::vector<Part> parts;
  int gpus = 0, nodes = 0;
  int64_t global = 0, steps = 0;
  double compute = 0, comm = 0, step = 0, total = 0, energy = 0, gpu_hours = 0;
  bool fits = false, meets = false;
};

std::vector<Ref> BruteForce(const Job& job, const Cluster& c,
                            const std::map<std::string, DeviceSpeed>& speeds) {
  const int slots = job.spec.optimizer.kind == OptimizerSpec::Kind::Adam ? 2
                    : job.spec.optimizer.momentum > 0                    ? 1
                                                                         : 0;
  auto fits = [&](const GpuType& g, int64_t b) {
    return TrainingMemoryBytes(job.features, b, slots, MemoryEngine::kDevice) <=
           0.9 * g.memory_gb * 1e9;
  };
  auto allowed = [&](const std::string& gpu) {
    // A type this build's GPU engine cannot run is never a candidate (cuda_targets.hpp).
    if (!WhyEngineCannotRun(c.gpu(gpu)->compute_capability).empty()) return false;
    return job.allowed_types.empty() ||
           std::count(job.allowed_types.begin(), job.allowed_types.end(), gpu) > 0;
  };
  auto avail = [](const NodeType& n) { return n.available < 0 ? n.nodes : n.available; };
  const AlphaBeta inter = AlphaBeta::from_link(c.inter_node);
  // Local SGD: the parameters and momenta (SmallCnn's SGD has momentum) averaged once a period.
  const bool local = job.spec.sync.local_sgd();
  const double bytes = job.features.param_bytes() * (local ? 2 : 1);
  const double per_step = local ? 1.0 / job.spec.sync.period : 1.0;
  // Stale-synchronous: the allreduce runs beside the next steps; the step waits for the rest.
  const bool stale = job.spec.sync.stale_sync() && job.spec.sync.staleness > 0;
  std::vector<Ref> out;
  // The whole job, the plain way (estimator/model/job_time.hpp): start-up, reading the data,
  // three warm-up steps, the steps, one evaluation per epoch (forward only, the slowest
  // rank's even slice in chunks of 256), one checkpoint per epoch and per 30 min.
  const double startup = job.startup_s >= 0 ? job.startup_s : c.runtime.startup_s;
  const int64_t eval_samples = job.eval_samples >= 0 ? job.eval_samples : job.samples / 6;
  const double forward = job.features.flops_fwd() / job.features.flops_train();
  const double ckpt_bytes = 4 * job.features.params * (1 + slots);
  // GPU-seconds of compute and energy per step, by part; `eval` the slowest rank's speed.
  auto finish = [&](Ref& r, double idle_w, double busy_j, double base_w, const DeviceSpeed& eval) {
    if (stale) r.comm = std::max(0.0, r.comm - r.compute);
    r.step = r.compute + r.comm;
    r.steps = job.epochs * (job.samples / r.global);
    const double steps_s = double(r.steps) * r.step;
    const double data = double(job.samples + eval_samples) * (job.features.input_elements + 1) /
                        (c.runtime.read_gbs * 1e9);
    const int64_t slice = (eval_samples + r.gpus - 1) / r.gpus;
    const double evals =
        eval_samples == 0
            ? 0
            : job.epochs * forward *
                  (eval.per_sample_s * double(slice) + eval.fixed_s * double((slice + 255) / 256));
    // The last written whole, the others in the background: a 2 GB/s snapshot each, and
    // the rest of the previous write when they come faster than it ends.
    const double n_ckpt = double(job.epochs + int64_t(steps_s / 1800));
    const double write = 0.05 + ckpt_bytes / (c.runtime.write_gbs * 1e9);
    const double ckpts =
        n_ckpt == 0
            ? 0
            : write + (n_ckpt - 1) * (ckpt_bytes / 2e9 + std::max(0.0, write - steps_s / n_ckpt));
    r.total = startup + data + 3 * r.step + steps_s + evals + ckpts;
    r.energy = double(r.steps) * (idle_w * r.step + busy_j) + r.total * base_w +
               (r.total - steps_s) * idle_w;
    r.gpu_hours = r.gpus * r.total / 3600;
    r.meets = job.deadline_s == 0 || r.total * (1 + job.margin) <= job.deadline_s;
    if (r.steps > 0) out.push_back(r);
  };
  for (const NodeType& n : c.node_types) {
    if (!allowed(n.gpu)) continue;
    const GpuType& g = *c.gpu(n.gpu);
    const DeviceSpeed& s = speeds.at(n.gpu);
    std::vector<int> gpns;
    for (int k = 1; k < n.gpus_per_node; k *= 2) gpns.push_back(k);
    gpns.push_back(n.gpus_per_node);
    for (int gpn : gpns)
      for (int nodes = 1; nodes <= avail(n); ++nodes) {
        const int gpus = gpn * nodes;
        if (job.max_gpus > 0 && gpus > job.max_gpus) continue;
        Ref r;
        r.gpus = gpus;
        r.nodes = nodes;
        int64_t lo, hi, n_hi;
        if (job.per_gpu_batch > 0) {
          r.global = job.per_gpu_batch * gpus;
          lo = hi = job.per_gpu_batch;
          n_hi = gpus;
        } else {
          r.global = job.spec.batch_size;
          if (r.global < gpus) continue;
          lo = r.global / gpus;
          hi = (r.global + gpus - 1) / gpus;
          n_hi = r.global % gpus == 0 ? gpus : r.global % gpus;
        }
        r.parts = {Part{n.name, n.gpu, nodes, gpn, hi, g.compute_capability}};
        r.fits = fits(g, hi);
        r.compute = s.seconds(double(hi));
        r.comm = per_step * HierarchicalAllreduceSeconds(bytes, gpn, nodes,
                                                         AlphaBeta::from_link(n.intra_node), inter);
        const double own =
            double(n_hi) * s.seconds(double(hi)) + double(gpus - n_hi) * s.seconds(double(lo));
        finish(r, g.idle_watts * gpus, (g.active_watts - g.idle_watts) * own,
               n.node_base_watts * nodes, s);
      }
  }
  if (!job.allow_mixed) return out;
  for (size_t i = 0; i < c.node_types.size(); ++i)
    for (size_t j = i + 1; j < c.node_types.size(); ++j) {
      const NodeType &na = c.node_types[i], &nb = c.node_types[j];
      if (!allowed(na.gpu) || !allowed(nb.gpu)) continue;
      const GpuType &ga = *c.gpu(na.gpu), &gb = *c.gpu(nb.gpu);
      const DeviceSpeed &sa = speeds.at(na.gpu), &sb = speeds.at(nb.gpu);
      for (int xa = 1; xa <= avail(na); ++xa)
        for (int xb = 1; xb <= avail(nb); ++xb) {
          const int ca = xa * na.gpus_per_node, cb = xb * nb.gpus_per_node;
          Ref r;
          r.gpus = ca + cb;
          r.nodes = xa + xb;
          if (job.max_gpus > 0 && r.gpus > job.max_gpus) continue;
          const int64_t want =
              job.per_gpu_batch > 0 ? job.per_gpu_batch * r.gpus : job.spec.batch_size;
          if (want < r.gpus) continue;
          std::vector<int64_t> b = BalanceBatch({sa, sb}, {ca, cb}, want);
          r.global = ca * b[0] + cb * b[1];
          r.parts = {Part{na.name, na.gpu, xa, na.gpus_per_node, b[0], ga.compute_capability},
                     Part{nb.name, nb.gpu, xb, nb.gpus_per_node, b[1], gb.compute_capability}};
          r.fits = fits(ga, b[0]) && fits(gb, b[1]);
          const double ta = sa.seconds(double(b[0])), tb = sb.seconds(double(b[1]));
          r.compute = std::max(ta, tb);
          const int g = std::min(na.gpus_per_node, nb.gpus_per_node);
          r.comm = per_step *
                   std::max(HierarchicalAllreduceSeconds(
                                bytes, g, r.nodes, AlphaBeta::from_link(na.intra_node), inter),
                            HierarchicalAllreduceSeconds(
                                bytes, g, r.nodes, AlphaBeta::from_link(nb.intra_node), inter));
          finish(r, ga.idle_watts * ca + gb.idle_watts * cb,
                 (ga.active_watts - ga.idle_watts) * ca * ta +
                     (gb.active_watts - gb.idle_watts) * cb * tb,
                 na.node_base_watts * xa + nb.node_base_watts * xb,
                 sa.per_sample_s >= sb.per_sample_s ? sa : sb);
        }
    }
  return out;
}

bool SameParts(const std::vector<Part>& a, const std::vector<Part>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].node_type != b[i].node_type || a[i].gpu != b[i].gpu || a[i].nodes != b[i].nodes ||
        a[i].gpus_per_node != b[i].gpus_per_node || a[i].per_gpu_batch != b[i].per_gpu_batch)
      return false;
  return true;
}

const Ref* Find(const std::vector<Ref>& refs, const Allocation& a) {
  for (const Ref& r : refs)
    if (SameParts(r.parts, a.parts)) return &r;
  return nullptr;
}

double Key(const Ref& r, Objective o) {
  return o == Objective::Energy ? r.energy : o == Objective::Time ? r.total : r.gpu_hours;
}

// Checks a recommendation against the brute force: the same candidates, the same figures
// for every ranked allocation, the ranking order, and the best among the feasible ones.
void CheckAgainstBruteForce(const Job& job, const Cluster& c,
                            const std::map<std::string, DeviceSpeed>& speeds,
                            const Recommendation& rec) {
  const std::vector<Ref> refs = BruteForce(job, c, speeds);
  EXPECT_EQ(rec.candidates, int(refs.size()));
  size_t feasible = 0;
  const Ref* best = nullptr;
  const Ref* fastest = nullptr;
  for (const Ref& r : refs) {
    if (r.fits && (!fastest || r.total < fastest->total)) fastest = &r;
    if (!r.fits || !r.meets) continue;
    ++feasible;
    if (!best || Key(r, job.objective) < Key(*best, job.objective)) best = &r;
  }
  EXPECT_EQ(rec.feasible, feasible > 0);
  if (job.top == 0) {
    EXPECT_EQ(rec.ranked.size(), feasible);
  }
  ASSERT_NE(fastest, nullptr);
  EXPECT_NEAR(rec.fastest.total_s, fastest->total, 1e-9 * fastest->total);
  for (size_t i = 0; i < rec.ranked.size(); ++i) {
    const Allocation& a = rec.ranked[i];
    const Ref* r = Find(refs, a);
    ASSERT_NE(r, nullptr) << "ranked[" << i << "] is no candidate";
    EXPECT_TRUE(r->fits && r->meets);
    EXPECT_TRUE(a.fits_memory && a.meets_deadline);
    EXPECT_EQ(a.gpus, r->gpus);
    EXPECT_EQ(a.nodes, r->nodes);
    EXPECT_EQ(a.global_batch, r->global);
    EXPECT_EQ(a.steps, r->steps);
    EXPECT_NEAR(a.compute_s, r->compute, 1e-12);
    EXPECT_NEAR(a.comm_s, r->comm, 1e-12);
    EXPECT_NEAR(a.total_s, r->total, 1e-9 * r->total);
    EXPECT_NEAR(a.energy_j, r->energy, 1e-9 * r->energy);
    EXPECT_NEAR(a.gpu_hours, r->gpu_hours, 1e-9 * r->gpu_hours);
    if (i > 0) {
      const Allocation& p = rec.ranked[i - 1];
      const double kp = Key(*Find(refs, p), job.objective), ka = Key(*r, job.objective);
      EXPECT_LE(kp, ka * (1 + 1e-12)) << "order at " << i;
      EXPECT_FALSE(a.why.empty());
    }
  }
  if (feasible > 0) {
    ASSERT_FALSE(rec.ranked.empty());
    const Ref* top = Find(refs, rec.ranked[0]);
    EXPECT_NEAR(Key(*top, job.objective), Key(*best, job.objective),
                1e-9 * Key(*best, job.objective));
  }
}

// ---------------------------------------------------------------- BalanceBatch

int64_t Sum(const std::vector<int64_t>& b, const std::vector<int>& c) {
  int64_t s = 0;
  for (size_t i = 0; i < b.size(); ++i) s += b[i] * c[i];
  return s;
}

TEST(BalanceBatch, EqualSpeedsSplitEvenly) {
  EXPECT_EQ(BalanceBatch({Speed(0.01, 0.001), Speed(0.01, 0.001)}, {2, 2}, 100),
            (std::vector<int64_t>{25, 25}));
  EXPECT_EQ(BalanceBatch({Speed(0.01, 0.001)}, {4}, 64), (std::vector<int64_t>{16}));
}

TEST(BalanceBatch, TwiceAsFastTakesTwiceTheBatch) {
  EXPECT_EQ(BalanceBatch({Speed(0, 0.001), Speed(0, 0.002)}, {1, 1}, 90),
            (std::vector<int64_t>{60, 30}));
  // 4 fast + 8 slow GPUs: 4 b + 8 b/2 = 960 -> b = 120 and 60.
  EXPECT_EQ(BalanceBatch({Speed(0, 0.001), Speed(0, 0.002)}, {4, 8}, 960),
            (std::vector<int64_t>{120, 60}));
}

TEST(BalanceBatch, FixedCostsCount) {
  // T = 0.02 + 0.001 a = 0.001 b, a + b = 100 -> a = 40, b = 60, both finish at 60 ms.
  EXPECT_EQ(BalanceBatch({Speed(0.02, 0.001), Speed(0, 0.001)}, {1, 1}, 100),
            (std::vector<int64_t>{40, 60}));
}

TEST(BalanceBatch, SlowGroupKeepsOneSample) {
  // A fixed cost of 1 s would leave the first group nothing: pinned at 1, the rest to B.
  EXPECT_EQ(BalanceBatch({Speed(1.0, 0.001), Speed(0, 0.001)}, {1, 1}, 10),
            (std::vector<int64_t>{1, 9}));
  // Fewer samples than GPUs: some get none, never more than the batch.
  std::vector<int64_t> b = BalanceBatch({Speed(0, 0.001), Speed(0, 0.001)}, {4, 4}, 5);
  EXPECT_LE(Sum(b, {4, 4}), 5);
}

// The real balanced finish time of two groups (no group pinned).
double BalancedTime(const std::vector<DeviceSpeed>& s, const std::vector<int>& c, int64_t b) {
  double s1 = 0, s0 = 0;
  for (size_t g = 0; g < s.size(); ++g) {
    s1 += c[g] / s[g].per_sample_s;
    s0 += c[g] * s[g].fixed_s / s[g].per_sample_s;
  }
  return (double(b) + s0) / s1;
}

TEST(BalanceBatch, LeftoverWithinOneSample) {
  // 12.875 each: 13 + 12 = 100 of 103 (no GPU may take 14, past one sample over T).
  std::vector<int64_t> b = BalanceBatch({Speed(0, 0.001), Speed(0, 0.001)}, {4, 4}, 103);
  EXPECT_EQ(Sum(b, {4, 4}), 100);
  EXPECT_LE(std::abs(b[0] - b[1]), 1);
  // 5.8 each, at most 6: 6 x 6 + 4 x 5 = 56 (58 would need 7 on the 4 GPUs).
  b = BalanceBatch({Speed(0, 0.001), Speed(0, 0.001)}, {6, 4}, 58);
  EXPECT_EQ(b, (std::vector<int64_t>{6, 5}));
  // 1 fast + 6 slow GPUs, 256 samples: real 78.8 and 29.5. Rounding down and giving the
  // fast GPU the 4 left over (82, 29) would make it finish 1.3 ms late; 76 and 30 use all
  // 256 samples and finish at most 0.5 ms after the balanced time.
  const std::vector<DeviceSpeed> s = {Speed(0.004, 0.0004), Speed(0.006, 0.0010)};
  b = BalanceBatch(s, {1, 6}, 256);
  EXPECT_EQ(b, (std::vector<int64_t>{76, 30}));
  // Uneven real shares.
  b = BalanceBatch({Speed(0.003, 0.0007), Speed(0.001, 0.0013)}, {3, 5}, 1001);
  EXPECT_LE(Sum(b, {3, 5}), 1001);
  EXPECT_GT(Sum(b, {3, 5}), 1001 - 8);
}

TEST(BalanceBatch, FinishTimesWithinOneSample) {
  const std::vector<DeviceSpeed> s = {Speed(0.004, 0.0004), Speed(0.006, 0.0010)};
  int exact = 0, cases = 0;
  for (int ca : {1, 4, 8, 12})
    for (int cb : {2, 6, 8})
      for (int64_t batch : {256, 1000, 4096, 10007}) {
        std::vector<int64_t> b = BalanceBatch(s, {ca, cb}, batch);
        const int64_t sum = Sum(b, {ca, cb});
        EXPECT_LE(sum, batch);
        EXPECT_GT(sum, batch - ca - cb);
        exact += sum == batch;
        ++cases;
        // Nobody finishes later than one sample (of the slower GPU) after the balanced time.
        const double t = BalancedTime(s, {ca, cb}, batch);
        EXPECT_LE(std::max(s[0].seconds(double(b[0])), s[1].seconds(double(b[1]))),
                  t + 0.0010 + 1e-12)
            << ca << " " << cb << " " << batch << ": " << b[0] << " " << b[1];
      }
  std::cout << "[ info     ] " << exact << " of " << cases << " splits use every sample\n";
}

TEST(BalanceBatch, Errors) {
  EXPECT_THROW(BalanceBatch({Speed(0, 0.001)}, {1, 1}, 10), EstimateError);
  EXPECT_THROW(BalanceBatch({Speed(0, 0)}, {1}, 10), EstimateError);
  EXPECT_THROW(BalanceBatch({Speed(-1, 0.001)}, {1}, 10), EstimateError);
}

// ---------------------------------------------------------------- device speeds

TEST(DeviceSpeeds, RooflineByHand) {
  Job job = SmallJob();
  Cluster c = TwoTypes();
  auto speeds = DeviceSpeeds(job, c);
  ASSERT_EQ(speeds.size(), 2u);
  const ModelFeatures& f = job.features;
  const double per =
      std::max(f.flops_train() / (10e12 * 0.4), 4 * f.activation_elements * 3 / (500e9 * 0.6));
  const double fixed = 2 * double(f.layers.size()) * 10e-6 + f.param_bytes() * 4 / 500e9;
  EXPECT_DOUBLE_EQ(speeds["fast"].per_sample_s, per);
  EXPECT_DOUBLE_EQ(speeds["fast"].fixed_s, fixed);
  EXPECT_EQ(speeds["fast"].source, "roofline (no calibration for fast or any other type)");
  EXPECT_TRUE(speeds["fast"].reference.empty());
  EXPECT_GT(per, 0);
}

TEST(DeviceSpeeds, MissingCalibrationIsNamed) {
  Job job = SmallJob();
  Cluster c = TwoTypes();
  c.gpu_types[0].calibration = "/nonexistent/dlh/fast.json";
  try {
    DeviceSpeeds(job, c);
    FAIL() << "no error";
  } catch (const EstimateError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU type \"fast\": calibration file "
                                         "/nonexistent/dlh/fast.json not found"),
              std::string::npos)
        << e.what();
  }
  // A type the job does not use needs no calibration of its own, but "slow" has none and
  // needs fast's as its reference (ScaledSpeeds.ReferenceMayBeATypeTheJobCannotUse).
  job.allowed_types = {"slow"};
  EXPECT_THROW(DeviceSpeeds(job, c), EstimateError);
  c.gpu_types[0].calibration.clear();
  EXPECT_EQ(DeviceSpeeds(job, c).count("fast"), 0u);
}

TEST(DeviceSpeeds, CalibratedIsTheAffineModel) {
  const std::string path =
      (fs::temp_directory_path() / ("dlh_rec_cal_" + std::to_string(::getpid()) + ".json"))
          .string();
  Calibration cal;
  cal.device = "cpu";
  cal.host = "test";
  cal.threads = 1;
  cal.created = "2026-01-01T00:00:00Z";
  cal.model.device = "cpu";
  cal.model.coef = {1e-3, 2e-11, 3e-11, 4e-9, 5e-9, 1e-9, 2e-9, 1e-4, 5e-5, 0, 0};
  SaveCalibration(path, cal);
  Job job = SmallJob();
  Cluster c = TwoTypes();
  c.gpu_types[0].calibration = path;
  auto speeds = DeviceSpeeds(job, c);
  fs::remove(path);
  double t0 = 0, t7 = 0;
  const std::vector<double> r0 = TimeTerms(job.features, 0, true),
                            r7 = TimeTerms(job.features, 7, true);  // a "cpu" calibration
  for (int i = 0; i < kTimeTerms; ++i) {
    t0 += cal.model.coef[size_t(i)] * r0[size_t(i)];
    t7 += cal.model.coef[size_t(i)] * r7[size_t(i)];
  }
  EXPECT_NEAR(speeds["fast"].seconds(0), t0, 1e-12);
  EXPECT_NEAR(speeds["fast"].seconds(7), t7, 1e-12);
  EXPECT_EQ(speeds["fast"].source, "calibrated (" + fs::path(path).filename().string() + ")");
  // The same peaks: "slow" gets fast's model unchanged.
  EXPECT_EQ(speeds["slow"].source, "scaled from fast's calibration (" +
                                       fs::path(path).filename().string() +
                                       "): FLOP/s x1.00, bandwidth x1.00");
  EXPECT_NEAR(speeds["slow"].seconds(7), t7, 1e-12);
}

// A GPU calibration with a stored layer model (gpu-layers --store): its own type is planned
// with the layer model on the peaks it was fitted on, close to the model's own step at the
// job's batch; a type whose peaks the cluster names gets the model carried by them (slower
// on a GPU of lower peaks); one without them keeps the wave-scaled linear model. The band
// comes from the larger of the cross-validated and the validation MAPE.
TEST(DeviceSpeeds, GpuLayerModelPlansItsTypeAndCarriesByPeaks) {
  const std::string path =
      (fs::temp_directory_path() / ("dlh_rec_glm_" + std::to_string(::getpid()) + ".json"))
          .string();
  Calibration cal;
  cal.device = "cuda";
  cal.host = "test GPU";
  cal.created = "2026-01-01T00:00:00Z";
  cal.model.device = "cuda";
  cal.model.coef = {1e-4, 0, 2e-14, 2e-12, 8e-12, 4e-12, 3e-11, 3e-4, 7e-5, 0, 0};
  StoredGpuLayerModel& m = cal.gpu_layer_model;
  m.present = true;
  m.params.overlap = false;
  m.peaks = GpuPeaks{"fast", 60, 480, 3000, 132};
  m.samples = 96;
  m.mape = 9;
  m.cv_mape = 10;
  m.validation_mape = 19.4;
  m.validation_models = 10;
  m.fitted_to = "the calibration's sweep";
  SaveCalibration(path, cal);
  EXPECT_TRUE(LoadCalibration(path).gpu_layer_model.present);

  Job job = SmallJob();
  Cluster c = TwoTypes();
  c.gpu_types[0].calibration = path;
  c.gpu_types[1].peak_tflops = 20;  // slow: a third of fast's peaks
  c.gpu_types[1].tf32_tflops = 160;
  c.gpu_types[1].memory_bandwidth_gbs = 1000;
  c.gpu_types[1].sms = 108;
  auto speeds = DeviceSpeeds(job, c);
  const std::string file = fs::path(path).filename().string();
  const DeviceSpeed& fast = speeds["fast"];
  EXPECT_EQ(fast.source, "GPU layer model of " + file);
  EXPECT_EQ(fast.provenance, "calibration fast (" + file + ", its GPU layer model)");
  const double own = PredictGpuStep(job.features, 256, m.peaks, m.params).seconds;
  EXPECT_NEAR(fast.seconds(256), own, 0.05 * own);
  EXPECT_NEAR(fast.log_sigma, std::log1p(0.194) / 0.7979, 1e-9);
  EXPECT_EQ(fast.layer_pass_s.size(), job.spec.layers.size());
  const DeviceSpeed& slow = speeds["slow"];
  EXPECT_EQ(slow.source, "GPU layer model of fast's calibration (" + file +
                             "), carried by slow's peaks (FP32 20, TF32 160 TFLOP/s, 1000 GB/s, "
                             "108 SMs)");
  EXPECT_GT(slow.seconds(256), fast.seconds(256));
  EXPECT_GT(slow.log_sigma, fast.log_sigma);
  // Without the layer model's peaks in the cluster: the linear model, wave-scaled.
  c.gpu_types[1].tf32_tflops = 0;
  c.gpu_types[1].sms = 0;
  EXPECT_EQ(DeviceSpeeds(job, c)["slow"].source.rfind("scaled from fast's calibration", 0), 0u);
  fs::remove(path);
}

// A calibration file in the temporary folder, removed with the fixture.
class ScaledSpeeds : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("dlh_wave_cal_" + std::to_string(::getpid()) + ".json"))
                .string();
    cal_.device = "cpu";
    cal_.host = "test";
    cal_.threads = 1;
    cal_.created = "2026-01-01T00:00:00Z";
    cal_.engine = EngineFingerprint("cpu");  // fresh unless a test says otherwise
    cal_.model.device = "cpu";
    cal_.model.coef = {1e-3, 2e-11, 3e-11, 4e-9, 5e-9, 1e-9, 2e-9, 1e-4, 5e-5, 0, 0};
  }
  void TearDown() override { fs::remove(path_); }
  void Save() { SaveCalibration(path_, cal_); }
  std::string file() const { return fs::path(path_).filename().string(); }

  std::string path_;
  Calibration cal_;
};

TEST_F(ScaledSpeeds, UncalibratedTypeGetsTheReferenceModelScaledByThePeaks) {
  Save();
  Job job = SmallJob();
  Cluster c = TwoTypes();
  c.gpu_types[0].calibration = path_;  // fast: 10 TFLOP/s, 500 GB/s
  c.gpu_types[1].peak_tflops = 4;      // slow: 0.4x the FLOP/s, 0.5x the bandwidth
  c.gpu_types[1].memory_bandwidth_gbs = 250;
  auto speeds = DeviceSpeeds(job, c);
  const DeviceSpeed& slow = speeds["slow"];
  EXPECT_EQ(slow.source,
            "scaled from fast's calibration (" + file() + "): FLOP/s x0.40, bandwidth x0.50");
  EXPECT_EQ(slow.reference, "fast");
  EXPECT_TRUE(slow.stale.empty());
  EXPECT_TRUE(speeds["fast"].reference.empty());
  // By hand: overhead, per-layer and per-sample call costs (0, 7, 8, 9) kept, compute terms
  // (1, 2, 6) / 0.4, memory terms (3, 4, 5, 10) / 0.5.
  const std::vector<double> scale = {1, 2.5, 2.5, 2, 2, 2, 2.5, 1, 1, 1, 2};
  ASSERT_EQ(scale.size(), size_t(kTimeTerms));
  for (int64_t b : {0, 1, 64}) {
    const std::vector<double> t = TimeTerms(job.features, b, true);  // a "cpu" calibration
    double want = 0;
    for (int i = 0; i < kTimeTerms; ++i)
      want += cal_.model.coef[size_t(i)] * scale[size_t(i)] * t[size_t(i)];
    EXPECT_NEAR(slow.seconds(double(b)), want, 1e-12 * want) << "batch " << b;
  }
  EXPECT_GT(slow.seconds(64), speeds["fast"].seconds(64));
  EXPECT_TRUE(StaleCalibrationWarnings(speeds).empty());
}

// A job's GELUs beyond the step-time model's price of their FLOPs (activation_cost.hpp): each
// value at its measured cost, less what the model charges; on the type scaled from this
// calibration, the measured cost moves with the FLOP/s and the price with the scaled model.
TEST_F(ScaledSpeeds, TheJobsGelusCostWhatTheCalibrationMeasured) {
  Job job = SmallJob();
  job.spec = ParseSpec(R"({"name": "gelu", "input": {"channels": 1, "height": 28, "width": 28},
      "classes": 10, "layers": [{"type": "flatten"}, {"type": "dense", "units": 16},
      {"type": "gelu"}, {"type": "dense", "units": 10}], "optimizer": {"type": "sgd",
      "lr": 0.1, "momentum": 0.9}, "batch_size": 64, "epochs": 1, "dataset": "x.h5"})",
                       "gelu.json", "");
  job.features = ComputeFeatures(job.spec);
  Cluster c = TwoTypes();
  c.gpu_types[0].calibration = path_;
  c.gpu_types[1].peak_tflops = c.gpu_types[0].peak_tflops / 4;  // slow: a quarter the FLOP/s
  Save();
  auto none = DeviceSpeeds(job, c);  // no activation_cost: as before
  cal_.activation_cost.values = 65536;
  cal_.activation_cost.gelu_forward_s = 300e-9;
  cal_.activation_cost.gelu_backward_s = 500e-9;
  cal_.activation_cost.silu_forward_s = cal_.activation_cost.silu_backward_s = 1e-9;
  Save();
  auto speeds = DeviceSpeeds(job, c);
  const double measured = 16 * 800e-9, flops = 16 * (10 + 12);
  EXPECT_NEAR(speeds["fast"].per_sample_s - none["fast"].per_sample_s,
              measured - flops * cal_.model.coef[kElementwiseTerm], 1e-15);
  const SpeedRatio ratio = PeakRatio(c.gpu_types[0], c.gpu_types[1]);
  ASSERT_NEAR(ratio.flops, 0.25, 1e-12);
  const double price = ScaleCoefficients(cal_.model.coef, ratio)[kElementwiseTerm];
  EXPECT_NEAR(speeds["slow"].per_sample_s - none["slow"].per_sample_s,
              measured / 0.25 - flops * price, 1e-15);
}

// A job's optimizer beyond the sweep's (optimizer_cost.hpp): Adam's update adds its measured
// cost over momentum's for each parameter, plain SGD takes away, momentum changes nothing;
// the type scaled from this calibration moves it by the bandwidth.
TEST_F(ScaledSpeeds, TheJobsOptimizerUpdateIsAddedOverTheSweeps) {
  Job job = SmallJob();
  Cluster c = TwoTypes();
  c.gpu_types[0].calibration = path_;
  c.gpu_types[1].memory_bandwidth_gbs = 250;  // slow: half fast's bandwidth
  Save();
  job.spec.optimizer.kind = OptimizerSpec::Kind::Adam;
  const double none = DeviceSpeeds(job, c)["fast"].seconds(8);  // no optimizer_update: as before
  cal_.optimizer_update.params = 1000000;
  cal_.optimizer_update.sgd_s = 0.05e-9;
  cal_.optimizer_update.momentum_s = 0.1e-9;
  cal_.optimizer_update.adam_s = 0.9e-9;
  Save();
  auto speeds = DeviceSpeeds(job, c);
  const double params = job.features.params;
  ASSERT_GT(params, 0);
  EXPECT_NEAR(speeds["fast"].seconds(8) - none, params * 0.8e-9, 1e-9 * none);
  const double slow_none = [&] {
    Calibration without = cal_;
    without.optimizer_update = OptimizerUpdateCost{};
    SaveCalibration(path_, without);
    const double t = DeviceSpeeds(job, c)["slow"].seconds(8);
    Save();
    return t;
  }();
  EXPECT_NEAR(speeds["slow"].seconds(8) - slow_none, params * 0.8e-9 * 2, 1e-9 * slow_none);
  job.spec.optimizer.kind = OptimizerSpec::Kind::Sgd;
  job.spec.optimizer.momentum = 0.9;
  EXPECT_NEAR(DeviceSpeeds(job, c)["fast"].seconds(8), none, 1e-12);
  job.spec.optimizer.momentum = 0;
  EXPECT_NEAR(DeviceSpeeds(job, c)["fast"].seconds(8), none - params * 0.05e-9, 1e-9 * none);
}

TEST_F(ScaledSpeeds, MeasuredJoulesSetThePowerOfTheirOwnTypeOnly) {
  TimingSample a;
  a.model = "a";
  a.batch = 8;
  a.seconds = 0.1;
  a.joules = 30;
  TimingSample b = a, unmeasured = a;
  b.model = "b";
  b.seconds = 0.3;
  b.joules = 60;  // with a: 90 J over 0.4 s
  unmeasured.model = "c";
  unmeasured.joules = -1;
  cal_.samples = {a, b, unmeasured};
  Save();
  Job job = SmallJob();
  Cluster c = TwoTypes();
  c.gpu_types[0].calibration = path_;  // fast: 300 W active, 50 W idle on the datasheet
  auto speeds = DeviceSpeeds(job, c);
  EXPECT_DOUBLE_EQ(speeds["fast"].measured_watts, 225);
  EXPECT_EQ(speeds["fast"].energy_source, "measured (" + file() + ": 225.0 W over 2 samples)");
  EXPECT_EQ(speeds["slow"].measured_watts, 0);  // scaled speed, but not another type's power
  EXPECT_EQ(speeds["slow"].energy_source, "datasheet (active_watts 200 W)");
  job.allowed_types = {"fast"};
  const Recommendation measured = Recommend(job, c, speeds);
  speeds["fast"].measured_watts = 0;
  const Recommendation datasheet = Recommend(job, c, speeds);
  EXPECT_EQ(measured.fastest.gpus, datasheet.fastest.gpus);  // the same time, less energy
  EXPECT_DOUBLE_EQ(measured.fastest.total_s, datasheet.fastest.total_s);
  EXPECT_LT(measured.fastest.energy_j, datasheet.fastest.energy_j);
  EXPECT_EQ(PlanJson(job, measured, measured.fastest)["energy_source"]["fast"],
            "measured (" + file() + ": 225.0 W over 2 samples)");
}

TEST_F(ScaledSpeeds, StaleReferenceCarriesItsStalenessOver) {
  cal_.engine = "0123456789ab";
  Save();
  Job job = SmallJob();
  Cluster c = TwoTypes();
  c.gpu_types[0].calibration = path_;
  auto speeds = DeviceSpeeds(job, c);
  EXPECT_EQ(speeds["slow"].stale, speeds["fast"].stale);
  EXPECT_EQ(speeds["slow"].stale.rfind(file() + ": measured with engine 0123456789ab", 0), 0u)
      << speeds["slow"].stale;
  const std::vector<std::string> w = StaleCalibrationWarnings(speeds);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0], "fast's calibration " + speeds["fast"].stale);
  EXPECT_EQ(w[1], "slow's speed is scaled from fast's calibration " + speeds["fast"].stale);
}

TEST_F(ScaledSpeeds, ReferenceMayBeATypeTheJobCannotUse) {
  Save();
  Job job = SmallJob();
  job.allowed_types = {"slow"};
  Cluster c = TwoTypes();
  c.gpu_types[0].calibration = path_;
  auto speeds = DeviceSpeeds(job, c);
  ASSERT_EQ(speeds.count("fast"), 0u);
  EXPECT_EQ(speeds["slow"].reference, "fast");
  // Its file is needed then, and a missing one is named.
  fs::remove(path_);
  try {
    DeviceSpeeds(job, c);
    FAIL() << "no error";
  } catch (const EstimateError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU type \"fast\": calibration file"), std::string::npos)
        << e.what();
  }
}

// Issue 47: a pipeline's stages are timed by the type's time model, layer by layer. The
// layers' parts add up to the whole network's time (the step's overhead and the loss aside).
// With one micro-batch the stages run one after the other, so the step is the whole
// network's on one GPU, less what the stages' optimizer updates do side by side. By the
// layers' FLOPs alone (the slowest stage's share, M + P - 1 times) the example spec's step
// was predicted at 2x the measured one (BENCHMARKS.md, the pipeline table).
TEST_F(ScaledSpeeds, APipelinesStagesAreTimedByTheModelLayerByLayer) {
  // A GPU's model: a rank's speed does not depend on how many share the node's cores.
  cal_.device = cal_.model.device = "cuda";
  Save();
  Job job = SmallJob();
  Cluster c = TwoTypes();
  c.gpu_types[0].calibration = path_;
  auto speeds = DeviceSpeeds(job, c);
  const DeviceSpeed& s = speeds["fast"];
  ASSERT_EQ(s.layer_pass_s.size(), job.spec.layers.size());
  ASSERT_EQ(s.layer_update_s.size(), job.spec.layers.size());
  ASSERT_EQ(s.layer_per_sample_s.size(), job.spec.layers.size());
  double pass = 0, update = 0, per = 0;
  for (size_t i = 0; i < job.spec.layers.size(); ++i) {
    pass += s.layer_pass_s[i];
    update += s.layer_update_s[i];
    per += s.layer_per_sample_s[i];
  }
  EXPECT_NEAR(pass + update + cal_.model.coef[0], s.fixed_s, 1e-12);
  EXPECT_GT(update, 0);
  // The loss: 5 FLOPs a class, element-wise (coef[3]).
  EXPECT_NEAR(per + cal_.model.coef[3] * 5 * job.spec.classes, s.per_sample_s, 1e-15);

  job.spec.parallel.pipeline_stages = 2;
  job.spec.parallel.micro_batches = 1;
  const Recommendation rec = Recommend(job, c, speeds);
  const double whole = s.fixed_s + s.per_sample_s * double(job.spec.batch_size);
  int checked = 0;
  for (const Allocation& a : rec.ranked) {
    if (a.parts.size() != 1 || a.parts[0].gpu != "fast" || a.gpus != 2 || a.nodes != 1) continue;
    EXPECT_EQ(a.pipeline_stages, 2);
    EXPECT_LE(a.compute_s, whole + 1e-12);
    EXPECT_GE(a.compute_s, whole - update - 1e-12);
    ++checked;
  }
  EXPECT_EQ(checked, 1);
}

// Where the calibration has a layer model, the step still takes the step-time model's time,
// and only how it divides among the layers is the layer model's (the update stays the step
// model's: the layer rows leave it out); a type scaled from it gets both moved by the peaks.
TEST_F(ScaledSpeeds, ALayerModelDividesTheStepTheStepModelTimes) {
  Save();
  Job job = SmallJob();
  Cluster c = TwoTypes();
  c.gpu_types[0].calibration = path_;  // fast: 10 TFLOP/s, 500 GB/s
  c.gpu_types[1].peak_tflops = 4;      // slow: scaled from fast by 0.4x and 0.5x
  c.gpu_types[1].memory_bandwidth_gbs = 250;
  const auto without = DeviceSpeeds(job, c);
  // A layer model that prices only the dense layers' FLOPs and fixed costs.
  cal_.layer_model.coef = {0, 0, 4e-11, 0, 0, 0, 0, 0, 2e-4};
  cal_.layer_model.samples = 100;
  Save();
  const auto with = DeviceSpeeds(job, c);
  const DeviceSpeed &a = without.at("fast"), &b = with.at("fast");
  EXPECT_EQ(a.fixed_s, b.fixed_s);
  EXPECT_EQ(a.per_sample_s, b.per_sample_s);
  EXPECT_EQ(a.layer_update_s, b.layer_update_s);
  const std::vector<ModelFeatures> layers = TopLevelLayerFeatures(job.spec);
  ASSERT_EQ(b.layer_pass_s.size(), layers.size());
  int dense = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const double pass = LayerSeconds(cal_.layer_model, layers[i], 0, true);
    EXPECT_DOUBLE_EQ(b.layer_pass_s[i], pass) << i;
    EXPECT_DOUBLE_EQ(b.layer_per_sample_s[i],
                     LayerSeconds(cal_.layer_model, layers[i], 1, true) - pass)
        << i;
    if (job.spec.layers[i].kind == LayerKind::Dense) {
      ++dense;
      EXPECT_GT(b.layer_per_sample_s[i], 0) << i;
    } else {
      EXPECT_EQ(b.layer_pass_s[i] + b.layer_per_sample_s[i], 0) << i;
    }
  }
  EXPECT_GT(dense, 0);
  // The slow type is scaled from it: the layer model too, so its layers take longer.
  const DeviceSpeed& slow = with.at("slow");
  ASSERT_EQ(slow.layer_per_sample_s.size(), layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    if (b.layer_per_sample_s[i] > 0) {
      EXPECT_GT(slow.layer_per_sample_s[i], b.layer_per_sample_s[i]) << i;
    }
  }
}

TEST(DeviceSpeeds, LocalClusterScalesBetaFromAlpha) {
  // share/cluster/local.json: alpha (0.05 TFLOP/s, 10 GB/s) calibrated, beta (0.02, 5) not.
  Job job = SmallJob();
  const Cluster c = LoadCluster(RepoFile("share/cluster/local.json"));
  auto speeds = DeviceSpeeds(job, c);
  EXPECT_EQ(speeds["alpha"].source, "calibrated (cpu.json)");
  EXPECT_EQ(speeds["beta"].source,
            "scaled from alpha's calibration (cpu.json): FLOP/s x0.40, bandwidth x0.50");
}

// ---------------------------------------------------------------- ranking

TEST(Recommend, DeadlineMetWithLeastEnergy) {
  Job job = SmallJob();
  job.deadline_s = 60;
  Cluster c = TwoTypes();
  auto speeds = TwoSpeeds();
  Recommendation rec = Recommend(job, c, speeds);
  ASSERT_TRUE(rec.feasible);
  const Allocation& top = rec.ranked.front();
  EXPECT_LE(top.total_s * 1.1, 60);
  CheckAgainstBruteForce(job, c, speeds, rec);
  EXPECT_EQ(top.why.rfind("least energy of " + std::to_string(rec.ranked.size()) +
                              " allocations meeting the 60s deadline (",
                          0),
            0u)
      << top.why;
  EXPECT_NE(rec.ranked[1].why.find(" energy, "), std::string::npos) << rec.ranked[1].why;
  // Without a deadline some allocations are slower than 60 s and rank too.
  job.deadline_s = 0;
  Recommendation all = Recommend(job, c, speeds);
  EXPECT_GT(all.ranked.size(), rec.ranked.size());
  CheckAgainstBruteForce(job, c, speeds, all);
}

// Issue 47: local SGD sums no gradient; its model average (parameters and momenta) once a
// period is the step's communication, spread over the period.
TEST(Recommend, LocalSgdPaysOneAverageOfParametersAndMomentaAPeriod) {
  Job job = SmallJob();
  job.allow_mixed = true;
  ASSERT_GT(job.spec.optimizer.momentum, 0);
  Cluster c = TwoTypes();
  const Recommendation sync = Recommend(job, c, TwoSpeeds());
  job.spec.sync.mode = SyncSpec::Mode::LocalSgd;
  job.spec.sync.period = 8;
  const Recommendation local = Recommend(job, c, TwoSpeeds());
  CheckAgainstBruteForce(job, c, TwoSpeeds(), local);
  ASSERT_EQ(local.ranked.size(), sync.ranked.size());
  auto key = [](const Allocation& a) {
    std::string k;
    for (const Part& p : a.parts)
      k += p.node_type + " " + std::to_string(p.nodes) + "x" + std::to_string(p.gpus_per_node) +
           " b" + std::to_string(p.per_gpu_batch) + "; ";
    return k;
  };
  int cheaper = 0, matched = 0;
  for (const Allocation& a : local.ranked)
    for (const Allocation& b : sync.ranked)
      if (key(a) == key(b)) {
        ++matched;
        EXPECT_LE(a.comm_s, b.comm_s) << key(a);
        cheaper += a.comm_s < b.comm_s;
      }
  EXPECT_EQ(matched, int(local.ranked.size()));
  EXPECT_GT(cheaper, 10);
}

// Stale-synchronous training sums a step's gradients while the next steps compute: a step takes
// the longer of its compute and its allreduce; with staleness 0 it is the synchronous step.
TEST(Recommend, StaleSyncStepTakesTheLongerOfComputeAndAllreduce) {
  Job job = SmallJob();
  Cluster c = TwoTypes();
  c.inter_node = Link{0.001, 100};  // 8 Mbit/s between nodes: the allreduce weighs
  job.max_gpus = 0;
  const Recommendation sync = Recommend(job, c, TwoSpeeds());
  job.spec.sync.mode = SyncSpec::Mode::StaleSync;
  job.spec.sync.staleness = 0;
  const Recommendation zero = Recommend(job, c, TwoSpeeds());
  ASSERT_EQ(zero.ranked.size(), sync.ranked.size());
  for (size_t i = 0; i < zero.ranked.size(); ++i)
    EXPECT_EQ(zero.ranked[i].step_s, sync.ranked[i].step_s);
  job.spec.sync.staleness = 2;
  const Recommendation stale = Recommend(job, c, TwoSpeeds());
  CheckAgainstBruteForce(job, c, TwoSpeeds(), stale);
  int hidden = 0;
  for (const Allocation& a : stale.ranked) {
    EXPECT_LE(a.step_s, a.compute_s + a.comm_s + 1e-12);
    hidden += a.nodes > 1 && a.comm_s < a.step_s;
    if (a.gpus > 1) {
      const std::string note = SyncNote(job, a);
      EXPECT_EQ(note.rfind("stale-synchronous from the spec, staleness 2: ", 0), 0u) << note;
      const nlohmann::json plan = PlanJson(job, stale, a);
      EXPECT_EQ(plan["sync"]["mode"], "stale_sync");
      EXPECT_EQ(plan["sync"]["staleness"], 2);
    }
  }
  EXPECT_GT(hidden, 0);
}

// The plan and the lines say the mode: local SGD's period and what it saves; for a synchronous
// job whose allreduce weighs on the step, what local SGD would make of it; else nothing.
TEST(Recommend, SyncNoteSaysTheModeAndOffersLocalSgdWhereTheAllreduceWeighs) {
  Job job = SmallJob();
  Cluster c = TwoTypes();
  c.inter_node = Link{0.001, 100};  // 8 Mbit/s between nodes: the allreduce weighs
  job.max_gpus = 0;
  Recommendation rec = Recommend(job, c, TwoSpeeds());
  const Allocation* multi = nullptr;
  for (const Allocation& a : rec.ranked)
    if (a.nodes > 1 && a.comm_s >= 0.25 * a.step_s) multi = &a;
  ASSERT_NE(multi, nullptr);
  const std::string offer = SyncNote(job, *multi);
  EXPECT_EQ(offer.rfind("communication is ", 0), 0u) << offer;
  EXPECT_NE(
      offer.find("local SGD (\"sync\": {\"mode\": \"local_sgd\", \"period\": 16} in the spec)"),
      std::string::npos)
      << offer;
  nlohmann::json plan = PlanJson(job, rec, *multi);
  EXPECT_EQ(plan["sync"]["mode"], "sync");
  EXPECT_EQ(plan["sync"]["note"], offer);
  for (const Allocation& a : rec.ranked)
    if (a.gpus == 1) {
      EXPECT_EQ(SyncNote(job, a), "") << "one GPU has nothing to average";
    }

  job.spec.sync.mode = SyncSpec::Mode::LocalSgd;
  job.spec.sync.period = 8;
  rec = Recommend(job, c, TwoSpeeds());
  for (const Allocation& a : rec.ranked) {
    if (a.gpus == 1) continue;
    const std::string note = SyncNote(job, a);
    EXPECT_EQ(note.rfind("local SGD from the spec, period 8: one model average every 8 steps, ", 0),
              0u)
        << note;
    plan = PlanJson(job, rec, a);
    EXPECT_EQ(plan["sync"]["mode"], "local_sgd");
    EXPECT_EQ(plan["sync"]["period"], 8);
    break;
  }
}

// Issue 47: a network that fits no GPU whole is planned as the shortest pipeline whose largest
// stage fits (its memory per GPU under the usable 90%), with four micro-batches a stage, and the
// plan says so; with room for the whole network, no pipeline.
TEST(Recommend, NetworkOverTheMemoryCapIsPlannedAsAPipeline) {
  Job job;
  job.spec = ParseSpec(R"({"input": {"channels": 1, "height": 28, "width": 28}, "classes": 10,
      "layers": [{"type": "flatten"}, {"type": "dense", "units": 4096}, {"type": "relu"},
                 {"type": "dense", "units": 4096}, {"type": "relu"},
                 {"type": "dense", "units": 4096}, {"type": "relu"}, {"type": "dense", "units": 10}],
      "optimizer": {"type": "sgd", "lr": 0.01, "momentum": 0.9}, "batch_size": 64, "epochs": 1,
      "dataset": "x.h5"})",
                       "big.json", "");
  job.features = ComputeFeatures(job.spec);
  job.samples = 60000;
  job.epochs = 1;
  job.top = 0;
  Cluster c = TwoTypes();
  Recommendation whole = Recommend(job, c, TwoSpeeds());
  EXPECT_EQ(whole.ranked.front().pipeline_stages, 1);
  EXPECT_FALSE(PlanJson(job, whole, whole.ranked.front()).contains("parallel"));
  // A cap under the whole network at batch 1: nothing fits whole, half of it does.
  const double whole_bytes = TrainingMemoryBytes(job.features, 1, 1, MemoryEngine::kDevice);
  for (GpuType& g : c.gpu_types) g.memory_gb = 0.65 * whole_bytes / 0.9e9;
  const Recommendation rec = Recommend(job, c, TwoSpeeds());
  ASSERT_TRUE(rec.feasible);
  ASSERT_FALSE(rec.pipeline_why.empty());
  for (const Allocation& a : rec.ranked) {
    EXPECT_EQ(a.pipeline_stages, 2) << a.why;
    EXPECT_EQ(a.micro_batches, 8);
    EXPECT_EQ(a.gpus % 2, 0);
    EXPECT_LE(a.memory_bytes, 0.9 * c.gpu_types[0].memory_gb * 1e9);
    EXPECT_LT(a.memory_bytes, whole_bytes);
  }
  const nlohmann::json plan = PlanJson(job, rec, rec.ranked.front());
  ASSERT_TRUE(plan.contains("parallel"));
  EXPECT_EQ(plan["parallel"]["pipeline_stages"], 2);
  EXPECT_EQ(plan["parallel"]["micro_batches"], 8);
  // GPipe's (P - 1) / (M + P - 1) where the stages are even; this cut's are not (its first
  // stage holds 784 x 4096 weights more), so its stages wait longer.
  EXPECT_GT(plan["parallel"]["bubble"].get<double>(), 1.0 / 9.0);
  EXPECT_LT(plan["parallel"]["bubble"].get<double>(), 1.0);
  EXPECT_EQ(plan["parallel"]["why"], rec.pipeline_why);
  // Under 54% (the 2-stage cut's largest stage), three stages; under 46% (the largest layer's
  // share of the weights) no cut fits, and the refusal says pipelines were tried.
  for (GpuType& g : c.gpu_types) g.memory_gb = 0.52 * whole_bytes / 0.9e9;
  const Recommendation more = Recommend(job, c, TwoSpeeds());
  ASSERT_TRUE(more.feasible);
  EXPECT_EQ(more.ranked.front().pipeline_stages, 3);
  for (GpuType& g : c.gpu_types) g.memory_gb = 0.4 * whole_bytes / 0.9e9;
  try {
    Recommend(job, c, TwoSpeeds());
    ADD_FAILURE() << "planned a network whose largest layer fits no GPU";
  } catch (const EstimateError& e) {
    EXPECT_NE(std::string(e.what()).find("no pipeline of up to 8 stages fits either"),
              std::string::npos)
        << e.what();
  }
}

TEST(Recommend, DefaultKeepsTheTopTen) {
  Job job = SmallJob();
  job.top = 10;
  job.allow_mixed = true;
  Cluster c = TwoTypes();
  Recommendation rec = Recommend(job, c, TwoSpeeds());
  EXPECT_EQ(rec.ranked.size(), 10u);
  CheckAgainstBruteForce(job, c, TwoSpeeds(), rec);
  for (const Allocation& a : rec.ranked) EXPECT_FALSE(a.why.empty());
}

// Issue 41: above 32 nodes a type, mixes are enumerated on a grid of counts and refined around
// each pair's best. The best allocation must be that of every pair of counts (exhaustive_mix),
// and the best mix within 0.5% of it, at a fraction of the candidates.
TEST(Recommend, AMixOfHundredsOfNodesOnTheGridIsTheExhaustiveBest) {
  Cluster c = TwoTypes();
  c.node_types[0].nodes = 400;
  c.node_types[1].nodes = 300;
  auto speeds = TwoSpeeds();
  for (double deadline : {0.0, 40.0, 90.0, 400.0}) {
    for (Objective objective : {Objective::Energy, Objective::Time}) {
      Job job = SmallJob();
      job.samples = 6000000;
      job.per_gpu_batch = 64;
      job.allow_mixed = true;
      job.top = 500;  // the best mix is among them
      job.deadline_s = deadline;
      job.objective = objective;
      Recommendation grid = Recommend(job, c, speeds);
      job.exhaustive_mix = true;
      Recommendation all = Recommend(job, c, speeds);
      ASSERT_EQ(grid.feasible, all.feasible) << deadline;
      EXPECT_LT(grid.candidates * 4, all.candidates) << deadline;
      auto best_mix = [](const Recommendation& r) -> const Allocation* {
        for (const Allocation& a : r.ranked)
          if (a.parts.size() == 2) return &a;
        return nullptr;
      };
      const std::string what = "deadline " + std::to_string(deadline) + " s, objective " +
                               std::to_string(int(objective));
      if (!all.feasible) continue;
      const Allocation& g = grid.ranked.front();
      const Allocation& e = all.ranked.front();
      EXPECT_EQ(g.gpus, e.gpus) << what << ": " << g.why << " / " << e.why;
      EXPECT_DOUBLE_EQ(g.energy_j, e.energy_j) << what;
      EXPECT_DOUBLE_EQ(g.total_s, e.total_s) << what;
      const Allocation* gm = best_mix(grid);
      const Allocation* em = best_mix(all);
      ASSERT_EQ(gm == nullptr, em == nullptr) << what;
      if (!em) continue;
      // Near a flat optimum the refinement may stop a few nodes off: the objective, not the
      // counts, is held to within 0.5%.
      const double gk = objective == Objective::Energy ? gm->energy_j : gm->total_s;
      const double ek = objective == Objective::Energy ? em->energy_j : em->total_s;
      EXPECT_LE(gk, ek * 1.005) << what << ": grid " << gm->parts[0].nodes << " + "
                                << gm->parts[1].nodes << " nodes, every pair " << em->parts[0].nodes
                                << " + " << em->parts[1].nodes;
      EXPECT_GE(gk, ek) << what;  // the grid's pairs are among every pair's
    }
  }
}

// The plugin asks Slurm for one GPU count per node: its mixes use the smaller node's count
// (2 of the fast type's 4) on every node, and nothing else about them changes.
TEST(Recommend, MixedWithOneGpuCountPerNode) {
  Job job = SmallJob();
  job.allow_mixed = true;
  job.mixed_same_gpus_per_node = true;
  Cluster c = TwoTypes();
  Recommendation rec = Recommend(job, c, TwoSpeeds());
  int mixes = 0;
  for (const Allocation& a : rec.ranked) {
    if (a.parts.size() != 2) continue;
    ++mixes;
    EXPECT_EQ(a.parts[0].gpus_per_node, 2) << a.why;
    EXPECT_EQ(a.parts[1].gpus_per_node, 2) << a.why;
    EXPECT_EQ(a.gpus, 2 * a.nodes);
    EXPECT_EQ(a.global_batch, a.parts[0].per_gpu_batch * 2 * a.parts[0].nodes +
                                  a.parts[1].per_gpu_batch * 2 * a.parts[1].nodes);
  }
  EXPECT_EQ(mixes, 3 * 4);  // 1..3 fast nodes x 1..4 slow nodes
  job.mixed_same_gpus_per_node = false;
  for (const Allocation& a : Recommend(job, c, TwoSpeeds()).ranked) {
    if (a.parts.size() == 2) {
      EXPECT_EQ(a.parts[0].gpus_per_node, 4) << a.why;
    }
  }
}

TEST(Recommend, TimeObjectivePicksTheFastest) {
  Job job = SmallJob();
  job.objective = Objective::Time;
  job.allow_mixed = true;
  Cluster c = TwoTypes();
  Recommendation rec = Recommend(job, c, TwoSpeeds());
  ASSERT_TRUE(rec.feasible);
  EXPECT_DOUBLE_EQ(rec.ranked[0].total_s, rec.fastest.total_s);
  for (const Allocation& a : rec.ranked) EXPECT_GE(a.total_s, rec.ranked[0].total_s);
  CheckAgainstBruteForce(job, c, TwoSpeeds(), rec);
  EXPECT_EQ(rec.ranked[0].why.rfind("fastest of ", 0), 0u) << rec.ranked[0].why;
}

TEST(Recommend, GpuHoursObjective) {
  Job job = SmallJob();
  job.objective = Objective::GpuHours;
  job.deadline_s = 70;
  Cluster c = TwoTypes();
  Recommendation rec = Recommend(job, c, TwoSpeeds());
  ASSERT_TRUE(rec.feasible);
  for (const Allocation& a : rec.ranked) EXPECT_GE(a.gpu_hours, rec.ranked[0].gpu_hours);
  CheckAgainstBruteForce(job, c, TwoSpeeds(), rec);
  EXPECT_EQ(rec.ranked[0].why.rfind("fewest GPU-hours of ", 0), 0u) << rec.ranked[0].why;
}

TEST(Recommend, ImpossibleDeadlineNamesTheFastest) {
  Job job = SmallJob();
  job.deadline_s = 35;  // 30 s startup + 468 steps of at least 4 ms: 31.9 s * 1.1 > 35
  job.allow_mixed = true;
  Cluster c = TwoTypes();
  Recommendation rec = Recommend(job, c, TwoSpeeds());
  EXPECT_FALSE(rec.feasible);
  EXPECT_TRUE(rec.ranked.empty());
  CheckAgainstBruteForce(job, c, TwoSpeeds(), rec);
  EXPECT_NEAR(rec.miss_s, rec.fastest.total_s * 1.1 - 35, 1e-9);
  EXPECT_GT(rec.miss_s, 0);
  EXPECT_FALSE(rec.fastest.meets_deadline);
  EXPECT_TRUE(rec.fastest.fits_memory);
  EXPECT_EQ(rec.fastest.why.rfind("fastest allocation misses the 35s deadline by ", 0), 0u)
      << rec.fastest.why;
  nlohmann::json plan = PlanJson(job, rec, rec.fastest);
  EXPECT_EQ(plan["feasible"], false);
}

TEST(Recommend, MemoryFilterDropsSmallGpus) {
  Job job = SmallJob();
  Cluster c = TwoTypes();
  // "slow" holds no sample at all: every one of its allocations is dropped.
  c.gpu_types[1].memory_gb =
      TrainingMemoryBytes(job.features, 1, 1, MemoryEngine::kDevice) * 0.5 / 0.9 / 1e9;
  Recommendation rec = Recommend(job, c, TwoSpeeds());
  ASSERT_TRUE(rec.feasible);
  for (const Allocation& a : rec.ranked)
    for (const Part& p : a.parts) EXPECT_EQ(p.gpu, "fast");
  CheckAgainstBruteForce(job, c, TwoSpeeds(), rec);

  // "fast" holds at most 40 samples: batch 256 needs 7 GPUs or more.
  c.gpu_types[0].memory_gb = (TrainingMemoryBytes(job.features, 40, 1, MemoryEngine::kDevice) +
                              TrainingMemoryBytes(job.features, 41, 1, MemoryEngine::kDevice)) /
                             2 / 0.9 / 1e9;
  rec = Recommend(job, c, TwoSpeeds());
  ASSERT_TRUE(rec.feasible);
  for (const Allocation& a : rec.ranked) {
    EXPECT_GE(a.gpus, 7);
    EXPECT_LE(a.parts[0].per_gpu_batch, 40);
    EXPECT_LE(a.memory_bytes, 0.9 * c.gpu_types[0].memory_gb * 1e9);
  }
  CheckAgainstBruteForce(job, c, TwoSpeeds(), rec);

  // Nothing fits: the error names the need and the largest GPU.
  c.gpu_types[0].memory_gb = 1e-6;
  c.gpu_types[1].memory_gb = 0.5e-6;
  const std::string need = [&] {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f",
                  TrainingMemoryBytes(job.features, 22, 1, MemoryEngine::kDevice) / 1e9);
    return std::string(buf);
  }();
  try {
    Recommend(job, c, TwoSpeeds());
    FAIL() << "no error";
  } catch (const EstimateError& e) {
    // 256 samples over all 12 "fast" GPUs: 22 each at the least.
    EXPECT_EQ(std::string(e.what()),
              "model needs " + need +
                  " GB per GPU at batch 22; the largest GPU has 1e-06 "
                  "GB (fast, 90% usable); no pipeline of up to 5 stages fits either");
  }
}

TEST(Recommend, MaxGpusRespected) {
  Job job = SmallJob();
  job.max_gpus = 5;
  job.allow_mixed = true;
  Cluster c = TwoTypes();
  Recommendation rec = Recommend(job, c, TwoSpeeds());
  ASSERT_TRUE(rec.feasible);
  for (const Allocation& a : rec.ranked) EXPECT_LE(a.gpus, 5);
  EXPECT_LE(rec.fastest.gpus, 5);
  CheckAgainstBruteForce(job, c, TwoSpeeds(), rec);
}

TEST(Recommend, AllowedTypesRespected) {
  Job job = SmallJob();
  job.allowed_types = {"slow"};
  job.allow_mixed = true;
  Cluster c = TwoTypes();
  std::map<std::string, DeviceSpeed> only_slow = {{"slow", Speed(0.006, 0.0010)}};
  Recommendation rec = Recommend(job, c, only_slow);  // "fast" needs no speed
  ASSERT_TRUE(rec.feasible);
  for (const Allocation& a : rec.ranked) {
    ASSERT_EQ(a.parts.size(), 1u);
    EXPECT_EQ(a.parts[0].gpu, "slow");
    EXPECT_EQ(a.parts[0].node_type, "ns");
  }
  CheckAgainstBruteForce(job, c, only_slow, rec);
  job.allowed_types = {"h200"};
  EXPECT_THROW(Recommend(job, c, only_slow), EstimateError);
}

TEST(Recommend, AvailabilityLimitsNodes) {
  Job job = SmallJob();
  Cluster c = TwoTypes();
  c.node_types[0].available = 1;
  c.node_types[1].available = 0;
  Recommendation rec = Recommend(job, c, TwoSpeeds());
  for (const Allocation& a : rec.ranked) {
    EXPECT_EQ(a.parts[0].gpu, "fast");
    EXPECT_EQ(a.nodes, 1);
  }
  EXPECT_EQ(rec.candidates, 3);  // 1, 2 and 4 GPUs of one node
  CheckAgainstBruteForce(job, c, TwoSpeeds(), rec);
}

TEST(Recommend, MixedBatchesBalancedAndSummed) {
  Job job = SmallJob();
  job.allow_mixed = true;
  job.spec.batch_size = 1000;
  Cluster c = TwoTypes();
  const auto speeds = TwoSpeeds();
  Recommendation rec = Recommend(job, c, speeds);
  CheckAgainstBruteForce(job, c, speeds, rec);
  int mixed = 0;
  for (const Allocation& a : rec.ranked) {
    if (a.parts.size() != 2) continue;
    ++mixed;
    const Part &p = a.parts[0], &q = a.parts[1];
    EXPECT_EQ(p.gpus_per_node, 4);  // full nodes
    EXPECT_EQ(q.gpus_per_node, 2);
    const int cp = p.nodes * p.gpus_per_node, cq = q.nodes * q.gpus_per_node;
    EXPECT_EQ(cp * p.per_gpu_batch + cq * q.per_gpu_batch, a.global_batch);
    EXPECT_LE(a.global_batch, 1000);
    EXPECT_GT(a.global_batch, 1000 - cp - cq);
    const double tp = speeds.at(p.gpu).seconds(double(p.per_gpu_batch));
    const double tq = speeds.at(q.gpu).seconds(double(q.per_gpu_batch));
    const double t = BalancedTime({speeds.at(p.gpu), speeds.at(q.gpu)}, {cp, cq}, 1000);
    EXPECT_LE(std::max(tp, tq), t + 0.0010 + 1e-12) << p.nodes << "+" << q.nodes;
    EXPECT_DOUBLE_EQ(a.compute_s, std::max(tp, tq));
    EXPECT_NEAR(a.lr, 0.1 * double(a.global_batch) / 1000, 1e-15);
  }
  EXPECT_EQ(mixed, 3 * 4);
}

TEST(Recommend, LinearLrScalingAndWarmup) {
  Job job = SmallJob();
  job.per_gpu_batch = 64;
  job.allow_mixed = true;
  Cluster c = TwoTypes();
  Recommendation rec = Recommend(job, c, TwoSpeeds());
  CheckAgainstBruteForce(job, c, TwoSpeeds(), rec);
  bool saw_small = false, saw_large = false;
  for (const Allocation& a : rec.ranked) {
    if (a.parts.size() == 1) {
      EXPECT_EQ(a.global_batch, 64 * a.gpus);
    }
    const double ratio = double(a.global_batch) / 256;
    EXPECT_NEAR(a.lr, 0.1 * ratio, 1e-12);
    EXPECT_DOUBLE_EQ(a.warmup_epochs, ratio > 2 ? 1.0 : 0.5);
    saw_small = saw_small || ratio <= 2;
    saw_large = saw_large || ratio > 2;
  }
  EXPECT_TRUE(saw_small && saw_large);
}

TEST(Recommend, BadJobs) {
  Cluster c = TwoTypes();
  Job job = SmallJob();
  job.samples = 0;
  EXPECT_THROW(Recommend(job, c, TwoSpeeds()), EstimateError);
  job = SmallJob();
  job.epochs = 0;
  EXPECT_THROW(Recommend(job, c, TwoSpeeds()), EstimateError);
  job = SmallJob();
  std::map<std::string, DeviceSpeed> one = {{"fast", Speed(0.004, 0.0004)}};
  EXPECT_THROW(Recommend(job, c, one), EstimateError);  // no speed for "slow"
  job.samples = 100;  // fewer samples than any global batch of 256
  EXPECT_THROW(Recommend(job, c, TwoSpeeds()), EstimateError);
}

TEST(Recommend, ExampleClusterWithRooflineSpeeds) {
  Job job = SmallJob();
  job.top = 5;
  job.deadline_s = 3 * 3600;
  job.allow_mixed = true;
  Cluster c = LoadCluster(RepoFile("share/cluster/example.json"));
  Recommendation rec = Recommend(job, c);
  ASSERT_TRUE(rec.feasible);
  EXPECT_EQ(rec.ranked.size(), 5u);
  EXPECT_EQ(rec.speeds.size(), 4u);
  CheckAgainstBruteForce(job, c, rec.speeds, rec);
}

// The example's v100 (compute capability 7.0) has no target in a CUDA 13 build (sm_80, sm_90,
// compute_90): it is never offered, the recommendation says why, and a job that may use it
// alone gets one line naming the type and its capability (issue 42).
TEST(Recommend, TypesTheEngineCannotRunAreLeftOut) {
  Job job = SmallJob();
  job.top = 1000;
  job.deadline_s = 3 * 3600;
  job.allow_mixed = true;
  const Cluster c = LoadCluster(RepoFile("share/cluster/example.json"));
  ASSERT_EQ(c.gpu("v100")->compute_capability, "7.0");
  const Recommendation rec = Recommend(job, c);
  ASSERT_TRUE(rec.feasible);
  ASSERT_EQ(rec.unrunnable_types.size(), 1u);
  EXPECT_EQ(rec.unrunnable_types[0].rfind("v100 (compute capability 7.0: DLH's GPU engine is "
                                          "built for sm_80, sm_90 and PTX compute_90)",
                                          0),
            0u)
      << rec.unrunnable_types[0];
  for (const Allocation& a : rec.ranked)
    for (const Part& p : a.parts) EXPECT_NE(p.gpu, "v100") << a.why;
  for (const Allocation& a : rec.rejected)
    for (const Part& p : a.parts) EXPECT_NE(p.gpu, "v100");
  job.allowed_types = {"v100"};
  try {
    Recommend(job, c);
    ADD_FAILURE() << "a job on v100 alone was planned";
  } catch (const EstimateError& e) {
    EXPECT_NE(std::string(e.what()).find("no GPU type this job may use can run DLH's GPU "
                                         "engine: v100 (compute capability 7.0"),
              std::string::npos)
        << e.what();
  }
  job.allowed_types = {"v100", "a100"};
  const Recommendation a100 = Recommend(job, c);
  ASSERT_TRUE(a100.feasible);
  for (const Allocation& a : a100.ranked)
    for (const Part& p : a.parts) EXPECT_EQ(p.gpu, "a100");
  // The plan's part carries the capability: the launcher then never trains it on the CPU.
  EXPECT_EQ(PlanJson(job, a100, a100.ranked[0])["allocation"]["parts"][0]["compute_capability"],
            "8.0");
}

TEST(CudaTargets, WhichCapabilitiesABuildRuns) {
  const std::vector<std::string> built = {"sm_80", "sm_90", "compute_90"};
  auto runs = [&](const char* cc) {
    return CudaTargetsRun(built, ParseComputeCapability(cc, "test"));
  };
  EXPECT_FALSE(runs("7.0"));  // V100: CUDA 13 has no Volta target
  EXPECT_FALSE(runs("7.5"));  // T4: below sm_80, and no PTX below 9.0
  EXPECT_TRUE(runs("8.0"));   // A100: sm_80
  EXPECT_TRUE(runs("8.6"));   // A40, A10: sm_80 runs on later minors of 8
  EXPECT_TRUE(runs("8.9"));   // L40S
  EXPECT_TRUE(runs("9.0"));   // H100, H200: sm_90
  EXPECT_TRUE(runs("10.0"));  // B200: the compute_90 PTX, compiled by the driver
  EXPECT_TRUE(runs("12.0"));
  EXPECT_FALSE(CudaTargetsRun({"sm_80", "sm_90"}, ParseComputeCapability("10.0", "t")));
  EXPECT_FALSE(CudaTargetsRun({"sm_90a"}, ParseComputeCapability("10.0", "t")));
  EXPECT_TRUE(CudaTargetsRun({"sm_90a"}, ParseComputeCapability("9.0", "t")));
  EXPECT_FALSE(CudaTargetsRun({"sm_86"}, ParseComputeCapability("8.0", "t")));
  EXPECT_EQ(BuiltCudaTargets(), built) << "CUDA_ARCH_FLAGS changed: update this test";
  EXPECT_EQ(WhyEngineCannotRun(""), "");  // unknown (CPU-rank types): not refused
  EXPECT_EQ(WhyEngineCannotRun("9.0"), "");
  for (const char* bad : {"9", "9.", "v9.0", "9.0.1", "09.0", "9.10", " 9.0"})
    EXPECT_THROW(ParseComputeCapability(bad, "t"), EstimateError) << bad;
}

// ---------------------------------------------------------------- plan, time limit

TEST(Plan, FieldsPresent) {
  Job job = SmallJob();
  job.deadline_s = 60;
  job.allow_mixed = true;
  Cluster c = TwoTypes();
  Recommendation rec = Recommend(job, c, TwoSpeeds());
  ASSERT_TRUE(rec.feasible);
  const Allocation& a = rec.ranked[0];
  nlohmann::json p = PlanJson(job, rec, a);
  EXPECT_EQ(p["format_version"], 1);
  EXPECT_EQ(p["spec"], "small.json");
  EXPECT_EQ(p["objective"], "energy");
  EXPECT_EQ(p["deadline_s"], 60.0);
  EXPECT_EQ(p["feasible"], true);
  ASSERT_EQ(p["allocation"]["parts"].size(), a.parts.size());
  for (const char* k : {"node_type", "gpu", "nodes", "gpus_per_node", "per_gpu_batch"})
    EXPECT_TRUE(p["allocation"]["parts"][0].contains(k)) << k;
  EXPECT_EQ(p["allocation"]["parts"][0]["gpu"], a.parts[0].gpu);
  EXPECT_EQ(p["allocation"]["nodes"], a.nodes);
  EXPECT_EQ(p["allocation"]["gpus"], a.gpus);
  int tpn = 0;
  for (const Part& part : a.parts) tpn = std::max(tpn, part.gpus_per_node);
  EXPECT_EQ(p["allocation"]["tasks_per_node"], tpn);
  EXPECT_EQ(p["global_batch"], a.global_batch);
  EXPECT_DOUBLE_EQ(p["lr"].get<double>(), a.lr);
  EXPECT_DOUBLE_EQ(p["warmup_epochs"].get<double>(), a.warmup_epochs);
  for (const char* k : {"step_s", "compute_s", "comm_s", "steps", "total_s", "energy_j",
                        "energy_kwh", "gpu_hours", "memory_gb_per_gpu"})
    EXPECT_TRUE(p["predicted"].contains(k)) << k;
  EXPECT_DOUBLE_EQ(p["predicted"]["energy_kwh"].get<double>(), a.energy_j / 3.6e6);
  EXPECT_GT(p["predicted"]["memory_gb_per_gpu"].get<double>(), 0);
  // The limit comes from the band's upper end plus room, not a fixed grace.
  EXPECT_EQ(p["time_limit"], SlurmTimeLimit(job, a));
  EXPECT_EQ(p["time_limit_s"], JobTimeLimit(job, a).seconds());
  EXPECT_GE(p["time_limit_s"].get<double>(), a.total_upper_s);
  EXPECT_DOUBLE_EQ(p["predicted"]["upper_s"].get<double>(), std::max(a.total_s, a.total_upper_s));
  EXPECT_FALSE(p.contains("signal_lead_s"));
  Job signalled = job;
  signalled.signal = true;
  const nlohmann::json ps = PlanJson(signalled, rec, a);
  ASSERT_TRUE(ps.contains("signal_lead_s"));
  EXPECT_GE(ps["time_limit_s"].get<double>(),
            a.total_upper_s + ps["signal_lead_s"].get<double>() + kSignalEarlySeconds - 1);
  EXPECT_EQ(p["speed_source"][a.parts[0].gpu], "test");
  EXPECT_EQ(p["why"], a.why);
}

TEST(Plan, SlurmTimeLimitFromTheBand) {
  Job job;
  Allocation a;
  a.total_s = 300;
  a.phases.steps_s = 300;
  // No band computed: the prediction itself, + 5% room (15 s): 5m15s -> 6 minutes.
  EXPECT_EQ(SlurmTimeLimit(job, a), "00:06:00");
  // A band to 5m50s: + 17.5 s room would be 7 minutes, 1.63x the band's lower end (300^2 /
  // 350 = 4m17s, where the job may end); 6 minutes still holds the upper end.
  a.total_upper_s = 350;
  EXPECT_EQ(SlurmTimeLimit(job, a), "00:06:00");
  // A 3 h job with a 10% band: 3h18m + 5%.
  a.total_s = a.phases.steps_s = 3 * 3600;
  a.total_upper_s = 3 * 3600 * 1.1;
  EXPECT_EQ(SlurmTimeLimit(job, a), "03:28:00");
  EXPECT_EQ(JobTimeLimit(job, a).minutes, 208);
}

TEST(Plan, Objectives) {
  EXPECT_EQ(ParseObjective("energy"), Objective::Energy);
  EXPECT_EQ(ParseObjective("time"), Objective::Time);
  EXPECT_EQ(ParseObjective("gpu-hours"), Objective::GpuHours);
  EXPECT_STREQ(ObjectiveName(Objective::GpuHours), "gpu-hours");
  try {
    ParseObjective("cost");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--objective: must be one of energy, time, gpu-hours, got 'cost'");
  }
}

// ---------------------------------------------------------------- performance

// 1,000 nodes of 4 types, mixing allowed: prints the time (no timed assertion).
TEST(RecommendPerformance, ThousandNodesFourTypes) {
  Cluster c;
  c.name = "big";
  c.gpu_types = {Gpu("a100", 40, 400, 55), Gpu("h100", 80, 700, 70), Gpu("v100", 32, 300, 40),
                 Gpu("l40s", 48, 350, 35)};
  c.node_types = {Node("na", "a100", 4, 250, 350, Link{300, 3}),
                  Node("nh", "h100", 8, 250, 800, Link{450, 2.5}),
                  Node("nv", "v100", 4, 250, 300, Link{150, 4}),
                  Node("nl", "l40s", 2, 250, 250, Link{25, 8})};
  c.inter_node = Link{25, 2};
  std::map<std::string, DeviceSpeed> speeds = {{"a100", Speed(0.002, 2.0e-5)},
                                               {"h100", Speed(0.0015, 0.7e-5)},
                                               {"v100", Speed(0.003, 3.0e-5)},
                                               {"l40s", Speed(0.002, 1.5e-5)}};
  Job job = SmallJob();
  job.top = 10;
  job.samples = 1281167;
  job.epochs = 90;
  job.deadline_s = 12 * 3600;
  job.allow_mixed = true;
  struct Case {
    const char* what;
    int64_t per_gpu_batch;
    int batch;
  };
  for (const Case& k :
       {Case{"weak scaling, 64 per GPU", 64, 256}, Case{"global batch 8192", 0, 8192}}) {
    job.per_gpu_batch = k.per_gpu_batch;
    job.spec.batch_size = k.batch;
    double best = 1e9;
    Recommendation rec;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      rec = Recommend(job, c, speeds);
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    ASSERT_TRUE(rec.feasible);
    EXPECT_EQ(rec.ranked.size(), 10u);
    std::cout << "[ perf     ] Recommend, 1000 nodes x 4 types, mixed, " << k.what << ": "
              << rec.candidates << " candidates in " << best * 1e3 << " ms (best of 3)\n"
              << "[ perf     ]   chosen: " << rec.ranked[0].why << "\n";
  }
}

// ---------------------------------------------------------------- memory by engine

// A CPU node type's ranks are sized by the CPU engine's count (TrainingMemoryBytes, kCpu),
// not a GPU's: a wide MLP whose weights the CPU engine keeps 5 copies of (momentum) where a
// GPU keeps 3. share/cluster/local.json's cpu-local node, its memory set per case.
TEST(Recommend, CpuNodeRanksAreSizedByTheCpuEnginesCount) {
  Job job;
  job.spec = ParseSpec(R"({"name": "wide", "input": {"channels": 1, "height": 28, "width": 28},
      "classes": 10, "layers": [{"type": "flatten"}, {"type": "dense", "units": 5632},
      {"type": "relu"}, {"type": "dense", "units": 5632}, {"type": "relu"},
      {"type": "dense", "units": 5632}, {"type": "relu"}, {"type": "dense", "units": 10}],
      "optimizer": {"type": "sgd", "lr": 0.01, "momentum": 0.9}, "batch_size": 128,
      "epochs": 1, "dataset": "d.h5"})",
                       "wide.json", ".");
  job.features = ComputeFeatures(job.spec);
  job.samples = 1280;
  job.epochs = 1;
  job.allowed_types = {"cpu-local"};
  Cluster c = LoadCluster(RepoFile("share/cluster/local.json"));
  GpuType* node = nullptr;
  for (GpuType& g : c.gpu_types)
    if (g.name == "cpu-local") node = &g;
  ASSERT_NE(node, nullptr);
  const double cpu_one = TrainingMemoryBytes(job.features, 128, 1, MemoryEngine::kCpu);
  const double cpu_two = TrainingMemoryBytes(job.features, 64, 1, MemoryEngine::kCpu);
  const double gpu_two = TrainingMemoryBytes(job.features, 64, 1, MemoryEngine::kDevice);
  ASSERT_GT(cpu_two, 1.5 * gpu_two);  // the case needs the two counts far apart

  // 90% of the node between 2 ranks holds the GPU figure, not the CPU engine's: 1 rank only.
  node->memory_gb = 2 * (cpu_two + gpu_two) / 2 / 0.9 / 1e9;
  ASSERT_LT(cpu_one, 0.9 * node->memory_gb * 1e9);
  Recommendation rec = Recommend(job, c);
  ASSERT_FALSE(rec.ranked.empty());
  int fitting = 0;
  for (const Allocation& a : rec.ranked) {
    if (!a.fits_memory) continue;
    ++fitting;
    ASSERT_EQ(a.parts.size(), 1u);
    EXPECT_TRUE(a.parts[0].cpu);
    EXPECT_EQ(a.parts[0].gpus_per_node, 1) << a.why;
    EXPECT_DOUBLE_EQ(a.memory_bytes, cpu_one);
  }
  EXPECT_GE(fitting, 1);

  // A node that would hold one rank by the GPU count but not by the CPU engine's: refused,
  // with the CPU engine's figure.
  node->memory_gb = (cpu_one + gpu_two) / 2 / 0.9 / 1e9;
  ASSERT_GT(0.9 * node->memory_gb * 1e9,
            TrainingMemoryBytes(job.features, 128, 1, MemoryEngine::kDevice));
  try {
    Recommend(job, c);
    ADD_FAILURE() << "a node too small for the CPU engine's count was planned";
  } catch (const EstimateError& e) {
    char need[96];
    std::snprintf(need, sizeof need, "model needs %.1f GB per GPU at batch ", cpu_two / 1e9);
    EXPECT_NE(std::string(e.what()).find(need), std::string::npos) << e.what();
  }
}

// A pipeline's stages on CPU ranks: the first stage's rank, which writes the checkpoints,
// keeps 4 + 2s copies of its own weights (one more than a whole rank: the gradients summed
// over micro-batches) and 2 (1 + s) of the other stages'; the others 3 + s + 2 max(1, s)
// (live, summed, and what they send it: an export and its packed copy at a time); a GPU
// stage 2 + s of its own. Checked through what one more optimizer slot adds to each stage.
TEST(Recommend, PipelineStagesOnCpuRanksCountTheCheckpointsCopies) {
  Job job;
  job.spec = LoadSpec(RepoFile("share/examples/fashion-mnist.json"));
  job.features = ComputeFeatures(job.spec);
  const std::vector<size_t> bounds = StageBounds(job.spec, 2);
  double stage_params[2] = {0, 0};
  for (int s = 0; s < 2; ++s)
    for (size_t i = bounds[size_t(s)]; i < bounds[size_t(s) + 1]; ++i)
      stage_params[s] += job.features.layers[i].params;
  ASSERT_GT(stage_params[0], 0);
  ASSERT_GT(stage_params[1], 0);
  const auto cpu = [&](int slots) {
    return PipelineStageMemoryBytes(job, 2, 4, 64, slots, MemoryEngine::kCpu);
  };
  const auto gpu = [&](int slots) {
    return PipelineStageMemoryBytes(job, 2, 4, 64, slots, MemoryEngine::kDevice);
  };
  const std::vector<double> c0 = cpu(0), c1 = cpu(1), c2 = cpu(2), g0 = gpu(0), g1 = gpu(1);
  ASSERT_EQ(c0.size(), 2u);
  EXPECT_DOUBLE_EQ(c1[1] - c0[1], 4.0 * stage_params[1]);
  EXPECT_DOUBLE_EQ(c2[1] - c1[1], 4.0 * stage_params[1] * 3);
  EXPECT_DOUBLE_EQ(c1[0] - c0[0], 4.0 * stage_params[0] * 2 + 2 * 4.0 * stage_params[1]);
  EXPECT_DOUBLE_EQ(g1[1] - g0[1], 4.0 * stage_params[1]);
  EXPECT_DOUBLE_EQ(g1[0] - g0[0], 4.0 * stage_params[0]);
  // No optimizer state: 4 copies of the first stage's own weights and 2 of the rest; 5 of
  // the other stage's.
  EXPECT_GT(c0[0], 4.0 * (4 * stage_params[0] + 2 * stage_params[1]));
  EXPECT_GT(c0[1], 4.0 * 5 * stage_params[1]);
}

}  // namespace
}  // namespace dlh
