// DLH — tests of HDF5 checkpoints: round trip, corruption detection, atomic replacement,
// checkpoint folders (rotation, fallback to an older valid file, stale temporary files).
#include "launcher/storage/checkpoint.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "launcher/storage/h5.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

namespace fs = std::filesystem;

std::vector<float> Iota(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + 0.25f * float(i);
  return v;
}

// Several arrays in a non-alphabetical order, a 4-D shape, names with '/', a scalar, a
// zero-sized array and float values that only a bit-exact copy preserves.
TrainState SampleState(int64_t step = 42) {
  TrainState s;
  s.spec_json = "{\n  \"name\": \"tést\",\n  \"layers\": [{\"type\": \"conv2d\"}]\n}\n";
  s.step = step;
  s.epoch = 3;
  s.step_in_epoch = 17;
  s.seed = 0xFEDCBA9876543210ull;  // top bit set
  s.world_size = 4;
  s.samples_seen = 123456789012345;
  s.elapsed_seconds = 1234.5678901234567;
  s.optimizer = "adam";
  s.params.push_back({"03.conv2d/weight", {2, 3, 3, 3}, Iota(54, -5)});
  s.params.push_back({"03.conv2d/bias", {2}, {0.5f, -0.5f}});
  s.params.push_back({"00.dense/weight", {4, 3}, Iota(12, 1)});
  s.params.push_back({"zz/deep/nested/scale", {}, {std::numeric_limits<float>::denorm_min()}});
  s.params.push_back({"empty", {0, 5}, {}});
  s.params[2].data[0] = -0.0f;
  s.params[2].data[1] = std::numeric_limits<float>::infinity();
  s.params[2].data[2] = std::nanf("0x123");
  s.buffers.push_back({"05.batchnorm/running_var", {3}, {1, 2, 3}});
  s.buffers.push_back({"05.batchnorm/running_mean", {3}, {0.1f, 0.2f, 0.3f}});
  return s;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

void ExpectSameArrays(const std::vector<NamedArray>& want, const std::vector<NamedArray>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(want[i].name, got[i].name) << i;
    EXPECT_EQ(want[i].shape, got[i].shape) << want[i].name;
    EXPECT_TRUE(SameBits(want[i].data, got[i].data)) << want[i].name;
  }
}

void ExpectSameState(const TrainState& want, const TrainState& got) {
  EXPECT_EQ(want.spec_json, got.spec_json);
  EXPECT_EQ(want.step, got.step);
  EXPECT_EQ(want.epoch, got.epoch);
  EXPECT_EQ(want.step_in_epoch, got.step_in_epoch);
  EXPECT_EQ(want.seed, got.seed);
  EXPECT_EQ(want.world_size, got.world_size);
  EXPECT_EQ(want.samples_seen, got.samples_seen);
  EXPECT_EQ(std::memcmp(&want.elapsed_seconds, &got.elapsed_seconds, sizeof(double)), 0);
  EXPECT_EQ(want.optimizer, got.optimizer);
  ExpectSameArrays(want.params, got.params);
  ExpectSameArrays(want.buffers, got.buffers);
  ExpectSameArrays(want.optimizer_state, got.optimizer_state);
}

// The message of the CheckpointError that `f` throws ("" and a test failure if none).
template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a CheckpointError: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no exception";
  return "";
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The h5 wrapper opens files read-only or creates them; the tests corrupt files in place
// with HDF5's own read-write open.
h5::Handle OpenReadWrite(const std::string& path) {
  return h5::Handle(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class CheckpointTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return tmp_ / name; }
  // A warn callback that keeps what it is told in warnings_ (state, not a static).
  std::function<void(const std::string&)> CaptureWarning() {
    return [this](const std::string& message) { warnings_.push_back(message); };
  }

  test::TempDir tmp_{"dlh-ckpt-test"};
  const std::string dir_ = tmp_.path();
  std::vector<std::string> warnings_;
};

// ---- round trip -------------------------------------------------------------------------

TEST_F(CheckpointTest, RoundTripKeepsEveryFieldOrderAndBit) {
  TrainState s = SampleState();
  SaveCheckpoint(Path("a.h5"), s);
  TrainState got = LoadCheckpoint(Path("a.h5"));
  ExpectSameState(s, got);
  EXPECT_TRUE(got.optimizer_state.empty());
}

