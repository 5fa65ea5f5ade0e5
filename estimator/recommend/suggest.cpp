// DLH — a network suggested for a data set (see suggest.hpp).
#include "estimator/recommend/suggest.hpp"

#include <algorithm>
#include <cstdio>

#include "common/capture_output.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"
#include "estimator/model/features.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh {
namespace {

constexpr int kBaseBatch = 128;
constexpr double kBaseLr = 0.05;  // at kBaseBatch; the recommender scales it with the batch

struct Size {
  int width, depth;  // CNN: first stage's filters, convolutions a stage; MLP: units, blocks
  bool base;
};
// Smallest first; the base member is the one objective energy takes.
const Size kCnnSizes[] = {{8, 1, false},  {16, 1, false}, {32, 1, true},  {32, 2, false},
                          {48, 2, false}, {64, 2, false}, {96, 2, false}, {128, 2, false}};
const Size kMlpSizes[] = {{64, 1, false},  {128, 1, false},  {256, 2, true},
                          {512, 2, false}, {1024, 2, false}, {1024, 3, false}};

bool IsImage(const Shape3& s) { return s.height >= 8 && s.width >= 8; }

// 2x2 max-pools until the side is at most 7, at most 4 (VGG ends at 7x7).
int Stages(const Shape3& s) {
  int side = std::min(s.height, s.width), stages = 0;
  while (side > 7 && stages < 4) {
    side /= 2;
    ++stages;
  }
  return std::max(stages, 1);
}

int Batch(int64_t train) {
  int batch = kBaseBatch;
  while (batch > 8 && int64_t(batch) * 8 > train) batch /= 2;  // at least 8 steps an epoch
  return batch;
}

nlohmann::json Training(const DataFacts& data, const SuggestOptions& o, nlohmann::json layers) {
  const int batch = Batch(data.train);
  nlohmann::json spec = {{"name", o.name},
                         {"input",
                          {{"channels", data.shape.channels},
                           {"height", data.shape.height},
                           {"width", data.shape.width}}},
                         {"classes", data.classes},
                         {"init", "he_normal"},
                         {"layers", std::move(layers)},
                         {"optimizer",
                          {{"type", "sgd"},
                           {"lr", kBaseLr * batch / kBaseBatch},
                           {"momentum", 0.9},
                           {"nesterov", true},
                           {"weight_decay", 5e-4}}},
                         {"schedule", {{"warmup_epochs", 1}, {"decay", "cosine"}, {"min_lr", 0}}},
                         {"batch_size", batch},
                         {"epochs", o.epochs},
                         {"seed", 1},
                         {"dataset", data.path}};
  if (data.shape.channels == 3 && data.shape.height >= 24 && data.shape.width >= 24)
    spec["augment"] = {{"crop_padding", std::max(1, data.shape.height / 8)}, {"flip", true}};
  return spec;
}

SuggestedMember Cnn(const DataFacts& data, const SuggestOptions& o, const Size& size) {
  nlohmann::json layers = nlohmann::json::array();
  const int stages = Stages(data.shape);
  int filters = size.width;
  for (int s = 0; s < stages; ++s, filters *= 2) {
    for (int c = 0; c < size.depth; ++c) {
      layers.push_back({{"type", "conv2d"}, {"filters", filters}, {"kernel", 3}, {"padding", 1}});
      layers.push_back({{"type", "batchnorm"}});
      layers.push_back({{"type", "relu"}});
    }
    layers.push_back({{"type", "maxpool2d"}, {"kernel", 2}});
  }
  const int last = filters / 2;
  layers.push_back({{"type", "flatten"}});
  layers.push_back({{"type", "dropout"}, {"rate", 0.3}});
  layers.push_back({{"type", "dense"}, {"units", std::max(64, 4 * last)}});
  layers.push_back({{"type", "relu"}});
  layers.push_back({{"type", "dropout"}, {"rate", 0.3}});
  layers.push_back({{"type", "dense"}, {"units", data.classes}});
  SuggestedMember m;
  m.label = "CNN " + std::to_string(size.width) + " filters, " + std::to_string(size.depth) +
            " conv" + (size.depth > 1 ? "s" : "") + " a stage";
  m.spec = Training(data, o, std::move(layers));
  m.base = size.base;
  return m;
}

SuggestedMember Mlp(const DataFacts& data, const SuggestOptions& o, const Size& size) {
  nlohmann::json layers = nlohmann::json::array();
  layers.push_back({{"type", "flatten"}});
  for (int b = 0; b < size.depth; ++b) {
    layers.push_back({{"type", "dense"}, {"units", size.width}});
    layers.push_back({{"type", "batchnorm"}});
    layers.push_back({{"type", "relu"}});
    layers.push_back({{"type", "dropout"}, {"rate", 0.2}});
  }
  layers.push_back({{"type", "dense"}, {"units", data.classes}});
  SuggestedMember m;
  m.label = "MLP " + std::to_string(size.depth) + " x " + std::to_string(size.width) + " units";
  m.spec = Training(data, o, std::move(layers));
  m.base = size.base;
  return m;
}

std::string AllocationText(const Allocation& a) {
  std::string text;
  for (const Part& p : a.parts) text += (text.empty() ? "" : " + ") + PartText(p);
  return text;
}

std::string Balance(const DataFacts& d) {
  const auto [lo, hi] = std::minmax_element(d.histogram.begin(), d.histogram.end());
  if (*lo == 0) return "some class has no training sample";
  const double ratio = double(*hi) / double(*lo);
  char buf[160];
  if (ratio <= 1.5)
    std::snprintf(buf, sizeof buf, "balanced (classes within %.1fx of each other)", ratio);
  else
    std::snprintf(buf, sizeof buf,
                  "unbalanced: the largest class has %.1fx the samples of the smallest, so "
                  "accuracy hides the small ones (the report's per-class recall shows them)",
                  ratio);
  return buf;
}

}  // namespace

