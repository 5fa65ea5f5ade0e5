// DLH — data set files: loading with validation, Fashion-MNIST import, synthetic data.
// The layout is documented in dataset.hpp.
#include "launcher/data/dataset.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "launcher/data/dataset_write.hpp"
#include "launcher/data/idx.hpp"
#include "launcher/nn/random.hpp"
#include "launcher/storage/h5.hpp"

namespace dlh {

// ---------------------------------------------------------------------------------------
// Writing (dataset_write.hpp)

void WriteDatasetAtomically(const std::string& out_path, const std::function<void(hid_t)>& body) {
  std::string tmp_path;  // for the rename message
  try {
    CommitAtomically(out_path, [&](const std::string& tmp) {
      tmp_path = tmp;
      // HDF5's own create error only says "unable to create file" (see h5.cpp's error stack
      // walk), so try the path first to report the real reason (missing folder, permissions).
      int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0)
        throw DataError(out_path + ": cannot create " + tmp + ": " + std::strerror(errno));
      ::close(fd);
      try {
        h5::File file(tmp, h5::Mode::Create);
        body(file.id());
        file.flush_and_sync();
        file.close();
      } catch (const H5Error& e) {
        throw DataError(out_path + ": cannot write: " + e.what());
      }
    });
  } catch (const IoError& e) {
    // The body throws DataError; an IoError is CommitAtomically's rename into place.
    throw DataError(out_path + ": cannot rename " + tmp_path + " into place: " + e.reason);
  }
}

void WriteDatasetRootAttrs(hid_t file, int classes, const std::string& source,
                           const std::vector<double>& mean, const std::vector<double>& stddev) {
  h5::SetAttr(file, ".", "format_version", kDatasetFormatVersion);
  h5::SetAttr(file, ".", "classes", int64_t(classes));
  h5::SetAttr(file, ".", "source", source);
  h5::SetDoublesAttr(file, ".", "mean", mean);
  h5::SetDoublesAttr(file, ".", "std", stddev);
}

namespace {

constexpr int64_t kFormatVersion = kDatasetFormatVersion;
// A mean or std attribute: one per element of a sample at most (its shape is checked when the
// samples are read); past this a file is refused before its array is read.
constexpr size_t kMaxStatsValues = size_t(1) << 24;
const char* const kSplits[] = {"train", "test"};

std::string ShapeText(const Shape3& s) {
  return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width);
}

// The wrapper's messages name the file only sometimes (File does, dataset reads do not);
// every DataError must start with it exactly once.
std::string WithFile(const std::string& path, const std::string& what) {
  if (what.compare(0, path.size() + 1, path + ":") == 0) return what;
  return path + ": " + what;
}

// ---------------------------------------------------------------------------------------
// Random numbers. The standard distributions (normal, uniform_int) are implementation-
// defined, so data generated from a seed could differ between standard libraries; these
// are specified here in full on top of std::mt19937_64, whose output the standard fixes.

// Standard normal deviates by the Box-Muller transform.
constexpr double kTwoPi = 6.283185307179586476925;
class Normal {
 public:
  explicit Normal(uint64_t seed) : gen_(seed) {}
  double operator()() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // u1 in (0, 1] keeps log() finite; 53 bits is a double's full precision.
    double u1 = double((gen_() >> 11) + 1) * 0x1.0p-53;
    double u2 = double(gen_() >> 11) * 0x1.0p-53;
    double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(kTwoPi * u2);
    has_spare_ = true;
    return r * std::cos(kTwoPi * u2);
  }
  std::mt19937_64& engine() { return gen_; }

 private:
  std::mt19937_64 gen_;
  bool has_spare_ = false;
  double spare_ = 0;
};

