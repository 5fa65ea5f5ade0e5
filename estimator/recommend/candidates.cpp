// DLH estimator — the recommender's candidates: every allocation of one node type, or of a
// mix of two, predicted (time, energy, GPU-hours, memory) and kept when among the best.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "estimator/model/comm_model.hpp"
#include "estimator/model/job_time.hpp"
#include "estimator/observe/phases.hpp"
#include "estimator/recommend/batch_balance.hpp"
#include "estimator/recommend/recommend_detail.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh::recommend_detail {

int OptimizerSlots(const OptimizerSpec& o) {
  if (o.kind == OptimizerSpec::Kind::Adam) return 2;
  return o.momentum > 0 ? 1 : 0;
}

// A profiled program says its own count, which may be one no spec optimizer has.
int OptimizerSlots(const Job& job) {
  return job.profile ? job.profile->optimizer_slots : OptimizerSlots(job.spec.optimizer);
}

namespace {

class Enumerator {
 public:
  Enumerator(const Job& job, const Cluster& cluster, std::vector<TypeInfo> types,
             const PipelineShape& pipe)
      : job_(job), types_(std::move(types)), pipe_(pipe) {
    inter_ = AlphaBeta::from_link(cluster.inter_node);
    runtime_ = cluster.runtime;
    startup_s_ = job.startup_s >= 0 ? job.startup_s : runtime_.startup_s;
    const int64_t eval = job.eval_samples >= 0 ? job.eval_samples : job.samples / 6;
    work_ =
        WorkOf(job.features, job.samples, eval, job.epochs, recommend_detail::OptimizerSlots(job));
    work_.staged = job.stage;
    bytes_ = job.features.param_bytes();
    if (!job.profile && job.spec.sync.local_sgd()) {
      local_period_ = job.spec.sync.period;
      average_bytes_ = bytes_ * recommend_detail::ModelAverageToGradientBytes(job);
    }
    if (!job.profile && job.spec.sync.stale_sync()) staleness_ = job.spec.sync.staleness;
    weak_ = job.per_gpu_batch > 0;
    keep_ = job.top > 0 ? size_t(job.top) : 0;
    keep_rejected_ = job.rejected > 0 ? size_t(job.rejected) : 0;
    slots_ = recommend_detail::OptimizerSlots(job);
    min_batch_.assign(types_.size(), std::numeric_limits<int64_t>::max());
    for (const TypeInfo& t : types_) learned_.push_back(LearnPhases(job, cluster, t.gpu->name));
  }

