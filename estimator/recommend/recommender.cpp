// DLH estimator — the deadline-driven allocation recommender.
//
// Candidates are evaluated in plain structs (no strings, no allocation per candidate); the
// best `Job::top` are kept in a bounded heap, and only those (and the fastest) become
// Allocations with names and a `why` line.
#include "estimator/recommend/recommender.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "common/error.hpp"
#include "estimator/model/wave_scaling.hpp"
#include "estimator/recommend/profile_speeds.hpp"

namespace dlh {

namespace {

// Roofline assumptions (GPU types without a calibration): a CNN training step reaches
// about 40% of the fp32 peak in its GEMM-bound work and about 60% of the memory bandwidth
// in its element-wise passes; each layer launches kernels costing about 10 us forward and
// 10 us backward; the optimizer reads and writes weights, gradients and state (4 passes
// over the parameters).
constexpr double kComputeEfficiency = 0.4;
constexpr double kBandwidthEfficiency = 0.6;
constexpr double kLaunchSeconds = 10e-6;
constexpr double kUsableMemory = 0.9;      // of a GPU's memory_gb, the rest for the runtime
constexpr double kMaxTotalSamples = 1e15;  // samples x epochs; see CheckJob

constexpr int kMaxGroups = 16;

// ---------------------------------------------------------------- batch balancing

// The integer search of BalanceCore: per-group batches in [lo, cap[g]] using as many of
// `total` samples as possible, then with the earliest slowest finish. Groups are taken in
// decreasing count; the last (smallest count) takes what is left, up to its cap.
struct IntegerSearch {
  const double* fixed;
  const double* per;
  const int* count;
  const int64_t* cap;
  int64_t lo = 0;
  int order[kMaxGroups];
  int m = 0;
  int64_t after_lo[kMaxGroups], after_cap[kMaxGroups];  // samples of the later groups
  int64_t b[kMaxGroups] = {}, best[kMaxGroups] = {};
  int64_t best_used = -1;
  double best_finish = 0;
  long budget = 200000;

  void Prepare() {
    int64_t sl = 0, sc = 0;
    for (int d = m - 1; d >= 0; --d) {
      after_lo[d] = sl;
      after_cap[d] = sc;
      sl += count[order[d]] * lo;
      sc += count[order[d]] * cap[order[d]];
    }
  }

  void Run(int d, int64_t rest, int64_t used) {
    const int g = order[d];
    const int64_t c = count[g];
    if (d == m - 1) {
      b[g] = std::min(cap[g], rest / c);
      if (b[g] >= lo) Leaf(used + c * b[g]);
      return;
    }
    const int64_t hi = std::min(cap[g], (rest - after_lo[d]) / c);
    if (hi < lo) return;
    // Below `need` the later groups sit at their caps and the total only falls.
    int64_t low = lo;
    const int64_t need = rest - after_cap[d];
    if (need > 0) low = std::max(low, (need + c - 1) / c);
    low = std::min(low, hi);
    for (int64_t v = hi; v >= low && budget > 0; --v) {
      b[g] = v;
      Run(d + 1, rest - c * v, used + c * v);
    }
  }