// One smooth random image per class. Drawing white noise per pixel would give prototypes
// that only a dense layer can exploit; drawing on a coarse grid and interpolating
// bilinearly gives them spatial structure, so convolutions and pooling help as they do on
// real images. The set is scaled to unit RMS so the noise level means the same for all
// shapes.
std::vector<float> MakePrototypes(const Shape3& s, int classes, Normal& normal) {
  const int cell = std::clamp(std::min(s.height, s.width) / 6, 1, 4);
  const int gh = (s.height - 1) / cell + 2, gw = (s.width - 1) / cell + 2;
  const size_t plane = size_t(s.height) * s.width;
  std::vector<float> protos(size_t(classes) * s.elements());
  std::vector<double> grid(size_t(gh) * gw);
  double sum_sq = 0;
  for (int k = 0; k < classes; ++k) {
    for (int c = 0; c < s.channels; ++c) {
      for (double& g : grid) g = normal();
      float* out = protos.data() + (size_t(k) * s.channels + c) * plane;
      for (int y = 0; y < s.height; ++y) {
        double gy = double(y) / cell;
        int y0 = int(gy);
        double fy = gy - y0;
        for (int x = 0; x < s.width; ++x) {
          double gx = double(x) / cell;
          int x0 = int(gx);
          double fx = gx - x0;
          const double* r0 = &grid[size_t(y0) * gw];
          const double* r1 = r0 + gw;
          double v = (1 - fy) * ((1 - fx) * r0[x0] + fx * r0[x0 + 1]) +
                     fy * ((1 - fx) * r1[x0] + fx * r1[x0 + 1]);
          out[size_t(y) * s.width + x] = float(v);
          sum_sq += v * v;
        }
      }
    }
  }
  double scale = 1.0 / std::sqrt(sum_sq / double(protos.size()));
  for (float& v : protos) v = float(v * scale);
  return protos;
}

// Noise standard deviation for a sample of `elements` values. Two unit-RMS prototypes lie
// about sqrt(2 * elements) apart, so white noise of this deviation leaves a margin of
// kSyntheticMargin deviations between a sample and the midpoint to the nearest other
// class: the optimal classifier is right about 99% of the time, a small network that has
// to learn to average out the noise somewhat less. A fixed noise level would instead make
// large images trivially separable and tiny ones hopeless.
constexpr double kSyntheticMargin = 2.5;
double SyntheticNoise(int64_t elements) {
  return std::sqrt(2.0 * double(elements)) / (2.0 * kSyntheticMargin);
}

struct SyntheticSplit {
  std::vector<float> images;
  std::vector<int32_t> labels;
};

