// Tests for launcher/data/dataset.cpp and launcher/data/idx.cpp: IDX import (the real Fashion-MNIST
// files and small hand-made ones), synthetic generation, and the validation of every kind
// of malformed input.
#include "launcher/data/dataset.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/data/idx.hpp"
#include "launcher/storage/h5.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

namespace fs = std::filesystem;

const char* const kFashionDir = "/usr/share/datasets/fashion-mnist";

using test::TempDir;  // a fresh folder per test, removed afterwards

// Whether a temporary file of `out` ("<out>.tmp.<pid>.<n>", common/atomic_file.hpp) was left
// beside it.
bool LeftTemporaryFile(const std::string& out) {
  const fs::path p(out);
  const std::string prefix = p.filename().string() + ".tmp";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(p.parent_path(), ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  return false;
}

// Runs `fn`, which must throw DataError whose message is `expected` exactly.
void ExpectDataError(const std::function<void()>& fn, const std::string& expected) {
  try {
    fn();
    ADD_FAILURE() << "no DataError; expected: " << expected;
  } catch (const DataError& e) {
    EXPECT_EQ(e.what(), expected);
  }
}

// Runs `fn`, which must throw DataError starting with `prefix` and containing `part`.
void ExpectDataErrorLike(const std::function<void()>& fn, const std::string& prefix,
                         const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "no DataError; expected one starting with: " << prefix;
  } catch (const DataError& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.compare(0, prefix.size(), prefix), 0) << msg;
    EXPECT_NE(msg.find(part), std::string::npos) << msg << "\n  should contain: " << part;
  }
}

// ---------------------------------------------------------------------------------------
// IDX files written by hand

std::string IdxBytes(uint32_t magic, const std::vector<uint32_t>& dims,
                     const std::vector<uint8_t>& data) {
  std::string out;
  auto word = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out += char((v >> shift) & 0xff);
  };
  word(magic);
  for (uint32_t d : dims) word(d);
  out.append(data.begin(), data.end());
  return out;
}

void WriteFile(const std::string& path, const std::string& bytes, bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
}

struct SmallIdxSet {
  int rows = 3, cols = 2;
  std::vector<uint8_t> train_images, train_labels, test_images, test_labels;
  int64_t train_count() const { return int64_t(train_labels.size()); }
};

SmallIdxSet MakeSmallIdxSet() {
  SmallIdxSet s;
  for (int i = 0; i < 20; ++i) s.train_labels.push_back(uint8_t(i % 10));
  for (int i = 0; i < 10; ++i) s.test_labels.push_back(uint8_t(9 - i));
  for (size_t i = 0; i < s.train_labels.size() * 6; ++i) s.train_images.push_back(uint8_t(i * 7));
  for (size_t i = 0; i < s.test_labels.size() * 6; ++i) s.test_images.push_back(uint8_t(255 - i));
  return s;
}

// Writes the four files into `dir`; train files gzip-compressed, test files plain, as both
// spellings must be found.
void WriteSmallIdxSet(const std::string& dir, const SmallIdxSet& s) {
  auto n = [](const std::vector<uint8_t>& v) { return uint32_t(v.size()); };
  uint32_t r = uint32_t(s.rows), c = uint32_t(s.cols);
  WriteFile(dir + "/train-images-idx3-ubyte.gz",
            IdxBytes(kIdxImagesMagic, {n(s.train_images) / (r * c), r, c}, s.train_images), true);
  WriteFile(dir + "/train-labels-idx1-ubyte.gz",
            IdxBytes(kIdxLabelsMagic, {n(s.train_labels)}, s.train_labels), true);
  WriteFile(dir + "/t10k-images-idx3-ubyte",
            IdxBytes(kIdxImagesMagic, {n(s.test_images) / (r * c), r, c}, s.test_images), false);
  WriteFile(dir + "/t10k-labels-idx1-ubyte",
            IdxBytes(kIdxLabelsMagic, {n(s.test_labels)}, s.test_labels), false);
}

TEST(Idx, ReadsPlainAndGzipFiles) {
  TempDir dir;
  std::vector<uint8_t> data = {1, 2, 3, 4, 5, 6};
  WriteFile(dir / "a", IdxBytes(kIdxImagesMagic, {1, 2, 3}, data), false);
  WriteFile(dir / "b.gz", IdxBytes(kIdxImagesMagic, {1, 2, 3}, data), true);
  for (const char* name : {"a", "b.gz"}) {
    IdxArray a = ReadIdx(dir / name, kIdxImagesMagic);
    EXPECT_EQ(a.dims, (std::vector<uint32_t>{1, 2, 3})) << name;
    EXPECT_EQ(a.data, data) << name;
  }
}

