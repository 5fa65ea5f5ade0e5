// DLH — data sets in HDF5, imported from IDX (Fashion-MNIST) or generated.
//
// File layout (format_version 1):
//   /train/images  N x C x H x W, uint8 (scaled to [0,1] on load) or float32 (as is)
//   /train/labels  N, integer in [0, classes)
//   /test/images, /test/labels   the same for the held-out split
//   root attributes: format_version (int), classes (int), source (string),
//                    mean, std (double, optional: loaded images become (x - mean) / std;
//                    one value, or a 1-D array of one per channel or one per element of a
//                    sample: input_stats.hpp)
//   /class_names   optional scalar string: a JSON array of the class names, index = label
//                  (written by the imports of named classes: image folders, CSV)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/spec.hpp"
#include "launcher/data/input_stats.hpp"

namespace dlh {

struct DataSplit {
  int64_t count = 0;
  Shape3 shape;
  std::vector<float> images;    // count * shape.elements(), normalized (empty: not read)
  std::vector<int32_t> labels;  // count
  // How a sample's stored value v at element j became its loaded one: float(v) * load.a[j] +
  // load.b[j], in float arithmetic, uint8 (stored_bytes) or float storage. A reader of the
  // file's samples (file_source.hpp) applies exactly this, so its samples equal the loaded
  // ones bit for bit.
  bool stored_bytes = false;
  LoadTransform load;
};

struct Dataset {
  int classes = 0;
  // Loaded value = stored value * input_scale, then (v - input_mean) / input_std, with one
  // mean and std, one per channel or one per element (input_stats.hpp); recorded in
  // checkpoints so that a model is usable without its data set file.
  double input_scale = 1;
  std::vector<double> input_mean{0.0}, input_std{1.0};
  DataSplit train;
  DataSplit test;
};

// Loads and validates a data set file. Throws DataError naming the file and the
// dataset at fault (missing, wrong rank, label count mismatch, label out of range).
// `with_images` false: everything but the images (their shape and type are still checked),
// for a loader that reads the samples it needs from the file (file_source.hpp).
Dataset LoadDataset(const std::string& path, bool with_images = true);

// The classes' names a data set file holds (/class_names, index = label); empty when it
// holds none. Throws DataError naming the file when they are not `classes` names.
std::vector<std::string> ReadClassNames(const std::string& path, int classes);

// Reads IDX files (train-images-idx3-ubyte[.gz], ...) from `source_dir` and writes the
// data set file atomically. Throws DataError.
void ImportFashionMnist(const std::string& source_dir, const std::string& out_path);

// Writes a learnable synthetic classification data set of any shape: each class has a
// random prototype image, samples are prototype + Gaussian noise. Deterministic in seed.
void WriteSyntheticDataset(const std::string& out_path, const Shape3& shape, int classes,
                           int64_t train_count, int64_t test_count, uint64_t seed);

}  // namespace dlh