SyntheticSplit MakeSyntheticSplit(const std::vector<float>& protos, const Shape3& s, int classes,
                                  int64_t count, uint64_t stream_seed) {
  Normal normal(stream_seed);
  SyntheticSplit out;
  // Balanced classes in a shuffled order: every class is equally represented however
  // small the split, which keeps accuracy numbers comparable between seeds.
  out.labels.resize(size_t(count));
  for (int64_t i = 0; i < count; ++i) out.labels[size_t(i)] = int32_t(i % classes);
  for (int64_t i = count - 1; i > 0; --i)
    std::swap(out.labels[size_t(i)], out.labels[UniformBelow(normal.engine(), uint64_t(i) + 1)]);
  const size_t n = size_t(s.elements());
  const double sigma = SyntheticNoise(s.elements());
  out.images.resize(size_t(count) * n);
  for (int64_t i = 0; i < count; ++i) {
    const float* p = protos.data() + size_t(out.labels[size_t(i)]) * n;
    float* x = out.images.data() + size_t(i) * n;
    for (size_t j = 0; j < n; ++j) x[j] = float(p[j] + sigma * normal());
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Loading

enum class ElementKind { UInt8, Float, OtherInteger, Other };

// The wrapper has no type query, so this opens the dataset through its Handle and
// H5_CHECK directly. Only the class, size and sign are needed.
ElementKind DatasetElementKind(hid_t file, const std::string& path) {
  h5::Handle dset(H5_CHECK(H5Dopen2(file, path.c_str(), H5P_DEFAULT)));
  h5::Handle type(H5_CHECK(H5Dget_type(dset.id())));
  switch (H5Tget_class(type.id())) {
    case H5T_FLOAT:
      return ElementKind::Float;
    case H5T_INTEGER:
      return H5Tget_size(type.id()) == 1 && H5Tget_sign(type.id()) == H5T_SGN_NONE
                 ? ElementKind::UInt8
                 : ElementKind::OtherInteger;
    default:
      return ElementKind::Other;
  }
}

std::string DimsText(const std::vector<hsize_t>& dims) {
  std::string out;
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? " x " : "") + std::to_string(dims[i]);
  return dims.empty() ? "scalar" : out;
}

DataSplit LoadSplit(const std::string& path, hid_t file, const std::string& split, int classes,
                    const std::vector<double>& mean, const std::vector<double>& stddev,
                    bool with_images) {
  const std::string images_path = "/" + split + "/images";
  const std::string labels_path = "/" + split + "/labels";
  auto fail = [&](const std::string& what) { throw DataError(path + ": " + what); };

  std::vector<hsize_t> idims = h5::Dims(file, images_path);
  if (idims.size() != 4)
    fail(images_path + " has rank " + std::to_string(idims.size()) + " (" + DimsText(idims) +
         "), expected 4 (N x C x H x W)");
  for (size_t i = 1; i < 4; ++i)
    if (idims[i] == 0 || idims[i] > hsize_t(INT_MAX))
      fail(images_path + " has an invalid sample shape " + DimsText(idims));
  std::vector<hsize_t> ldims = h5::Dims(file, labels_path);
  if (ldims.size() != 1)
    fail(labels_path + " has rank " + std::to_string(ldims.size()) + " (" + DimsText(ldims) +
         "), expected 1");
  if (ldims[0] != idims[0])
    fail(labels_path + " has " + std::to_string(ldims[0]) + " entries but " + images_path +
         " has " + std::to_string(idims[0]));

  ElementKind ikind = DatasetElementKind(file, images_path);
  if (ikind != ElementKind::UInt8 && ikind != ElementKind::Float)
    fail(images_path + " must hold uint8 or floating-point values");
  ElementKind lkind = DatasetElementKind(file, labels_path);
  if (lkind != ElementKind::UInt8 && lkind != ElementKind::OtherInteger)
    fail(labels_path + " must hold integers");

  DataSplit out;
  out.count = int64_t(idims[0]);
  out.shape = Shape3{int(idims[1]), int(idims[2]), int(idims[3])};

  // Labels first: they are small, and a bad label should not cost reading the images.
  out.labels = h5::ReadInts(file, labels_path);
  for (size_t i = 0; i < out.labels.size(); ++i)
    if (out.labels[i] < 0 || out.labels[i] >= classes)
      fail(labels_path + "[" + std::to_string(i) + "] = " + std::to_string(out.labels[i]) +
           " is outside [0, " + std::to_string(classes) + ")");

  // One pass for both steps: uint8 to [0, 1], then standardization (a mean of 0 and a std of
  // 1 where the file has none: adding -0.0 changes no value).
  const double scale = ikind == ElementKind::UInt8 ? 1.0 / 255.0 : 1.0;
  out.stored_bytes = ikind == ElementKind::UInt8;
  out.load = MakeLoadTransform(mean, stddev, scale, out.shape, path + ": root attributes");
  if (!with_images) return out;
  out.images = h5::ReadFloats(file, images_path);
  if (ikind == ElementKind::Float) {
    for (size_t i = 0; i < out.images.size(); ++i)
      if (!std::isfinite(out.images[i]))
        fail(images_path + " holds a non-finite value at element " + std::to_string(i));
  }
  const size_t e = size_t(out.shape.elements());
  const float* a = out.load.a.data();
  const float* b = out.load.b.data();
  if (!out.load.identity)
    for (size_t i = 0; i < out.images.size(); i += e)
      for (size_t j = 0; j < e; ++j) out.images[i + j] = out.images[i + j] * a[j] + b[j];
  return out;
}

// HDF5 only says "unable to open file" for a file that is not HDF5 at all (or that is
// unreadable), so look for the format signature first and say which it is. It sits at
// offset 0, or 512, 1024, 2048, ... when the file has a user block.
void CheckHdf5Signature(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(path + ": cannot open: " + std::strerror(errno));
  static const char kSignature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  bool found = false;
  for (off_t offset = 0; !found; offset = offset == 0 ? 512 : offset * 2) {
    char buf[8];
    ssize_t got = ::pread(fd, buf, sizeof buf, offset);
    if (got < 0) {
      int err = errno;
      ::close(fd);
      throw DataError(path + ": cannot read: " + std::strerror(err));
    }
    if (got < ssize_t(sizeof buf)) break;
    found = std::memcmp(buf, kSignature, sizeof buf) == 0;
  }
  ::close(fd);
  if (!found) throw DataError(path + ": not an HDF5 file (no HDF5 signature)");
}

}  // namespace