TEST(Idx, FindsPlainBeforeGzip) {
  TempDir dir;
  WriteFile(dir / "x", "", false);
  WriteFile(dir / "y.gz", "", true);
  EXPECT_EQ(FindIdxFile(dir.path(), "x"), dir / "x");
  EXPECT_EQ(FindIdxFile(dir.path(), "y"), dir / "y.gz");
  ExpectDataError([&] { FindIdxFile(dir.path(), "z"); }, dir.path() + ": neither z nor z.gz found");
}

TEST(Idx, RejectsBadMagic) {
  TempDir dir;
  WriteFile(dir / "f", IdxBytes(0x00000802, {1, 2}, {1, 2}), false);
  ExpectDataError([&] { ReadIdx(dir / "f", kIdxImagesMagic); },
                  dir / "f" +
                      ": bad IDX magic number 0x00000802, expected 0x00000803 (unsigned bytes, "
                      "3 dimensions)");
  // A labels file where images are expected (the classic mix-up).
  WriteFile(dir / "g.gz", IdxBytes(kIdxLabelsMagic, {2}, {1, 2}), true);
  ExpectDataErrorLike([&] { ReadIdx(dir / "g.gz", kIdxImagesMagic); }, dir / "g.gz" + ": ",
                      "bad IDX magic number 0x00000801");
}

