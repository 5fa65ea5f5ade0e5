// DLH — a classifier's results analysed (see results.hpp).
#include "launcher/predict/results.hpp"

#include <algorithm>
#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/transform_width.hpp>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace dlh {
namespace {

nlohmann::json Ratio(int64_t num, int64_t den) {
  return den > 0 ? nlohmann::json(double(num) / double(den)) : nlohmann::json(nullptr);
}

void PutLe(std::string* out, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(char((v >> (8 * i)) & 0xff));
}

}  // namespace

std::vector<int64_t> MisclassifiedToShow(const Predictions& p, int limit) {
  std::vector<int64_t> wrong;
  for (size_t i = 0; i < p.labels.size(); ++i)
    if (p.predicted[i] != p.labels[i]) wrong.push_back(int64_t(i));
  // The surest mistakes say most about the model (and about labels that may be wrong).
  std::stable_sort(wrong.begin(), wrong.end(), [&](int64_t a, int64_t b) {
    return p.confidence[size_t(a)] > p.confidence[size_t(b)];
  });
  if (limit >= 0 && wrong.size() > size_t(limit)) wrong.resize(size_t(limit));
  return wrong;
}

nlohmann::json AnalyseResults(const Predictions& p, const ResultsOptions& o) {
  const size_t n = p.labels.size();
  if (p.classes < 1 || p.predicted.size() != n || p.confidence.size() != n)
    throw std::invalid_argument("results: predictions and labels differ in number");
  if (!o.class_names.empty() && o.class_names.size() != size_t(p.classes))
    throw std::invalid_argument("results: " + std::to_string(o.class_names.size()) +
                                " class names for " + std::to_string(p.classes) + " classes");
  const size_t k = size_t(p.classes);
  std::vector<std::vector<int64_t>> confusion(k, std::vector<int64_t>(k, 0));
  int64_t correct = 0;
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = p.labels[i], q = p.predicted[i];
    if (t < 0 || size_t(t) >= k || q < 0 || size_t(q) >= k)
      throw std::invalid_argument("results: sample " + std::to_string(i) +
                                  ": a class outside [0, " + std::to_string(k) + ")");
    ++confusion[size_t(t)][size_t(q)];
    correct += t == q;
  }
  auto name = [&](size_t c) {
    return o.class_names.empty() ? std::to_string(c) : o.class_names[c];
  };
  nlohmann::json per_class = nlohmann::json::array(), names = nlohmann::json::array();
  double f1_sum = 0;
  int f1_count = 0;
  for (size_t c = 0; c < k; ++c) {
    int64_t support = 0, predicted = 0;
    for (size_t j = 0; j < k; ++j) support += confusion[c][j], predicted += confusion[j][c];
    const int64_t hit = confusion[c][c];
    const nlohmann::json precision = Ratio(hit, predicted), recall = Ratio(hit, support);
    nlohmann::json f1 = nullptr;
    if (precision.is_number() && recall.is_number()) {
      const double pr = precision.get<double>(), rc = recall.get<double>();
      f1 = pr + rc > 0 ? 2 * pr * rc / (pr + rc) : 0.0;
    } else if (support > 0) {
      f1 = 0.0;  // samples of the class, none predicted as it
    }
    if (f1.is_number()) f1_sum += f1.get<double>(), ++f1_count;
    per_class.push_back({{"class", c},
                         {"name", name(c)},
                         {"support", support},
                         {"precision", precision},
                         {"recall", recall},
                         {"f1", f1}});
    names.push_back(name(c));
  }
  struct Pair {
    size_t truth, predicted;
    int64_t count;
  };
  std::vector<Pair> pairs;
  for (size_t t = 0; t < k; ++t)
    for (size_t q = 0; q < k; ++q)
      if (t != q && confusion[t][q] > 0) pairs.push_back({t, q, confusion[t][q]});
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const Pair& a, const Pair& b) { return a.count > b.count; });
  if (pairs.size() > size_t(std::max(0, o.most_confused))) pairs.resize(size_t(o.most_confused));
  nlohmann::json confused = nlohmann::json::array();
  for (const Pair& x : pairs) {
    const int64_t support =
        std::accumulate(confusion[x.truth].begin(), confusion[x.truth].end(), int64_t(0));
    confused.push_back({{"true", x.truth},
                        {"predicted", x.predicted},
                        {"true_name", name(x.truth)},
                        {"predicted_name", name(x.predicted)},
                        {"count", x.count},
                        {"share_of_true", Ratio(x.count, support)}});
  }
  nlohmann::json wrong = nlohmann::json::array();
  for (int64_t i : MisclassifiedToShow(p, o.misclassified))
    wrong.push_back({{"index", i},
                     {"true", p.labels[size_t(i)]},
                     {"predicted", p.predicted[size_t(i)]},
                     {"confidence", p.confidence[size_t(i)]}});
  return {{"format_version", 1},
          {"samples", n},
          {"correct", correct},
          {"accuracy", Ratio(correct, int64_t(n))},
          {"classes", k},
          {"class_names", names},
          {"confusion", confusion},
          {"per_class", per_class},
          {"macro_f1", f1_count > 0 ? nlohmann::json(f1_sum / f1_count) : nlohmann::json(nullptr)},
          {"most_confused", confused},
          {"misclassified", wrong}};
}

std::string GreyBmpBase64(const float* pixels, const Shape3& shape) {
  const int w = shape.width, h = shape.height;
  if (w <= 0 || h <= 0 || shape.channels <= 0) return {};
  float lo = pixels[0], hi = pixels[0];
  for (int64_t i = 0; i < int64_t(w) * h; ++i)
    lo = std::min(lo, pixels[i]), hi = std::max(hi, pixels[i]);
  const float span = hi > lo ? hi - lo : 1;
  // 24-bit BMP (no palette), rows bottom-up, each padded to 4 bytes.
  const uint32_t row = uint32_t((3 * w + 3) / 4 * 4), image = row * uint32_t(h);
  std::string bmp = "BM";
  PutLe(&bmp, 54 + image, 4);
  PutLe(&bmp, 0, 4);
  PutLe(&bmp, 54, 4);
  PutLe(&bmp, 40, 4);
  PutLe(&bmp, uint32_t(w), 4);
  PutLe(&bmp, uint32_t(h), 4);
  PutLe(&bmp, 1, 2);
  PutLe(&bmp, 24, 2);
  for (int i = 0; i < 6; ++i) PutLe(&bmp, 0, 4);  // no compression, sizes and palette unset
  for (int y = h - 1; y >= 0; --y) {
    for (int x = 0; x < w; ++x) {
      const float v = (pixels[int64_t(y) * w + x] - lo) / span;
      const char g = char(std::lround(255 * std::min(1.0f, std::max(0.0f, v))));
      bmp.append(3, g);
    }
    bmp.append(row - uint32_t(3 * w), '\0');
  }
  using namespace boost::archive::iterators;
  using Encode = base64_from_binary<transform_width<std::string::const_iterator, 6, 8>>;
  std::string out(Encode(bmp.begin()), Encode(bmp.end()));
  out.append((3 - bmp.size() % 3) % 3, '=');
  return out;
}

}  // namespace dlh
