// DLH estimator — predictions corrected by observations (see correction.hpp).
#include "estimator/observe/correction.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <optional>

#include "common/median.hpp"
#include "common/spec.hpp"
#include "estimator/model/comm_model.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/job_time.hpp"
#include "estimator/observe/model_key.hpp"
#include "estimator/observe/robust.hpp"

namespace dlh {
namespace {

std::string Runs(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string PercentText(double log_factor) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.0f%%", 100 * (std::exp(log_factor) - 1));
  return buf;
}

// How the record's ranks shared their node's cores, as the recommender counts them for a
// plan of that shape (candidates.cpp, Share). None on a GPU type.
CpuShare RecordShare(const Observation& r, const DeviceSpeed& s, const Cluster& cluster,
                     const std::string& gpu) {
  if (s.cpu_threads <= 0) return {};
  if (cluster.runtime.shared_host_cores > 0)
    return CpuRankShare(s.cpu_threads, cluster.runtime.shared_host_cores, r.ranks, s.cpu_scaling,
                        r.threads_per_rank);
  int cores = s.cpu_threads;
  for (const NodeType& n : cluster.node_types)
    if (n.gpu == gpu && n.cpu_cores > 0) cores = n.cpu_cores;
  return CpuRankShare(s.cpu_threads, cores, r.ranks_per_node, s.cpu_scaling, r.threads_per_rank);
}

// The nodes the record's ranks ran on.
int RecordNodes(const Observation& r) {
  return r.ranks_per_node > 0 ? (r.ranks + r.ranks_per_node - 1) / r.ranks_per_node : 1;
}

}  // namespace

double PredictedCompute(const Observation& r, const DeviceSpeed& s, const Cluster& cluster,
                        const std::string& gpu) {
  const CpuShare share = RecordShare(r, s, cluster, gpu);
  return s.fixed_s * share.fixed + s.per_sample_s * share.per_sample * double(r.per_rank_batch);
}

double ModelledComm(const Observation& r, double gradient_bytes, const DeviceSpeed& s,
                    const Cluster& cluster, const std::string& gpu) {
  if (r.ranks <= 1) return 0;
  if (!(gradient_bytes > 0) || r.ranks_per_node <= 0) return -1;
  // Local SGD, stale-synchronous steps and pipelines do not wait for one gradient allreduce
  // a step: their records teach the compute only.
  if (r.spec.is_object() && (r.spec.contains("sync") || r.spec.contains("parallel"))) return -1;
  const NodeType* node = nullptr;
  for (const NodeType& n : cluster.node_types)
    if (n.gpu == gpu) {
      node = &n;
      break;
    }
  if (!node) return -1;
  return HierarchicalAllreduceSeconds(gradient_bytes, r.ranks_per_node, RecordNodes(r),
                                      AlphaBeta::from_link(node->intra_node),
                                      AlphaBeta::from_link(cluster.inter_node)) +
         RecordShare(r, s, cluster, gpu).wait_s;
}

std::string BaseProvenance(const std::string& gpu, const DeviceSpeed& s) {
  if (!s.provenance.empty()) return s.provenance;
  const std::string calibrated = "calibrated (";
  if (s.source.rfind(calibrated, 0) == 0)
    return "calibration " + gpu + " (" + s.source.substr(calibrated.size());
  return s.source;
}

namespace {

// The calibrated speed on `gpu` of the model a record of ANOTHER model ran: a record is
// judged against its own model's prediction, never against the planned job's (a residual of
// an MLP's step over a CNN's prediction says nothing about the type). From the record's spec;
// none for a program (its profile is not in the store) or a spec that no longer parses.
// Cached by model key: a store holds many runs of few models.
const DeviceSpeed* RecordModelSpeed(const Observation& r, const Job& job, const Cluster& cluster,
                                    const std::string& gpu,
                                    std::map<std::string, std::optional<DeviceSpeed>>* cache) {
  auto it = cache->find(r.model_key);
  if (it == cache->end()) {
    std::optional<DeviceSpeed> speed;
    if (r.spec.is_object()) {
      try {
        Job other = job;
        other.profile.reset();
        other.spec = ParseSpec(r.spec.dump(), "observation", "");
        other.features = ComputeFeatures(other.spec);
        other.allowed_types = {gpu};
        const auto speeds = CalibratedDeviceSpeeds(other, cluster);
        if (auto s = speeds.find(gpu); s != speeds.end()) speed = s->second;
      } catch (const std::exception&) {  // a record the reader cannot judge is left out
      }
    }
    it = cache->emplace(r.model_key, speed).first;
  }
  return it->second ? &*it->second : nullptr;
}

// How many ranks shared the cores of the record's node, as the recommender counts them
// (candidates.cpp, Share): every rank of the job on a cluster whose nodes are one machine,
// else a node's ranks. 0 on a GPU type: its ranks do not share a device.
int SharingCount(const Observation& r, const DeviceSpeed& s, const Cluster& cluster) {
  if (s.cpu_threads <= 0) return 0;
  return cluster.runtime.shared_host_cores > 0 ? r.ranks : r.ranks_per_node;
}

struct Residual {
  std::string model;  // the record's model key
  int sharing = 0;    // SharingCount
  double value = 0;   // ln(measured / predicted) of the compute
  bool own = false;   // the caller's record
  // The plan predicted less communication than compute. Of a record where the allreduce
  // was most of the step, the residual is mostly the allreduce's error (ranks crowded on
  // shared cores spin in MPI while they wait), not the compute's: it may correct its own
  // model's later runs, never another model's compute. 2026-11-30: an MLP at 4 ranks on
  // 2 cores ("communication is 95% of the step") taught "4 ranks +205%", and the CNN's
  // 4-rank job was then predicted at 392 s; it took 205 s.
  bool compute_bound = true;
};

// ln(step factor) of n ranks side by side over one alone, beyond what the thread curves
// predict, from models run both ways: per model, its median at n less its median alone; per
// n, the median over models. The caller's records when they hold such a pair, else the
// others', capped at kOthersCapLog. Compute-bound records only (Residual::compute_bound).
struct SharingOffset {
  double log = 0;  // the median over models
  int models = 0;  // how many models ran both alone and at this count
};
std::map<int, SharingOffset> SharingOffsets(const std::vector<Residual>& all) {
  auto offsets = [&all](bool own) {
    std::map<std::string, std::map<int, std::vector<double>>> by_model;
    for (const Residual& r : all)
      if (r.sharing > 0 && r.own == own && r.compute_bound)
        by_model[r.model][r.sharing].push_back(r.value);
    std::map<int, std::vector<double>> differences;
    for (const auto& [model, counts] : by_model) {
      const auto alone = counts.find(1);
      if (alone == counts.end()) continue;
      const double base = Median(alone->second);
      for (const auto& [n, values] : counts)
        if (n != 1) differences[n].push_back(Median(values) - base);
    }
    std::map<int, SharingOffset> out;
    for (const auto& [n, d] : differences) out[n] = {Median(d), int(d.size())};
    return out;
  };
  std::map<int, SharingOffset> out = offsets(true);
  for (auto [n, d] : offsets(false)) {
    d.log = std::clamp(d.log, -kOthersCapLog, kOthersCapLog);
    out.emplace(n, d);
  }
  return out;
}

// What a count's offset adds to the prediction of a model that never ran at that count: the
// offset shrunk toward none as a type's correction is (robust.hpp), m / (m + kShrinkJobs) of
// it from m models. How crowded cores slow a step depends on the model: measured 2026-12-01
// on the project's 2-core host (bench part jobs), an MLP whose allreduce was about half its
// compute taught "4 ranks +129%", while the example CNN's steps took 69.7, 71.4 and 75.9 ms
// at 1, 2 and 4 ranks; carried unshrunk, the CNN's 4-rank job was planned at 2.2x its time.
std::map<int, double> CarriedOffsets(const std::map<int, SharingOffset>& offsets) {
  std::map<int, double> carried;
  for (const auto& [n, o] : offsets) carried[n] = ShrunkTowardNone(o.log, double(o.models));
  return carried;
}

// The record's model's gradient bytes (4 a parameter): its features' count, else its spec's;
// 0 when neither says (a program's record, a spec this build no longer parses).
double RecordGradientBytes(const Observation& r) {
  if (r.features.is_object() && r.features.contains("params") && r.features["params"].is_number())
    return 4 * r.features["params"].get<double>();
  if (!r.spec.is_object()) return 0;
  try {
    return ComputeFeatures(ParseSpec(r.spec.dump(), "observation", "")).param_bytes();
  } catch (const std::exception&) {
    return 0;
  }
}

// A modelled allreduce shorter than this is latency the model and the clock both blur: no
// ratio is learned from it.
constexpr double kMinModelledCommS = 20e-6;

// What a step's allreduce waits for, against what the links model: ln(measured / modelled)
// by shape (ranks, ranks per node) and by regime (CommRegime: within one node or across
// nodes, with a core for every busy thread or crowded), of the planned model and of every
// model of the type. A link's factor is a measurement of the link, not a model's residual:
// the caller's records count unshrunk (their median), others' within the cap (ModelHistory).
// What ranks wait for depends on the shape as much as on the link (2026-12-04, make bench's
// jobs on the local cluster, whose two nodes are one 2-core machine: an MLP's 2 ranks across
// the two nodes waited 0.48x the modelled allreduce, its 4 ranks crowding the cores 1.5x and
// the example CNN's 2.4x, 2 ranks on one node 10-13x), so a shape learns from its own runs
// first, the model's, else the type's; then the regime's, the model's, else the type's.
struct CommResiduals {
  Residuals type[4], model[4];
  std::map<std::pair<int, int>, Residuals> type_at, model_at;
  std::map<std::pair<int, int>, int> regime_at;  // a shape's regime, as its first record ran
  int runs = 0;                                  // records that taught any of them
  void add(const Observation& r, int regime, double value, bool own, bool planned_model) {
    const std::pair<int, int> shape{r.ranks, r.ranks_per_node};
    auto push = [&](Residuals& to) { (own ? to.own : to.others).push_back(value); };
    push(type[regime]);
    push(type_at[shape]);
    regime_at.emplace(shape, regime);
    if (planned_model) {
      push(model[regime]);
      push(model_at[shape]);
    }
    ++runs;
  }
  // The caller's records alone; a shape only others ran at is left out, so that it falls
  // back to the regime's factor as it would in a store of the caller's own.
  CommResiduals OwnOnly() const {
    CommResiduals own = *this;
    for (int regime = 0; regime < 4; ++regime) {
      own.type[regime].others.clear();
      own.model[regime].others.clear();
    }
    for (auto* at : {&own.type_at, &own.model_at})
      for (auto it = at->begin(); it != at->end();)
        it = it->second.own.empty() ? at->erase(it) : std::next(it);
    return own;
  }
};

void LearnCommUnbounded(const CommResiduals& c, DeviceSpeed* s) {
  auto any = [](const Residuals& r) { return !r.own.empty() || !r.others.empty(); };
  for (int regime = 0; regime < 4; ++regime)
    s->comm_log_factor[regime] =
        ModelHistory(any(c.model[regime]) ? c.model[regime] : c.type[regime]).log_factor;
  s->comm_log_at.clear();
  for (const auto& [shape, r] : c.type_at) {
    const auto mine = c.model_at.find(shape);
    s->comm_log_at[shape] = ModelHistory(mine != c.model_at.end() ? mine->second : r).log_factor;
  }
}

// Every factor within kOthersCapLog of what the caller's own records alone teach. Each part
// is capped (ModelHistory), but a model's history is preferred to the type's: others' runs
// of the planned model replaced the caller's own measurement of the link (a measured x3
// planned at their x1), and others' runs at a shape replaced the caller's regime factor.
void LearnComm(const CommResiduals& c, DeviceSpeed* s) {
  DeviceSpeed own;
  LearnCommUnbounded(c.OwnOnly(), &own);
  LearnCommUnbounded(c, s);
  for (int regime = 0; regime < 4; ++regime)
    s->comm_log_factor[regime] =
        WithinCapOf(s->comm_log_factor[regime], own.comm_log_factor[regime]);
  for (auto& [shape, log_factor] : s->comm_log_at) {
    const auto mine = own.comm_log_at.find(shape);
    log_factor = WithinCapOf(log_factor, mine != own.comm_log_at.end()
                                             ? mine->second
                                             : own.comm_log_factor[c.regime_at.at(shape)]);
  }
}

std::string CommText(const DeviceSpeed& s, const CommResiduals& c) {
  std::string text;
  const char* where[4] = {"within a node", "across nodes", "crowded within a node",
                          "crowded across nodes"};
  for (int regime = 0; regime < 4; ++regime) {
    if (std::fabs(s.comm_log_factor[regime]) < 0.005) continue;
    char factor[32];
    std::snprintf(factor, sizeof factor, " x%.2g", std::exp(s.comm_log_factor[regime]));
    text += std::string(text.empty() ? "" : ", ") + where[regime] + factor;
  }
  return text.empty() ? "" : "; allreduce " + text + " (" + Runs(c.runs, "job", "jobs") + ")";
}

std::string SharingText(const std::map<int, double>& learned) {
  std::string text;
  for (const auto& [n, log_factor] : learned) {
    if (n == 1 && std::fabs(log_factor) < 0.005) continue;
    text += (text.empty() ? "" : ", ") + Runs(n, "rank", "ranks") + " " + PercentText(log_factor);
  }
  return text.empty() ? "" : "; side by side: " + text;
}

// What a type's residuals teach the compute: the correction of every count of ranks side by
// side (c) and, per count, what it adds (ThreadScaling::learned_log_by_ranks).
struct ComputeLearning {
  Combined c;
  bool by_model = false;  // c is the planned model's own history, not the type's correction
  std::map<int, double> learned;
};

ComputeLearning LearnCompute(const std::vector<Residual>& residuals, const std::string& key) {
  ComputeLearning out;
  // Ranks side by side, learned from models run both ways; every residual is then judged
  // as if its ranks had run alone, so that the model's (or the type's) factor is one of
  // the model, not of the shapes it happened to run at.
  const std::map<int, SharingOffset> offsets = SharingOffsets(residuals);
  auto alone = [&offsets](const Residual& r) {
    const auto o = offsets.find(r.sharing);
    return r.value - (o == offsets.end() ? 0 : o->second.log);
  };
  Residuals model, type;
  std::map<int, Residuals> model_at;  // this model's own residuals, by ranks side by side
  for (const Residual& r : residuals) {
    if (r.compute_bound) (r.own ? type.own : type.others).push_back(alone(r));
    if (r.model != key) continue;
    (r.own ? model.own : model.others).push_back(alone(r));
    if (r.sharing > 0)
      (r.own ? model_at[r.sharing].own : model_at[r.sharing].others).push_back(r.value);
  }
  if (!model.own.empty() || !model.others.empty()) {
    out.c = ModelHistory(model);
    out.by_model = true;
  } else if (!type.own.empty() || !type.others.empty()) {
    out.c = TypeCorrection(type);
  }
  if (out.c.runs == 0) return out;
  // A shape this model ran at is predicted from those runs themselves (a repeat is its
  // own best predictor); another count of ranks side by side gets the learned offset,
  // shrunk by the number of models that taught it (CarriedOffsets).
  out.learned = CarriedOffsets(offsets);
  for (const auto& [n, at] : model_at)
    out.learned[n] = ModelHistory(at).log_factor - out.c.log_factor;
  return out;
}

// `all` (every record) within kOthersCapLog of `own` (the caller's records alone) at every
// count of ranks side by side: each of its parts is capped, but a type's correction of +15%
// and a count's offset of +15%, both from others' records, made one step 32% slower.
void BoundByOwn(const ComputeLearning& own, ComputeLearning* all) {
  const double c = WithinCapOf(all->c.log_factor, own.c.log_factor);
  std::map<int, double> counts = all->learned;
  counts.insert(own.learned.begin(), own.learned.end());
  std::map<int, double> learned;
  for (const auto& count : counts) {
    const int n = count.first;
    const double mine = own.c.log_factor + LearnedLogAt(own.learned, n);
    const double total = all->c.log_factor + LearnedLogAt(all->learned, n);
    const double bounded = WithinCapOf(total, mine);
    // Unchanged where within the bound (the same value, not one rounded through c).
    learned[n] =
        bounded == total && c == all->c.log_factor ? LearnedLogAt(all->learned, n) : bounded - c;
  }
  all->c.log_factor = c;
  all->learned = learned;
}

}  // namespace

void ApplyObservationsFrom(const StoreContents& store, uid_t caller, const Job& job,
                           const Cluster& cluster, std::map<std::string, DeviceSpeed>* speeds) {
  const std::string key = JobModelKey(job);
  const char* what = job.profile ? "this program" : "this spec";
  for (auto& [gpu, s] : *speeds) {
    const std::string base = BaseProvenance(gpu, s);
    s.provenance = base;
    s.cpu_scaling.learned_log_by_ranks.clear();  // residuals are of the curves alone
    std::vector<Residual> residuals;
    std::map<RunShape, std::vector<const Observation*>> repeats;  // the caller's, of this model
    std::map<std::string, std::optional<DeviceSpeed>> other_models;
    CommResiduals comm_residuals;
    for (const StoredObservation& so : store.records) {
      const Observation& r = so.record;
      if (r.gpu_type != gpu) continue;
      // The compute is the step less the allreduce the record measured (or, from an older
      // writer, the one its plan predicted): a link's error is the link's, not the compute's.
      const double comm = r.step_comm_s();
      const DeviceSpeed* own_model =
          r.model_key == key ? &s : RecordModelSpeed(r, job, cluster, gpu, &other_models);
      if (!own_model) continue;
      const bool own = so.owner == caller;
      if (r.allreduce_s >= 0) {
        const double bytes =
            r.model_key == key ? job.features.param_bytes() : RecordGradientBytes(r);
        const double modelled = ModelledComm(r, bytes, *own_model, cluster, gpu);
        if (modelled >= kMinModelledCommS) {
          const double v = std::log(std::max(r.allreduce_s, kMinModelledCommS / 10) / modelled);
          const bool crowded = RecordShare(r, *own_model, cluster, gpu).wait_s > 0;
          comm_residuals.add(r, CommRegime(RecordNodes(r), crowded), v, own, r.model_key == key);
        }
      }
      const double compute = PredictedCompute(r, *own_model, cluster, gpu);
      const double step = r.steady_step_s() - comm;
      if (!(compute > 0) || !(step > 0)) continue;
      const double residual = std::log(step / compute);
      if (!std::isfinite(residual)) continue;
      residuals.push_back(
          {r.model_key, SharingCount(r, s, cluster), residual, own, comm < compute});
      if (r.model_key == key && own)
        repeats[RunShape{r.ranks, r.ranks_per_node, r.per_rank_batch}].push_back(&r);
    }
    // What every record teaches, bounded by what the caller's own teach alone: at any count
    // of ranks side by side, others' records move the compute by at most kOthersCapLog in all
    // (a type's correction and a count's offset are each capped, and together they are again).
    std::vector<Residual> own_residuals;
    for (const Residual& r : residuals)
      if (r.own) own_residuals.push_back(r);
    ComputeLearning learning = LearnCompute(residuals, key);
    const bool by_model = learning.by_model;
    BoundByOwn(LearnCompute(own_residuals, key), &learning);
    const Combined& c = learning.c;
    std::string provenance;
    if (by_model) {
      provenance =
          "from " + Runs(c.runs, "earlier run", "earlier runs") + " of " + what + " on " + gpu;
      if (c.own == 0) provenance += " by other users (" + PercentText(c.log_factor) + ", capped)";
    } else if (c.runs > 0) {
      provenance = base + ", corrected by " + Runs(c.runs, "job", "jobs") + " (" +
                   PercentText(c.log_factor) + ")";
    }
    LearnComm(comm_residuals, &s);
    const std::string comm_text = CommText(s, comm_residuals);
    if (c.runs == 0) {
      s.provenance += comm_text;
      continue;
    }
    const std::map<int, double>& learned = learning.learned;
    const double f = std::exp(c.log_factor);
    s.fixed_s *= f;
    s.per_sample_s *= f;
    s.cpu_scaling.learned_log_by_ranks = learned;
    s.observed_runs = c.runs;
    s.log_sigma = std::hypot(s.log_sigma, c.log_sigma);
    // A shape the caller ran this model at: how far the learned prediction misses those
    // runs (the median of their residuals now) and how much they scatter, in quadrature.
    s.repeat_log_sigma.clear();
    for (const auto& [shape, runs] : repeats) {
      Residuals after;
      for (const Observation* r : runs) {
        after.own.push_back(std::log((r->steady_step_s() - r->step_comm_s()) /
                                     PredictedCompute(*r, s, cluster, gpu)));
      }
      const Combined left = ModelHistory(after);
      s.repeat_log_sigma[shape] = std::hypot(left.log_factor, left.log_sigma);
    }
    s.provenance = provenance + SharingText(learned) + comm_text;
  }
}

void ApplyObservations(const Job& job, const Cluster& cluster,
                       std::map<std::string, DeviceSpeed>* speeds) {
  if (cluster.observations.empty()) {
    for (auto& [gpu, s] : *speeds) s.provenance = BaseProvenance(gpu, s);
    return;
  }
  ApplyObservationsFrom(ReadStoreCached(cluster.observations), getuid(), job, cluster, speeds);
}

}  // namespace dlh