TEST_F(CheckpointTest, RoundTripOptimizerStateAndEmptyGroups) {
  TrainState s;
  s.optimizer = "sgd";
  s.optimizer_state.push_back({"b/momentum", {2, 2}, {1, 2, 3, 4}});
  s.optimizer_state.push_back({"a/momentum", {1, 1, 1, 3}, {5, 6, 7}});
  SaveCheckpoint(Path("o.h5"), s);
  ExpectSameState(s, LoadCheckpoint(Path("o.h5")));

  TrainState bare;  // nothing but defaults: empty spec, no arrays at all
  SaveCheckpoint(Path("bare.h5"), bare);
  ExpectSameState(bare, LoadCheckpoint(Path("bare.h5")));
}

// The batch and rate a resume rescales from (launcher/train/elastic.hpp): written when set,
// covered by the checksum; a file without them (as every file written before) still loads.
TEST_F(CheckpointTest, GlobalBatchAndLrRoundTripAndAreOptional) {
  TrainState s = SampleState();
  s.global_batch = 96;
  s.lr = 0.0123456789012345;
  SaveCheckpoint(Path("b.h5"), s);
  TrainState got = LoadCheckpoint(Path("b.h5"));
  ExpectSameState(s, got);
  EXPECT_EQ(got.global_batch, 96);
  EXPECT_EQ(got.lr, s.lr);
  {
    h5::Handle file = OpenReadWrite(Path("b.h5"));
    h5::SetAttr(file.id(), ".", "lr", 0.5);
  }
  EXPECT_NE(ErrorOf([&] { LoadCheckpoint(Path("b.h5")); }).find("checksum mismatch"),
            std::string::npos);

  SaveCheckpoint(Path("old.h5"), SampleState());  // global_batch 0: written as before
  {
    h5::File f(Path("old.h5"), h5::Mode::ReadOnly);
    EXPECT_FALSE(h5::HasAttr(f.id(), ".", "global_batch"));
    EXPECT_FALSE(h5::HasAttr(f.id(), ".", "lr"));
  }
  got = LoadCheckpoint(Path("old.h5"));
  EXPECT_EQ(got.global_batch, 0);
  EXPECT_EQ(got.lr, 0);

  s.lr = 0;  // a batch without a rate cannot be resumed from
  EXPECT_NE(ErrorOf([&] { SaveCheckpoint(Path("c.h5"), s); }).find("global_batch and lr"),
            std::string::npos);
}

// How the data set's values were transformed (scale, mean, std): written when recorded,
// covered by the checksum, optional on reading, and refused when not usable.
TEST_F(CheckpointTest, InputNormalisationRoundTripsAndIsOptional) {
  TrainState s = SampleState();
  s.input_scale = 1.0 / 255.0;
  s.input_mean = {0.2860405969887955};
  s.input_std = {0.3530242445149223};
  SaveCheckpoint(Path("n.h5"), s);
  {  // one value: a scalar attribute, as files before per-channel statistics
    h5::File f(Path("n.h5"), h5::Mode::ReadOnly);
    EXPECT_DOUBLE_EQ(h5::GetDoubleAttr(f.id(), ".", "input_mean"), s.input_mean[0]);
  }
  TrainState got = LoadCheckpoint(Path("n.h5"));
  EXPECT_EQ(got.input_scale, s.input_scale);
  EXPECT_EQ(got.input_mean, s.input_mean);
  EXPECT_EQ(got.input_std, s.input_std);
  {
    h5::Handle file = OpenReadWrite(Path("n.h5"));
    h5::SetAttr(file.id(), ".", "input_mean", 0.5);
  }
  EXPECT_NE(ErrorOf([&] { LoadCheckpoint(Path("n.h5")); }).find("checksum mismatch"),
            std::string::npos);
  {
    SaveCheckpoint(Path("n.h5"), s);
    h5::Handle file = OpenReadWrite(Path("n.h5"));
    h5::SetAttr(file.id(), ".", "input_std", -1.0);
  }
  EXPECT_NE(ErrorOf([&] { LoadCheckpoint(Path("n.h5")); }).find("input_std"), std::string::npos);

  SaveCheckpoint(Path("old.h5"), SampleState());  // not recorded: written as before
  {
    h5::File f(Path("old.h5"), h5::Mode::ReadOnly);
    EXPECT_FALSE(h5::HasAttr(f.id(), ".", "input_scale"));
  }
  EXPECT_EQ(LoadCheckpoint(Path("old.h5")).input_scale, 0);

  // One mean and std per channel (or per element): arrays, checksummed, counts checked.
  s.input_mean = {0.49, 0.48, 0.45};
  s.input_std = {0.25, 0.24, 0.26};
  SaveCheckpoint(Path("c3.h5"), s);
  got = LoadCheckpoint(Path("c3.h5"));
  EXPECT_EQ(got.input_mean, s.input_mean);
  EXPECT_EQ(got.input_std, s.input_std);
  {
    h5::Handle file = OpenReadWrite(Path("c3.h5"));
    h5::SetDoublesAttr(file.id(), ".", "input_mean", {0.49, 0.48, 0.46});
  }
  EXPECT_NE(ErrorOf([&] { LoadCheckpoint(Path("c3.h5")); }).find("checksum mismatch"),
            std::string::npos);
  {
    SaveCheckpoint(Path("c3.h5"), s);
    h5::Handle file = OpenReadWrite(Path("c3.h5"));
    h5::SetDoublesAttr(file.id(), ".", "input_std", {0.25, 0.24});
  }
  EXPECT_NE(ErrorOf([&] { LoadCheckpoint(Path("c3.h5")); }).find("as many stds as means"),
            std::string::npos);
}

