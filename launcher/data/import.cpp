// DLH — the one path from a user's own data to a DLH data set file (see import.hpp).
#include "launcher/data/import.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>

#include "common/error.hpp"
#include "launcher/data/dataset_write.hpp"
#include "launcher/data/input_stats.hpp"
#include "launcher/nn/random.hpp"
#include "launcher/storage/h5.hpp"

namespace dlh {
namespace {

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string out;
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? " x " : "") + std::to_string(dims[i]);
  return dims.empty() ? "a scalar" : out;
}

bool LooksLikeChannels(int64_t n) { return n == 1 || n == 3 || n == 4; }

template <typename T>
void SetImagesOf(ImportedSplit* split, const std::vector<int64_t>& dims, ImageLayout layout,
                 std::vector<T> values, const std::string& where) {
  if (dims.size() < 2 || dims.size() > 4)
    throw DataError(where + ": images are " + DimsText(dims) +
                    "; expected N x F, N x H x W, N x C x H x W or N x H x W x C");
  for (int64_t d : dims)
    if (d <= 0 || d > INT_MAX) throw DataError(where + ": invalid shape " + DimsText(dims));
  const int64_t n = dims[0];
  bool nhwc = false;
  Shape3 s;
  if (dims.size() == 2) {
    s = Shape3{1, 1, int(dims[1])};
  } else if (dims.size() == 3) {
    s = Shape3{1, int(dims[1]), int(dims[2])};
  } else {
    nhwc =
        layout == ImageLayout::kNHWC ||
        (layout == ImageLayout::kAuto && LooksLikeChannels(dims[3]) && !LooksLikeChannels(dims[1]));
    s = nhwc ? Shape3{int(dims[3]), int(dims[1]), int(dims[2])}
             : Shape3{int(dims[1]), int(dims[2]), int(dims[3])};
  }
  if (s.elements() > (int64_t(1) << 26))
    throw DataError(where + ": samples of " + DimsText(dims) + " are too large (over 2^26 values)");
  if (int64_t(values.size()) / s.elements() != n || int64_t(values.size()) % s.elements() != 0)
    throw DataError(where + ": holds " + std::to_string(values.size()) + " values, its shape " +
                    DimsText(dims) + " needs " + std::to_string(n * s.elements()));
  if (nhwc) {  // one sample at a time: H x W x C -> C x H x W
    const size_t plane = size_t(s.height) * s.width, c = size_t(s.channels);
    std::vector<T> sample(plane * c);
    for (int64_t i = 0; i < n; ++i) {
      T* x = values.data() + size_t(i) * plane * c;
      for (size_t p = 0; p < plane; ++p)
        for (size_t k = 0; k < c; ++k) sample[k * plane + p] = x[p * c + k];
      std::copy(sample.begin(), sample.end(), x);
    }
  }
  split->shape = s;
  if constexpr (std::is_same_v<T, uint8_t>) {
    split->bytes = std::move(values);
    split->floats.clear();
  } else {
    split->floats = std::move(values);
    split->bytes.clear();
  }
}

void ToFloatsInPlace(ImportedSplit* s) {
  if (!s->floats.empty() || s->bytes.empty()) return;
  s->floats.resize(s->bytes.size());
  for (size_t i = 0; i < s->bytes.size(); ++i) s->floats[i] = float(s->bytes[i]) / 255.0f;
  s->bytes = {};
}

std::string SampleText(const ImportedSplit& s, size_t i) {
  std::string out = "sample " + std::to_string(i);
  if (i < s.origins.size() && !s.origins[i].empty()) out += " (" + s.origins[i] + ")";
  return out;
}

// Moves the samples at `indices` (sorted) out of `from` into a new split.
ImportedSplit TakeSamples(const ImportedSplit& from, const std::vector<size_t>& indices) {
  ImportedSplit out;
  out.shape = from.shape;
  const size_t e = size_t(from.shape.elements());
  auto copy = [&](const auto& src, auto& dst) {
    if (src.empty()) return;
    dst.resize(indices.size() * e);
    for (size_t k = 0; k < indices.size(); ++k)
      std::copy_n(src.begin() + indices[k] * e, e, dst.begin() + k * e);
  };
  copy(from.bytes, out.bytes);
  copy(from.floats, out.floats);
  for (size_t i : indices) {
    out.labels.push_back(from.labels[i]);
    if (i < from.origins.size()) out.origins.push_back(from.origins[i]);
  }
  return out;
}

