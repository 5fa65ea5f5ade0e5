// DLH — a network suggested for a data set and sized to a deadline (dlh-estimate suggest).
//
// The rules, each from published practice (docs/man/dlh-estimate.md, "suggest"):
//   - Images (both sides at least 8): a VGG-style CNN (Simonyan & Zisserman, ICLR 2015:
//     stacks of 3x3 convolutions, the channels doubling each time a 2x2 max-pool halves the
//     side), batch norm after every convolution (Ioffe & Szegedy, ICML 2015), then dropout
//     (Srivastava et al., JMLR 2014) and a dense head. Stages: the side is halved until it is
//     at most 7 (at most 4 stages), as VGG ends at 7x7. The members grow in width (first
//     stage's filters) and depth (convolutions a stage); the dense head has 4x the last
//     stage's filters, at least 64.
//   - Flat features (1x1 samples): an MLP of dense, batch norm, ReLU and dropout blocks.
//   - Training: SGD with Nesterov momentum 0.9, lr 0.05 at a batch of 128 (scaled linearly
//     with the batch, Goyal et al. 2017), 1 epoch of warm-up, cosine decay to 0 (Loshchilov &
//     Hutter, ICLR 2017), weight decay 5e-4, He initialisation (He et al., ICCV 2015); colour
//     images of 24 pixels or more get random crops (padding side/8) and flips (He et al.,
//     CVPR 2016, on CIFAR).
//   - Size: every member is planned by the recommender (the cluster's free resources, the
//     least energy meeting the deadline) for the stated epochs; objective accuracy takes the
//     largest member that meets the deadline, objective energy the family's base member
//     (the 32-filter CNN with one convolution a stage, the 256-unit MLP of two blocks: the
//     size small published networks use on MNIST-like sets) or the largest one below it
//     that meets the deadline.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/spec.hpp"
#include "estimator/cluster/cluster.hpp"

namespace dlh {

// What `dlh-data inspect --json` says of a data set.
struct DataFacts {
  std::string path;  // as given (the spec's "dataset")
  Shape3 shape;
  int classes = 0;
  int64_t train = 0, test = 0;
  std::vector<int64_t> histogram;  // training samples per class
  bool uint8 = true;
};

// Reads inspect --json's object; throws Error naming `origin` and the field.
DataFacts ParseDataFacts(const nlohmann::json& j, const std::string& origin);

// Runs `TOOL inspect PATH --json` (TOOL: dlh-data), which checks the file as the trainer
// loads it and says what is wrong on its own standard error; the facts with `path` set.
// Throws UsageError "PREFIX--data PATH: not a usable data set (dlh-data said why above)".
DataFacts InspectDataSet(const std::string& tool, const std::string& path,
                         const std::string& prefix);

enum class SuggestObjective { Accuracy, Energy };

struct SuggestOptions {
  double deadline_s = 0;  // > 0
  SuggestObjective objective = SuggestObjective::Accuracy;
  int epochs = 10;
  std::string name;          // the spec's name (default: the data set file's stem)
  int threads_per_rank = 0;  // Job::threads_per_rank of every member's plan (0: the cores')
};

struct SuggestedMember {
  std::string label;    // "CNN 32 filters, 1 conv a stage"
  nlohmann::json spec;  // the whole spec
  int64_t params = 0;
  bool feasible = false;  // meets the deadline on the cluster's free resources
  double total_s = 0, energy_j = 0;
  std::string allocation;  // "1 node x 2 alpha GPUs", or why none
  bool base = false;       // the family's base member
};

struct Suggestion {
  std::vector<SuggestedMember> members;  // smallest first
  int chosen = -1;                       // index into members; -1: none meets the deadline
  std::vector<std::string> why;          // the reasons, one line each
};

// The family for the data's shape, smallest first (the specs, not yet planned).
std::vector<SuggestedMember> SuggestFamily(const DataFacts& data, const SuggestOptions& options);

// Plans every member on `cluster` and chooses. Throws EstimateError for data nothing can be
// suggested for (fewer than 2 classes with training samples, an empty training split).
Suggestion Suggest(const DataFacts& data, const SuggestOptions& options, const Cluster& cluster);

}  // namespace dlh
