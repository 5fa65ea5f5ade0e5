// DLH replay — the networks a replay's jobs train, and their predictions through the real
// planning code (estimator/recommend/recommender.hpp).
//
// A network is a member of the project's spec families (estimator/recommend/suggest.hpp:
// VGG-style CNNs for images, MLPs for flat features) sized for one data set of a small
// catalogue, named "cnn-32x1:cifar10" (family, width x depth, data set). Each is parsed and
// its per-device-type speeds computed once (DeviceSpeeds reads calibration files), then every
// plan of every job reuses them through Recommend's precomputed-speeds overload.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/spec.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh::replay {

// A data set of the catalogue: the sizes of well-known public sets (their names are only
// labels; no data is read).
struct DataSetSize {
  std::string name;  // "cifar10"
  Shape3 shape;
  int classes = 0;
  int64_t train = 0, test = 0;
  bool image() const { return shape.height >= 8 && shape.width >= 8; }
};
// mnist, cifar10, tiny-imagenet, imagenet (images); covertype, higgs (flat features).
const std::vector<DataSetSize>& DataSetCatalogue();

// The members of the data set's family, smallest first, by name ("cnn-32x1:cifar10").
std::vector<std::string> FamilyNames(const DataSetSize& data);
// Whether `name` is one of the catalogue's networks; otherwise *why says what is wrong.
bool KnownNetwork(const std::string& name, std::string* why);

// What a job trains: a network (Workload::ModelOf), samples per epoch and epochs.
struct Training {
  int model = -1;
  int64_t samples = 0;
  int epochs = 0;
};

// A prediction for one allocation, the few figures a replay needs.
struct Predicted {
  bool ok = false;  // false: the network does not fit the devices' memory there
  double total_s = 0, upper_s = 0, energy_j = 0;
  double log_sigma = 0;  // the speed's uncertainty there (DeviceSpeed::log_sigma)
  int units = 0;
};

class Workload {
 public:
  explicit Workload(Cluster cluster);
  ~Workload();

  const Cluster& cluster() const { return cluster_; }
  // The pool (node type index) of a node type's name; throws std::out_of_range.
  int PoolOf(const std::string& node_type) const;
  // The node types a user's GPU request (gres/gpu) can land on: the GPU node types, in the
  // cluster's order (a CPU node type runs no --gres job); every node type of a cluster that
  // has no GPU node type.
  const std::vector<int>& RequestPools() const { return request_pools_; }
  // Their device types, no duplicates (Job::allowed_types for a policy that wants GPUs).
  std::vector<std::string> RequestDeviceTypes() const;

  // A network by name, or a spec file by path ("spec:" + path): parsed, its features and
  // speeds computed on first use. Throws UsageError for an unknown name, SpecError for a
  // bad spec file.
  int ModelOf(const std::string& network);
  int ModelOfSpec(const std::string& path);
  const std::string& Name(int model) const;
  int64_t DataSetSamples(int model) const;  // the data set's training split (0: a spec file)
  int BatchSize(int model) const;           // the spec's global batch

  // The estimator's job for a training: no deadline, the objective given, top 1, nothing
  // rejected kept (the cheap form of Recommend).
  Job MakeJob(const Training& t, double deadline_s, Objective objective) const;
  // Recommend with the network's speeds, on the cluster with `available` whole nodes per
  // node type (nullptr: every node). Throws EstimateError as Recommend does.
  Recommendation Plan(int model, const Job& job, const std::vector<int>* available);
  // The prediction for `nodes` nodes of node type `pool` with `per_node` devices on each, as
  // the recommender predicts it. A count per node the recommender does not enumerate (it
  // tries 1, 2, 4, ... and the node's count) is predicted at the one below. Memoised.
  Predicted PredictShape(const Training& t, int pool, int nodes, int per_node);
  // The uncertainty of an allocation: the widest of its parts' speeds.
  double LogSigma(int model, const Allocation& a) const;

  int64_t recommend_calls = 0;  // every Recommend made through this object

 private:
  struct Model;
  int AddModel(const std::string& key, TrainSpec spec, int64_t samples, int64_t eval_samples);

  Cluster cluster_;
  Cluster scratch_;  // cluster_ with the availability of the current plan
  std::vector<int> request_pools_;
  std::map<std::string, int> by_key_;
  std::vector<std::unique_ptr<Model>> models_;
  std::map<std::tuple<int, int64_t, int, int, int, int>, Predicted> shapes_;
};

}  // namespace dlh::replay
