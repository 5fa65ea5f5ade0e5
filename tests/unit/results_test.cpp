// A classifier's results analysed (launcher/predict/results.hpp), by hand-counted cases.
#include "launcher/predict/results.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace dlh {
namespace {

// 3 classes, 8 samples: class 2 is never predicted; 0 is taken for 1 twice.
Predictions Example() {
  Predictions p;
  p.classes = 3;
  p.labels = {0, 0, 0, 1, 1, 1, 2, 0};
  p.predicted = {0, 1, 1, 1, 1, 0, 1, 0};
  p.confidence = {0.9f, 0.8f, 0.95f, 0.7f, 0.6f, 0.55f, 0.8f, 0.99f};
  return p;
}

TEST(ResultsTest, ConfusionAndPerClassScoresByHand) {
  ResultsOptions o;
  o.class_names = {"cat", "dog", "bird"};
  const nlohmann::json r = AnalyseResults(Example(), o);
  EXPECT_EQ(r["samples"], 8);
  EXPECT_EQ(r["correct"], 4);
  EXPECT_DOUBLE_EQ(r["accuracy"].get<double>(), 0.5);
  EXPECT_EQ(r["confusion"], nlohmann::json({{2, 2, 0}, {1, 2, 0}, {0, 1, 0}}));
  const nlohmann::json& cat = r["per_class"][0];
  EXPECT_EQ(cat["name"], "cat");
  EXPECT_EQ(cat["support"], 4);
  EXPECT_DOUBLE_EQ(cat["precision"].get<double>(), 2.0 / 3);  // 2 of the 3 called cat
  EXPECT_DOUBLE_EQ(cat["recall"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(cat["f1"].get<double>(), 2 * (2.0 / 3) * 0.5 / (2.0 / 3 + 0.5));
  // Never predicted: no precision to give; its samples all missed: F1 0.
  const nlohmann::json& bird = r["per_class"][2];
  EXPECT_TRUE(bird["precision"].is_null());
  EXPECT_DOUBLE_EQ(bird["recall"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(bird["f1"].get<double>(), 0);
  // The pairs by count, then in (true, predicted) order.
  ASSERT_EQ(r["most_confused"].size(), 3u);
  EXPECT_EQ(r["most_confused"][0]["true_name"], "cat");
  EXPECT_EQ(r["most_confused"][0]["predicted_name"], "dog");
  EXPECT_EQ(r["most_confused"][0]["count"], 2);
  EXPECT_DOUBLE_EQ(r["most_confused"][0]["share_of_true"].get<double>(), 0.5);
  EXPECT_EQ(r["most_confused"][1]["true"], 1);
  EXPECT_EQ(r["most_confused"][2]["true"], 2);
}

TEST(ResultsTest, SurestMistakesFirstTiesByIndex) {
  Predictions p = Example();
  EXPECT_EQ(MisclassifiedToShow(p, 10), (std::vector<int64_t>{2, 1, 6, 5}));
  EXPECT_EQ(MisclassifiedToShow(p, 2), (std::vector<int64_t>{2, 1}));
  p.confidence[6] = 0.8f;  // equal to sample 1's: the lower index first
  EXPECT_EQ(MisclassifiedToShow(p, 3), (std::vector<int64_t>{2, 1, 6}));
  ResultsOptions o;
  o.misclassified = 1;
  const nlohmann::json r = AnalyseResults(p, o);
  ASSERT_EQ(r["misclassified"].size(), 1u);
  EXPECT_EQ(r["misclassified"][0]["index"], 2);
  EXPECT_EQ(r["class_names"], nlohmann::json({"0", "1", "2"}));
}

TEST(ResultsTest, InconsistentInputIsRefused) {
  Predictions p = Example();
  p.predicted.pop_back();
  EXPECT_THROW(AnalyseResults(p, {}), std::invalid_argument);
  p = Example();
  p.labels[0] = 3;
  EXPECT_THROW(AnalyseResults(p, {}), std::invalid_argument);
  ResultsOptions o;
  o.class_names = {"a", "b"};
  EXPECT_THROW(AnalyseResults(Example(), o), std::invalid_argument);
}

TEST(ResultsTest, GreyBmpOfASample) {
  const float pixels[6] = {-1, 0, 1, 1, 0, -1};  // 2 rows of 3, mapped from [-1, 1]
  const std::string b64 = GreyBmpBase64(pixels, Shape3{1, 2, 3});
  // "BM", then a file of 54 + 2 rows x 12 bytes (9 padded to 12) = 78 bytes: 104 characters.
  EXPECT_EQ(b64.substr(0, 4), "Qk1O");
  EXPECT_EQ(b64.size(), 104u);
}

}  // namespace
}  // namespace dlh