TEST(Idx, RejectsTruncatedAndOverlongFiles) {
  TempDir dir;
  std::string full = IdxBytes(kIdxImagesMagic, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  WriteFile(dir / "short", full.substr(0, full.size() - 3), false);
  ExpectDataError(
      [&] { ReadIdx(dir / "short", kIdxImagesMagic); },
      dir / "short" + ": truncated IDX file: the header announces 8 data bytes, the file has 5");
  WriteFile(dir / "short.gz", full.substr(0, full.size() - 3), true);
  ExpectDataError(
      [&] { ReadIdx(dir / "short.gz", kIdxImagesMagic); },
      dir / "short.gz" + ": truncated IDX file: the header announces 8 data bytes, the file has 5");
  WriteFile(dir / "header", full.substr(0, 9), false);
  ExpectDataError([&] { ReadIdx(dir / "header", kIdxImagesMagic); },
                  dir / "header" + ": truncated IDX header (dimension 1 missing)");
  WriteFile(dir / "empty", "", false);
  ExpectDataError([&] { ReadIdx(dir / "empty", kIdxImagesMagic); },
                  dir / "empty" + ": truncated IDX header (no magic number)");
  WriteFile(dir / "long", full + "xy", false);
  ExpectDataError([&] { ReadIdx(dir / "long", kIdxImagesMagic); },
                  dir / "long" + ": IDX file has 2 bytes after the data its header announces");
  ExpectDataErrorLike([&] { ReadIdx(dir / "missing", kIdxImagesMagic); }, dir / "missing" + ": ",
                      "No such file or directory");
}

TEST(Idx, RejectsTruncatedGzipStream) {
  // A download cut short: the compressed stream itself ends early.
  TempDir dir;
  std::vector<uint8_t> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t((i * 2654435761u) >> 13);
  WriteFile(dir / "f.gz", IdxBytes(kIdxImagesMagic, {1000, 10, 10}, data), true);
  fs::resize_file(dir / "f.gz", fs::file_size(dir / "f.gz") / 2);
  ExpectDataError([&] { ReadIdx(dir / "f.gz", kIdxImagesMagic); },
                  dir / "f.gz" + ": truncated gzip stream (unexpected end of compressed data)");
}

// ---------------------------------------------------------------------------------------
// Import

TEST(Import, SmallIdxSetRoundTrips) {
  TempDir dir;
  SmallIdxSet s = MakeSmallIdxSet();
  WriteSmallIdxSet(dir.path(), s);
  const std::string out = dir / "small.h5";
  ImportFashionMnist(dir.path(), out);
  EXPECT_FALSE(LeftTemporaryFile(out));

  double sum = 0, sum_sq = 0;
  for (uint8_t v : s.train_images) {
    sum += v / 255.0;
    sum_sq += (v / 255.0) * (v / 255.0);
  }
  double mean = sum / s.train_images.size();
  double stddev = std::sqrt(sum_sq / s.train_images.size() - mean * mean);
  {
    h5::File f(out, h5::Mode::ReadOnly);
    EXPECT_EQ(h5::GetIntAttr(f.id(), ".", "format_version"), 1);
    EXPECT_EQ(h5::GetIntAttr(f.id(), ".", "classes"), 10);
    EXPECT_EQ(h5::GetStringAttr(f.id(), ".", "source"), "fashion-mnist (IDX, " + dir.path() + ")");
    EXPECT_NEAR(h5::GetDoubleAttr(f.id(), ".", "mean"), mean, 1e-12);
    EXPECT_NEAR(h5::GetDoubleAttr(f.id(), ".", "std"), stddev, 1e-12);
    EXPECT_EQ(h5::Dims(f.id(), "/train/images"), (std::vector<hsize_t>{20, 1, 3, 2}));
    EXPECT_EQ(h5::Dims(f.id(), "/test/labels"), (std::vector<hsize_t>{10}));
  }

  Dataset ds = LoadDataset(out);
  EXPECT_EQ(ds.classes, 10);
  ASSERT_EQ(ds.train.count, 20);
  ASSERT_EQ(ds.test.count, 10);
  EXPECT_EQ(ds.train.shape, (Shape3{1, 3, 2}));
  EXPECT_EQ(ds.test.shape, (Shape3{1, 3, 2}));
  for (size_t i = 0; i < s.train_images.size(); ++i)
    ASSERT_NEAR(ds.train.images[i], (s.train_images[i] / 255.0 - mean) / stddev, 1e-5) << i;
  for (size_t i = 0; i < s.test_images.size(); ++i)
    ASSERT_NEAR(ds.test.images[i], (s.test_images[i] / 255.0 - mean) / stddev, 1e-5) << i;
  EXPECT_EQ(ds.train.labels, std::vector<int32_t>(s.train_labels.begin(), s.train_labels.end()));
  EXPECT_EQ(ds.test.labels, std::vector<int32_t>(s.test_labels.begin(), s.test_labels.end()));
}

TEST(Import, RejectsInconsistentIdxSets) {
  TempDir dir;
  SmallIdxSet s = MakeSmallIdxSet();
  const std::string out = dir / "out.h5";

  s.train_labels.pop_back();  // 19 labels for 20 images
  WriteSmallIdxSet(dir.path(), s);
  ExpectDataError([&] { ImportFashionMnist(dir.path(), out); },
                  dir / "train-labels-idx1-ubyte.gz" + ": 19 labels but " +
                      (dir / "train-images-idx3-ubyte.gz") + " holds 20 images");

  s = MakeSmallIdxSet();
  s.test_labels[4] = 10;
  WriteSmallIdxSet(dir.path(), s);
  ExpectDataError([&] { ImportFashionMnist(dir.path(), out); },
                  dir / "t10k-labels-idx1-ubyte" + ": label 10 at index 4 is outside [0, 10)");

  s = MakeSmallIdxSet();
  WriteSmallIdxSet(dir.path(), s);
  fs::remove(dir / "t10k-images-idx3-ubyte");
  ExpectDataError(
      [&] { ImportFashionMnist(dir.path(), out); },
      dir.path() + ": neither t10k-images-idx3-ubyte nor t10k-images-idx3-ubyte.gz found");
  ExpectDataError([&] { ImportFashionMnist(dir / "nowhere", out); },
                  dir / "nowhere" + ": cannot open folder: No such file or directory");

  // Nothing half-written is left behind by any of the failures.
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(LeftTemporaryFile(out));
}

TEST(Import, ReportsUnwritableOutput) {
  TempDir dir;
  WriteSmallIdxSet(dir.path(), MakeSmallIdxSet());
  const std::string out = dir / "no-such-folder/out.h5";
  ExpectDataErrorLike([&] { ImportFashionMnist(dir.path(), out); },
                      out + ": cannot create " + out + ".tmp.", ": No such file or directory");
}

TEST(Import, ReportsOutputThatCannotBeReplaced) {
  TempDir dir;
  WriteSmallIdxSet(dir.path(), MakeSmallIdxSet());
  const std::string out = dir / "taken.h5";
  fs::create_directories(out + "/inside");  // a folder: rename(2) will not replace it
  ExpectDataErrorLike([&] { ImportFashionMnist(dir.path(), out); },
                      out + ": cannot rename " + out + ".tmp.", " into place: Is a directory");
  EXPECT_TRUE(fs::is_directory(out + "/inside"));
  EXPECT_FALSE(LeftTemporaryFile(out));
}

TEST(Import, RealFashionMnist) {
  struct stat st;
  if (::stat(kFashionDir, &st) != 0)
    GTEST_SKIP() << kFashionDir << " is missing (Debian package dataset-fashion-mnist)";
  TempDir dir;
  const std::string out = dir / "fashion-mnist.h5";
  ImportFashionMnist(kFashionDir, out);
  EXPECT_FALSE(LeftTemporaryFile(out));

  double mean = 0, stddev = 0;
  {
    h5::File f(out, h5::Mode::ReadOnly);
    EXPECT_EQ(h5::GetStringAttr(f.id(), ".", "source"),
              "fashion-mnist (IDX, /usr/share/datasets/fashion-mnist)");
    EXPECT_EQ(h5::Dims(f.id(), "/train/images"), (std::vector<hsize_t>{60000, 1, 28, 28}));
    // Stored as bytes: 47 MB rather than 188 MB of floats.
    EXPECT_EQ(h5::ReadInts(f.id(), "/test/labels").size(), 10000u);
    mean = h5::GetDoubleAttr(f.id(), ".", "mean");
    stddev = h5::GetDoubleAttr(f.id(), ".", "std");
  }
  // The published statistics of the Fashion-MNIST training pixels.
  EXPECT_NEAR(mean, 0.2860, 1e-4);
  EXPECT_NEAR(stddev, 0.3530, 1e-4);

  Dataset ds = LoadDataset(out);
  EXPECT_EQ(ds.classes, 10);
  EXPECT_EQ(ds.train.count, 60000);
  EXPECT_EQ(ds.test.count, 10000);
  EXPECT_EQ(ds.train.shape, (Shape3{1, 28, 28}));
  std::vector<int> train_hist(10), test_hist(10);
  for (int32_t l : ds.train.labels) ++train_hist.at(size_t(l));
  for (int32_t l : ds.test.labels) ++test_hist.at(size_t(l));
  EXPECT_EQ(train_hist, std::vector<int>(10, 6000));
  EXPECT_EQ(test_hist, std::vector<int>(10, 1000));

  // Pixels were scaled to [0, 1] and standardized: the extremes map to (0 - mean) / std
  // and (1 - mean) / std, and the training set ends up with mean 0 and deviation 1.
  float lo = 1e9f, hi = -1e9f;
  double sum = 0, sum_sq = 0;
  for (float v : ds.train.images) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    sum_sq += double(v) * v;
  }
  double n = double(ds.train.images.size());
  EXPECT_NEAR(lo, -mean / stddev, 1e-5);
  EXPECT_NEAR(hi, (1 - mean) / stddev, 1e-5);
  EXPECT_NEAR(sum / n, 0.0, 1e-4);
  EXPECT_NEAR(std::sqrt(sum_sq / n - (sum / n) * (sum / n)), 1.0, 1e-4);
}

