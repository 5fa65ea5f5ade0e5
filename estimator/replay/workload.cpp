// DLH replay — the networks and their predictions (see workload.hpp).
#include "estimator/replay/workload.hpp"

#include <algorithm>
#include <stdexcept>

#include "common/error.hpp"
#include "estimator/model/features.hpp"
#include "estimator/recommend/suggest.hpp"

namespace dlh::replay {

struct Workload::Model {
  std::string name;
  Job base;  // spec, features, eval_samples; samples and epochs set per plan
  int64_t data_train = 0;
  std::map<std::string, DeviceSpeed> speeds;
};

namespace {

// The family's members for a data set, as `dlh-estimate suggest` makes them.
std::vector<SuggestedMember> Members(const DataSetSize& d) {
  DataFacts facts;
  facts.path = d.name;
  facts.shape = d.shape;
  facts.classes = d.classes;
  facts.train = d.train;
  facts.test = d.test;
  SuggestOptions options;
  options.name = d.name;
  options.epochs = 1;
  return SuggestFamily(facts, options);
}

// "cnn-32x1": a CNN's first-stage filters and convolutions a stage, or an MLP's units and
// blocks, read back from the member's spec.
std::string MemberName(const nlohmann::json& spec) {
  const nlohmann::json& layers = spec["layers"];
  int width = 0, depth = 0;
  bool cnn = false;
  for (const nlohmann::json& l : layers) {
    const std::string type = l["type"];
    if (type == "conv2d") {
      cnn = true;
      if (depth == 0) width = l["filters"];
      ++depth;
    } else if (type == "maxpool2d" && cnn) {
      break;
    } else if (type == "dense" && !cnn) {
      if (depth == 0) width = l["units"];
      ++depth;
    }
  }
  if (!cnn) --depth;  // the last dense layer is the classifier
  return std::string(cnn ? "cnn-" : "mlp-") + std::to_string(width) + "x" + std::to_string(depth);
}

const DataSetSize* FindDataSet(const std::string& name) {
  for (const DataSetSize& d : DataSetCatalogue())
    if (d.name == name) return &d;
  return nullptr;
}

// The counts per node the recommender enumerates: 1, 2, 4, ... below the node's, and it.
int EnumeratedPerNode(int per_node, int full) {
  if (per_node >= full) return full;
  int p = 1;
  while (p * 2 <= per_node) p *= 2;
  return p;
}

}  // namespace

const std::vector<DataSetSize>& DataSetCatalogue() {
  // Train and test splits as published: MNIST 60,000/10,000; CIFAR-10 50,000/10,000; Tiny
  // ImageNet 100,000/10,000 (its validation split); ImageNet-1k 1,281,167/50,000; Covertype
  // 581,012 samples split 80/20; HIGGS 11 million, the last 500,000 its test split.
  static const std::vector<DataSetSize> catalogue = {
      {"mnist", {1, 28, 28}, 10, 60000, 10000},
      {"cifar10", {3, 32, 32}, 10, 50000, 10000},
      {"tiny-imagenet", {3, 64, 64}, 200, 100000, 10000},
      {"imagenet", {3, 224, 224}, 1000, 1281167, 50000},
      {"covertype", {54, 1, 1}, 7, 464809, 116203},
      {"higgs", {28, 1, 1}, 2, 10500000, 500000},
  };
  return catalogue;
}

std::vector<std::string> FamilyNames(const DataSetSize& data) {
  std::vector<std::string> names;
  for (const SuggestedMember& m : Members(data))
    names.push_back(MemberName(m.spec) + ":" + data.name);
  return names;
}

bool KnownNetwork(const std::string& name, std::string* why) {
  const size_t colon = name.find(':');
  const DataSetSize* data =
      colon == std::string::npos ? nullptr : FindDataSet(name.substr(colon + 1));
  if (!data) {
    std::string sets;
    for (const DataSetSize& d : DataSetCatalogue()) sets += (sets.empty() ? "" : ", ") + d.name;
    *why = "'" + name + "' is not NETWORK:DATASET with DATASET one of " + sets;
    return false;
  }
  const std::vector<std::string> names = FamilyNames(*data);
  if (std::find(names.begin(), names.end(), name) != names.end()) return true;
  std::string members;
  for (const std::string& n : names)
    members += (members.empty() ? "" : ", ") + n.substr(0, n.find(':'));
  *why = "'" + name.substr(0, colon) + "' is not a network of " + data->name + "'s family (" +
         members + ")";
  return false;
}

Workload::Workload(Cluster cluster) : cluster_(std::move(cluster)), scratch_(cluster_) {
  for (size_t i = 0; i < cluster_.node_types.size(); ++i)
    if (!cluster_.node_types[i].cpu) request_pools_.push_back(int(i));
  if (request_pools_.empty())
    for (size_t i = 0; i < cluster_.node_types.size(); ++i) request_pools_.push_back(int(i));
}

std::vector<std::string> Workload::RequestDeviceTypes() const {
  std::vector<std::string> out;
  for (int p : request_pools_) {
    const std::string& type = cluster_.node_types[size_t(p)].gpu;
    if (std::find(out.begin(), out.end(), type) == out.end()) out.push_back(type);
  }
  return out;
}
Workload::~Workload() = default;

int Workload::PoolOf(const std::string& node_type) const {
  for (size_t i = 0; i < cluster_.node_types.size(); ++i)
    if (cluster_.node_types[i].name == node_type) return int(i);
  throw std::out_of_range("replay: no node type " + node_type);
}

int Workload::AddModel(const std::string& key, TrainSpec spec, int64_t samples,
                       int64_t eval_samples) {
  auto m = std::make_unique<Model>();
  m->name = key;
  m->base.spec = std::move(spec);
  m->base.features = ComputeFeatures(m->base.spec);
  m->base.samples = samples;
  m->base.eval_samples = eval_samples;
  m->base.epochs = 1;
  m->data_train = samples;
  m->speeds = DeviceSpeeds(m->base, cluster_);
  models_.push_back(std::move(m));
  by_key_[key] = int(models_.size()) - 1;
  return int(models_.size()) - 1;
}

int Workload::ModelOf(const std::string& network) {
  auto it = by_key_.find(network);
  if (it != by_key_.end()) return it->second;
  std::string why;
  if (!KnownNetwork(network, &why)) throw UsageError("replay: network " + why);
  const size_t colon = network.find(':');
  const DataSetSize& data = *FindDataSet(network.substr(colon + 1));
  for (const SuggestedMember& m : Members(data)) {
    if (MemberName(m.spec) + ":" + data.name != network) continue;
    TrainSpec spec = ParseSpec(m.spec.dump(), "replay network " + network, "");
    return AddModel(network, std::move(spec), data.train, data.test);
  }
  throw std::logic_error("replay: " + network + " vanished from its family");
}

int Workload::ModelOfSpec(const std::string& path) {
  const std::string key = "spec:" + path;
  auto it = by_key_.find(key);
  if (it != by_key_.end()) return it->second;
  return AddModel(key, LoadSpec(path), 0, -1);
}

const std::string& Workload::Name(int model) const { return models_.at(size_t(model))->name; }
int64_t Workload::DataSetSamples(int model) const { return models_.at(size_t(model))->data_train; }
int Workload::BatchSize(int model) const { return models_.at(size_t(model))->base.spec.batch_size; }

Job Workload::MakeJob(const Training& t, double deadline_s, Objective objective) const {
  Job job = models_.at(size_t(t.model))->base;
  job.samples = t.samples;
  job.epochs = t.epochs;
  job.deadline_s = deadline_s;
  job.objective = objective;
  job.top = 1;
  job.rejected = 0;
  return job;
}

Recommendation Workload::Plan(int model, const Job& job, const std::vector<int>* available) {
  for (size_t i = 0; i < scratch_.node_types.size(); ++i)
    scratch_.node_types[i].available = available ? (*available)[i] : cluster_.node_types[i].nodes;
  ++recommend_calls;
  return Recommend(job, scratch_, models_.at(size_t(model))->speeds);
}

Predicted Workload::PredictShape(const Training& t, int pool, int nodes, int per_node) {
  const auto key = std::make_tuple(t.model, t.samples, t.epochs, pool, nodes, per_node);
  auto it = shapes_.find(key);
  if (it != shapes_.end()) return it->second;
  const NodeType& nt = cluster_.node_types.at(size_t(pool));
  const int per = EnumeratedPerNode(per_node, nt.gpus_per_node);
  std::vector<int> available(cluster_.node_types.size(), 0);
  available[size_t(pool)] = nodes;
  Job job = MakeJob(t, 0, Objective::Time);
  job.top = 0;  // every candidate of this node type up to the shape: few, all kept
  job.max_gpus = nodes * per;
  Predicted p;
  Recommendation rec;
  try {
    rec = Plan(t.model, job, &available);
  } catch (const EstimateError&) {
    return shapes_[key] = p;  // does not fit the devices' memory
  }
  // The shape itself; when the model cannot use that many devices (its global batch), the
  // largest allocation it allows there.
  const Allocation* exact = nullptr;
  const Allocation* largest = nullptr;
  for (const Allocation& a : rec.ranked) {
    const Part& part = a.parts.front();
    if (a.parts.size() == 1 && part.nodes == nodes && part.gpus_per_node == per) {
      exact = &a;
      break;
    }
    if (!largest || a.gpus > largest->gpus ||
        (a.gpus == largest->gpus && a.total_s < largest->total_s))
      largest = &a;
  }
  const Allocation* chosen = exact ? exact : largest;
  if (chosen) {
    p.ok = true;
    p.total_s = chosen->total_s;
    p.upper_s = chosen->total_upper_s > 0 ? chosen->total_upper_s : chosen->total_s;
    p.energy_j = chosen->energy_j;
    p.units = chosen->gpus;
    p.log_sigma = LogSigma(t.model, *chosen);
  }
  return shapes_[key] = p;
}

double Workload::LogSigma(int model, const Allocation& a) const {
  const std::map<std::string, DeviceSpeed>& speeds = models_.at(size_t(model))->speeds;
  double sigma = 0;
  for (const Part& part : a.parts) {
    auto s = speeds.find(part.gpu);
    if (s != speeds.end()) sigma = std::max(sigma, s->second.log_sigma);
  }
  return sigma;
}

}  // namespace dlh::replay
