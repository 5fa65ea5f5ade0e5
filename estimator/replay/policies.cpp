// DLH replay — the policies (see policies.hpp).
#include "estimator/replay/policies.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "common/error.hpp"

namespace dlh::replay {
namespace {

constexpr Policy kAll[] = {Policy::User, Policy::DlhEnergy, Policy::DlhTime, Policy::MaxGpus,
                           Policy::OneGpu};

// How a plan's allocation runs: its parts as the scheduler's, the job's noise applied.
Shape ShapeOf(const Allocation& a, const ReplayJob& job, Workload& workload) {
  Shape s;
  for (const Part& part : a.parts) {
    const int pool = workload.PoolOf(part.node_type);
    // A CPU plan's ranks share every core of their nodes (threads = cores / ranks): it holds
    // its nodes whole, as its Slurm request (--cpus-per-task x --ntasks-per-node) does.
    const int per_node =
        part.cpu ? workload.cluster().node_types[size_t(pool)].gpus_per_node : part.gpus_per_node;
    s.parts.push_back({pool, part.nodes, per_node});
  }
  const double factor = std::exp(workload.LogSigma(job.training.model, a) * job.noise_z);
  s.run_s = a.total_s * factor;
  s.limit_s = a.total_upper_s > 0 ? a.total_upper_s : a.total_s;
  s.energy_j = a.energy_j * factor;
  return s;
}

Shape ShapeOf(const PartShape& part, const Predicted& p, double limit_s, double z) {
  Shape s;
  s.parts.push_back(part);
  const double factor = std::exp(p.log_sigma * z);
  s.run_s = p.total_s * factor;
  s.limit_s = limit_s;
  s.energy_j = p.energy_j * factor;
  return s;
}

// Where a user's request (`units` GPUs of `device_type`, "": any; on `nodes_asked` nodes, 0:
// as few as hold them) lands on node type `nt`: its nodes and GPUs per node. False when the
// type is not the one named or cannot hold the request.
bool RequestOn(const NodeType& nt, const std::string& device_type, int units, int nodes_asked,
               int* nodes, int* per_node) {
  if (!device_type.empty() && nt.gpu != device_type) return false;
  *nodes = nodes_asked > 0 ? nodes_asked : (units + nt.gpus_per_node - 1) / nt.gpus_per_node;
  *per_node = (units + *nodes - 1) / *nodes;
  return *per_node <= nt.gpus_per_node && *nodes <= nt.nodes;
}

Request User(const ReplayJob& job, Workload& workload) {
  Request r;
  const std::vector<NodeType>& types = workload.cluster().node_types;
  for (int p : workload.RequestPools()) {
    int nodes = 0, per_node = 0;
    if (!RequestOn(types[size_t(p)], job.device_type, job.units, job.nodes, &nodes, &per_node))
      continue;
    const Predicted pred = workload.PredictShape(job.training, p, nodes, per_node);
    if (!pred.ok) continue;
    r.shapes.push_back(ShapeOf({p, nodes, per_node}, pred,
                               job.limit_s > 0 ? job.limit_s : kNoLimitSeconds, job.noise_z));
  }
  return r;
}

Request Dlh(const ReplayJob& job, Workload& workload, Objective objective,
            const std::vector<int>& free_nodes) {
  const Job plan_job = workload.MakeJob(job.training, job.deadline_s, objective);
  Recommendation rec;
  bool have = false;
  if (std::any_of(free_nodes.begin(), free_nodes.end(), [](int n) { return n > 0; })) {
    try {
      rec = workload.Plan(job.training.model, plan_job, &free_nodes);
      have = rec.feasible;
    } catch (const EstimateError&) {  // nothing free fits: all nodes below
    }
  }
  if (!have) rec = workload.Plan(job.training.model, plan_job, nullptr);
  return {{ShapeOf(rec.feasible ? rec.ranked.front() : rec.fastest, job, workload)}};
}

Request MaxGpus(const ReplayJob& job, Workload& workload) {
  const std::vector<NodeType>& types = workload.cluster().node_types;
  const int64_t batch = workload.BatchSize(job.training.model);
  // Per node type, the most devices the model can use there; then the node types that reach
  // the most of all, fastest first: like a user who names no type, the job takes whichever
  // is free.
  std::vector<std::pair<Predicted, Shape>> best;
  for (int p : workload.RequestPools()) {
    const NodeType& nt = types[size_t(p)];
    // The counts per node the recommender enumerates, each on as many nodes as the batch
    // allows (strong scaling: every device gets at least one sample of the global batch).
    int units = 0, nodes = 0, per_node = 0;
    for (int64_t gpn = 1;; gpn = std::min<int64_t>(gpn * 2, nt.gpus_per_node)) {
      const int n = int(std::min<int64_t>(nt.nodes, batch / gpn));
      if (n >= 1 && gpn * n > units) {
        units = int(gpn * n);
        nodes = n;
        per_node = int(gpn);
      }
      if (gpn == nt.gpus_per_node) break;
    }
    if (units == 0) continue;
    const Predicted pred = workload.PredictShape(job.training, p, nodes, per_node);
    if (pred.ok)
      best.emplace_back(pred, ShapeOf({p, nodes, per_node}, pred, pred.upper_s, job.noise_z));
  }
  int most = 0;
  for (const auto& b : best) most = std::max(most, b.first.units);
  std::stable_sort(best.begin(), best.end(),
                   [](const auto& a, const auto& b) { return a.first.total_s < b.first.total_s; });
  Request r;
  for (const auto& b : best)
    if (b.first.units == most) r.shapes.push_back(b.second);
  return r;
}

Request OneGpu(const ReplayJob& job, Workload& workload) {
  Job plan_job = workload.MakeJob(job.training, 0, Objective::Energy);
  plan_job.max_gpus = 1;
  plan_job.allowed_types = workload.RequestDeviceTypes();  // a GPU, not a CPU rank
  const Recommendation rec = workload.Plan(job.training.model, plan_job, nullptr);
  return {{ShapeOf(rec.ranked.front(), job, workload)}};
}

}  // namespace

const char* PolicyName(Policy p) {
  switch (p) {
    case Policy::User:
      return "user";
    case Policy::DlhEnergy:
      return "dlh-energy";
    case Policy::DlhTime:
      return "dlh-time";
    case Policy::MaxGpus:
      return "max-gpus";
    case Policy::OneGpu:
      return "one-gpu";
  }
  return "unknown";
}

std::vector<Policy> ParsePolicies(const std::string& list) {
  if (list.empty() || list == "all") return {std::begin(kAll), std::end(kAll)};
  std::vector<Policy> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const std::string name =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? list.size() + 1 : comma + 1;
    const Policy* found = nullptr;
    for (const Policy& p : kAll)
      if (name == PolicyName(p)) found = &p;
    if (!found)
      throw UsageError("replay: --policies: unknown policy '" + name +
                       "' (user, dlh-energy, dlh-time, max-gpus, one-gpu or all)");
    if (std::find(out.begin(), out.end(), *found) != out.end())
      throw UsageError("replay: --policies: " + name + " is named twice");
    out.push_back(*found);
  }
  return out;
}

