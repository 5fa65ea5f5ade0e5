// h5_test — large arrays written through the small reused buffer (h5.cpp, WriteInPieces)
// read back exactly, whatever their shape: rows that do not divide the pieces, one row
// larger than a piece, one dimension, integers beside floats; and strings as other writers
// (h5py, NumPy) pad them.
#include "launcher/storage/h5.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace dlh {
namespace {

class H5PiecesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dlh-h5-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string dir_;
};

std::vector<float> Ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(i % 1000003) * 0.5f - 7.0f;
  return v;
}

TEST_F(H5PiecesTest, LargeArraysReadBackExactly) {
  const std::string path = dir_ + "/arrays.h5";
  struct Case {
    std::string name;
    std::vector<hsize_t> dims;
  };
  const std::vector<Case> cases = {
      {"rows", {3, 1000, 100}},   // 400 KB rows: pieces of 2 rows, then 1
      {"flat", {700001}},         // one dimension, an odd count
      {"wide", {2, 400000}},      // each row larger than a piece
      {"many", {1000, 3, 5, 7}},  // small rows, many per piece
      {"small", {10, 10}},        // under one piece: written whole
  };
  {
    h5::File f(path, h5::Mode::Create);
    for (const Case& c : cases) {
      size_t n = 1;
      for (hsize_t d : c.dims) n *= size_t(d);
      h5::WriteFloats(f.id(), "f/" + c.name, c.dims, Ramp(n).data());
    }
    std::vector<int32_t> ints(600000);
    for (size_t i = 0; i < ints.size(); ++i) ints[i] = int32_t(i) - 300000;
    h5::WriteInts(f.id(), "labels", {hsize_t(ints.size())}, ints.data());
    f.close();
  }
  h5::File f(path, h5::Mode::ReadOnly);
  for (const Case& c : cases) {
    EXPECT_EQ(h5::Dims(f.id(), "f/" + c.name), c.dims) << c.name;
    const std::vector<float> got = h5::ReadFloats(f.id(), "f/" + c.name);
    EXPECT_TRUE(got == Ramp(got.size())) << c.name;
    size_t n = 1;
    for (hsize_t d : c.dims) n *= size_t(d);
    EXPECT_EQ(got.size(), n) << c.name;
  }
  const std::vector<int32_t> ints = h5::ReadInts(f.id(), "labels");
  ASSERT_EQ(ints.size(), 600000u);
  for (size_t i = 0; i < ints.size(); ++i) ASSERT_EQ(ints[i], int32_t(i) - 300000) << i;
}

}  // namespace
}  // namespace dlh

namespace dlh {
namespace {

// h5py and NumPy write fixed-length bytes null-padded, not null-terminated: every byte of
// the type is text. Read into a type of the same size, HDF5 dropped the last character
// ('["ant", "bee"' for '["ant", "bee"]'). h5py's str is a variable-length string, once
// refused. Strings as DLH writes them read as before.
TEST_F(H5PiecesTest, NullPaddedStringsReadWhole) {
  const std::string path = dir_ + "/strings.h5";
  const std::string text = R"(["ant", "bee"])";
  {
    h5::File f(path, h5::Mode::Create);
    h5::Handle type(H5Tcopy(H5T_C_S1));
    H5Tset_size(type.id(), text.size());
    H5Tset_strpad(type.id(), H5T_STR_NULLPAD);
    h5::Handle space(H5Screate(H5S_SCALAR));
    h5::Handle dset(
        H5Dcreate2(f.id(), "padded", type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Dwrite(dset.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()), 0);
    h5::Handle attr(
        H5Acreate2(f.id(), "padded_attr", type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Awrite(attr.id(), type.id(), text.data()), 0);
    h5::Handle vlen(H5Tcopy(H5T_C_S1));
    H5Tset_size(vlen.id(), H5T_VARIABLE);
    h5::Handle variable(H5Dcreate2(f.id(), "variable", vlen.id(), space.id(), H5P_DEFAULT,
                                   H5P_DEFAULT, H5P_DEFAULT));
    const char* pointer = text.c_str();
    ASSERT_GE(H5Dwrite(variable.id(), vlen.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &pointer), 0);
    h5::WriteString(f.id(), "own", text);
    h5::SetAttr(f.id(), ".", "own_attr", text);
  }
  h5::File f(path, h5::Mode::ReadOnly);
  EXPECT_EQ(h5::ReadString(f.id(), "padded"), text);
  EXPECT_EQ(h5::GetStringAttr(f.id(), ".", "padded_attr"), text);
  EXPECT_EQ(h5::ReadString(f.id(), "variable"), text);  // h5py's str
  EXPECT_EQ(h5::ReadString(f.id(), "own"), text);
  EXPECT_EQ(h5::GetStringAttr(f.id(), ".", "own_attr"), text);
}

}  // namespace
}  // namespace dlh