DataFacts ParseDataFacts(const nlohmann::json& j, const std::string& origin) {
  auto need = [&](bool ok, const std::string& field) {
    if (!ok) throw Error(origin + ": " + field + ": missing or malformed");
  };
  need(j.is_object(), "(the object)");
  DataFacts d;
  need(j.contains("classes") && j["classes"].is_number_integer(), "classes");
  d.classes = j["classes"].get<int>();
  need(j.contains("train") && j["train"].is_object(), "train");
  const nlohmann::json& t = j["train"];
  need(t.contains("samples") && t["samples"].is_number_integer(), "train.samples");
  need(t.contains("shape") && t["shape"].is_array() && t["shape"].size() == 3, "train.shape");
  need(t.contains("histogram") && t["histogram"].is_array(), "train.histogram");
  d.train = t["samples"].get<int64_t>();
  d.shape = {t["shape"][0].get<int>(), t["shape"][1].get<int>(), t["shape"][2].get<int>()};
  d.histogram = t["histogram"].get<std::vector<int64_t>>();
  need(j.contains("test") && j["test"].contains("samples"), "test.samples");
  d.test = j["test"]["samples"].get<int64_t>();
  d.uint8 = j.value("element", "uint8") == "uint8";
  return d;
}

DataFacts InspectDataSet(const std::string& tool, const std::string& path,
                         const std::string& prefix) {
  std::string text;
  if (RunCapturingOutput({tool, "inspect", path, "--json"}, &text) != 0)
    throw UsageError(prefix + path + ": not a usable data set (dlh-data said why above)");
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw Error(tool + " inspect " + path + " --json printed no JSON");
  DataFacts facts = ParseDataFacts(j, tool + " inspect " + path);
  facts.path = path;
  return facts;
}

std::vector<SuggestedMember> SuggestFamily(const DataFacts& data, const SuggestOptions& options) {
  std::vector<SuggestedMember> out;
  if (IsImage(data.shape))
    for (const Size& s : kCnnSizes) out.push_back(Cnn(data, options, s));
  else
    for (const Size& s : kMlpSizes) out.push_back(Mlp(data, options, s));
  return out;
}