// The data set's class names: a JSON array, checksummed, refused when not names; a file
// without them is written as before (LayoutMatchesDocumentation lists its datasets).
TEST_F(CheckpointTest, ClassNamesRoundTripAndAreOptional) {
  TrainState s = SampleState();
  s.class_names = {"T-shirt/top", "a, \"quoted\" name", "Ankle boot"};
  SaveCheckpoint(Path("names.h5"), s);
  EXPECT_EQ(LoadCheckpoint(Path("names.h5")).class_names, s.class_names);
  {
    h5::Handle file = OpenReadWrite(Path("names.h5"));
    H5_CHECK(H5Ldelete(file.id(), "class_names", H5P_DEFAULT));
    h5::WriteString(file.id(), "class_names", R"(["T-shirt/top", "b", "Ankle boot"])");
  }
  EXPECT_NE(ErrorOf([&] { LoadCheckpoint(Path("names.h5")); }).find("checksum mismatch"),
            std::string::npos);
  {
    SaveCheckpoint(Path("names.h5"), s);
    h5::Handle file = OpenReadWrite(Path("names.h5"));
    H5_CHECK(H5Ldelete(file.id(), "class_names", H5P_DEFAULT));
    h5::WriteString(file.id(), "class_names", R"(["a", 2])");
  }
  EXPECT_NE(ErrorOf([&] {
              LoadCheckpoint(Path("names.h5"));
            }).find("names.h5: dataset /class_names: [1] is not a name"),
            std::string::npos);
  EXPECT_TRUE(LoadCheckpoint([&] {
                SaveCheckpoint(Path("none.h5"), SampleState());
                return Path("none.h5");
              }())
                  .class_names.empty());
}

TEST_F(CheckpointTest, SeedKeepsAll64Bits) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{INT64_MAX}, uint64_t{1} << 63,
                        UINT64_MAX, uint64_t{0xFEDCBA9876543210ull}}) {
    TrainState s;
    s.seed = seed;
    SaveCheckpoint(Path("seed.h5"), s);
    EXPECT_EQ(LoadCheckpoint(Path("seed.h5")).seed, seed);
  }
}

TEST_F(CheckpointTest, LayoutMatchesDocumentation) {
  TrainState s = SampleState();
  SaveCheckpoint(Path("a.h5"), s);
  h5::File f(Path("a.h5"), h5::Mode::ReadOnly);
  hid_t id = f.id();
  EXPECT_EQ(h5::GetIntAttr(id, ".", "format_version"), kCheckpointFormatVersion);
  EXPECT_EQ(h5::GetStringAttr(id, ".", "producer"), "dlh");
  EXPECT_EQ(h5::GetIntAttr(id, ".", "step"), 42);
  EXPECT_EQ(h5::GetStringAttr(id, ".", "seed"), "18364758544493064720");
  EXPECT_EQ(h5::GetDoubleAttr(id, ".", "elapsed_seconds"), s.elapsed_seconds);
  EXPECT_EQ(h5::GetStringAttr(id, ".", "optimizer"), "adam");
  EXPECT_GT(h5::GetIntAttr(id, ".", "created_unix"), 1600000000);
  std::string checksum = h5::GetStringAttr(id, ".", "checksum");
  EXPECT_TRUE(StartsWith(checksum, "crc32:") && checksum.size() == 14) << checksum;
  EXPECT_EQ(h5::ReadString(id, "spec"), s.spec_json);
  EXPECT_EQ(h5::Dims(id, "params/03.conv2d/weight"), (std::vector<hsize_t>{2, 3, 3, 3}));
  EXPECT_EQ(h5::ReadString(id, "order/params"),
            "03.conv2d/weight\n03.conv2d/bias\n00.dense/weight\nzz/deep/nested/scale\nempty");
  EXPECT_EQ(h5::ReadString(id, "order/optimizer"), "");
  EXPECT_EQ(h5::ListChildren(id, "/"),
            (std::vector<std::string>{"buffers", "optimizer", "order", "params", "spec"}));
  EXPECT_TRUE(h5::ListChildren(id, "optimizer").empty());
}

