// DLH — images and labels from someone else's HDF5 file (see import_hdf5.hpp).
#include "launcher/data/import_hdf5.hpp"

#include <cmath>

#include "common/error.hpp"
#include "launcher/storage/h5.hpp"

namespace dlh {
namespace {

struct ElementType {
  H5T_class_t cls;
  size_t bytes;
  bool is_unsigned;
};

ElementType TypeOf(hid_t file, const std::string& path) {
  h5::Handle dset(H5_CHECK(H5Dopen2(file, path.c_str(), H5P_DEFAULT)));
  h5::Handle type(H5_CHECK(H5Dget_type(dset.id())));
  return {H5Tget_class(type.id()), H5Tget_size(type.id()),
          H5Tget_class(type.id()) == H5T_INTEGER && H5Tget_sign(type.id()) == H5T_SGN_NONE};
}

std::string DimsText(const std::vector<hsize_t>& dims) {
  std::string out;
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? " x " : "") + std::to_string(dims[i]);
  return dims.empty() ? "a scalar" : out;
}

}  // namespace

void ReadHdf5Split(const std::string& path, const std::string& images, const std::string& labels,
                   ImageLayout layout, ImportedSplit* out) {
  const std::string where_images = path + ": " + images, where_labels = path + ": " + labels;
  try {
    h5::File file(path, h5::Mode::ReadOnly);
    const hid_t f = file.id();
    for (const std::string* name : {&images, &labels})
      if (!h5::Exists(f, *name)) throw DataError(path + ": no dataset " + *name);

    const std::vector<hsize_t> ldims = h5::Dims(f, labels);
    if (!(ldims.size() == 1 || (ldims.size() == 2 && ldims[1] == 1)))
      throw DataError(where_labels + ": labels are " + DimsText(ldims) + "; expected N or N x 1");
    // Whole numbers stored as floats count too: MATLAB (-v7.3) writes doubles unless told
    // otherwise, and import-numpy takes them from a .npy.
    const int label_class = TypeOf(f, labels).cls;
    if (label_class != H5T_INTEGER && label_class != H5T_FLOAT)
      throw DataError(where_labels + ": labels must be whole numbers (class indices)");
    const std::vector<hsize_t> idims = h5::Dims(f, images);
    if (idims.empty() || idims[0] != ldims[0])
      throw DataError(where_images + ": " +
                      (idims.empty() ? "a scalar" : std::to_string(idims[0]) + " samples") + " (" +
                      DimsText(idims) + ") for " + std::to_string(ldims[0]) + " labels in " +
                      labels);

    const ElementType it = TypeOf(f, images);
    if (it.cls != H5T_INTEGER && it.cls != H5T_FLOAT)
      throw DataError(where_images + ": images must hold numbers");
    std::vector<int64_t> dims(idims.begin(), idims.end());
    std::vector<float> values = h5::ReadFloats(f, images);
    if (it.cls == H5T_INTEGER && it.bytes == 1 && it.is_unsigned) {
      // uint8 stays uint8: a quarter of the file, and loads as x / 255 like the IDX import.
      std::vector<uint8_t> bytes(values.size());
      for (size_t i = 0; i < values.size(); ++i) bytes[i] = uint8_t(values[i]);
      values = {};
      SetImages(out, dims, layout, std::move(bytes), where_images);
    } else {
      SetImages(out, dims, layout, std::move(values), where_images);
    }
    if (label_class == H5T_INTEGER) {
      std::vector<int32_t> l = h5::ReadInts(f, labels);
      out->labels.assign(l.begin(), l.end());
    } else {
      // Read as float: exact for every whole number up to 2^24, far beyond any class count.
      const std::vector<float> l = h5::ReadFloats(f, labels);
      out->labels.clear();
      for (size_t i = 0; i < l.size(); ++i) {
        if (!(std::fabs(l[i]) <= 16777216.0f) || l[i] != std::trunc(l[i]))
          throw DataError(where_labels + ": label " + std::to_string(i) + " is " +
                          std::to_string(l[i]) + ": labels must be whole numbers (class indices)");
        out->labels.push_back(int64_t(l[i]));
      }
    }
    out->origins.clear();
  } catch (const H5Error& e) {
    std::string what = e.what();
    if (what.compare(0, path.size() + 1, path + ":") != 0) what = path + ": " + what;
    throw DataError(what);
  }
}

}  // namespace dlh