Suggestion Suggest(const DataFacts& data, const SuggestOptions& options, const Cluster& cluster) {
  if (data.train < 2)
    throw EstimateError(data.path + ": the training split has no samples to learn from");
  std::string present;
  int classes_present = 0;
  for (size_t k = 0; k < data.histogram.size(); ++k)
    if (data.histogram[k] > 0) {
      ++classes_present;
      present += (present.empty() ? "" : ", ") + std::to_string(k);
    }
  if (classes_present < 2)
    throw EstimateError(
        data.path + ": the training labels hold " + std::to_string(classes_present) + " class" +
        (present.empty() ? "" : " (" + present + ")") + " of " + std::to_string(data.classes) +
        ": a classifier needs samples of at least 2 (dlh-data inspect " + data.path + ")");
  Suggestion s;
  s.members = SuggestFamily(data, options);
  for (SuggestedMember& m : s.members) {
    Job job;
    job.spec = ParseSpec(m.spec.dump(), "suggest: " + m.label, "");
    job.features = ComputeFeatures(job.spec);
    m.params = int64_t(job.features.params);
    job.samples = data.train;
    job.eval_samples = data.test;
    job.epochs = options.epochs;
    job.deadline_s = options.deadline_s;
    job.threads_per_rank = options.threads_per_rank;
    job.objective = Objective::Energy;
    job.top = 1;
    try {
      const Recommendation rec = Recommend(job, cluster);
      const Allocation& a = rec.feasible ? rec.ranked.front() : rec.fastest;
      m.feasible = rec.feasible;
      m.total_s = a.total_s;
      m.energy_j = a.energy_j;
      m.allocation = AllocationText(a);
    } catch (const EstimateError& e) {
      m.allocation = std::string("none: ") + e.what();
    }
  }
  int largest = -1, base = -1;
  for (int i = 0; i < int(s.members.size()); ++i) {
    if (s.members[size_t(i)].feasible) largest = i;
    if (s.members[size_t(i)].base) base = i;
  }
  const bool energy = options.objective == SuggestObjective::Energy;
  s.chosen = energy ? std::min(base, largest) : largest;
  if (energy && s.chosen >= 0 && !s.members[size_t(s.chosen)].feasible) s.chosen = largest;

  const bool image = IsImage(data.shape);
  char line[512];
  std::snprintf(line, sizeof line, "data: %lld training samples of %dx%dx%d (%s), %d classes, %s",
                (long long)data.train, data.shape.channels, data.shape.height, data.shape.width,
                data.uint8 ? "uint8" : "float32", data.classes, Balance(data).c_str());
  s.why.push_back(line);
  if (image) {
    const int stages = Stages(data.shape);
    std::snprintf(line, sizeof line,
                  "family: images, so a VGG-style CNN (stacked 3x3 convolutions with batch norm, "
                  "the filters doubling at each of %d 2x2 max-pool%s, dropout and a dense head; "
                  "Simonyan & Zisserman 2015, Ioffe & Szegedy 2015)",
                  stages, stages > 1 ? "s" : "");
  } else {
    std::snprintf(line, sizeof line,
                  "family: %s, so an MLP (dense, batch norm, ReLU and dropout blocks)",
                  data.shape.height == 1 && data.shape.width == 1 ? "flat features"
                                                                  : "images too small to pool");
  }
  s.why.push_back(line);
  const nlohmann::json& spec = s.members.front().spec;
  std::snprintf(line, sizeof line,
                "training: %d epochs, batch %d, SGD with Nesterov momentum, lr %g (Goyal et al. "
                "2017's linear scaling from 0.05 at 128), 1 epoch of warm-up and a cosine decay%s",
                options.epochs, spec["batch_size"].get<int>(),
                spec["optimizer"]["lr"].get<double>(),
                spec.contains("augment") ? ", random crops and flips" : "");
  s.why.push_back(line);
  const std::string deadline = HumanDuration(options.deadline_s);
  if (s.chosen < 0) {
    const SuggestedMember& smallest = s.members.front();
    s.why.push_back("none of the " + std::to_string(s.members.size()) + " members meets the " +
                    deadline + " deadline: the smallest, " + smallest.label + ", needs " +
                    (smallest.total_s > 0
                         ? HumanDuration(smallest.total_s) + " on " + smallest.allocation
                         : smallest.allocation) +
                    " (a longer deadline or fewer --epochs)");
    return s;
  }
  const SuggestedMember& c = s.members[size_t(s.chosen)];
  std::string rule;
  if (!energy)
    rule = "the largest of the " + std::to_string(s.members.size()) + " members that meets it";
  else if (c.base)
    rule = "objective energy: the family's base size, which meets it";
  else
    rule = "objective energy: the largest below the family's base size that meets it";
  std::snprintf(line, sizeof line,
                "chosen: %s (%lld parameters), %s: predicted %s on %s, %s, "
                "deadline %s",
                c.label.c_str(), (long long)c.params, rule.c_str(),
                HumanDuration(c.total_s).c_str(), c.allocation.c_str(),
                FormatEnergy(c.energy_j).c_str(), deadline.c_str());
  s.why.push_back(line);
  return s;
}

}  // namespace dlh
