// DLH replay — a generated trace (see trace.hpp).
//
// Sizes, durations and arrivals follow what three published studies of production GPU
// clusters report. The numbers below are our approximations of their figures, not values
// read off them, and were not checked against the figures themselves (only the papers'
// abstracts and the traces' descriptions were at hand): each names the figure it
// approximates, by what it plots (docs/reference/replay.md, "The generator"):
//   Philly   Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN
//            Training Workloads", USENIX ATC '19 (Microsoft, 2017): most jobs use one GPU;
//            run times range from minutes to weeks, and jobs of more GPUs run longer (its
//            CDFs of run time by job size: 1, 2-4, 5-8, more than 8 GPUs).
//   Helios   Hu et al., "Characterization and Prediction of Deep Learning Workloads in
//            Large-Scale GPU Datacenters", SC '21 (SenseTime, 2020): most GPU jobs are
//            single-GPU while the few large ones hold most GPU time (its CDFs of GPU demand
//            by jobs and by GPU time); durations are heavy-tailed around a median of minutes
//            (its duration CDFs); submissions follow the working day (its hourly
//            submission pattern).
//   PAI      Weng et al., "MLaaS in the Wild: Workload Analysis and Scheduling in
//            Large-Scale Heterogeneous GPU Clusters", NSDI '22 (Alibaba, 2020): most task
//            instances ask for one GPU or less, run times span seconds to days with a long
//            tail (its CDFs of GPU request and run time), and many tasks ask for a specific
//            GPU type (its picky, hard-to-schedule high-end requests).
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "common/error.hpp"
#include "estimator/replay/trace.hpp"