// ---------------------------------------------------------------------------------------
// Synthetic data

// Every dataset and root attribute, as text, to compare files by content. (The files are
// not byte-identical: HDF5 records object modification times.)
std::string FileContents(const std::string& path) {
  h5::File f(path, h5::Mode::ReadOnly);
  std::string out;
  for (const char* name : {"format_version", "classes"})
    out += std::to_string(h5::GetIntAttr(f.id(), ".", name)) + ";";
  for (const char* name : {"mean", "std"})
    out += std::to_string(h5::GetDoubleAttr(f.id(), ".", name)) + ";";
  out += h5::GetStringAttr(f.id(), ".", "source") + ";";
  for (const char* split : {"train", "test"}) {
    std::string images = std::string("/") + split + "/images";
    for (hsize_t d : h5::Dims(f.id(), images)) out += std::to_string(d) + "x";
    std::vector<float> values = h5::ReadFloats(f.id(), images);
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    for (int32_t l : h5::ReadInts(f.id(), std::string("/") + split + "/labels"))
      out += std::to_string(l) + ",";
  }
  return out;
}

TEST(Synthetic, DeterministicInSeed) {
  TempDir dir;
  const Shape3 shape{2, 5, 4};
  WriteSyntheticDataset(dir / "a.h5", shape, 3, 30, 9, 42);
  WriteSyntheticDataset(dir / "b.h5", shape, 3, 30, 9, 42);
  WriteSyntheticDataset(dir / "c.h5", shape, 3, 30, 9, 43);
  EXPECT_FALSE(LeftTemporaryFile(dir / "a.h5"));
  std::string a = FileContents(dir / "a.h5");
  EXPECT_EQ(a, FileContents(dir / "b.h5"));
  EXPECT_NE(a, FileContents(dir / "c.h5"));

  Dataset da = LoadDataset(dir / "a.h5"), dc = LoadDataset(dir / "c.h5");
  EXPECT_NE(da.train.images, dc.train.images);
  EXPECT_NE(da.test.images, dc.test.images);
}

