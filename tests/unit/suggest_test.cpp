// The network suggested for a data set (estimator/recommend/suggest.hpp): the family for a
// shape, its members' layers and training settings, and the choice on a cluster by deadline
// and objective.
#include "estimator/recommend/suggest.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "common/spec.hpp"
#include "estimator/cluster/cluster.hpp"

namespace dlh {
namespace {

DataFacts Facts(Shape3 shape, int classes, int64_t train) {
  DataFacts d;
  d.path = "/data/d.h5";
  d.shape = shape;
  d.classes = classes;
  d.train = train;
  d.test = train / 6;
  d.histogram.assign(size_t(classes), train / classes);
  return d;
}

int Count(const nlohmann::json& spec, const std::string& type) {
  int n = 0;
  for (const auto& l : spec["layers"]) n += l["type"] == type;
  return n;
}

TEST(SuggestTest, ImagesGetAVggStyleCnnPooledTo7) {
  SuggestOptions o;
  o.name = "d";
  const auto family = SuggestFamily(Facts({1, 28, 28}, 10, 60000), o);
  ASSERT_EQ(family.size(), 8u);
  for (const SuggestedMember& m : family) {
    EXPECT_EQ(Count(m.spec, "maxpool2d"), 2) << m.label;  // 28 -> 14 -> 7
    const TrainSpec spec = ParseSpec(m.spec.dump(), m.label, "");
    EXPECT_EQ(LayerShapes(spec).back().channels, 10);
    EXPECT_EQ(spec.batch_size, 128);
    EXPECT_EQ(spec.dataset, "/data/d.h5");
    EXPECT_FALSE(spec.augment.any());  // grey images: no flips
  }
  EXPECT_EQ(Count(family.front().spec, "conv2d"), 2);
  EXPECT_EQ(Count(family.back().spec, "conv2d"), 4);
  EXPECT_TRUE(family[2].base);
  EXPECT_EQ(family[2].spec["layers"][0]["filters"], 32);
  // Colour images of 32 pixels: 3 stages (32 -> 16 -> 8 -> 4), crops of 4 and flips.
  const auto cifar = SuggestFamily(Facts({3, 32, 32}, 10, 50000), o);
  EXPECT_EQ(Count(cifar.front().spec, "maxpool2d"), 3);
  EXPECT_EQ(cifar.front().spec["augment"]["crop_padding"], 4);
}

TEST(SuggestTest, FlatFeaturesGetAnMlpAndSmallSetsASmallerBatch) {
  SuggestOptions o;
  o.name = "flat";
  const auto family = SuggestFamily(Facts({20, 1, 1}, 3, 400), o);
  ASSERT_EQ(family.size(), 6u);
  EXPECT_EQ(Count(family.front().spec, "conv2d"), 0);
  EXPECT_EQ(family.front().spec["batch_size"], 32);  // at least 8 steps an epoch
  EXPECT_DOUBLE_EQ(family.front().spec["optimizer"]["lr"].get<double>(), 0.05 * 32 / 128);
  EXPECT_NO_THROW(ParseSpec(family.back().spec.dump(), "mlp", ""));
}

TEST(SuggestTest, TheDeadlineAndTheObjectiveChoose) {
  const Cluster cluster = LoadCluster("share/cluster/local.json");
  const DataFacts data = Facts({1, 28, 28}, 10, 60000);
  SuggestOptions o;
  o.name = "d";
  o.deadline_s = 600;
  const Suggestion ten = Suggest(data, o, cluster);
  ASSERT_GE(ten.chosen, 0);
  for (size_t i = 0; i < ten.members.size(); ++i)  // the largest feasible
    EXPECT_EQ(ten.members[i].feasible, int(i) <= ten.chosen) << ten.members[i].label;
  o.deadline_s = 4 * 3600;
  const Suggestion long_one = Suggest(data, o, cluster);
  EXPECT_GT(long_one.chosen, ten.chosen);
  o.objective = SuggestObjective::Energy;
  const Suggestion energy = Suggest(data, o, cluster);
  EXPECT_TRUE(energy.members[size_t(energy.chosen)].base);
  o.deadline_s = 1;
  const Suggestion none = Suggest(data, o, cluster);
  EXPECT_EQ(none.chosen, -1);
  EXPECT_NE(none.why.back().find("none of the 8 members meets"), std::string::npos);
}

TEST(SuggestTest, OneClassIsRefused) {
  DataFacts data = Facts({1, 28, 28}, 2, 100);
  data.histogram = {100, 0};
  SuggestOptions o;
  o.name = "one";
  o.deadline_s = 600;
  EXPECT_THROW(Suggest(data, o, LoadCluster("share/cluster/local.json")), EstimateError);
}

}  // namespace
}  // namespace dlh