TEST_F(CheckpointTest, CreatesMissingFolders) {
  std::string path = Path("x/y/z/ckpt.h5");
  SaveCheckpoint(path, SampleState());
  ExpectSameState(SampleState(), LoadCheckpoint(path));
}

TEST_F(CheckpointTest, RefusesStatesItCannotStoreFaithfully) {
  auto refuse = [&](TrainState s, const std::string& why) {
    std::string msg = ErrorOf([&] { SaveCheckpoint(Path("bad.h5"), s); });
    EXPECT_TRUE(StartsWith(msg, Path("bad.h5") + ": ")) << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
  };
  TrainState s = SampleState();
  s.params[1].data.push_back(1);
  refuse(s, "shape holds 2 values but it has 3");
  for (const char* name : {"", "a//b", "/a", "a/", "a/./b", "..", "a\nb"}) {
    s = SampleState();
    s.buffers[0].name = name;
    refuse(s, "buffers[0] name");
  }
  s = SampleState();
  s.params[1].name = s.params[0].name;
  refuse(s, "is repeated");
  s = SampleState();
  s.params.push_back({"03.conv2d/weight/extra", {1}, {1}});
  refuse(s, "clash");
  s = SampleState();
  s.params[0].shape[1] = -3;
  refuse(s, "negative dimension");
  EXPECT_FALSE(fs::exists(Path("bad.h5")));
  EXPECT_TRUE(Names(dir_).empty());
}

// ---- corruption and bad files -----------------------------------------------------------

TEST_F(CheckpointTest, ChecksumDetectsAFlippedFloat) {
  std::string path = Path("a.h5");
  SaveCheckpoint(path, SampleState());
  {
    h5::Handle file = OpenReadWrite(path);
    h5::Handle dset(H5_CHECK(H5Dopen2(file.id(), "params/03.conv2d/weight", H5P_DEFAULT)));
    std::vector<float> v = h5::ReadFloats(file.id(), "params/03.conv2d/weight");
    uint32_t bits;
    std::memcpy(&bits, &v[37], 4);
    bits ^= 1u << 7;
    std::memcpy(&v[37], &bits, 4);
    H5_CHECK(H5Dwrite(dset.id(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()));
  }
  std::string msg = ErrorOf([&] { LoadCheckpoint(path); });
  EXPECT_TRUE(StartsWith(msg, path + ": checksum mismatch (stored crc32:")) << msg;
  EXPECT_NE(msg.find(", computed crc32:"), std::string::npos) << msg;
}

// SampleState ends its params with an empty array: zlib restarts a crc32 given a null
// buffer, which once made every byte before such an array irrelevant.
TEST_F(CheckpointTest, ChecksumDetectsAChangedScalarAndSpec) {
  std::string path = Path("a.h5");
  SaveCheckpoint(path, SampleState());
  {
    h5::Handle file = OpenReadWrite(path);
    h5::SetAttr(file.id(), ".", "step_in_epoch", int64_t{18});
  }
  EXPECT_NE(ErrorOf([&] { LoadCheckpoint(path); }).find("checksum mismatch"), std::string::npos);

  SaveCheckpoint(path, SampleState());
  {
    h5::Handle file = OpenReadWrite(path);
    H5_CHECK(H5Ldelete(file.id(), "spec", H5P_DEFAULT));
    h5::WriteString(file.id(), "spec", "{}");
  }
  EXPECT_NE(ErrorOf([&] { LoadCheckpoint(path); }).find("checksum mismatch"), std::string::npos);

  // created_unix is informational: changing it keeps the file valid.
  SaveCheckpoint(path, SampleState());
  {
    h5::Handle file = OpenReadWrite(path);
    h5::SetAttr(file.id(), ".", "created_unix", int64_t{1});
  }
  ExpectSameState(SampleState(), LoadCheckpoint(path));
}

TEST_F(CheckpointTest, TruncatedFileIsRefused) {
  std::string path = Path("a.h5");
  SaveCheckpoint(path, SampleState());
  ASSERT_EQ(truncate(path.c_str(), off_t(fs::file_size(path) / 2)), 0);
  std::string msg = ErrorOf([&] { LoadCheckpoint(path); });
  EXPECT_TRUE(StartsWith(msg, path + ": not a valid HDF5 file, truncated or corrupt (")) << msg;
}

TEST_F(CheckpointTest, GarbageAndEmptyFilesAreRefused) {
  std::string path = Path("garbage.h5");
  std::string junk;
  for (int i = 0; i < 5000; ++i) junk += char(i * 7919 % 251);
  WriteFile(path, junk);
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }), path + ": not an HDF5 file");
  WriteFile(path, "");
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }), path + ": not an HDF5 file");
}