  void Run() {
    if (pipe_.pipelined()) {
      for (int t = 0; t < int(types_.size()); ++t) Pipelined(t);
      return;
    }
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
  // Gradient communication per step. Local SGD sums no gradient: every `period` steps it
  // averages the parameters and the optimizer's state, one allreduce of (1 + state arrays) x
  // the parameter bytes, spread over the period (its synchronous warm-up left out).
  double CommSeconds(int gpus_per_node, int nodes, const AlphaBeta& intra) const {
    if (local_period_ == 0)
      return HierarchicalAllreduceSeconds(bytes_, gpus_per_node, nodes, intra, inter_);
    return HierarchicalAllreduceSeconds(average_bytes_, gpus_per_node, nodes, intra, inter_) /
           double(local_period_);
  }

  // The part of a step's communication the step waits for. Stale-synchronous training
  // (staleness >= 1) sums each step's gradients while the next steps compute: the link carries
  // one allreduce per step, so a step takes the longer of its compute and its allreduce.
  double ExposedComm(double comm_s, double compute_s) const {
    return staleness_ == 0 ? comm_s : std::max(0.0, comm_s - compute_s);
  }

  // GPUs per node: 1, 2, 4, ... below the node's count, then the node's count itself, into
  // `options`; returns how many.
  static int GpusPerNodeOptions(int full, int options[32]) {
    int n = 0;
    for (int64_t g = 1; g < full; g *= 2) options[n++] = int(g);
    options[n++] = full;
    return n;
  }

  // A candidate of n nodes of type t, gpn GPUs each (g in all): its parts, the rest to fill.
  static Cand OneType(int t, int n, int gpn, int64_t g) {
    Cand c;
    c.parts = 1;
    c.type[0] = t;
    c.nodes[0] = n;
    c.gpn[0] = gpn;
    c.gpus = int(g);
    c.node_count = n;
    return c;
  }

  void Homogeneous(int t) {
    const TypeInfo& ti = types_[size_t(t)];
    int options[32];
    const int num_options = GpusPerNodeOptions(ti.node->gpus_per_node, options);
    for (int o = 0; o < num_options; ++o) {
      const int gpn = options[o];
      for (int n = 1; n <= ti.available; ++n) {
        const int64_t g = int64_t(gpn) * n;
        if (job_.max_gpus > 0 && g > job_.max_gpus) break;
        if (g > std::numeric_limits<int>::max()) break;
        Cand c = OneType(t, n, gpn, g);
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
        // A CPU node's ranks split its cores (cores / gpn threads each), its memory and its
        // power: the figures of the file are the whole node's.
        bool fits = hi <= ti.max_batch;
        double watts_active = ti.active_watts, watts_idle = ti.gpu->idle_watts;
        if (ti.cpu) {
          fits = RankMemoryBytes(job_, ti, hi, slots_) <=
                 kUsableMemory * ti.gpu->memory_gb * 1e9 / gpn;
          watts_active /= gpn;
          watts_idle /= gpn;
        }
        const CpuShare share = Share(ti, gpn, g);
        const double fixed = ti.fixed * share.fixed, per = ti.per * share.per_sample;
        c.crowding = share.oversubscribed;
        c.eval_fixed = fixed;
        c.eval_per = per;
        const double t_hi = fixed + per * double(hi);
        const double t_lo = fixed + per * double(lo);
        const double busy = double(n_hi) * t_hi + double(g - n_hi) * t_lo;  // GPU-seconds
        c.compute_s = t_hi;
        c.comm_s = (ExposedComm(CommSeconds(gpn, n, ti.intra), c.compute_s) + share.wait_s) *
                   ti.CommFactor(g, gpn, n, share.wait_s > 0);
        Finish(c, watts_active * busy - watts_idle * busy, watts_idle * double(g),
               ti.node->node_base_watts * n, fits);
      }
    }
  }

  // A pipeline on one node type: every P GPUs a replica of the stages, the replica's batch cut
  // into micro-batches (pipeline_plan.cpp); a stage's memory must fit its GPU. Activations
  // and their gradients cross each stage boundary once per micro-batch each way, on the
  // critical path as often as the pipeline has slots; the ranks of one stage then sum its
  // gradients (the largest stage's, the allreduce of replicas per node on the same links).
  void Pipelined(int t) {
    const TypeInfo& ti = types_[size_t(t)];
    const int stages = pipe_.stages, micro = pipe_.micro_batches;
    double stage_params = 0;
    for (const PipelineShape::Stage& s : pipe_.parts)
      stage_params = std::max(stage_params, s.params);
    int options[32];
    const int num_options = GpusPerNodeOptions(ti.node->gpus_per_node, options);
    for (int o = 0; o < num_options; ++o) {
      const int gpn = options[o];
      for (int n = 1; n <= ti.available; ++n) {
        const int64_t g = int64_t(gpn) * n;
        if (job_.max_gpus > 0 && g > job_.max_gpus) break;
        if (g > std::numeric_limits<int>::max()) break;
        if (g % stages != 0) continue;
        const int64_t replicas = g / stages;
        Cand c = OneType(t, n, gpn, g);
        c.global = weak_ ? job_.per_gpu_batch * replicas : job_.spec.batch_size;
        if (c.global < replicas * micro) break;  // a micro-batch without a sample
        const int64_t hi = (c.global + replicas - 1) / replicas;
        c.batch[0] = hi;  // every stage of a replica takes the replica's batch
        double capacity = kUsableMemory * ti.gpu->memory_gb * 1e9;
        double watts_active = ti.active_watts, watts_idle = ti.gpu->idle_watts;
        if (ti.cpu) {
          capacity /= gpn;
          watts_active /= gpn;
          watts_idle /= gpn;
        }
        const bool fits = StageMemoryBytes(pipe_, hi, slots_, EngineOf(job_, ti)) <= capacity;
        const CpuShare share = Share(ti, gpn, g);
        const double fixed = ti.fixed * share.fixed, per = ti.per * share.per_sample;
        c.crowding = share.oversubscribed;
        c.eval_fixed = fixed;
        c.eval_per = per;
        c.compute_s = PipelineStepSeconds(pipe_, ti, fixed, per, hi, &c.stage_busy_s);
        double busy_one = 0;  // a stage's compute seconds a step, on average
        for (double s : c.stage_busy_s) busy_one += s / double(c.stage_busy_s.size());
        c.bubble = c.compute_s > 0 ? std::max(0.0, 1 - busy_one / c.compute_s) : 0;
        const AlphaBeta& link = stages <= gpn ? ti.intra : inter_;
        const double transfer =
            2.0 * double(micro + stages - 1) * link.MessageSeconds(BoundaryBytes(pipe_, hi));
        const double allreduce =
            replicas > 1 ? HierarchicalAllreduceSeconds(4 * stage_params, std::max(1, gpn / stages),
                                                        n, ti.intra, inter_)
                         : 0.0;
        c.comm_s =
            (transfer + allreduce + share.wait_s) * ti.CommFactor(g, gpn, n, share.wait_s > 0);
        const double busy = double(g) * busy_one;
        Finish(c, watts_active * busy - watts_idle * busy, watts_idle * double(g),
               ti.node->node_base_watts * n, fits);
      }
    }
  }

  // What every allocation of a pair of types shares.
  struct Pair {
    int a = 0, b = 0;
    int ga = 0, gb = 0, gmin = 0;
    AlphaBeta intra;
  };
  enum class Next { Go, Skip, Stop };  // Stop: more nodes of b only worse (see EvaluateMixed)

  void Mixed(int a, int b) {
    const TypeInfo& ta = types_[size_t(a)];
    const TypeInfo& tb = types_[size_t(b)];
    // One job's ranks are all GPU ranks or all CPU ranks: a CPU node in a mix would hold the
    // GPUs to its pace, and Slurm's request (--gres on every node) could not name it.
    if (ta.cpu || tb.cpu) return;
    Pair p;
    p.a = a;
    p.b = b;
    p.gmin = std::min(ta.node->gpus_per_node, tb.node->gpus_per_node);
    p.ga = job_.mixed_same_gpus_per_node ? p.gmin : ta.node->gpus_per_node;
    p.gb = job_.mixed_same_gpus_per_node ? p.gmin : tb.node->gpus_per_node;
    // Allreduce over the smaller node size (its shard crossing nodes is the larger) and the
    // slower of the two intra-node links at that size (the cross-node stage is the same).
    p.intra = RingAllreduceSeconds(bytes_, p.gmin, ta.intra) >=
                      RingAllreduceSeconds(bytes_, p.gmin, tb.intra)
                  ? ta.intra
                  : tb.intra;
    const std::vector<int> counts_a = NodeCounts(ta.available);
    const std::vector<int> counts_b = NodeCounts(tb.available);
    Cand c;
    if (job_.exhaustive_mix ||
        (int(counts_a.size()) == ta.available && int(counts_b.size()) == tb.available)) {
      for (int na = 1; na <= ta.available; ++na)
        for (int nb = 1; nb <= tb.available; ++nb)
          if (EvaluateMixed(p, na, nb, &c) == Next::Stop) break;
      return;
    }
    // Issue 41: at 2,500 nodes a type, every pair of counts is 6 million allocations a pair of
    // types (seconds). So: every count up to kExactNodes, then steps of kNodeStep; then the
    // pair's best (and its fastest, for when none meets the deadline) are refined one count
    // at a time between the grid's neighbours, first of a, then of b. The best allocation's
    // node counts are then exact along each axis.
    // The grid's points, then the few the refinement adds: none is evaluated twice, so none
    // is listed twice.
    bool refining = false;
    std::vector<std::pair<int, int>> refined;
    auto evaluate = [&](int na, int nb, Cand* out) {
      if (refining) {
        const bool on_grid = std::binary_search(counts_a.begin(), counts_a.end(), na) &&
                             std::binary_search(counts_b.begin(), counts_b.end(), nb);
        if (on_grid ||
            std::find(refined.begin(), refined.end(), std::make_pair(na, nb)) != refined.end())
          return Next::Skip;
        refined.emplace_back(na, nb);
      }
      return EvaluateMixed(p, na, nb, out);
    };
    bool have_best = false, have_fast = false;
    Cand pair_best, pair_fast;
    auto consider = [&](const Cand& x) {
      if (x.fits && x.meets && (!have_best || Better(x, pair_best))) {
        pair_best = x;
        have_best = true;
      }
      if (x.fits && (!have_fast || Faster(x, pair_fast))) {
        pair_fast = x;
        have_fast = true;
      }
    };
    for (int na : counts_a) {
      for (int nb : counts_b) {
        const Next next = evaluate(na, nb, &c);
        if (next == Next::Stop) break;
        if (next == Next::Go) consider(c);
      }
    }
    refining = true;
    for (int round = 0; round < 2; ++round) {
      for (const bool target_best : {true, false}) {
        if (!(target_best ? have_best : have_fast)) continue;
        // Along a, b's count fixed; then along b with a's count as it now is.
        const Cand& now = target_best ? pair_best : pair_fast;
        for (int axis = 0; axis < 2; ++axis) {
          const std::vector<int>& grid = axis == 0 ? counts_a : counts_b;
          const int at = axis == 0 ? now.nodes[0] : now.nodes[1];
          const auto it = std::lower_bound(grid.begin(), grid.end(), at);
          const int lo = it == grid.begin() ? 1 : *std::prev(it);
          const int hi =
              (it == grid.end() || std::next(it) == grid.end()) ? grid.back() : *std::next(it);
          const int other = axis == 0 ? now.nodes[1] : now.nodes[0];
          for (int n = lo; n <= hi; ++n) {
            const Next next = axis == 0 ? evaluate(n, other, &c) : evaluate(other, n, &c);
            if (next == Next::Stop && axis == 1) break;
            if (next == Next::Go) consider(c);
          }
        }
      }
    }
  }

  // Every node count of a type with at most kExactNodes available; above, every count up to
  // it and then steps of kNodeStep (5%), and the count available itself.
  static constexpr int kExactNodes = 32;
  static constexpr double kNodeStep = 1.05;
  static std::vector<int> NodeCounts(int available) {
    std::vector<int> counts;
    for (int n = 1; n <= std::min(available, kExactNodes); ++n) counts.push_back(n);
    for (int n = kExactNodes; n < available;) {
      n = std::min(available, std::max(n + 1, int(double(n) * kNodeStep)));
      counts.push_back(n);
    }
    return counts;
  }

  // One allocation of na nodes of a and nb of b, predicted and kept when among the best
  // (Finish). Stop: this count of b is over the GPU cap or leaves a GPU without a sample, and
  // so is every larger one.
  Next EvaluateMixed(const Pair& p, int na, int nb, Cand* out) {
    const TypeInfo& ta = types_[size_t(p.a)];
    const TypeInfo& tb = types_[size_t(p.b)];
    const int64_t ca = int64_t(p.ga) * na, cb = int64_t(p.gb) * nb, g = ca + cb;
    if (job_.max_gpus > 0 && g > job_.max_gpus) return Next::Stop;
    if (g > std::numeric_limits<int>::max()) return Next::Stop;
    const int64_t want = weak_ ? job_.per_gpu_batch * g : int64_t(job_.spec.batch_size);
    if (want < g) return Next::Stop;  // some GPU would get no sample
    int count[2] = {int(ca), int(cb)};
    const CpuShare sa = Share(ta, p.ga, g), sb = Share(tb, p.gb, g);
    double fixed[2] = {ta.fixed * sa.fixed, tb.fixed * sb.fixed};
    double per[2] = {ta.per * sa.per_sample, tb.per * sb.per_sample};
    int64_t batch[2];
    BalanceCore(fixed, per, count, 2, want, batch);
    if (batch[0] < 1 || batch[1] < 1) return Next::Skip;
    Cand& c = *out;
    c = Cand{};
    c.parts = 2;
    c.type[0] = p.a;
    c.type[1] = p.b;
    c.nodes[0] = na;
    c.nodes[1] = nb;
    c.gpn[0] = p.ga;
    c.gpn[1] = p.gb;
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
    // Two types' nodes: the allreduce crosses nodes; the more pessimistic type's learned factor.
    c.comm_s = (ExposedComm(CommSeconds(p.gmin, na + nb, p.intra), c.compute_s) +
                std::max(sa.wait_s, sb.wait_s)) *
               std::max(ta.CommFactor(0, 0, na + nb, sa.wait_s > 0),
                        tb.CommFactor(0, 0, na + nb, sb.wait_s > 0));
    const double busy_energy = (ta.active_watts - ta.gpu->idle_watts) * double(ca) * t_a +
                               (tb.active_watts - tb.gpu->idle_watts) * double(cb) * t_b;
    const double idle_watts = ta.gpu->idle_watts * double(ca) + tb.gpu->idle_watts * double(cb);
    const double base_watts = ta.node->node_base_watts * na + tb.node->node_base_watts * nb;
    Finish(c, busy_energy, idle_watts, base_watts,
           batch[0] <= ta.max_batch && batch[1] <= tb.max_batch);
    return Next::Go;
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
    // A type's start-up, and this model's evaluations and checkpoints, as measured before.
    if (c.parts == 1)
      ApplyLearnedPhases(learned_[size_t(c.type[0])], c.gpus, c.crowding, runtime_.launch_s,
                         &c.phases);
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
      return CpuRankShare(t.cpu_threads, runtime_.shared_host_cores, int(gpus), t.cpu_scaling,
                          job_.threads_per_rank);
    return CpuRankShare(t.cpu_threads, t.cores, gpn, t.cpu_scaling, job_.threads_per_rank);
  }

  const Job& job_;
  std::vector<TypeInfo> types_;
  Runtime runtime_;
  double startup_s_ = 0;
  JobWork work_;
  AlphaBeta inter_;
  double bytes_ = 0;
  PipelineShape pipe_;    // a pipeline's stages (not pipelined: every rank the whole network)
  int local_period_ = 0;  // local SGD's period (0: synchronous)
  int staleness_ = 0;     // stale-synchronous training's (0: the step waits for its sums)
  double average_bytes_ = 0;
  bool weak_ = false;
  size_t keep_ = 0;
  size_t keep_rejected_ = 0;
  int slots_ = 0;  // optimizer state per parameter
  uint32_t index_ = 0;
  std::vector<LearnedPhases> learned_;  // by type: what the observation store taught
};

}  // namespace

Enumeration Enumerate(const Job& job, const Cluster& cluster, std::vector<TypeInfo> types,
                      const PipelineShape& pipe) {
  Enumerator e(job, cluster, std::move(types), pipe);
  e.Run();
  Enumeration out;
  out.types = e.types();
  out.evaluated = e.evaluated;
  out.fitting = e.fitting;
  out.feasible = e.feasible;
  out.have_fastest = e.have_fastest;
  out.fastest = e.fastest;
  out.best = std::move(e.best);
  out.rejected = std::move(e.rejected);
  out.min_batch = std::move(e.min_batch_);
  return out;
}

}  // namespace dlh::recommend_detail