TEST(Synthetic, LayoutAndBalancedLabels) {
  TempDir dir;
  const std::string out = dir / "s.h5";
  WriteSyntheticDataset(out, Shape3{3, 7, 6}, 4, 41, 8, 1);
  {
    h5::File f(out, h5::Mode::ReadOnly);
    EXPECT_EQ(h5::Dims(f.id(), "/train/images"), (std::vector<hsize_t>{41, 3, 7, 6}));
    EXPECT_EQ(h5::Dims(f.id(), "/test/images"), (std::vector<hsize_t>{8, 3, 7, 6}));
    EXPECT_EQ(h5::GetIntAttr(f.id(), ".", "classes"), 4);
  }
  Dataset ds = LoadDataset(out);
  EXPECT_EQ(ds.train.shape, (Shape3{3, 7, 6}));
  std::vector<int> hist(4);
  for (int32_t l : ds.train.labels) ++hist.at(size_t(l));
  EXPECT_EQ(hist, (std::vector<int>{11, 10, 10, 10}));
  // Labels are shuffled, not in class order.
  EXPECT_FALSE(std::is_sorted(ds.train.labels.begin(), ds.train.labels.end()));
}

TEST(Synthetic, TestSplitDoesNotDependOnTrainCount) {
  TempDir dir;
  WriteSyntheticDataset(dir / "a.h5", Shape3{1, 4, 4}, 3, 30, 12, 5);
  WriteSyntheticDataset(dir / "b.h5", Shape3{1, 4, 4}, 3, 60, 12, 5);
  Dataset a = LoadDataset(dir / "a.h5"), b = LoadDataset(dir / "b.h5");
  EXPECT_EQ(a.test.labels, b.test.labels);
  // Stored values are identical; loaded ones differ by the train statistics only.
  h5::File fa(dir / "a.h5", h5::Mode::ReadOnly), fb(dir / "b.h5", h5::Mode::ReadOnly);
  EXPECT_EQ(h5::ReadFloats(fa.id(), "/test/images"), h5::ReadFloats(fb.id(), "/test/images"));
}

// Nearest class mean, estimated from the training split: a stand-in for "a small model can
// learn this". It should do well but not perfectly, or accuracy numbers mean nothing.
double NearestCentroidAccuracy(const Dataset& ds) {
  const size_t n = size_t(ds.train.shape.elements());
  std::vector<double> centroids(size_t(ds.classes) * n, 0.0);
  std::vector<int> counts(size_t(ds.classes), 0);
  for (int64_t i = 0; i < ds.train.count; ++i) {
    size_t k = size_t(ds.train.labels[size_t(i)]);
    ++counts[k];
    for (size_t j = 0; j < n; ++j) centroids[k * n + j] += ds.train.images[size_t(i) * n + j];
  }
  for (size_t k = 0; k < counts.size(); ++k)
    for (size_t j = 0; j < n; ++j) centroids[k * n + j] /= counts[k];
  int correct = 0;
  for (int64_t i = 0; i < ds.test.count; ++i) {
    size_t best = 0;
    double best_d = 1e300;
    for (size_t k = 0; k < counts.size(); ++k) {
      double d = 0;
      for (size_t j = 0; j < n; ++j) {
        double t = ds.test.images[size_t(i) * n + j] - centroids[k * n + j];
        d += t * t;
      }
      if (d < best_d) best_d = d, best = k;
    }
    correct += int(best) == ds.test.labels[size_t(i)];
  }
  return double(correct) / double(ds.test.count);
}

TEST(Synthetic, LearnableButNotTrivial) {
  TempDir dir;
  for (const Shape3& shape : {Shape3{1, 8, 8}, Shape3{3, 16, 16}, Shape3{24, 1, 1}}) {
    WriteSyntheticDataset(dir / "s.h5", shape, 5, 1000, 1000, 7);
    double acc = NearestCentroidAccuracy(LoadDataset(dir / "s.h5"));
    EXPECT_GT(acc, 0.9) << shape.channels << "x" << shape.height << "x" << shape.width;
    EXPECT_LT(acc, 0.999) << shape.channels << "x" << shape.height << "x" << shape.width;
  }
}