std::vector<ReplayJob> PrepareJobs(const Trace& trace, Workload& workload, uint64_t seed) {
  // A stream of its own: not the generator's, which starts from the same seed.
  std::seed_seq streams{uint32_t(seed), uint32_t(seed >> 32), 0x6e6f6973u};
  std::mt19937_64 rng(streams);
  std::normal_distribution<double> normal(0, 1);
  const std::vector<NodeType>& types = workload.cluster().node_types;
  std::vector<ReplayJob> jobs;
  jobs.reserve(trace.jobs.size());
  for (const TraceJob& t : trace.jobs) {
    // "trace.csv:12:6: ReqTRES: job 104", or "generated: job 104".
    auto where = [&](int column, const std::string& name) {
      if (t.line == 0) return trace.origin + ": job " + t.id;
      return trace.origin + ":" + std::to_string(t.line) +
             (column > 0 ? ":" + std::to_string(column) + ": " + name : std::string()) + ": job " +
             t.id;
    };
    ReplayJob j;
    j.id = t.id;
    j.submit_s = t.submit_s;
    j.deadline_s = t.deadline_s;
    j.units = t.units;
    j.nodes = t.nodes;
    j.device_type = t.device_type;
    j.limit_s = t.limit_s;
    j.noise_z = normal(rng);
    // Node types that could hold the request (of its GPU type, when named).
    int holder = -1;
    for (int p : workload.RequestPools()) {
      int nodes = 0, per_node = 0;
      if (RequestOn(types[size_t(p)], t.device_type, t.units, t.nodes, &nodes, &per_node)) {
        holder = p;
        break;
      }
    }
    if (holder < 0)
      throw UsageError(where(trace.tres_column, trace.tres_name) + ": no node type of " +
                       workload.cluster().origin + " holds " + std::to_string(t.units) + " GPUs" +
                       (t.device_type.empty() ? "" : " of type " + t.device_type) +
                       (t.nodes > 0
                            ? " on " + std::to_string(t.nodes) + (t.nodes > 1 ? " nodes" : " node")
                            : ""));
    try {
      if (!t.network.empty()) {
        j.training.model = workload.ModelOf(t.network);
      } else if (!t.spec.empty()) {
        j.training.model = workload.ModelOfSpec(t.spec);
      } else {
        j.training = MatchTraining(workload, t.units, holder, t.elapsed_s, rng);
      }
    } catch (const Error& e) {
      if (!t.spec.empty()) throw UsageError(where(trace.spec_column, "Spec") + ": " + e.what());
      throw UsageError(where(trace.network_column, "Network") + ": " + e.what());
    }
    if (!t.network.empty() || !t.spec.empty()) {
      j.training.samples = t.samples > 0 ? t.samples : workload.DataSetSamples(j.training.model);
      j.training.epochs = t.epochs;
    }
    jobs.push_back(std::move(j));
  }
  return jobs;
}

Request PlanRequest(Policy policy, const ReplayJob& job, Workload& workload,
                    const std::vector<int>& free_nodes) {
  switch (policy) {
    case Policy::User:
      return User(job, workload);
    case Policy::DlhEnergy:
      return Dlh(job, workload, Objective::Energy, free_nodes);
    case Policy::DlhTime:
      return Dlh(job, workload, Objective::Time, free_nodes);
    case Policy::MaxGpus:
      return MaxGpus(job, workload);
    case Policy::OneGpu:
      return OneGpu(job, workload);
  }
  return {};
}

}  // namespace dlh::replay