TEST_F(CheckpointTest, MissingFileAndFolderAreRefused) {
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(Path("none.h5")); }),
            Path("none.h5") + ": cannot open (No such file or directory)");
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(dir_); }), dir_ + ": cannot open (not a regular file)");
}

TEST_F(CheckpointTest, UnsupportedFormatVersionIsRefused) {
  std::string path = Path("a.h5");
  SaveCheckpoint(path, SampleState());
  {
    h5::Handle file = OpenReadWrite(path);
    h5::SetAttr(file.id(), ".", "format_version", int64_t{7});
  }
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }),
            path + ": format_version 7 is not supported (this build reads 1)");
}

TEST_F(CheckpointTest, MissingAttributeOrDatasetIsNamed) {
  std::string path = Path("a.h5");
  SaveCheckpoint(path, SampleState());
  {
    h5::Handle file = OpenReadWrite(path);
    H5_CHECK(H5Adelete(file.id(), "step"));
  }
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }), path + ": missing attribute step");

  SaveCheckpoint(path, SampleState());
  {
    h5::Handle file = OpenReadWrite(path);
    H5_CHECK(H5Ldelete(file.id(), "params/03.conv2d/bias", H5P_DEFAULT));
  }
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }),
            path + ": missing dataset /params/03.conv2d/bias");

  SaveCheckpoint(path, SampleState());
  {
    h5::Handle file = OpenReadWrite(path);
    H5_CHECK(H5Ldelete(file.id(), "order/buffers", H5P_DEFAULT));
  }
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }), path + ": missing dataset /order/buffers");

  SaveCheckpoint(path, SampleState());
  {
    h5::Handle file = OpenReadWrite(path);
    h5::SetAttr(file.id(), ".", "seed", int64_t{5});  // wrong type
  }
  std::string msg = ErrorOf([&] { LoadCheckpoint(path); });
  EXPECT_TRUE(StartsWith(msg, path + ": ")) << msg;
  EXPECT_NE(msg.find("seed"), std::string::npos) << msg;
}

// ---- hostile files (tests/fuzz/checkpoint_fuzz) -----------------------------------------
// HDF5 writes every element a file holds into the reader's buffer, converted through a
// buffer sized by the file's element type. Each of these files once overflowed a buffer
// sized for one value (ASan: stack- or heap-buffer-overflow), or made one read allocate
// and clear what a corrupt header claimed (1.5 GB per float, 3 GB for a string).