  void Leaf(int64_t used) {
    --budget;
    if (used < best_used) return;
    double finish = 0;
    for (int i = 0; i < m; ++i) {
      const int g = order[i];
      finish = std::max(finish, fixed[g] + per[g] * double(b[g]));
    }
    if (used > best_used || finish < best_finish) {
      best_used = used;
      best_finish = finish;
      for (int i = 0; i < m; ++i) best[order[i]] = b[order[i]];
    }
  }
};

// The balancing of BalanceBatch on plain arrays (n <= kMaxGroups, per[g] > 0), so that the
// recommender's inner loop allocates nothing. Writes out[g]; sum count*out <= total.
void BalanceCore(const double* fixed, const double* per, const int* count, int n, int64_t total,
                 int64_t* out) {
  int64_t gpus = 0;
  for (int g = 0; g < n; ++g) gpus += std::max(0, count[g]);
  const int64_t lo = total >= gpus ? 1 : 0;  // every GPU gets one when possible

  // Equal finish time T over the active groups: sum c (T - f) / p = B. Groups whose batch
  // would fall below the floor are pinned there and T is solved again for the rest
  // (water filling: T only decreases, so pinned groups stay pinned).
  bool active[kMaxGroups];
  int64_t rest = total;
  for (int g = 0; g < n; ++g) active[g] = count[g] > 0;
  double t = 0;
  for (;;) {
    double s1 = 0, s0 = 0;
    for (int g = 0; g < n; ++g)
      if (active[g]) {
        s1 += count[g] / per[g];
        s0 += count[g] * fixed[g] / per[g];
      }
    if (s1 == 0) break;
    t = (double(rest) + s0) / s1;
    bool pinned = false;
    for (int g = 0; g < n; ++g)
      if (active[g] && (t - fixed[g]) / per[g] < double(lo)) {
        active[g] = false;
        rest -= count[g] * lo;
        pinned = true;
      }
    if (!pinned) break;
  }

  // Whole batches: nobody may finish later than T plus one sample of the GPU that is slowest
  // per sample (each group can then take at least the real batch rounded up); within that,
  // use as many samples as possible, then finish as early as possible.
  double slowest_sample = 0;
  for (int g = 0; g < n; ++g)
    if (count[g] > 0) slowest_sample = std::max(slowest_sample, per[g]);
  const double limit = t + slowest_sample;
  int64_t cap[kMaxGroups];
  IntegerSearch s;
  s.fixed = fixed;
  s.per = per;
  s.count = count;
  s.cap = cap;
  s.lo = lo;
  for (int g = 0; g < n; ++g) {
    out[g] = 0;
    if (count[g] <= 0) continue;
    cap[g] = lo;
    if (active[g]) {
      const double most = std::floor((limit - fixed[g]) / per[g] + 1e-9);
      cap[g] = std::max<int64_t>(lo, most >= double(total) ? total : int64_t(most));
    }
    s.order[s.m++] = g;
  }
  if (s.m == 0) return;
  std::sort(s.order, s.order + s.m,
            [&](int a, int b) { return count[a] != count[b] ? count[a] > count[b] : a < b; });
  s.Prepare();
  s.Run(0, total, 0);
  if (s.best_used < 0) {  // cannot happen (the floors of the real batches qualify)
    for (int i = 0; i < s.m; ++i) out[s.order[i]] = lo;
    return;
  }
  for (int i = 0; i < s.m; ++i) out[s.order[i]] = s.best[s.order[i]];
}

// ---------------------------------------------------------------- formatting

std::string Printf(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

// 45s, 5m30s, 12m, 1h12m, 3h, 2d3h (minutes from an hour on, hours from a day on)
std::string Duration(double s) {
  if (!std::isfinite(s)) return "inf";
  long v = std::lround(std::min(std::max(0.0, s), 1e15));
  char buf[64];
  if (v < 100) {
    std::snprintf(buf, sizeof buf, "%lds", v);
  } else if (v < 3600) {
    if (v % 60 == 0)
      std::snprintf(buf, sizeof buf, "%ldm", v / 60);
    else
      std::snprintf(buf, sizeof buf, "%ldm%02lds", v / 60, v % 60);
  } else if (v < 86400) {
    long m = (v + 30) / 60;
    if (m % 60 == 0)
      std::snprintf(buf, sizeof buf, "%ldh", m / 60);
    else
      std::snprintf(buf, sizeof buf, "%ldh%02ldm", m / 60, m % 60);
  } else {
    long h = (v + 1800) / 3600;
    if (h % 24 == 0)
      std::snprintf(buf, sizeof buf, "%ldd", h / 24);
    else
      std::snprintf(buf, sizeof buf, "%ldd%ldh", h / 24, h % 24);
  }
  return buf;
}

std::string GpuHours(double h) { return Printf(h < 10 ? "%.2f GPU-h" : "%.1f GPU-h", h); }

// "+12%", "+0.4%", "-3%"
std::string Percent(double ratio) {
  double p = (ratio - 1) * 100;
  return Printf(std::fabs(p) < 1 ? "%+.1f%%" : "%+.0f%%", p);
}

// Whole minutes of (1 + margin) * seconds + grace, rounded up, at least 1 (and at most 100
// years).
long LimitMinutes(double seconds, double margin, double grace_s) {
  double v = (1 + std::max(0.0, margin)) * seconds + std::max(0.0, grace_s);
  if (!(v > 0)) v = 0;
  // The tolerance keeps exact multiples of a minute (3600 s, margin 0) from rounding up.
  double minutes = std::ceil(v / 60 - 1e-9);
  const double most = 100 * 365.0 * 24 * 60;
  if (!(minutes <= most)) minutes = most;
  return std::max(1L, long(minutes));
}

// ---------------------------------------------------------------- candidates

// One node type the job may use, with everything the inner loop needs.
struct TypeInfo {
  const NodeType* node = nullptr;
  const GpuType* gpu = nullptr;
  double fixed = 0, per = 0;  // speed
  double active_watts = 0;    // measured where the calibration has joules, else the datasheet's
  int cpu_threads = 0;        // DeviceSpeed::cpu_threads
  int cores = 0;              // the node's CPU cores (NodeType::cpu_cores, else cpu_threads)
  int available = 0;
  AlphaBeta intra;
  int64_t max_batch = 0;  // largest per-GPU batch that fits in memory
};

struct Cand {
  double key = 0;  // the objective's value
  double total_s = 0, energy_j = 0, gpu_hours = 0, compute_s = 0, comm_s = 0, step_s = 0;
  double eval_per = 0, eval_fixed = 0;  // the slowest rank's speed, for the evaluations
  JobPhases phases;
  int64_t steps = 0, global = 0;
  int64_t batch[2] = {0, 0};  // largest per-GPU batch of each part
  int type[2] = {-1, -1};     // index into the TypeInfo list
  int nodes[2] = {0, 0}, gpn[2] = {0, 0};
  int parts = 0, gpus = 0, node_count = 0;
  uint32_t index = 0;  // enumeration order, the last tie-break
  bool fits = false, meets = false;
};

// a ranks before b: objective, then fewer GPUs, then faster, then enumeration order.
bool Better(const Cand& a, const Cand& b) {
  if (a.key != b.key) return a.key < b.key;
  if (a.gpus != b.gpus) return a.gpus < b.gpus;
  if (a.total_s != b.total_s) return a.total_s < b.total_s;
  return a.index < b.index;
}

bool Faster(const Cand& a, const Cand& b) {
  if (a.total_s != b.total_s) return a.total_s < b.total_s;
  if (a.gpus != b.gpus) return a.gpus < b.gpus;
  return a.index < b.index;
}

int OptimizerSlots(const OptimizerSpec& o) {
  if (o.kind == OptimizerSpec::Kind::Adam) return 2;
  return o.momentum > 0 ? 1 : 0;
}

// A profiled program says its own count, which may be one no spec optimizer has.
int OptimizerSlots(const Job& job) {
  return job.profile ? job.profile->optimizer_slots : OptimizerSlots(job.spec.optimizer);
}

class Enumerator {
 public:
  Enumerator(const Job& job, const Cluster& cluster, std::vector<TypeInfo> types)
      : job_(job), types_(std::move(types)) {
    inter_ = AlphaBeta::from_link(cluster.inter_node);
    runtime_ = cluster.runtime;
    startup_s_ = job.startup_s >= 0 ? job.startup_s : runtime_.startup_s;
    const int64_t eval = job.eval_samples >= 0 ? job.eval_samples : job.samples / 6;
    work_ = WorkOf(job.features, job.samples, eval, job.epochs, OptimizerSlots(job));
    work_.staged = job.stage;
    bytes_ = job.features.param_bytes();
    weak_ = job.per_gpu_batch > 0;
    keep_ = job.top > 0 ? size_t(job.top) : 0;
    keep_rejected_ = job.rejected > 0 ? size_t(job.rejected) : 0;
    min_batch_.assign(types_.size(), std::numeric_limits<int64_t>::max());
  }

  void Run() {
    for (int t = 0; t < int(types_.size()); ++t) Homogeneous(t);
    if (job_.allow_mixed)
      for (int a = 0; a < int(types_.size()); ++a)
        for (int b = a + 1; b < int(types_.size()); ++b) Mixed(a, b);
  }

  const std::vector<TypeInfo>& types() const { return types_; }
  int evaluated = 0, fitting = 0, feasible = 0;
  bool have_fastest = false;
  Cand fastest;
  std::vector<Cand> best;           // a heap (worst on top) while running
  std::vector<Cand> rejected;       // the same, of the ones left out (Job::rejected)
  std::vector<int64_t> min_batch_;  // smallest per-GPU batch asked of each type

 private:
  void Homogeneous(int t) {
    const TypeInfo& ti = types_[size_t(t)];
    // GPUs per node: 1, 2, 4, ... below the node's count, then the node's count itself.
    int options[32];
    int num_options = 0;
    const int full = ti.node->gpus_per_node;
    for (int64_t g = 1; g < full; g *= 2) options[num_options++] = int(g);
    options[num_options++] = full;
    for (int o = 0; o < num_options; ++o) {
      const int gpn = options[o];
      for (int n = 1; n <= ti.available; ++n) {
        const int64_t g = int64_t(gpn) * n;
        if (job_.max_gpus > 0 && g > job_.max_gpus) break;
        if (g > std::numeric_limits<int>::max()) break;
        Cand c;
        c.parts = 1;
        c.type[0] = t;
        c.nodes[0] = n;
        c.gpn[0] = gpn;
        c.gpus = int(g);
        c.node_count = n;
        int64_t lo, hi, n_hi;  // GPUs with batch hi (n_hi of them) and lo (the rest)
        if (weak_) {
          c.global = job_.per_gpu_batch * g;
          lo = hi = job_.per_gpu_batch;
          n_hi = g;
        } else {
          c.global = job_.spec.batch_size;
          if (c.global < g) break;  // some GPU would get no sample; more nodes only worse
          lo = c.global / g;
          n_hi = c.global % g;
          hi = n_hi > 0 ? lo + 1 : lo;
          if (n_hi == 0) n_hi = g;
        }
        c.batch[0] = hi;
        const CpuShare share = Share(ti, gpn, g);
        const double fixed = ti.fixed * share.fixed, per = ti.per * share.per_sample;
        c.eval_fixed = fixed;
        c.eval_per = per;
        const double t_hi = fixed + per * double(hi);
        const double t_lo = fixed + per * double(lo);
        const double busy = double(n_hi) * t_hi + double(g - n_hi) * t_lo;  // GPU-seconds
        c.compute_s = t_hi;
        c.comm_s = HierarchicalAllreduceSeconds(bytes_, gpn, n, ti.intra, inter_);
        const double watts_active = ti.active_watts, watts_idle = ti.gpu->idle_watts;
        Finish(c, watts_active * busy - watts_idle * busy, watts_idle * double(g),
               ti.node->node_base_watts * n, hi <= ti.max_batch);
      }
    }
  }

  void Mixed(int a, int b) {
    const TypeInfo& ta = types_[size_t(a)];
    const TypeInfo& tb = types_[size_t(b)];
    const int gmin = std::min(ta.node->gpus_per_node, tb.node->gpus_per_node);
    const int ga = job_.mixed_same_gpus_per_node ? gmin : ta.node->gpus_per_node;
    const int gb = job_.mixed_same_gpus_per_node ? gmin : tb.node->gpus_per_node;
    // Allreduce over the smaller node size (its shard crossing nodes is the larger) and the
    // slower of the two intra-node links at that size (the cross-node stage is the same).
    const AlphaBeta& intra =
        RingAllreduceSeconds(bytes_, gmin, ta.intra) >= RingAllreduceSeconds(bytes_, gmin, tb.intra)
            ? ta.intra
            : tb.intra;
    for (int na = 1; na <= ta.available; ++na) {
      for (int nb = 1; nb <= tb.available; ++nb) {
        const int64_t ca = int64_t(ga) * na, cb = int64_t(gb) * nb, g = ca + cb;
        if (job_.max_gpus > 0 && g > job_.max_gpus) break;
        if (g > std::numeric_limits<int>::max()) break;
        const int64_t want = weak_ ? job_.per_gpu_batch * g : int64_t(job_.spec.batch_size);
        if (want < g) break;  // some GPU would get no sample
        int count[2] = {int(ca), int(cb)};
        const CpuShare sa = Share(ta, ga, g), sb = Share(tb, gb, g);
        double fixed[2] = {ta.fixed * sa.fixed, tb.fixed * sb.fixed};
        double per[2] = {ta.per * sa.per_sample, tb.per * sb.per_sample};
        int64_t batch[2];
        BalanceCore(fixed, per, count, 2, want, batch);
        if (batch[0] < 1 || batch[1] < 1) continue;
        Cand c;
        c.parts = 2;
        c.type[0] = a;
        c.type[1] = b;
        c.nodes[0] = na;
        c.nodes[1] = nb;
        c.gpn[0] = ga;
        c.gpn[1] = gb;
        c.gpus = int(g);
        c.node_count = na + nb;
        c.batch[0] = batch[0];
        c.batch[1] = batch[1];
        c.global = ca * batch[0] + cb * batch[1];
        const double t_a = fixed[0] + per[0] * double(batch[0]);
        const double t_b = fixed[1] + per[1] * double(batch[1]);
        c.compute_s = std::max(t_a, t_b);
        // Evaluation slices are even, not balanced: the slower type per sample decides.
        const int slow = per[0] >= per[1] ? 0 : 1;
        c.eval_fixed = fixed[slow];
        c.eval_per = per[slow];
        c.comm_s = HierarchicalAllreduceSeconds(bytes_, gmin, na + nb, intra, inter_);
        const double busy_energy = (ta.active_watts - ta.gpu->idle_watts) * double(ca) * t_a +
                                   (tb.active_watts - tb.gpu->idle_watts) * double(cb) * t_b;
        const double idle_watts = ta.gpu->idle_watts * double(ca) + tb.gpu->idle_watts * double(cb);
        const double base_watts = ta.node->node_base_watts * na + tb.node->node_base_watts * nb;
        Finish(c, busy_energy, idle_watts, base_watts,
               batch[0] <= ta.max_batch && batch[1] <= tb.max_batch);
      }
    }
  }

  // Completes a candidate whose parts, batches, compute_s and comm_s are set.
  void Finish(Cand& c, double busy_energy, double idle_watts, double base_watts, bool fits) {
    const int64_t per_epoch = job_.samples / c.global;
    if (per_epoch <= 0) return;  // the global batch exceeds an epoch
    c.index = index_++;
    ++evaluated;
    for (int p = 0; p < c.parts; ++p)
      min_batch_[size_t(c.type[p])] = std::min(min_batch_[size_t(c.type[p])], c.batch[p]);
    if (!fits) {
      // Predicted only to be shown as left out: the common case stays one comparison.
      if (keep_rejected_ == 0) return;
      Predict(c, per_epoch, busy_energy, idle_watts, base_watts);
      Keep(c, keep_rejected_, &rejected);
      return;
    }
    ++fitting;
    c.fits = true;
    Predict(c, per_epoch, busy_energy, idle_watts, base_watts);
    if (!have_fastest || Faster(c, fastest)) {
      fastest = c;
      have_fastest = true;
    }
    if (!c.meets) {
      if (keep_rejected_ > 0) Keep(c, keep_rejected_, &rejected);
      return;
    }
    ++feasible;
    Keep(c, keep_, &best);
  }

  // Steps, phases, time, energy, GPU-hours, whether it meets the deadline and the
  // objective's key. Energy per step = sum over GPUs of idle W * step + (active - idle) W *
  // own compute time: `busy_energy` is the second sum, `idle_watts` the GPUs' idle power,
  // `base_watts` the nodes' base power.
  void Predict(Cand& c, int64_t per_epoch, double busy_energy, double idle_watts,
               double base_watts) const {
    c.steps = per_epoch * job_.epochs;
    c.step_s = c.compute_s + c.comm_s;
    const double steps = double(c.steps);
    StepShape shape;
    shape.steps = c.steps;
    shape.step_s = c.step_s;
    shape.gpus = c.gpus;
    shape.per_sample_s = c.eval_per;
    shape.fixed_s = c.eval_fixed;
    c.phases = PredictJobPhases(work_, shape, runtime_, startup_s_);
    c.total_s = c.phases.total_s();
    // Outside the steps the GPUs are allocated but (mostly) waiting: idle power.
    c.energy_j = steps * (idle_watts * c.step_s + busy_energy) + c.total_s * base_watts +
                 (c.total_s - c.phases.steps_s) * idle_watts;
    c.gpu_hours = c.gpus * c.total_s / 3600;
    c.meets = job_.deadline_s <= 0 || c.total_s * (1 + job_.margin) <= job_.deadline_s;
    switch (job_.objective) {
      case Objective::Energy:
        c.key = c.energy_j;
        break;
      case Objective::Time:
        c.key = c.total_s;
        break;
      case Objective::GpuHours:
        c.key = c.gpu_hours;
        break;
    }
  }

  // Adds c to `heap` (worst on top), which holds at most `bound` (0: no bound).
  static void Keep(const Cand& c, size_t bound, std::vector<Cand>* heap) {
    std::vector<Cand>& h = *heap;
    if (bound == 0) {
      h.push_back(c);
    } else if (h.size() < bound) {
      h.push_back(c);
      std::push_heap(h.begin(), h.end(), Better);
    } else if (Better(c, h.front())) {
      std::pop_heap(h.begin(), h.end(), Better);
      h.back() = c;
      std::push_heap(h.begin(), h.end(), Better);
    }
  }

  // The CPU share of one rank of type `t` with `gpn` ranks per node and `gpus` in the job:
  // on a test cluster whose nodes are one machine, every rank of the job shares its cores.
  CpuShare Share(const TypeInfo& t, int gpn, int64_t gpus) const {
    if (t.cpu_threads <= 0) return {};
    if (runtime_.shared_host_cores > 0)
      return CpuRankShare(t.cpu_threads, runtime_.shared_host_cores, int(gpus));
    return CpuRankShare(t.cpu_threads, t.cores, gpn);
  }

  const Job& job_;
  std::vector<TypeInfo> types_;
  Runtime runtime_;
  double startup_s_ = 0;
  JobWork work_;
  AlphaBeta inter_;
  double bytes_ = 0;
  bool weak_ = false;
  size_t keep_ = 0;
  size_t keep_rejected_ = 0;
  uint32_t index_ = 0;
};

void CheckSpeed(const std::string& gpu, const DeviceSpeed& s) {
  if (!(s.per_sample_s > 0) || !std::isfinite(s.per_sample_s) || !(s.fixed_s >= 0) ||
      !std::isfinite(s.fixed_s))
    throw EstimateError("GPU type \"" + gpu + "\": speed must have fixed_s >= 0 and " +
                        "per_sample_s > 0, got " + Printf("%g", s.fixed_s) + " s + " +
                        Printf("%g", s.per_sample_s) + " s/sample (" + s.source + ")");
}

void CheckJob(const Job& job) {
  auto fail = [](const std::string& m) { throw EstimateError("recommend: " + m); };
  if (job.samples <= 0)
    fail("samples per epoch must be positive, got " + std::to_string(job.samples));
  if (job.epochs <= 0) fail("epochs must be positive, got " + std::to_string(job.epochs));
  // Steps are counted in int64 and times in double seconds: beyond 1e15 samples in all (a
  // million years of training on any GPU) the counts would overflow into negative times.
  if (double(job.samples) * double(job.epochs) > kMaxTotalSamples)
    fail("samples x epochs = " + Printf("%.3g", double(job.samples) * double(job.epochs)) +
         " is more than DLH plans for (at most " + Printf("%.0e", kMaxTotalSamples) +
         " samples in all)");
  if (job.per_gpu_batch < 0)
    fail("per-GPU batch must not be negative, got " + std::to_string(job.per_gpu_batch));
  if (job.per_gpu_batch > std::numeric_limits<int>::max())
    fail("per-GPU batch must be at most " + std::to_string(std::numeric_limits<int>::max()) +
         ", got " + std::to_string(job.per_gpu_batch));
  if (job.per_gpu_batch == 0 && job.spec.batch_size <= 0)
    fail("the spec's batch_size must be positive, got " + std::to_string(job.spec.batch_size));
  if (!(job.deadline_s >= 0) || !(job.margin >= 0) || std::isnan(job.startup_s))
    fail("deadline and margin must not be negative");
  if (job.max_gpus < 0) fail("max_gpus must not be negative");
  if (job.top < 0) fail("top must not be negative");
  if (job.rejected < 0) fail("rejected must not be negative");
}

bool Allowed(const Job& job, const std::string& gpu) {
  return job.allowed_types.empty() || std::find(job.allowed_types.begin(), job.allowed_types.end(),
                                                gpu) != job.allowed_types.end();
}

std::string Names(const Cluster& c) {
  std::string s;
  for (const GpuType& g : c.gpu_types) s += (s.empty() ? "" : ", ") + g.name;
  return s;
}

// ---------------------------------------------------------------- the steps of Recommend

// The node types the job may use (allowed GPU type, available nodes), with their checked
// speeds and links: the enumerator's input. An allowed type the cluster lacks is an error
// rather than an empty answer, since it is almost always a typo. `all_gpus` gets the GPUs
// of all these types, the largest job any candidate can be.
std::vector<TypeInfo> UsableTypes(const Job& job, const Cluster& cluster,
                                  const std::map<std::string, DeviceSpeed>& speeds,
                                  int64_t* all_gpus) {
  for (const std::string& t : job.allowed_types)
    if (!cluster.gpu(t))
      throw EstimateError("recommend: allowed GPU type \"" + t + "\" is not in cluster \"" +
                          cluster.name + "\" (it has " + Names(cluster) + ")");
  *all_gpus = 0;
  std::vector<TypeInfo> types;
  for (size_t i = 0; i < cluster.node_types.size(); ++i) {
    const NodeType& n = cluster.node_types[i];
    if (!Allowed(job, n.gpu)) continue;
    const int available = n.available < 0 ? n.nodes : n.available;
    if (available <= 0 || n.gpus_per_node <= 0) continue;
    TypeInfo t;
    t.node = &n;
    t.gpu = cluster.gpu(n.gpu);
    if (!t.gpu)
      throw EstimateError("node type \"" + n.name + "\": unknown GPU type \"" + n.gpu + "\"");
    auto s = speeds.find(n.gpu);
    if (s == speeds.end())
      throw EstimateError("recommend: no speed for GPU type \"" + n.gpu + "\"");
    CheckSpeed(n.gpu, s->second);
    t.fixed = s->second.fixed_s;
    t.per = s->second.per_sample_s;
    t.cpu_threads = s->second.cpu_threads;
    // Never below idle: the model charges (active - idle) W for the busy time.
    t.active_watts = s->second.measured_watts > 0
                         ? std::max(s->second.measured_watts, t.gpu->idle_watts)
                         : t.gpu->active_watts;
    t.cores = n.cpu_cores > 0 ? n.cpu_cores : t.cpu_threads;
    t.available = available;
    t.intra = AlphaBeta::from_link(n.intra_node);
    *all_gpus += int64_t(available) * n.gpus_per_node;
    types.push_back(t);
  }
  if (types.empty())
    throw EstimateError("recommend: no node type to use" +
                        std::string(job.allowed_types.empty() ? "" : " of the allowed GPU types") +
                        " has available nodes");
  return types;
}

// Sets each type's max_batch, the largest per-GPU batch its GPU holds, once per GPU type:
// the enumerator then tests memory with one comparison per candidate. Memory grows with
// the batch, so a binary search up to the largest batch any candidate can ask for.
void SetMaxBatches(const Job& job, int slots, int64_t all_gpus, std::vector<TypeInfo>* types) {
  const int64_t cap = job.per_gpu_batch > 0 ? job.per_gpu_batch * all_gpus : job.spec.batch_size;
  std::map<std::string, int64_t> max_batch;
  for (TypeInfo& t : *types) {
    auto known = max_batch.find(t.gpu->name);
    if (known != max_batch.end()) {
      t.max_batch = known->second;
      continue;
    }
    const double capacity = kUsableMemory * t.gpu->memory_gb * 1e9;
    int64_t lo = 0, hi = cap;  // fits(lo) (0 trivially), answer in [lo, hi]
    while (lo < hi) {
      int64_t mid = lo + (hi - lo + 1) / 2;
      if (TrainingMemoryBytes(job.features, mid, slots) <= capacity)
        lo = mid;
      else
        hi = mid - 1;
    }
    t.max_batch = max_batch[t.gpu->name] = lo;
  }
}

// Throws when the enumeration left nothing to rank, saying what to change: either no
// candidate at all (the batch and sample counts rule every one out), or none that fits in
// memory, naming the GPU with the most memory and the smallest batch asked of it (the
// closest the cluster comes).
void CheckSomethingFits(const Job& job, const Enumerator& e, int slots) {
  const std::vector<TypeInfo>& ti = e.types();
  if (e.evaluated == 0)
    throw EstimateError(
        "recommend: no allocation to consider: every candidate would leave a GPU without a "
        "sample or use more samples per step than an epoch has (global batch vs samples, "
        "max_gpus)");
  if (e.fitting > 0) return;
  size_t big = 0;
  for (size_t i = 1; i < ti.size(); ++i)
    if (ti[i].gpu->memory_gb > ti[big].gpu->memory_gb) big = i;
  int64_t b = e.min_batch_[big] == std::numeric_limits<int64_t>::max() ? 1 : e.min_batch_[big];
  for (size_t i = 0; i < ti.size(); ++i)
    if (ti[i].gpu == ti[big].gpu) b = std::min(b, e.min_batch_[i]);
  const double need = TrainingMemoryBytes(job.features, b, slots);
  throw EstimateError("model needs " + Printf("%.1f", need / 1e9) + " GB per GPU at batch " +
                      std::to_string(b) + "; the largest GPU has " +
                      Printf("%g", ti[big].gpu->memory_gb) + " GB (" + ti[big].gpu->name + ", " +
                      Printf("%.0f", kUsableMemory * 100) + "% usable)");
}

// A candidate as callers see it: named parts, memory per GPU, and the learning rate scaled
// with the global batch. Done only for the kept few (the enumeration stays allocation-free).
Allocation ToAllocation(const Job& job, const std::vector<TypeInfo>& ti, const Cand& c, int slots) {
  Allocation a;
  double memory = 0;
  for (int p = 0; p < c.parts; ++p) {
    const TypeInfo& t = ti[size_t(c.type[p])];
    Part part;
    part.node_type = t.node->name;
    part.gpu = t.gpu->name;
    part.nodes = c.nodes[p];
    part.gpus_per_node = c.gpn[p];
    part.per_gpu_batch = c.batch[p];
    a.parts.push_back(part);
    memory = std::max(memory, TrainingMemoryBytes(job.features, c.batch[p], slots));
  }
  a.gpus = c.gpus;
  a.nodes = c.node_count;
  a.global_batch = c.global;
  const double ratio =
      job.spec.batch_size > 0 ? double(c.global) / double(job.spec.batch_size) : 1.0;
  a.lr = job.spec.optimizer.lr * ratio;
  // Linear scaling (Goyal et al. 2017) needs a warm-up when the rate grows a lot.
  a.warmup_epochs = job.spec.schedule.warmup_epochs;
  if (ratio > 2) a.warmup_epochs = std::max(a.warmup_epochs, 1.0);
  a.compute_s = c.compute_s;
  a.comm_s = c.comm_s;
  a.step_s = c.step_s;
  a.steps = c.steps;
  a.total_s = c.total_s;
  a.phases = c.phases;
  a.energy_j = c.energy_j;
  a.gpu_hours = c.gpu_hours;
  a.memory_bytes = memory;
  a.fits_memory = c.fits;
  a.meets_deadline = c.meets;
  return a;
}

// "the 3h deadline", or "" without a deadline.
std::string DeadlineText(const Job& job) {
  return job.deadline_s > 0 ? "the " + Duration(job.deadline_s) + " deadline" : std::string();
}

// Why lines of the ranked allocations (best first), in the objective's terms so that the
// table reads as a comparison: the winner against the field (`feasible` allocations), the
// others against the winner.
void ExplainRanked(const Job& job, int feasible, std::vector<Allocation>* ranked) {
  const std::string among =
      job.deadline_s > 0 ? " meeting " + DeadlineText(job) : " that fit in memory";
  std::vector<Allocation>& r = *ranked;
  const Allocation& top = r.front();
  const std::string of = feasible == 1 ? std::string("only allocation") + among
                                       : " of " + std::to_string(feasible) + " allocations" + among;
  switch (job.objective) {
    case Objective::Energy:
      r[0].why = (feasible == 1 ? of : "least energy" + of) + " (" + FormatEnergy(top.energy_j) +
                 ", " + Duration(top.total_s) + ")";
      break;
    case Objective::Time:
      r[0].why = (feasible == 1 ? of : "fastest" + of) + " (" + Duration(top.total_s) + ", " +
                 FormatEnergy(top.energy_j) + ")";
      break;
    case Objective::GpuHours:
      r[0].why = (feasible == 1 ? of : "fewest GPU-hours" + of) + " (" + GpuHours(top.gpu_hours) +
                 ", " + Duration(top.total_s) + ")";
      break;
  }
  for (size_t i = 1; i < r.size(); ++i) {
    Allocation& a = r[i];
    const double dt = a.total_s - top.total_s;
    const std::string time = std::fabs(dt) < 1
                                 ? "same time"
                                 : Duration(std::fabs(dt)) + (dt < 0 ? " faster" : " slower");
    switch (job.objective) {
      case Objective::Energy:
        a.why = Percent(a.energy_j / top.energy_j) + " energy, " + time;
        break;
      case Objective::Time: {
        const double q = a.energy_j / top.energy_j;
        a.why = time + ", " +
                (std::fabs(q - 1) < 0.0005 ? std::string("same energy")
                                           : Printf(std::fabs(q - 1) < 0.01 ? "%.1f%%" : "%.0f%%",
                                                    std::fabs(q - 1) * 100) +
                                                 (q < 1 ? " less energy" : " more energy"));
        break;
      }
      case Objective::GpuHours:
        a.why = Percent(a.gpu_hours / top.gpu_hours) + " GPU-hours, " + time;
        break;
    }
  }
}

// The fastest allocation's why line (and miss_s): when nothing meets the deadline it is the
// answer, so it says by how much it misses; otherwise it is the reference for "how fast
// could this go", among the `fitting` allocations that fit in memory.
void ExplainFastest(const Job& job, int fitting, Recommendation* rec) {
  Allocation& f = rec->fastest;
  if (!rec->feasible) {
    rec->miss_s = f.total_s * (1 + job.margin) - job.deadline_s;
    f.why = "fastest allocation misses " + DeadlineText(job) + " by " + Duration(rec->miss_s) +
            " (" + Duration(f.total_s) + " predicted, " + Printf("%.0f", job.margin * 100) +
            "% margin)";
  } else {
    f.why = "fastest of " + std::to_string(fitting) + " allocations that fit in memory (" +
            Duration(f.total_s) + ", " + FormatEnergy(f.energy_j) + ")";
  }
}

// Why a candidate is left out: memory first (its time would not matter), else the deadline.
std::string WhyRejected(const Job& job, const std::vector<TypeInfo>& ti, const Cand& c, int slots) {
  for (int p = 0; p < c.parts && !c.fits; ++p) {
    const TypeInfo& t = ti[size_t(c.type[p])];
    if (c.batch[p] <= t.max_batch) continue;
    return "out of memory: " +
           Printf("%.3g", TrainingMemoryBytes(job.features, c.batch[p], slots) / 1e9) +
           " GB per GPU at batch " + std::to_string(c.batch[p]) + ", " +
           Printf("%.3g", kUsableMemory * t.gpu->memory_gb) + " GB usable on " + t.gpu->name;
  }
  return "misses " + DeadlineText(job) + ": " + Duration(c.total_s) + " predicted, " +
         Duration(c.total_s * (1 + job.margin)) + " with the " + Printf("%.0f", job.margin * 100) +
         "% margin";
}

}  // namespace

// ---------------------------------------------------------------- public

Objective ParseObjective(const std::string& text) {
  if (text == "energy") return Objective::Energy;
  if (text == "time") return Objective::Time;
  if (text == "gpu-hours") return Objective::GpuHours;
  throw UsageError("--objective: must be one of energy, time, gpu-hours, got '" + text + "'");
}

const char* ObjectiveName(Objective o) {
  switch (o) {
    case Objective::Energy:
      return "energy";
    case Objective::Time:
      return "time";
    case Objective::GpuHours:
      return "gpu-hours";
  }
  return "unknown";
}

namespace {

// A GPU type's calibration file, loaded and checked; errors name the type.
Calibration LoadTypeCalibration(const GpuType& g) {
  const std::string& path = g.calibration;
  const std::string where = "GPU type \"" + g.name + "\": ";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw EstimateError(where + "calibration file " + path +
                        " not found (calibrate this GPU type, or remove its \"calibration\" "
                        "to use the roofline model)");
  Calibration cal;
  try {
    cal = LoadCalibration(path);
  } catch (const EstimateError& e) {
    throw EstimateError(where + e.what());
  }
  if (cal.model.coef.size() != size_t(kTimeTerms))
    throw EstimateError(where + path + ": model has " + std::to_string(cal.model.coef.size()) +
                        " coefficients, expected " + std::to_string(kTimeTerms));
  return cal;
}

// The time model is affine in the batch: fixed = t(0), per_sample = t(1) - t(0).
DeviceSpeed AffineSpeed(const std::vector<double>& coef, const ModelFeatures& f, bool cpu_engine) {
  const std::vector<double> t0 = TimeTerms(f, 0, cpu_engine), t1 = TimeTerms(f, 1, cpu_engine);
  double at0 = 0, at1 = 0;
  for (int i = 0; i < kTimeTerms; ++i) {
    at0 += coef[size_t(i)] * t0[size_t(i)];
    at1 += coef[size_t(i)] * t1[size_t(i)];
  }
  DeviceSpeed s;
  s.fixed_s = at0;
  s.per_sample_s = at1 - at0;
  return s;
}

}  // namespace

DeviceSpeed RooflineSpeed(const ModelFeatures& f, double layers, const GpuType& g) {
  const double flops = g.peak_tflops * 1e12 * kComputeEfficiency;
  const double bandwidth = g.memory_bandwidth_gbs * 1e9;
  DeviceSpeed s;
  s.per_sample_s = std::max(f.flops_train() / flops,
                            4 * f.activation_elements * 3 / (bandwidth * kBandwidthEfficiency));
  s.fixed_s = 2 * layers * kLaunchSeconds + f.param_bytes() * 4 / bandwidth;
  return s;
}

std::map<std::string, DeviceSpeed> DeviceSpeeds(const Job& job, const Cluster& cluster) {
  std::map<std::string, DeviceSpeed> out;
  std::map<std::string, Calibration> loaded;  // by GPU type: a reference may serve several
  auto calibration_of = [&](const GpuType& g) -> const Calibration& {
    auto it = loaded.find(g.name);
    if (it == loaded.end()) it = loaded.emplace(g.name, LoadTypeCalibration(g)).first;
    return it->second;
  };
  const ModelFeatures& f = job.features;
  const double layers = double(f.layers.empty() ? job.spec.layers.size() : f.layers.size());
  // A profile is this very program measured: it beats any calibration of other models.
  const GpuType* profiled = job.profile ? &ProfiledGpuType(*job.profile, cluster) : nullptr;
  for (const NodeType& n : cluster.node_types) {
    if (out.count(n.gpu) || !Allowed(job, n.gpu)) continue;
    const GpuType* g = cluster.gpu(n.gpu);
    if (!g) throw EstimateError("node type \"" + n.name + "\": unknown GPU type \"" + n.gpu + "\"");
    DeviceSpeed s;
    if (profiled) {
      s = ProfileSpeed(*job.profile, *profiled, *g);
    } else if (!g->calibration.empty()) {
      const Calibration& cal = calibration_of(*g);
      const std::string file = std::filesystem::path(g->calibration).filename().string();
      s = AffineSpeed(cal.model.coef, f, CpuEngineDevice(cal.device));
      s.source = "calibrated (" + file + ")";
      if (const std::string stale = CalibrationStaleness(cal); !stale.empty())
        s.stale = file + ": " + stale;
      if (cal.device == "cpu") s.cpu_threads = CalibrationThreads(cal);
      int measured = 0;
      s.measured_watts = MeasuredWatts(cal, &measured);
      if (s.measured_watts > 0)
        s.energy_source = "measured (" + file + ": " + Printf("%.1f", s.measured_watts) +
                          " W over " + std::to_string(measured) + " samples)";
    } else if (const GpuType* ref = ClosestCalibrated(cluster, *g)) {
      // A measured model moved by the peaks' ratios beats a bare roofline, whose
      // efficiencies are guesses (wave_scaling.hpp).
      const Calibration& cal = calibration_of(*ref);
      const std::string file = std::filesystem::path(ref->calibration).filename().string();
      const SpeedRatio ratio = PeakRatio(*ref, *g);
      s = AffineSpeed(ScaleCoefficients(cal.model.coef, ratio), f, CpuEngineDevice(cal.device));
      s.source = "scaled from " + ref->name + "'s calibration (" + file + "): " + RatioText(ratio);
      s.reference = ref->name;
      // The reference's staleness carries over: the scaled model is no better than it.
      if (const std::string stale = CalibrationStaleness(cal); !stale.empty())
        s.stale = file + ": " + stale;
      if (cal.device == "cpu") s.cpu_threads = CalibrationThreads(cal);
    } else {
      s = RooflineSpeed(f, layers, *g);
      s.source = "roofline (no calibration for " + g->name + " or any other type)";
    }
    // Another type's joules say nothing about this one's power: only its own count.
    if (s.measured_watts <= 0)
      s.energy_source = "datasheet (active_watts " + Printf("%.0f", g->active_watts) + " W)";
    out[g->name] = s;
  }
  return out;
}

double MeasuredWatts(const Calibration& cal, int* count) {
  double joules = 0, seconds = 0;
  int n = 0;
  for (const TimingSample& s : cal.samples)
    if (s.joules >= 0 && s.seconds > 0) joules += s.joules, seconds += s.seconds, ++n;
  if (count) *count = n;
  return n > 0 && joules > 0 ? joules / seconds : 0;
}

std::vector<std::string> StaleCalibrationWarnings(
    const std::map<std::string, DeviceSpeed>& speeds) {
  std::vector<std::string> out;
  for (const auto& [gpu, speed] : speeds) {
    if (speed.stale.empty()) continue;
    if (speed.reference.empty())
      out.push_back(gpu + "'s calibration " + speed.stale);
    else
      out.push_back(gpu + "'s speed is scaled from " + speed.reference + "'s calibration " +
                    speed.stale);
  }
  return out;
}

Recommendation Recommend(const Job& job, const Cluster& cluster) {
  return Recommend(job, cluster, DeviceSpeeds(job, cluster));
}

Recommendation Recommend(const Job& job, const Cluster& cluster,
                         const std::map<std::string, DeviceSpeed>& speeds) {
  CheckJob(job);
  const int slots = OptimizerSlots(job);
  int64_t all_gpus = 0;
  std::vector<TypeInfo> types = UsableTypes(job, cluster, speeds, &all_gpus);
  SetMaxBatches(job, slots, all_gpus, &types);

  Enumerator e(job, cluster, std::move(types));
  e.Run();
  CheckSomethingFits(job, e, slots);

  Recommendation rec;
  rec.candidates = e.evaluated;
  rec.speeds = speeds;
  rec.feasible = e.feasible > 0;
  rec.fastest = ToAllocation(job, e.types(), e.fastest, slots);
  if (rec.feasible) {
    std::sort(e.best.begin(), e.best.end(), Better);
    rec.ranked.reserve(e.best.size());
    for (const Cand& c : e.best) rec.ranked.push_back(ToAllocation(job, e.types(), c, slots));
    ExplainRanked(job, e.feasible, &rec.ranked);
  }
  std::sort(e.rejected.begin(), e.rejected.end(), Better);
  rec.rejected.reserve(e.rejected.size());
  for (const Cand& c : e.rejected) {
    rec.rejected.push_back(ToAllocation(job, e.types(), c, slots));
    rec.rejected.back().why = WhyRejected(job, e.types(), c, slots);
  }
  ExplainFastest(job, e.fitting, &rec);
  return rec;
}

std::vector<int64_t> BalanceBatch(const std::vector<DeviceSpeed>& speed,
                                  const std::vector<int>& count, int64_t global_batch) {
  if (speed.size() != count.size())
    throw EstimateError("BalanceBatch: " + std::to_string(speed.size()) + " speeds for " +
                        std::to_string(count.size()) + " groups");
  if (speed.size() > size_t(kMaxGroups))
    throw EstimateError("BalanceBatch: at most " + std::to_string(kMaxGroups) + " groups, got " +
                        std::to_string(speed.size()));
  if (global_batch < 0) throw EstimateError("BalanceBatch: negative global batch");
  const int n = int(speed.size());
  double fixed[kMaxGroups], per[kMaxGroups];
  int counts[kMaxGroups];
  int64_t out[kMaxGroups];
  for (int g = 0; g < n; ++g) {
    if (count[size_t(g)] < 0) throw EstimateError("BalanceBatch: negative GPU count");
    CheckSpeed("group " + std::to_string(g), speed[size_t(g)]);
    fixed[g] = speed[size_t(g)].fixed_s;
    per[g] = speed[size_t(g)].per_sample_s;
    counts[g] = count[size_t(g)];
  }
  BalanceCore(fixed, per, counts, n, global_batch, out);
  return std::vector<int64_t>(out, out + n);
}

nlohmann::json PhasesJson(const JobPhases& p) {
  return {{"startup_s", p.startup_s},     {"stage_s", p.stage_s},
          {"data_s", p.data_s},           {"warmup_s", p.warmup_s},
          {"steps_s", p.steps_s},         {"eval_s", p.eval_s},
          {"evaluations", p.evaluations}, {"checkpoint_s", p.checkpoint_s},
          {"checkpoints", p.checkpoints}};
}

nlohmann::json PlanJson(const Job& job, const Recommendation& rec, const Allocation& chosen) {
  using nlohmann::json;
  json parts = json::array();
  json sources = json::object(), energy_sources = json::object();
  int tasks_per_node = 0;
  for (const Part& p : chosen.parts) {
    parts.push_back({{"node_type", p.node_type},
                     {"gpu", p.gpu},
                     {"nodes", p.nodes},
                     {"gpus_per_node", p.gpus_per_node},
                     {"per_gpu_batch", p.per_gpu_batch}});
    tasks_per_node = std::max(tasks_per_node, p.gpus_per_node);
    auto s = rec.speeds.find(p.gpu);
    if (s != rec.speeds.end()) sources[p.gpu] = s->second.source;
    if (s != rec.speeds.end() && !s->second.energy_source.empty())
      energy_sources[p.gpu] = s->second.energy_source;
  }
  const std::string limit = SlurmTimeLimit(chosen.total_s, job.margin, job.grace_s);
  const long limit_s = LimitMinutes(chosen.total_s, job.margin, job.grace_s) * 60;

  json j;
  j["format_version"] = 1;
  j["spec"] = job.spec.origin;
  if (job.profile) j["profile"] = job.profile->origin;
  j["objective"] = ObjectiveName(job.objective);
  j["deadline_s"] = job.deadline_s;
  j["feasible"] = chosen.fits_memory && chosen.meets_deadline;
  j["allocation"] = {{"parts", parts},
                     {"nodes", chosen.nodes},
                     {"gpus", chosen.gpus},
                     {"tasks_per_node", tasks_per_node}};
  j["global_batch"] = chosen.global_batch;
  j["lr"] = chosen.lr;
  j["warmup_epochs"] = chosen.warmup_epochs;
  j["epochs"] = job.epochs;
  j["samples"] = job.samples;
  j["predicted"] = {{"step_s", chosen.step_s},
                    {"compute_s", chosen.compute_s},
                    {"comm_s", chosen.comm_s},
                    {"steps", chosen.steps},
                    {"total_s", chosen.total_s},
                    {"energy_j", chosen.energy_j},
                    {"energy_kwh", chosen.energy_j / 3.6e6},
                    {"gpu_hours", chosen.gpu_hours},
                    {"memory_gb_per_gpu", chosen.memory_bytes / 1e9},
                    {"phases", PhasesJson(chosen.phases)}};
  j["margin"] = job.margin;
  j["time_limit"] = limit;
  j["time_limit_s"] = limit_s;
  j["speed_source"] = sources;
  j["energy_source"] = energy_sources;
  j["why"] = chosen.why;
  return j;
}

std::string FormatEnergy(double j) {
  if (j < 1e3) return Printf("%.0f J", j);
  if (j < 1e6) return Printf("%.1f kJ", j / 1e3);
  if (j < 1e9) return Printf("%.1f MJ", j / 1e6);
  return Printf("%.2f GJ", j / 1e9);
}

std::string SlurmTimeLimit(double seconds, double margin, double grace_s) {
  const long minutes = LimitMinutes(seconds, margin, grace_s);
  const long d = minutes / (24 * 60), h = (minutes / 60) % 24, m = minutes % 60;
  char buf[48];
  if (d > 0)
    std::snprintf(buf, sizeof buf, "%ld-%02ld:%02ld:00", d, h, m);
  else
    std::snprintf(buf, sizeof buf, "%02ld:%02ld:00", h, m);
  return buf;
}

}  // namespace dlh