TEST(Synthetic, RejectsBadArguments) {
  TempDir dir;
  const std::string out = dir / "s.h5";
  ExpectDataError(
      [&] {
        WriteSyntheticDataset(out, Shape3{0, 2, 2}, 3, 10, 1, 1);
      },
      out + ": invalid sample shape 0x2x2");
  ExpectDataError(
      [&] {
        WriteSyntheticDataset(out, Shape3{1, 2, 2}, 1, 10, 1, 1);
      },
      out + ": need at least 2 classes");
  ExpectDataError(
      [&] {
        WriteSyntheticDataset(out, Shape3{1, 2, 2}, 3, 0, 1, 1);
      },
      out + ": invalid sample counts (train 0, test 1)");
  EXPECT_FALSE(fs::exists(out));
}

TEST(Synthetic, ReplacesAnExistingFile) {
  TempDir dir;
  const std::string out = dir / "s.h5";
  WriteFile(out, "not a data set", false);
  WriteSyntheticDataset(out, Shape3{1, 2, 2}, 2, 4, 2, 1);
  EXPECT_EQ(LoadDataset(out).train.count, 4);
}

// ---------------------------------------------------------------------------------------
// Malformed data set files, written with the h5 wrapper

struct FileSpec {
  int64_t classes = 4;
  bool write_classes = true;
  int64_t format_version = 1;
  bool write_mean = false, write_std = false;
  double mean = 0.5, stddev = 0.25;
  std::vector<hsize_t> train_images{8, 1, 2, 3};
  std::vector<hsize_t> train_labels{8};
  std::vector<hsize_t> test_images{4, 1, 2, 3};
  std::vector<hsize_t> test_labels{4};
  std::vector<std::string> skip;     // datasets not to write
  std::function<void(hid_t)> tweak;  // runs last, for anything else
  bool uint8_images = false;
};

std::string WriteDataFile(const TempDir& dir, const FileSpec& s) {
  const std::string path = dir / "data.h5";
  h5::File f(path, h5::Mode::Create);
  if (s.write_classes) h5::SetAttr(f.id(), ".", "classes", s.classes);
  h5::SetAttr(f.id(), ".", "format_version", s.format_version);
  if (s.write_mean) h5::SetAttr(f.id(), ".", "mean", s.mean);
  if (s.write_std) h5::SetAttr(f.id(), ".", "std", s.stddev);
  auto count = [](const std::vector<hsize_t>& d) {
    size_t n = 1;
    for (hsize_t v : d) n *= v;
    return n;
  };
  auto wanted = [&](const std::string& name) {
    return std::find(s.skip.begin(), s.skip.end(), name) == s.skip.end();
  };
  for (const char* split : {"train", "test"}) {
    const auto& idims = std::string(split) == "train" ? s.train_images : s.test_images;
    const auto& ldims = std::string(split) == "train" ? s.train_labels : s.test_labels;
    std::string images = std::string("/") + split + "/images";
    std::string labels = std::string("/") + split + "/labels";
    if (wanted(images)) {
      if (s.uint8_images) {
        std::vector<uint8_t> v(count(idims));
        for (size_t i = 0; i < v.size(); ++i) v[i] = uint8_t(i * 13);
        h5::WriteBytes(f.id(), images, idims, v.data());
      } else {
        std::vector<float> v(count(idims));
        for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f;
        h5::WriteFloats(f.id(), images, idims, v.data());
      }
    }
    if (wanted(labels)) {
      std::vector<int32_t> v(count(ldims));
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = int32_t(i % size_t(std::max<int64_t>(s.classes, 1)));
      h5::WriteInts(f.id(), labels, ldims, v.data());
    }
  }
  if (s.tweak) s.tweak(f.id());
  f.close();
  return path;
}