Dataset LoadDataset(const std::string& path, bool with_images) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw DataError(path + ": cannot open: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw DataError(path + ": not a regular file");
  CheckHdf5Signature(path);
  try {
    h5::File file(path, h5::Mode::ReadOnly);
    const hid_t f = file.id();
    Dataset ds;
    if (h5::HasAttr(f, ".", "format_version")) {
      int64_t v = h5::GetIntAttr(f, ".", "format_version");
      if (v != kFormatVersion)
        throw DataError(path + ": format_version " + std::to_string(v) +
                        " is not supported (expected " + std::to_string(kFormatVersion) + ")");
    }
    if (!h5::HasAttr(f, ".", "classes"))
      throw DataError(path + ": missing root attribute 'classes'");
    int64_t classes = h5::GetIntAttr(f, ".", "classes");
    if (classes < 2 || classes > INT_MAX)
      throw DataError(path + ": classes = " + std::to_string(classes) +
                      " is invalid (must be at least 2)");
    ds.classes = int(classes);

    bool has_mean = h5::HasAttr(f, ".", "mean"), has_std = h5::HasAttr(f, ".", "std");
    if (has_mean != has_std)
      throw DataError(path + ": root attributes 'mean' and 'std' must be given together");
    std::vector<double> mean{0.0}, stddev{1.0};
    if (has_mean) {
      mean = h5::GetDoublesAttr(f, ".", "mean", kMaxStatsValues);
      stddev = h5::GetDoublesAttr(f, ".", "std", kMaxStatsValues);
      CheckStats(mean, stddev, path + ": invalid normalization attributes");
    }

    // All four datasets are checked for presence before any is read, so the message for
    // an incomplete file does not depend on which part happens to be read first.
    for (const char* split : kSplits)
      for (const char* part : {"images", "labels"}) {
        std::string name = std::string("/") + split + "/" + part;
        if (!h5::Exists(f, name)) throw DataError(path + ": missing dataset " + name);
      }
    ds.input_mean = mean;
    ds.input_std = stddev;
    ds.train = LoadSplit(path, f, "train", ds.classes, mean, stddev, with_images);
    ds.input_scale = ds.train.stored_bytes ? 1.0 / 255.0 : 1.0;
    ds.test = LoadSplit(path, f, "test", ds.classes, mean, stddev, with_images);
    if (!(ds.test.shape == ds.train.shape))
      throw DataError(path + ": /test/images samples are " + ShapeText(ds.test.shape) +
                      " but /train/images samples are " + ShapeText(ds.train.shape));
    return ds;
  } catch (const H5Error& e) {
    throw DataError(WithFile(path, e.what()));
  }
}