// How many of each class a held-out split of n_test takes: each class its share of n_test
// (largest remainders, so that the shares add up to n_test), every class of two samples or
// more at least one, and none all of its samples. Drawn without regard to class, a class of
// 6 images in 167 got no test sample, and predict's accuracy and macro F1 left it out unsaid.
std::vector<int64_t> StratifiedQuotas(const std::vector<int64_t>& labels, int64_t n_test) {
  int64_t top = 0;
  for (int64_t l : labels) top = std::max(top, l);
  std::vector<int64_t> count(size_t(top) + 1, 0), quota(count.size(), 0);
  for (int64_t l : labels) ++count[size_t(l)];
  const double n = double(labels.size());
  std::vector<std::pair<double, size_t>> remainder;
  int64_t given = 0;
  for (size_t c = 0; c < count.size(); ++c) {
    const double share = double(n_test) * double(count[c]) / n;
    quota[c] = int64_t(std::floor(share));
    given += quota[c];
    remainder.emplace_back(share - double(quota[c]), c);
  }
  std::sort(remainder.begin(), remainder.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  for (size_t k = 0; given < n_test && k < remainder.size(); ++k, ++given)
    ++quota[remainder[k].second];
  // Every class of two or more its one test sample, taken from the class that has the most.
  for (size_t c = 0; c < count.size(); ++c) {
    if (count[c] < 2 || quota[c] > 0) continue;
    const auto most = std::max_element(quota.begin(), quota.end()) - quota.begin();
    if (quota[size_t(most)] < 2) break;
    --quota[size_t(most)];
    quota[c] = 1;
  }
  for (size_t c = 0; c < count.size(); ++c)
    quota[c] = std::min(quota[c], std::max<int64_t>(0, count[c] - 1));
  return quota;
}

// A fixed shuffle of the training samples (the same for a seed whatever the library) puts
// the first of each class in it, as many as StratifiedQuotas gives the class, into the test
// split; both keep the file's order.
void HoldOut(ImportedData* d, const ImportOptions& o) {
  const int64_t n = d->train.count();
  if (!(o.test_fraction > 0 && o.test_fraction < 1))
    throw DataError(d->source_file + ": no test split given, and the held-out fraction " +
                    std::to_string(o.test_fraction) + " is not within (0, 1)");
  const int64_t n_test = std::max<int64_t>(1, std::llround(double(n) * o.test_fraction));
  if (n_test >= n)
    throw DataError(d->source_file + ": " + std::to_string(n) +
                    " samples are too few to hold out a test split");
  std::vector<size_t> order(static_cast<size_t>(n));
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 gen(SplitMix64(o.seed ^ 0x686f6c646f7574ULL));
  for (size_t i = order.size() - 1; i > 0; --i)
    std::swap(order[i], order[UniformBelow(gen, uint64_t(i) + 1)]);
  // The first of each class in that order, as many as its share (StratifiedQuotas).
  const std::vector<int64_t> quota = StratifiedQuotas(d->train.labels, n_test);
  std::vector<int64_t> taken(quota.size(), 0);
  std::vector<size_t> test, train;
  for (size_t i : order) {
    const size_t c = size_t(d->train.labels[i]);
    (taken[c] < quota[c] ? test : train).push_back(i);
    if (taken[c] < quota[c]) ++taken[c];
  }
  if (test.empty())
    throw DataError(d->source_file +
                    ": no class has two samples: too few to hold out a test split");
  std::sort(test.begin(), test.end());
  std::sort(train.begin(), train.end());
  d->test = TakeSamples(d->train, test);
  d->train = TakeSamples(d->train, train);
  d->has_test = true;
}

bool NoSampleOfClass0(const ImportedData& d) {
  for (const ImportedSplit* s : {&d.train, &d.test})
    for (int64_t l : s->labels)
      if (l == 0) return false;
  return true;
}

int CountClasses(const ImportedData& d) {
  if (!d.class_names.empty()) return int(d.class_names.size());
  if (d.classes > 0) return d.classes;
  int64_t top = -1;
  for (const ImportedSplit* s : {&d.train, &d.test})
    for (int64_t l : s->labels) top = std::max(top, l);
  return int(std::clamp<int64_t>(top + 1, 2, INT_MAX));
}

void CheckLabels(const ImportedData& d, const ImportedSplit& s, const char* split, int classes) {
  for (size_t i = 0; i < s.labels.size(); ++i)
    if (s.labels[i] < 0 || s.labels[i] >= classes)
      throw DataError((s.labels_file.empty() ? d.source_file : s.labels_file) + ": " + split + " " +
                      SampleText(s, i) + ": label " + std::to_string(s.labels[i]) +
                      " is outside [0, " + std::to_string(classes) + ")");
}

void CheckFinite(const ImportedData& d, const ImportedSplit& s, const char* split) {
  const size_t e = size_t(s.shape.elements());
  for (size_t i = 0; i < s.floats.size(); ++i)
    if (!std::isfinite(s.floats[i]))
      throw DataError((s.images_file.empty() ? d.source_file : s.images_file) + ": " + split + " " +
                      SampleText(s, i / e) + ": holds a non-finite value at element " +
                      std::to_string(i % e));
}

// Means and standard deviations of the training values as they load (bytes scaled to [0, 1]):
// one per channel, or one per element for a row of features (input_stats.hpp). Bytes of a
// few channels go through a histogram each, which keeps the sums exact however many there
// are. A group whose values are all equal gets a std of 1: it carries nothing to learn, and
// subtracting its mean makes it 0.
struct Moments {
  std::vector<double> mean, stddev;
  bool all_constant = true;
};

Moments MomentsOf(const ImportedSplit& s) {
  const size_t e = size_t(s.shape.elements());
  const bool per_element = StatsPerElement(s.shape);
  const size_t groups = per_element ? e : size_t(s.shape.channels), plane = e / groups;
  std::vector<double> n(groups, 0), sum(groups, 0), sum_sq(groups, 0);
  auto group = [&](size_t i) { return (i % e) / plane; };
  if (s.is_bytes() && groups <= 64) {
    std::vector<uint64_t> hist(groups * 256, 0);
    for (size_t i = 0; i < s.bytes.size(); ++i) ++hist[group(i) * 256 + s.bytes[i]];
    for (size_t g = 0; g < groups; ++g)
      for (int v = 0; v < 256; ++v) {
        const double x = v / 255.0, k = double(hist[g * 256 + size_t(v)]);
        n[g] += k;
        sum[g] += k * x;
        sum_sq[g] += k * x * x;
      }
  } else if (s.is_bytes()) {
    for (size_t i = 0; i < s.bytes.size(); ++i) {
      const double x = s.bytes[i] / 255.0;
      const size_t g = group(i);
      n[g] += 1;
      sum[g] += x;
      sum_sq[g] += x * x;
    }
  } else {
    for (size_t i = 0; i < s.floats.size(); ++i) {
      const float v = s.floats[i];
      const size_t g = group(i);
      n[g] += 1;
      sum[g] += v;
      sum_sq[g] += double(v) * v;
    }
  }
  Moments m;
  for (size_t g = 0; g < groups; ++g) {
    const double mean = n[g] > 0 ? sum[g] / n[g] : 0;
    const double sd = n[g] > 0 ? std::sqrt(std::max(0.0, sum_sq[g] / n[g] - mean * mean)) : 0;
    m.mean.push_back(mean);
    m.stddev.push_back(sd > 0 ? sd : 1.0);
    if (sd > 0) m.all_constant = false;
  }
  return m;
}

void WriteSplit(hid_t f, const std::string& split, const ImportedSplit& s) {
  const std::vector<hsize_t> dims = {hsize_t(s.count()), hsize_t(s.shape.channels),
                                     hsize_t(s.shape.height), hsize_t(s.shape.width)};
  if (s.is_bytes())
    h5::WriteBytes(f, "/" + split + "/images", dims, s.bytes.data());
  else
    h5::WriteFloats(f, "/" + split + "/images", dims, s.floats.data());
  std::vector<int32_t> labels(s.labels.begin(), s.labels.end());
  h5::WriteInts(f, "/" + split + "/labels", {hsize_t(labels.size())}, labels.data());
}

}  // namespace

