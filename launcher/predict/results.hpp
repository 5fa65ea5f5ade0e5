// DLH — a classifier's results on a labelled split, analysed: accuracy, the confusion matrix,
// per-class precision, recall and F1, the pairs of classes most often confused, and the
// misclassified samples the model was surest of (with their pixels, for the report's grid).
// Written as results.json beside a run's summary.json (docs/reference/results.md); pure
// arithmetic on the predictions, so the report and `dlh-launch predict` agree.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/spec.hpp"

namespace dlh {

struct Predictions {
  int classes = 0;
  std::vector<int32_t> labels;     // the true class of each sample
  std::vector<int32_t> predicted;  // the argmax of the logits (the first on ties)
  std::vector<float> confidence;   // the softmax probability of `predicted`
};

struct ResultsOptions {
  std::vector<std::string> class_names;  // index = class; empty: "0", "1", ...
  int most_confused = 10;                // pairs listed
  int misclassified = 24;                // samples kept for the grid
};

// The misclassified samples to show: the ones predicted wrongly with the highest confidence
// (ties: the lower index), at most `limit`.
std::vector<int64_t> MisclassifiedToShow(const Predictions& p, int limit);

// results.json's analysis (format_version 1): "samples", "accuracy", "classes",
// "class_names", "confusion" (rows: true class, columns: predicted), "per_class" [{class,
// name, support, precision, recall, f1}], "macro_f1", "most_confused" [{true, predicted,
// count, share of the true class}], "misclassified" [{index, true, predicted, confidence}]
// (MisclassifiedToShow's). A class never predicted has precision null; one without
// samples has recall null. Throws std::invalid_argument on inconsistent input.
nlohmann::json AnalyseResults(const Predictions& p, const ResultsOptions& o);

// A misclassified sample's image for the grid: its stored values as 8-bit grey (one
// channel: the first; mapped from [lo, hi] of the sample), base64 of a BMP file a browser
// shows as an <img src="data:image/bmp;base64,...">.
std::string GreyBmpBase64(const float* pixels, const Shape3& shape);

}  // namespace dlh