void ImportFashionMnist(const std::string& source_dir, const std::string& out_path) {
  struct Part {
    std::string images_file, labels_file;
    IdxArray images, labels;
  };
  constexpr int kClasses = 10;
  struct stat st;
  if (::stat(source_dir.c_str(), &st) != 0)
    throw DataError(source_dir + ": cannot open folder: " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) throw DataError(source_dir + ": not a folder");
  auto read = [&](const std::string& prefix) {
    Part p;
    p.images_file = FindIdxFile(source_dir, prefix + "-images-idx3-ubyte");
    p.labels_file = FindIdxFile(source_dir, prefix + "-labels-idx1-ubyte");
    p.images = ReadIdx(p.images_file, kIdxImagesMagic);
    p.labels = ReadIdx(p.labels_file, kIdxLabelsMagic);
    if (p.labels.dims[0] != p.images.dims[0])
      throw DataError(p.labels_file + ": " + std::to_string(p.labels.dims[0]) + " labels but " +
                      p.images_file + " holds " + std::to_string(p.images.dims[0]) + " images");
    if (p.images.dims[1] == 0 || p.images.dims[2] == 0 || p.images.dims[1] > INT_MAX ||
        p.images.dims[2] > INT_MAX)
      throw DataError(p.images_file + ": invalid image size " + std::to_string(p.images.dims[1]) +
                      "x" + std::to_string(p.images.dims[2]));
    for (size_t i = 0; i < p.labels.data.size(); ++i)
      if (p.labels.data[i] >= kClasses)
        throw DataError(p.labels_file + ": label " + std::to_string(p.labels.data[i]) +
                        " at index " + std::to_string(i) + " is outside [0, " +
                        std::to_string(kClasses) + ")");
    return p;
  };
  Part train = read("train");
  Part test = read("t10k");
  if (train.images.dims[1] != test.images.dims[1] || train.images.dims[2] != test.images.dims[2])
    throw DataError(test.images_file + ": images are " + std::to_string(test.images.dims[1]) + "x" +
                    std::to_string(test.images.dims[2]) + " but " + train.images_file + " holds " +
                    std::to_string(train.images.dims[1]) + "x" +
                    std::to_string(train.images.dims[2]));

  // Pixel statistics of the training split, after scaling to [0, 1]; a histogram keeps
  // the sums exact however many pixels there are.
  uint64_t hist[256] = {};
  for (uint8_t v : train.images.data) ++hist[v];
  double n = 0, sum = 0, sum_sq = 0;
  for (int v = 0; v < 256; ++v) {
    double x = v / 255.0;
    n += double(hist[v]);
    sum += double(hist[v]) * x;
    sum_sq += double(hist[v]) * x * x;
  }
  double mean = n > 0 ? sum / n : 0;
  double stddev = n > 0 ? std::sqrt(std::max(0.0, sum_sq / n - mean * mean)) : 0;
  if (!(stddev > 0)) throw DataError(train.images_file + ": all training pixels are equal");

  WriteDatasetAtomically(out_path, [&](hid_t f) {
    WriteDatasetRootAttrs(f, kClasses, "fashion-mnist (IDX, " + source_dir + ")", {mean}, {stddev});
    for (Part* p : {&train, &test}) {
      const std::string split = p == &train ? "train" : "test";
      std::vector<hsize_t> dims = {p->images.dims[0], 1, p->images.dims[1], p->images.dims[2]};
      h5::WriteBytes(f, "/" + split + "/images", dims, p->images.data.data());
      std::vector<int32_t> labels(p->labels.data.begin(), p->labels.data.end());
      h5::WriteInts(f, "/" + split + "/labels", {hsize_t(labels.size())}, labels.data());
    }
    // The classes' names as Fashion-MNIST's README gives them, for reports and predictions.
    h5::WriteString(f, "/class_names",
                    nlohmann::json({"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                                    "Shirt", "Sneaker", "Bag", "Ankle boot"})
                        .dump());
  });
}

void WriteSyntheticDataset(const std::string& out_path, const Shape3& shape, int classes,
                           int64_t train_count, int64_t test_count, uint64_t seed) {
  if (shape.channels <= 0 || shape.height <= 0 || shape.width <= 0)
    throw DataError(out_path + ": invalid sample shape " + ShapeText(shape));
  if (classes < 2) throw DataError(out_path + ": need at least 2 classes");
  if (train_count <= 0 || test_count < 0)
    throw DataError(out_path + ": invalid sample counts (train " + std::to_string(train_count) +
                    ", test " + std::to_string(test_count) + ")");

  // Independent streams per part, so that e.g. the test split does not change when only
  // the number of training samples does.
  Normal proto_normal(SplitMix64(seed ^ 0x70726f746fULL));
  std::vector<float> protos = MakePrototypes(shape, classes, proto_normal);
  SyntheticSplit train =
      MakeSyntheticSplit(protos, shape, classes, train_count, SplitMix64(seed ^ 0x747261696eULL));
  SyntheticSplit test =
      MakeSyntheticSplit(protos, shape, classes, test_count, SplitMix64(seed ^ 0x74657374ULL));

  double sum = 0, sum_sq = 0;
  for (float v : train.images) {
    sum += v;
    sum_sq += double(v) * v;
  }
  double n = double(train.images.size());
  double mean = sum / n;
  double stddev = std::sqrt(std::max(0.0, sum_sq / n - mean * mean));
  if (!(stddev > 0)) stddev = 1;

  WriteDatasetAtomically(out_path, [&](hid_t f) {
    WriteDatasetRootAttrs(
        f, classes, "synthetic (seed " + std::to_string(seed) + ", prototype + Gaussian noise)",
        {mean}, {stddev});
    for (const SyntheticSplit* s : {&train, &test}) {
      const std::string split = s == &train ? "train" : "test";
      hsize_t count = s->labels.size();
      h5::WriteFloats(f, "/" + split + "/images",
                      {count, hsize_t(shape.channels), hsize_t(shape.height), hsize_t(shape.width)},
                      s->images.data());
      h5::WriteInts(f, "/" + split + "/labels", {count}, s->labels.data());
    }
  });
}

std::vector<std::string> ReadClassNames(const std::string& data_path, int classes) {
  h5::File file(data_path, h5::Mode::ReadOnly);
  if (!h5::Exists(file.id(), "/class_names")) return {};
  const nlohmann::json j =
      nlohmann::json::parse(h5::ReadString(file.id(), "/class_names"), nullptr, false);
  std::vector<std::string> names;
  if (j.is_array())
    for (const nlohmann::json& n : j) names.push_back(n.is_string() ? n.get<std::string>() : "");
  if (names.size() != size_t(classes))
    throw DataError(data_path + ": /class_names: " + std::to_string(names.size()) + " names for " +
                    std::to_string(classes) + " classes");
  return names;
}

}  // namespace dlh