// Replaces the root attribute `name` by one of `count` values of `type`.
void ReplaceAttribute(const std::string& path, const char* name, hid_t type, hsize_t count,
                      const void* values) {
  h5::Handle file = OpenReadWrite(path);
  H5_CHECK(H5Adelete(file.id(), name));
  h5::Handle space(H5_CHECK(H5Screate_simple(1, &count, nullptr)));
  h5::Handle attr(
      H5_CHECK(H5Acreate2(file.id(), name, type, space.id(), H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attr.id(), type, values));
}

// Replaces dataset `name` by one of `type` and `dims`, never written (HDF5 reads fill
// bytes from it).
void ReplaceDataset(const std::string& path, const char* name, hid_t type,
                    const std::vector<hsize_t>& dims) {
  h5::Handle file = OpenReadWrite(path);
  H5_CHECK(H5Ldelete(file.id(), name, H5P_DEFAULT));
  h5::Handle space(H5_CHECK(dims.empty()
                                ? H5Screate(H5S_SCALAR)
                                : H5Screate_simple(int(dims.size()), dims.data(), nullptr)));
  h5::Handle dset(H5_CHECK(
      H5Dcreate2(file.id(), name, type, space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
}

h5::Handle StringType(size_t size) {
  h5::Handle type(H5_CHECK(H5Tcopy(H5T_C_S1)));
  H5_CHECK(H5Tset_size(type.id(), size));
  return type;
}

TEST_F(CheckpointTest, AttributeHoldingSeveralValuesIsRefused) {
  std::string path = Path("a.h5");
  SaveCheckpoint(path, SampleState());
  const int64_t steps[4] = {42, 43, 44, 45};
  ReplaceAttribute(path, "step", H5T_NATIVE_INT64, 4, steps);
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }),
            path + ": attribute 'step' holds 4 values, not one");

  SaveCheckpoint(path, SampleState());
  const double seconds[2] = {1, 2};
  ReplaceAttribute(path, "elapsed_seconds", H5T_NATIVE_DOUBLE, 2, seconds);
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }),
            path + ": attribute 'elapsed_seconds' holds 2 values, not one");

  SaveCheckpoint(path, SampleState());
  ReplaceAttribute(path, "producer", StringType(3).id(), 3, "dlhdlhdlh");
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }),
            path + ": attribute 'producer' holds 3 values, not one");

  SaveCheckpoint(path, SampleState());
  const char* seeds[2] = {"7", "8"};
  ReplaceAttribute(path, "seed", StringType(H5T_VARIABLE).id(), 2, seeds);
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }),
            path + ": attribute 'seed' holds 2 values, not one");
}

TEST_F(CheckpointTest, StringDatasetHoldingSeveralValuesIsRefused) {
  std::string path = Path("a.h5");
  SaveCheckpoint(path, SampleState());
  ReplaceDataset(path, "spec", StringType(64).id(), {4});
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }), path + ": 'spec' holds 4 values, not one");
}

// The fuzzer's file claimed 1,526,726,660 bytes per float; 1 MiB makes the same point
// without the memory.
TEST_F(CheckpointTest, NumberWiderThan8BytesIsRefused) {
  std::string path = Path("a.h5");
  SaveCheckpoint(path, SampleState());
  {
    h5::Handle wide(H5_CHECK(H5Tcopy(H5T_IEEE_F32LE)));
    H5_CHECK(H5Tset_size(wide.id(), size_t(1) << 20));
    ReplaceDataset(path, "params/03.conv2d/bias", wide.id(), {2});
  }
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }),
            path + ": 'params/03.conv2d/bias' has 1048576-byte elements, not a number");

  SaveCheckpoint(path, SampleState());
  {
    h5::Handle wide(H5_CHECK(H5Tcopy(H5T_STD_I64LE)));
    H5_CHECK(H5Tset_size(wide.id(), 16));
    const int64_t step[2] = {42, 0};  // 16 bytes, little-endian: the step that was saved
    ReplaceAttribute(path, "step", wide.id(), 1, step);
  }
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }),
            path + ": attribute 'step' has 16-byte elements, not a number");
}

// The fuzzer's file claimed a 3 GB string; 64 MiB makes the same point.
TEST_F(CheckpointTest, StringLongerThanTheFileIsRefused) {
  std::string path = Path("a.h5");
  SaveCheckpoint(path, SampleState());
  ReplaceDataset(path, "order/params", StringType(size_t(64) << 20).id(), {});
  const std::string size = std::to_string(fs::file_size(path));
  EXPECT_EQ(ErrorOf([&] { LoadCheckpoint(path); }),
            path + ": 'order/params' is a 67108864-byte string, longer than the file (" + size +
                " bytes)");
}

// Each array was checked against the file size alone, so an order list naming one dataset
// many times (or many hard links to it) read it again and again: a 1 MB file could make the
// reader allocate 1 MB per name, 500,000 times. All arrays together must fit the file.
TEST_F(CheckpointTest, ArraysTogetherLargerThanTheFileAreRefused) {
  std::string path = Path("a.h5");
  SaveCheckpoint(path, SampleState());
  std::string order = "03.conv2d/weight";  // 54 floats, 216 bytes
  for (int i = 0; i < 1000; ++i) order += "\n03.conv2d/weight";
  {
    h5::Handle file = OpenReadWrite(path);
    H5_CHECK(H5Ldelete(file.id(), "order/params", H5P_DEFAULT));
    h5::WriteString(file.id(), "order/params", order);
  }
  std::string msg = ErrorOf([&] { LoadCheckpoint(path); });
  EXPECT_TRUE(StartsWith(msg, path + ": dataset /params/03.conv2d/weight claims 54 values, "))
      << msg;
  EXPECT_NE(msg.find("more than the file holds"), std::string::npos) << msg;
}