TEST(LoadDataset, AcceptsAValidFile) {
  TempDir dir;
  FileSpec s;
  Dataset ds = LoadDataset(WriteDataFile(dir, s));
  EXPECT_EQ(ds.classes, 4);
  EXPECT_EQ(ds.train.count, 8);
  EXPECT_EQ(ds.test.count, 4);
  EXPECT_EQ(ds.train.shape, (Shape3{1, 2, 3}));
  EXPECT_EQ(ds.train.images.size(), 48u);
  EXPECT_EQ(ds.train.images[5], 2.5f);  // float32 images are used as stored
  EXPECT_EQ(ds.test.labels, (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(LoadDataset, ScalesBytesAndStandardizes) {
  TempDir dir;
  FileSpec s;
  s.uint8_images = true;
  Dataset plain = LoadDataset(WriteDataFile(dir, s));
  EXPECT_FLOAT_EQ(plain.train.images[3], float(39 / 255.0));
  s.write_mean = s.write_std = true;
  Dataset norm = LoadDataset(WriteDataFile(dir, s));
  EXPECT_NEAR(norm.train.images[3], (39 / 255.0 - 0.5) / 0.25, 1e-6);
  s.uint8_images = false;
  norm = LoadDataset(WriteDataFile(dir, s));
  EXPECT_NEAR(norm.train.images[3], (1.5 - 0.5) / 0.25, 1e-6);
}

// One mean and std per channel, or per element of a sample: each value standardised by its
// own; a count that fits neither is refused naming the file.
TEST(LoadDataset, StandardizesPerChannelAndPerElement) {
  TempDir dir;
  FileSpec s;
  s.train_images = {8, 2, 1, 3};
  s.test_images = {4, 2, 1, 3};
  s.tweak = [](hid_t f) {
    h5::SetDoublesAttr(f, ".", "mean", {1.0, 2.0});
    h5::SetDoublesAttr(f, ".", "std", {0.5, 4.0});
  };
  Dataset ds = LoadDataset(WriteDataFile(dir, s));
  ASSERT_EQ(ds.input_mean, (std::vector<double>{1.0, 2.0}));
  // Sample 1's values are 3.0 .. 5.5 (i * 0.5): channel 0 holds 3, 3.5, 4; channel 1 4.5 ...
  EXPECT_FLOAT_EQ(ds.train.images[6], float((3.0 - 1.0) / 0.5));
  EXPECT_FLOAT_EQ(ds.train.images[9], float((4.5 - 2.0) / 4.0));

  s.tweak = [](hid_t f) {
    h5::SetDoublesAttr(f, ".", "mean", {0, 1, 2, 3, 4, 5});
    h5::SetDoublesAttr(f, ".", "std", {1, 1, 1, 1, 1, 2});
  };
  ds = LoadDataset(WriteDataFile(dir, s));
  for (size_t j = 0; j < 6; ++j)
    EXPECT_FLOAT_EQ(ds.train.images[6 + j],
                    float((0.5 * double(6 + j) - double(j)) / (j == 5 ? 2 : 1)));

  s.tweak = [](hid_t f) {
    h5::SetDoublesAttr(f, ".", "mean", {0, 1, 2});
    h5::SetDoublesAttr(f, ".", "std", {1, 1, 1});
  };
  const std::string path = WriteDataFile(dir, s);
  ExpectDataErrorLike([&] { LoadDataset(path); }, path + ": root attributes mean: 3 values",
                      "take 1, one per channel (2) or one per element (6)");
}

TEST(InputStats, TextAndExpansion) {
  const Shape3 rgb{3, 2, 2};
  EXPECT_EQ(StatsPerValue({0.5}, rgb, "x"), std::vector<double>(12, 0.5));
  EXPECT_EQ(StatsPerValue({1, 2, 3}, rgb, "x")[5], 2.0);
  EXPECT_EQ(StatsText({0.286}, rgb), "0.286");
  EXPECT_EQ(StatsText({0.5, 0.25, 0.125}, rgb), "3 per channel: 0.5, 0.25, 0.125");
  EXPECT_EQ(StatsText({1, 2, 3, 4, 5, 6, 7}, Shape3{1, 1, 7}),
            "7 per element: 1, 2, 3, ..., 5, 6, 7");
  EXPECT_FALSE(StatsPerElement(rgb));
  EXPECT_TRUE(StatsPerElement(Shape3{1, 1, 7}));
}

TEST(LoadDataset, MissingDatasets) {
  TempDir dir;
  for (const char* name : {"/train/images", "/train/labels", "/test/images", "/test/labels"}) {
    FileSpec s;
    s.skip = {name};
    std::string path = WriteDataFile(dir, s);
    ExpectDataError([&] { LoadDataset(path); }, path + ": missing dataset " + name);
  }
}

TEST(LoadDataset, WrongRanks) {
  TempDir dir;
  FileSpec s;
  s.train_images = {8, 2, 3};
  std::string path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); },
                  path + ": /train/images has rank 3 (8 x 2 x 3), expected 4 (N x C x H x W)");
  s = FileSpec();
  s.test_labels = {4, 1};
  path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); },
                  path + ": /test/labels has rank 2 (4 x 1), expected 1");
}