namespace dlh::replay {
namespace {

// GPUs a job asks for: the share of jobs and the median duration of that size. Shares:
// about 7 jobs in 10 on one GPU and under 1 in 20 on more than 8 (Philly's and Helios'
// breakdowns by size; PAI's requests, fractions of a GPU counted as one). Medians: minutes
// for one GPU, hours for the large jobs (Philly's run time by size; Helios' durations).
struct SizeClass {
  int gpus;
  double share;
  double median_s;
};
constexpr SizeClass kSizes[] = {
    {1, 0.70, 12 * 60},   {2, 0.08, 25 * 60},    {4, 0.09, 40 * 60},    {8, 0.08, 60 * 60},
    {16, 0.03, 2 * 3600}, {32, 0.015, 3 * 3600}, {64, 0.005, 4 * 3600},
};
// The spread of ln(duration) around the size's median: the studies' duration CDFs cover
// four to five decades (a minute to weeks); sigma 1.6 puts 90% of a size's jobs within a
// factor of 14 of its median. Durations are kept within [1 minute, 7 days].
constexpr double kDurationLogSigma = 1.6;
constexpr double kMinDuration = 60, kMaxDuration = 7 * 86400;
// Image models (CNNs) against flat-feature ones (MLPs): vision dominates the jobs of Helios
// and Philly; our assumption, as no study counts this exactly.
constexpr double kImageShare = 0.8;
// A day-night cycle of submissions: a cosine peaking at 14:00 with +-50% (an approximation
// of Helios' hourly submissions), the trace starting at midnight.
constexpr double kDiurnalAmplitude = 0.5;
constexpr double kPeakHour = 14;
// The most epochs a matched job trains before a larger data set is taken.
constexpr int kMaxEpochs = 300;
// Users pad their time limit: at least 1.5 times what they expect, rounded up to a usual
// value (our assumption; users' overestimates are well documented in HPC traces).
constexpr double kLimitPad = 1.5;
constexpr double kLimitLadder[] = {1800,  3600,  7200,      14400,     28800,
                                   43200, 86400, 2 * 86400, 3 * 86400, 7 * 86400};

double UserLimit(double expected_s) {
  const double want = kLimitPad * expected_s;
  for (double l : kLimitLadder)
    if (l >= want) return l;
  return std::ceil(want / 86400) * 86400;
}

// The shape a user asks for on a node type: whole nodes for more than one node's count.
void UserShape(int units, int per_node_full, int* nodes, int* per_node) {
  *nodes = (units + per_node_full - 1) / per_node_full;
  *per_node = (units + *nodes - 1) / *nodes;
}

const std::vector<std::string>& Family(size_t data_set) {
  static std::map<size_t, std::vector<std::string>> cache;
  auto it = cache.find(data_set);
  if (it == cache.end())
    it = cache.emplace(data_set, FamilyNames(DataSetCatalogue()[data_set])).first;
  return it->second;
}

}  // namespace

Training MatchTraining(Workload& workload, int units, int pool, double duration_s,
                       std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(0, 1);
  const bool image = uniform(rng) < kImageShare;
  const double member_draw = uniform(rng);
  const NodeType& nt = workload.cluster().node_types.at(size_t(pool));
  int nodes = 0, per_node = 0;
  UserShape(units, nt.gpus_per_node, &nodes, &per_node);
  Training best;
  // The drawn kind of network first; where none of that kind fits the node type (a small
  // GPU's memory), the other kind, so that a small cluster can still be given a trace. A
  // cluster where the drawn kind fits draws exactly what it drew before this fallback.
  for (int kind = 0; kind < 2 && best.model < 0; ++kind)
    for (size_t d = 0; d < DataSetCatalogue().size(); ++d) {
      if (DataSetCatalogue()[d].image() != (kind == 0 ? image : !image)) continue;
      const std::vector<std::string>& names = Family(d);
      const size_t member = std::min(names.size() - 1, size_t(member_draw * double(names.size())));
      Training t;
      t.model = workload.ModelOf(names[member]);
      t.samples = workload.DataSetSamples(t.model);
      t.epochs = 1;
      const Predicted one = workload.PredictShape(t, pool, nodes, per_node);
      t.epochs = 2;
      const Predicted two = workload.PredictShape(t, pool, nodes, per_node);
      if (!one.ok || !two.ok) continue;  // does not fit this node type's memory
      // Time is affine in epochs (estimator/model/job_time.hpp): a + b x epochs.
      const double per_epoch = std::max(1e-9, two.total_s - one.total_s);
      const double fixed = one.total_s - per_epoch;
      const double epochs = std::round((duration_s - fixed) / per_epoch);
      t.epochs = int(std::clamp(epochs, 1.0, double(kMaxEpochs)));
      best = t;
      if (epochs <= kMaxEpochs) break;  // else a larger data set
    }
  if (best.model < 0)
    throw EstimateError("replay --generate: no network of the catalogue (" +
                        std::to_string(DataSetCatalogue().size()) + " data sets' families) fits " +
                        std::to_string(units) + " GPU(s) of " + nt.name + " (" + nt.gpu +
                        "): its memory is too small for all of them; replay a trace of your "
                        "own (--trace)");
  return best;
}

Trace GenerateTrace(const GeneratorOptions& o, Workload& workload) {
  if (o.jobs < 1) throw UsageError("--generate: at least 1 job");
  if (!(o.load > 0)) throw UsageError("--load: must be positive");
  if (!(o.deadline_lo >= 1 && o.deadline_hi >= o.deadline_lo))
    throw UsageError("--deadlines: need 1 <= LO <= HI");
  const Cluster& cluster = workload.cluster();
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::normal_distribution<double> normal(0, 1);
  Trace trace;
  trace.origin = "generated";
  double offered_unit_s = 0;
  double capacity_units = 0;
  // The load is the users' GPU requests against the node types they can run on: a CPU node
  // type is capacity only a planner that may move a job there (DLH) can use.
  int largest_pool = 0;  // the most GPUs one request can get on one node type
  for (int p : workload.RequestPools()) {
    const NodeType& nt = cluster.node_types[size_t(p)];
    capacity_units += double(nt.nodes) * nt.gpus_per_node;
    largest_pool = std::max(largest_pool, nt.nodes * nt.gpus_per_node);
  }
  if (largest_pool < 1) throw EstimateError(cluster.origin + ": no GPU node type to draw jobs for");
  for (int i = 0; i < o.jobs; ++i) {
    // Every job draws the same count of numbers, whatever it turns out to be: the trace's
    // other jobs do not move when one changes.
    const double u_size = uniform(rng), z_duration = normal(rng), u_names = uniform(rng),
                 u_type = uniform(rng), u_deadline = uniform(rng), u_multiple = uniform(rng);
    const SizeClass* size = &kSizes[0];
    double cumulative = 0;
    for (const SizeClass& s : kSizes) {
      size = &s;
      cumulative += s.share;
      if (u_size < cumulative) break;
    }
    // A size no node type holds (a small cluster) becomes the largest size class one does,
    // its duration that class's: jobs the cluster could take keep the draws they had.
    while (size > &kSizes[0] && size->gpus > largest_pool) --size;
    const double duration = std::clamp(size->median_s * std::exp(kDurationLogSigma * z_duration),
                                       kMinDuration, kMaxDuration);
    std::vector<int> holds;  // node types a request of the size can run on
    for (int p : workload.RequestPools())
      if (int64_t(cluster.node_types[size_t(p)].nodes) *
              cluster.node_types[size_t(p)].gpus_per_node >=
          size->gpus)
        holds.push_back(p);
    if (holds.empty())
      throw EstimateError(cluster.origin + ": no node type holds a job of " +
                          std::to_string(size->gpus) + " GPUs");
    TraceJob job;
    job.id = std::to_string(i + 1);
    job.units = size->gpus;
    const bool names_type = u_names < o.type_share;
    const int pool = holds[std::min(holds.size() - 1, size_t(u_type * double(holds.size())))];
    const int ref = names_type ? pool : holds.front();
    if (names_type) {
      job.device_type = cluster.node_types[size_t(pool)].gpu;
      int per = 0;
      UserShape(job.units, cluster.node_types[size_t(pool)].gpus_per_node, &job.nodes, &per);
    }
    const Training t = MatchTraining(workload, job.units, ref, duration, rng);
    job.network = workload.Name(t.model);
    job.samples = t.samples;
    job.epochs = t.epochs;
    // The user's limit covers the slowest node type they may land on.
    double expected = 0, on_ref = 0;
    for (int p : holds) {
      if (names_type && p != pool) continue;
      const NodeType& nt = cluster.node_types[size_t(p)];
      int nodes = 0, per = 0;
      UserShape(job.units, nt.gpus_per_node, &nodes, &per);
      const Predicted pr = workload.PredictShape(t, p, nodes, per);
      if (!pr.ok) continue;
      expected = std::max(expected, pr.total_s);
      if (p == ref) on_ref = pr.total_s;
    }
    job.limit_s = UserLimit(expected);
    offered_unit_s += double(job.units) * (on_ref > 0 ? on_ref : expected);
    if (u_deadline < o.deadline_share) {
      Job best_case = workload.MakeJob(t, 0, Objective::Time);
      const Recommendation rec = workload.Plan(t.model, best_case, nullptr);
      const double multiple = o.deadline_lo * std::pow(o.deadline_hi / o.deadline_lo, u_multiple);
      job.deadline_s = std::ceil(multiple * rec.fastest.total_s);
    }
    trace.jobs.push_back(std::move(job));
  }
  // Arrivals: a Poisson process whose mean rate puts the offered GPU-seconds at `load` of the
  // capacity over the span, modulated by the day (thinning: Lewis & Shedler 1979).
  const double span_s = offered_unit_s / (o.load * capacity_units);
  const double rate = double(o.jobs) / span_s;
  const double peak_rate = rate * (1 + kDiurnalAmplitude);
  std::exponential_distribution<double> gap(peak_rate);
  double t = 0;
  for (TraceJob& job : trace.jobs) {
    for (;;) {
      t += gap(rng);
      const double hour = std::fmod(t / 3600, 24);
      const double relative =
          (1 + kDiurnalAmplitude * std::cos(2 * M_PI * (hour - kPeakHour) / 24)) /
          (1 + kDiurnalAmplitude);
      if (uniform(rng) < relative) break;
    }
    job.submit_s = std::round(t);
  }
  // Times from the first submission, as a trace file's are.
  const double first = trace.jobs.front().submit_s;
  for (TraceJob& job : trace.jobs) job.submit_s -= first;
  return trace;
}

}  // namespace dlh::replay