void SetImages(ImportedSplit* split, const std::vector<int64_t>& dims, ImageLayout layout,
               std::vector<uint8_t> bytes, const std::string& where) {
  SetImagesOf(split, dims, layout, std::move(bytes), where);
}

void SetImages(ImportedSplit* split, const std::vector<int64_t>& dims, ImageLayout layout,
               std::vector<float> floats, const std::string& where) {
  SetImagesOf(split, dims, layout, std::move(floats), where);
}

std::vector<std::string> WriteImportedDataset(ImportedData d, const ImportOptions& o,
                                              const std::string& out_path) {
  if (d.source_file.empty()) d.source_file = out_path;
  if (d.train.count() == 0) throw DataError(d.source_file + ": no training samples");
  for (const ImportedSplit* s : {&d.train, &d.test}) {
    const size_t values = s->is_bytes() ? s->bytes.size() : s->floats.size();
    if (s->count() > 0 && values != size_t(s->count()) * size_t(s->shape.elements()))
      throw DataError(d.source_file + ": " + std::to_string(s->count()) + " labels for " +
                      std::to_string(values / std::max<size_t>(1, s->shape.elements())) +
                      " samples");
  }
  if (d.has_test && d.test.count() == 0)
    throw DataError(d.source_file + ": the test split is empty");
  if (d.has_test && !(d.test.shape == d.train.shape))
    throw DataError(
        d.source_file + ": test samples are " + std::to_string(d.test.shape.channels) + "x" +
        std::to_string(d.test.shape.height) + "x" + std::to_string(d.test.shape.width) +
        " but training samples are " + std::to_string(d.train.shape.channels) + "x" +
        std::to_string(d.train.shape.height) + "x" + std::to_string(d.train.shape.width));
  if (d.has_test && d.test.is_bytes() != d.train.is_bytes()) {
    // One element type per file: bytes become the floats they would load as.
    ToFloatsInPlace(&d.train);
    ToFloatsInPlace(&d.test);
  }
  const int classes = CountClasses(d);
  std::vector<std::string> notes;
  if (d.class_names.empty() && NoSampleOfClass0(d))
    notes.push_back(d.source_file +
                    ": no sample has label 0: class 0 is empty, an output the network never "
                    "learns (labels counted from 1, as MATLAB counts? subtract 1 from them)");
  CheckLabels(d, d.train, "train", classes);
  if (d.has_test) CheckLabels(d, d.test, "test", classes);
  CheckFinite(d, d.train, "train");
  if (d.has_test) CheckFinite(d, d.test, "test");
  if (!d.has_test) HoldOut(&d, o);

  std::vector<double> mean{0.0}, stddev{1.0};
  if (o.normalize) {
    const Moments m = MomentsOf(d.train);
    if (m.all_constant)
      throw DataError(
          d.source_file + ": every training value is " +
          (m.mean.size() == 1
               ? std::to_string(m.mean[0])
               : "the same in each " +
                     std::string(StatsPerElement(d.train.shape) ? "element" : "channel")) +
          ": nothing to learn from");
    mean = m.mean;
    stddev = m.stddev;
  }
  WriteDatasetAtomically(out_path, [&](hid_t f) {
    WriteDatasetRootAttrs(f, classes, d.source, mean, stddev);
    if (!d.class_names.empty())
      h5::WriteString(f, "/class_names", nlohmann::json(d.class_names).dump());
    WriteSplit(f, "train", d.train);
    WriteSplit(f, "test", d.test);
  });
  return notes;
}

}  // namespace dlh
