// DLH — bringing a user's own data set in: what every importer (NumPy, HDF5 from h5py, a
// folder of images per class, CSV) hands over, and the one path that turns it into a DLH data
// set file (layout: dataset.hpp). The readers only read; splitting, label checks, statistics
// and the atomic write are here, so every format gets the same rules and the same messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/spec.hpp"

namespace dlh {

// Samples as a reader found them, in file order. Images are bytes (0..255, loaded as x / 255)
// or floats (loaded as they are); exactly one of the two vectors is filled.
struct ImportedSplit {
  Shape3 shape;                 // per sample, C x H x W
  std::vector<uint8_t> bytes;   // count * shape.elements(), when the source held uint8
  std::vector<float> floats;    // count * shape.elements(), otherwise
  std::vector<int64_t> labels;  // count; checked against the classes in WriteImportedDataset
  // Where sample i came from, for messages ("cats/007.png", "row 12"); may be empty.
  std::vector<std::string> origins;
  // The files this split's images and labels came from, for messages about them; empty: the
  // data's source_file (NumPy keeps images and labels in files of their own, and a test split
  // of its own file names that file, not the training one).
  std::string images_file, labels_file;
  // Files of an image folder left out for a name that is no image's (notes.txt, a .csv of
  // labels), relative to the folder: the command says so in one note.
  std::vector<std::string> skipped;
  bool is_bytes() const { return !bytes.empty() || floats.empty(); }
  int64_t count() const { return int64_t(labels.size()); }
};

struct ImportedData {
  ImportedSplit train;
  ImportedSplit test;
  bool has_test = false;                 // false: a held-out split is drawn from train
  std::vector<std::string> class_names;  // optional; index = label
  int classes = 0;                       // 0: class_names.size(), else max label + 1
  std::string source;                    // what was imported, for the file's 'source'
  std::string source_file;               // names the input in messages about labels
};

// How a rank-4 image array is laid out: N x C x H x W (PyTorch) or N x H x W x C (NumPy,
// Keras, PIL). kAuto takes NHWC when the last axis has 1, 3 or 4 entries and the second does
// not, NCHW otherwise.
enum class ImageLayout { kAuto, kNCHW, kNHWC };

// Puts an array of rank 2 (N x F: 1 x 1 x F per sample), 3 (N x H x W: 1 x H x W) or 4 (see
// ImageLayout) into split->bytes or split->floats as N x C x H x W. `where` names the array
// in messages ("x.npz: x_train"). Throws DataError.
void SetImages(ImportedSplit* split, const std::vector<int64_t>& dims, ImageLayout layout,
               std::vector<uint8_t> bytes, const std::string& where);
void SetImages(ImportedSplit* split, const std::vector<int64_t>& dims, ImageLayout layout,
               std::vector<float> floats, const std::string& where);

struct ImportOptions {
  double test_fraction = 0.1;  // held out of train when the source has no test split
  uint64_t seed = 1;           // which samples are held out (a fixed shuffle of train)
  bool normalize = true;       // store mean/std of train, so images load standardized
};

// Holds out a test split when there is none, checks every label (one line naming the file
// and the sample), computes the training split's mean and standard deviation, and writes
// out_path atomically (nothing half-written on any error). Throws DataError. Returns notes
// for the user, one line each: what was written but may not be what they meant.
std::vector<std::string> WriteImportedDataset(ImportedData data, const ImportOptions& options,
                                              const std::string& out_path);

}  // namespace dlh