// ---- atomic replacement -----------------------------------------------------------------

TEST_F(CheckpointTest, OverwriteReplacesTheFileAtomically) {
  std::string path = Path("a.h5");
  TrainState first = SampleState(1), second = SampleState(2);
  second.params[0].data.assign(54, 9.0f);
  SaveCheckpoint(path, first);
  struct stat before {};
  ASSERT_EQ(stat(path.c_str(), &before), 0);
  SaveCheckpoint(path, second);
  struct stat after {};
  ASSERT_EQ(stat(path.c_str(), &after), 0);
  // A new inode: the file was renamed into place, not rewritten where it stood.
  EXPECT_NE(before.st_ino, after.st_ino);
  ExpectSameState(second, LoadCheckpoint(path));
  EXPECT_EQ(Names(dir_), std::vector<std::string>{"a.h5"});
}

TEST_F(CheckpointTest, FailedSaveLeavesThePreviousFileIntact) {
  std::string path = Path("a.h5");
  SaveCheckpoint(path, SampleState(1));

  // A folder that is a regular file: nothing can be created inside it.
  std::string inside = path + "/sub/ckpt.h5";
  std::string msg = ErrorOf([&] { SaveCheckpoint(inside, SampleState(2)); });
  EXPECT_TRUE(StartsWith(msg, inside + ": ")) << msg;

  // The target is a folder: writing succeeds, the rename fails, the temp file goes.
  fs::create_directory(Path("taken.h5"));
  msg = ErrorOf([&] { SaveCheckpoint(Path("taken.h5"), SampleState(2)); });
  EXPECT_TRUE(StartsWith(msg, Path("taken.h5") + ": cannot rename")) << msg;

  ExpectSameState(SampleState(1), LoadCheckpoint(path));
  EXPECT_EQ(Names(dir_), (std::vector<std::string>{"a.h5", "taken.h5"}));
}

// ---- checkpoint folders -----------------------------------------------------------------

TEST_F(CheckpointTest, DirNamesAndListsOnlyCompleteCheckpoints) {
  CheckpointDir d(dir_ + "/");
  EXPECT_EQ(d.dir(), dir_);
  EXPECT_EQ(d.path_for_step(120), dir_ + "/ckpt-000000120.h5");
  EXPECT_EQ(d.path_for_step(1234567890), dir_ + "/ckpt-1234567890.h5");
  EXPECT_TRUE(CheckpointDir(Path("not-yet")).list_newest_first().empty());

  for (int64_t step : {7, 1234567890, 30}) SaveCheckpoint(d.path_for_step(step), SampleState(step));
  WriteFile(Path("ckpt-000000099.h5.tmp.12345"), "partial");
  WriteFile(Path("ckpt-99.h5"), "not our spelling");
  WriteFile(Path("notes.txt"), "");
  fs::create_directory(Path("ckpt-000000500.h5"));
  EXPECT_EQ(d.list_newest_first(),
            (std::vector<std::string>{d.path_for_step(1234567890), d.path_for_step(30),
                                      d.path_for_step(7)}));
}

TEST_F(CheckpointTest, RotationKeepsExactlyTheNewest) {
  CheckpointDir d(dir_);
  for (int64_t step = 1; step <= 6; ++step) {
    EXPECT_EQ(d.save(SampleState(step), 3), d.path_for_step(step));
  }
  EXPECT_EQ(d.list_newest_first(),
            (std::vector<std::string>{d.path_for_step(6), d.path_for_step(5), d.path_for_step(4)}));
  d.save(SampleState(7), 1);
  EXPECT_EQ(Names(dir_), std::vector<std::string>{"ckpt-000000007.h5"});
  EXPECT_THROW(d.save(SampleState(8), 0), CheckpointError);
}

TEST_F(CheckpointTest, RotationNeverDeletesTheFileJustWritten) {
  CheckpointDir d(dir_);
  d.save(SampleState(10), 5);
  d.save(SampleState(20), 5);
  d.save(SampleState(5), 2);  // a run resumed from an older checkpoint
  EXPECT_EQ(d.list_newest_first(),
            (std::vector<std::string>{d.path_for_step(20), d.path_for_step(5)}));
}

