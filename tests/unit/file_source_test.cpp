// Tests for launcher/data/file_source.cpp: samples read from the file equal those LoadDataset
// loads, bit for bit, through the loader too; what it cannot read is refused with one line.
#include "launcher/data/file_source.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/data/dataset.hpp"
#include "launcher/data/import.hpp"
#include "launcher/data/loader.hpp"
#include "launcher/storage/h5.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

using test::TempDir;

// A data set of `count` samples of 3 x 5 x 4 written by the import path: uint8 values
// (i * 7 + j) % 256, or floats i - j / 10.
std::string WriteSet(const TempDir& dir, const std::string& name, bool bytes, int64_t count) {
  ImportedData d;
  const Shape3 shape{3, 5, 4};
  const size_t e = size_t(shape.elements());
  d.train.shape = d.test.shape = shape;
  for (ImportedSplit* s : {&d.train, &d.test}) {
    for (int64_t i = 0; i < count; ++i) {
      for (size_t j = 0; j < e; ++j) {
        if (bytes)
          s->bytes.push_back(uint8_t((i * 7 + int64_t(j)) % 256));
        else
          s->floats.push_back(float(i) - float(j) / 10);
      }
      s->labels.push_back(i % 3);
    }
  }
  d.has_test = true;
  d.source = "file_source_test";
  WriteImportedDataset(d, ImportOptions{}, dir / name);
  return dir / name;
}

void ExpectSameSamples(const std::string& path) {
  const Dataset loaded = LoadDataset(path);
  const Dataset meta = LoadDataset(path, /*with_images=*/false);
  EXPECT_TRUE(meta.train.images.empty());
  FileSource source(path, "train", meta.train);
  ASSERT_EQ(source.count(), loaded.train.count);
  EXPECT_EQ(source.labels(), loaded.train.labels);
  // Any order, repeats, and runs of neighbours (which become one read).
  const std::vector<int64_t> indices = {5, 0, 1, 2, 3, 39, 5, 17, 18, 38};
  const size_t e = size_t(loaded.train.shape.elements());
  std::vector<float> got(indices.size() * e);
  source.read(indices.data(), indices.size(), got.data());
  for (size_t k = 0; k < indices.size(); ++k)
    EXPECT_EQ(0,
              std::memcmp(got.data() + k * e, loaded.train.images.data() + size_t(indices[k]) * e,
                          e * sizeof(float)))
        << "sample " << indices[k];
  EXPECT_EQ(source.bytes_read(), indices.size() * e * (loaded.train.stored_bytes ? 1 : 4));
}

TEST(FileSource, Uint8SamplesEqualTheLoadedOnes) {
  TempDir dir;
  ExpectSameSamples(WriteSet(dir, "u8.h5", true, 40));
}

TEST(FileSource, Float32SamplesEqualTheLoadedOnes) {
  TempDir dir;
  ExpectSameSamples(WriteSet(dir, "f32.h5", false, 40));
}

// The loader hands out the same batches from the file as from memory, prefetching or not,
// and from a cursor in the middle (a resume).
TEST(FileSource, LoaderBatchesAreTheSameAsFromMemory) {
  TempDir dir;
  const std::string path = WriteSet(dir, "u8.h5", true, 40);
  const Dataset loaded = LoadDataset(path);
  FileSource source(path, "train", LoadDataset(path, false).train);
  LoaderOptions o;
  o.global_batch = 8;
  o.rank_offset = 3;
  o.rank_batch = 5;
  o.seed = 11;
  for (int prefetch : {0, 2}) {
    o.prefetch = prefetch;
    Loader memory(loaded.train, o, 1, 2), file(source, o, 1, 2);
    for (int step = 0; step < 9; ++step) {  // crosses an epoch end (5 steps an epoch)
      Batch a = memory.next(), b = file.next();
      EXPECT_EQ(a.epoch, b.epoch);
      EXPECT_EQ(a.step_in_epoch, b.step_in_epoch);
      EXPECT_EQ(a.labels, b.labels);
      ASSERT_EQ(a.images.size(), b.images.size());
      EXPECT_EQ(0, std::memcmp(a.images.data(), b.images.data(), a.images.size() * sizeof(float)));
    }
  }
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

TEST(FileSource, RefusesChunkedImagesAndReportsATruncatedFile) {
  TempDir dir;
  const std::string path = WriteSet(dir, "u8.h5", true, 40);
  const DataSplit meta = LoadDataset(path, false).train;

  // A chunked copy of /train/images (as h5py writes with chunks=True).
  const std::string chunked = dir / "chunked.h5";
  {
    h5::File out(chunked, h5::Mode::Create);
    const hsize_t dims[4] = {40, 3, 5, 4}, chunk[4] = {8, 3, 5, 4};
    h5::Handle space(H5_CHECK(H5Screate_simple(4, dims, nullptr)));
    h5::Handle props(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
    H5_CHECK(H5Pset_chunk(props.id(), 4, chunk));
    h5::Handle group(
        H5_CHECK(H5Gcreate2(out.id(), "train", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
    h5::Handle dset(H5_CHECK(H5Dcreate2(group.id(), "images", H5T_STD_U8LE, space.id(), H5P_DEFAULT,
                                        props.id(), H5P_DEFAULT)));
    std::vector<uint8_t> zeros(40 * 60);
    H5_CHECK(H5Dwrite(dset.id(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data()));
  }
  EXPECT_NE(ErrorOf([&] {
              FileSource(chunked, "train", meta);
            }).find(chunked + ": /train/images is not stored contiguously (chunked or compressed)"),
            std::string::npos);

  // Cut the file inside /train/images: opening succeeds (HDF5 reads only its header), and the
  // read of a sample past the end names it.
  FileSource source(path, "train", meta);
  ASSERT_EQ(0, ::truncate(path.c_str(), 0));
  const int64_t last = 39;
  std::vector<float> out(60);
  EXPECT_NE(ErrorOf([&] {
              source.read(&last, 1, out.data());
            }).find(path + ": truncated: /train/images sample 39 lies past the end of the file"),
            std::string::npos);
}

}  // namespace
}  // namespace dlh