TEST(LoadDataset, CountMismatch) {
  TempDir dir;
  FileSpec s;
  s.train_labels = {7};
  std::string path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); },
                  path + ": /train/labels has 7 entries but /train/images has 8");
}

TEST(LoadDataset, LabelOutOfRange) {
  TempDir dir;
  FileSpec s;
  // Labels are written as i % classes; claiming fewer classes afterwards puts label 10 at
  // index 10 out of range.
  s.classes = 13;
  s.train_images = {20, 1, 2, 3};
  s.train_labels = {20};
  s.tweak = [](hid_t f) { h5::SetAttr(f, ".", "classes", int64_t(10)); };
  std::string path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); }, path + ": /train/labels[10] = 10 is outside [0, 10)");

  s = FileSpec();
  s.skip = {"/test/labels"};
  s.tweak = [](hid_t f) {
    std::vector<int32_t> labels = {0, 1, -1, 2};
    h5::WriteInts(f, "/test/labels", {4}, labels.data());
  };
  path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); }, path + ": /test/labels[2] = -1 is outside [0, 4)");
}

TEST(LoadDataset, BadRootAttributes) {
  TempDir dir;
  FileSpec s;
  s.classes = 1;
  std::string path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); },
                  path + ": classes = 1 is invalid (must be at least 2)");

  s = FileSpec();
  s.write_classes = false;
  path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); }, path + ": missing root attribute 'classes'");

  s = FileSpec();
  s.write_classes = false;
  s.tweak = [](hid_t f) { h5::SetAttr(f, ".", "classes", std::string("ten")); };
  path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); }, path + ": attribute 'classes' is not an integer");

  s = FileSpec();
  s.format_version = 2;
  path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); },
                  path + ": format_version 2 is not supported (expected 1)");

  s = FileSpec();
  s.write_mean = true;
  path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); },
                  path + ": root attributes 'mean' and 'std' must be given together");

  s.write_std = true;
  s.stddev = 0;
  path = WriteDataFile(dir, s);
  ExpectDataErrorLike([&] { LoadDataset(path); }, path + ": invalid normalization attributes",
                      "std must be positive");
}

TEST(LoadDataset, BadElementsAndShapes) {
  TempDir dir;
  FileSpec s;
  s.test_images = {4, 1, 3, 2};
  std::string path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); },
                  path + ": /test/images samples are 1x3x2 but /train/images samples are 1x2x3");

  s = FileSpec();
  s.skip = {"/train/labels"};
  s.tweak = [](hid_t f) {
    std::vector<float> labels(8, 1.0f);
    h5::WriteFloats(f, "/train/labels", {8}, labels.data());
  };
  path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); }, path + ": /train/labels must hold integers");

  s = FileSpec();
  s.skip = {"/test/images"};
  s.tweak = [](hid_t f) {
    std::vector<float> images(24, 0.0f);
    images[7] = NAN;
    h5::WriteFloats(f, "/test/images", {4, 1, 2, 3}, images.data());
  };
  path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); },
                  path + ": /test/images holds a non-finite value at element 7");

  s = FileSpec();
  s.train_images = {8, 1, 0, 3};
  path = WriteDataFile(dir, s);
  ExpectDataError([&] { LoadDataset(path); },
                  path + ": /train/images has an invalid sample shape 8 x 1 x 0 x 3");
}

TEST(LoadDataset, UnreadableFiles) {
  TempDir dir;
  ExpectDataError([&] { LoadDataset(dir / "nope.h5"); },
                  dir / "nope.h5" + ": cannot open: No such file or directory");
  ExpectDataError([&] { LoadDataset(dir.path()); }, dir.path() + ": not a regular file");
  WriteFile(dir / "text.h5", "this is not HDF5\n", false);
  ExpectDataError([&] { LoadDataset(dir / "text.h5"); },
                  dir / "text.h5" + ": not an HDF5 file (no HDF5 signature)");
  // A real HDF5 file cut short: the signature is there, HDF5 itself must complain.
  WriteSyntheticDataset(dir / "cut.h5", Shape3{1, 4, 4}, 2, 100, 10, 1);
  fs::resize_file(dir / "cut.h5", fs::file_size(dir / "cut.h5") / 2);
  ExpectDataErrorLike([&] { LoadDataset(dir / "cut.h5"); }, dir / "cut.h5" + ": ", "");
}

}  // namespace
}  // namespace dlh