TEST_F(CheckpointTest, LoadNewestValidSkipsACorruptNewestFile) {
  CheckpointDir d(dir_);
  for (int64_t step : {1, 2, 3}) d.save(SampleState(step), 5);
  std::string newest = d.path_for_step(3);
  ASSERT_EQ(truncate(newest.c_str(), off_t(fs::file_size(newest) / 2)), 0);

  TrainState got;
  std::string path;
  ASSERT_TRUE(d.load_newest_valid(&got, &path, CaptureWarning()));
  EXPECT_EQ(path, d.path_for_step(2));
  ExpectSameState(SampleState(2), got);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_TRUE(StartsWith(warnings_[0], newest + ": skipped: ")) << warnings_[0];
  EXPECT_EQ(warnings_[0].find(newest, 1), std::string::npos) << "path repeated: " << warnings_[0];
}

TEST_F(CheckpointTest, LoadNewestValidWithNothingValid) {
  TrainState got;
  std::string path;
  EXPECT_FALSE(CheckpointDir(Path("missing")).load_newest_valid(&got, &path, CaptureWarning()));
  EXPECT_TRUE(warnings_.empty());

  CheckpointDir d(dir_);
  WriteFile(d.path_for_step(4), "junk");
  EXPECT_FALSE(d.load_newest_valid(&got, &path, CaptureWarning()));
  EXPECT_EQ(warnings_,
            std::vector<std::string>{d.path_for_step(4) + ": skipped: not an HDF5 file"});
  EXPECT_FALSE(d.load_newest_valid(&got, &path, nullptr));  // warn is optional
}

TEST_F(CheckpointTest, LoadNewestValidWarnsOncePerSkippedFileNewestFirst) {
  CheckpointDir d(dir_);
  d.save(SampleState(1), 5);
  WriteFile(d.path_for_step(2), "junk");
  WriteFile(d.path_for_step(3), "junk");

  // Any callable will do, with its own state: the trainer's sends to its progress display.
  std::vector<std::string> told;
  int calls = 0;
  TrainState got;
  std::string path;
  ASSERT_TRUE(d.load_newest_valid(&got, &path, [&](const std::string& m) {
    ++calls;
    told.push_back("warning: " + m);
  }));
  EXPECT_EQ(path, d.path_for_step(1));
  ExpectSameState(SampleState(1), got);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(told, (std::vector<std::string>{
                      "warning: " + d.path_for_step(3) + ": skipped: not an HDF5 file",
                      "warning: " + d.path_for_step(2) + ": skipped: not an HDF5 file"}));
}

TEST_F(CheckpointTest, StaleTempFilesAreIgnoredThenRemoved) {
  CheckpointDir d(dir_);
  d.save(SampleState(5), 3);

  // A writer that died: a child process that has exited and been reaped.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  std::string dead = d.path_for_step(9) + ".tmp." + std::to_string(child);
  std::string mine = d.path_for_step(8) + ".tmp." + std::to_string(getpid());
  std::string alive = d.path_for_step(7) + ".tmp." + std::to_string(getppid());
  for (const std::string& p : {dead, mine, alive}) WriteFile(p, "half-written");

  EXPECT_EQ(d.list_newest_first(), std::vector<std::string>{d.path_for_step(5)});
  TrainState got;
  std::string path;
  ASSERT_TRUE(d.load_newest_valid(&got, &path, CaptureWarning()));
  EXPECT_EQ(path, d.path_for_step(5));
  EXPECT_TRUE(warnings_.empty());

  d.save(SampleState(6), 3);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(mine));
  EXPECT_TRUE(fs::exists(alive));  // its writer may still be at work
  EXPECT_EQ(d.list_newest_first(),
            (std::vector<std::string>{d.path_for_step(6), d.path_for_step(5)}));
}

TEST_F(CheckpointTest, StaleTempFilesOfTheSharedAtomicWriterAreRemovedToo) {
  // SaveCheckpoint writes through CommitAtomically: "<path>.tmp.<pid>.<n>".
  CheckpointDir d(dir_);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  std::string dead = d.path_for_step(9) + ".tmp." + std::to_string(child) + ".0";
  std::string mine = d.path_for_step(8) + ".tmp." + std::to_string(getpid()) + ".17";
  std::string alive = d.path_for_step(7) + ".tmp." + std::to_string(getppid()) + ".2";
  std::string odd = d.path_for_step(6) + ".tmp." + std::to_string(child) + ".x";  // not ours
  for (const std::string& p : {dead, mine, alive, odd}) WriteFile(p, "half-written");

  d.save(SampleState(5), 3);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(mine));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(odd));
  EXPECT_EQ(d.list_newest_first(), std::vector<std::string>{d.path_for_step(5)});
}

}  // namespace
}  // namespace dlh
