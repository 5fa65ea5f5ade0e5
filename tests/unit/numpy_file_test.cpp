// Tests for launcher/data/numpy_file.cpp: .npy files of every supported dtype and header
// version, written byte by byte here, .npz archives written with libzip (stored and
// deflated), the conversions, and the one-line message for each kind of bad input.
#include "launcher/data/numpy_file.hpp"

#include <gtest/gtest.h>
#include <zip.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

using test::TempDir;

// Runs `fn`, which must throw DataError whose message is `expected` exactly.
void ExpectDataError(const std::function<void()>& fn, const std::string& expected) {
  try {
    fn();
    ADD_FAILURE() << "no DataError; expected: " << expected;
  } catch (const DataError& e) {
    EXPECT_EQ(e.what(), expected);
  }
}

// Runs `fn`, which must throw DataError starting with `prefix`.
void ExpectDataErrorStartingWith(const std::function<void()>& fn, const std::string& prefix) {
  try {
    fn();
    ADD_FAILURE() << "no DataError; expected one starting with: " << prefix;
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()).substr(0, prefix.size()), prefix) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

// A .npy file as np.save writes it: magic, version, header length (2 bytes in 1.0, 4 in
// 2.0/3.0), the dict padded with spaces to a multiple of 64 bytes and ended by '\n', data.
std::string Npy(const std::string& dict, const std::string& data, int major = 1) {
  size_t lead = 6 + 2 + (major == 1 ? 2 : 4);
  std::string header = dict;
  while ((lead + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += '\0';
  uint32_t len = uint32_t(header.size());
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += char(len >> (8 * i) & 0xff);
  return out + header + data;
}

std::string Dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

// The bytes of values of type T, in this (little-endian) machine's order.
template <typename T>
std::string Bytes(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof v);
  return out;
}

TEST(NumpyFile, ReadsVersion1Uint8) {
  TempDir dir("numpy");
  auto path =
      dir.Write("x.npy", Npy(Dict("|u1", "(2, 3)"), Bytes<uint8_t>({0, 1, 2, 253, 254, 255})));
  NumpyArray a = ReadNpy(path);
  EXPECT_EQ(a.descr, "|u1");
  EXPECT_EQ(a.kind, 'u');
  EXPECT_EQ(a.item_bytes, 1);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.count(), 6);
  EXPECT_EQ(a.data, (std::vector<uint8_t>{0, 1, 2, 253, 254, 255}));
  EXPECT_EQ(ToFloats(a), (std::vector<float>{0, 1, 2, 253, 254, 255}));
  EXPECT_EQ(ToWholeNumbers(a, "x"), (std::vector<int64_t>{0, 1, 2, 253, 254, 255}));
}

TEST(NumpyFile, ReadsVersions2And3) {
  TempDir dir("numpy");
  for (int major : {2, 3}) {
    auto path =
        dir.Write("v.npy", Npy(Dict("<f4", "(3,)"), Bytes<float>({1.5f, -2, 0.25f}), major));
    NumpyArray a = ReadNpy(path);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{3})) << major;
    EXPECT_EQ(ToFloats(a), (std::vector<float>{1.5f, -2, 0.25f})) << major;
  }
}

TEST(NumpyFile, AcceptsAnyKeyOrderAndPython2Longs) {
  TempDir dir("numpy");
  auto path = dir.Write("x.npy", Npy("{'shape': (2L, 1L), 'fortran_order': False, 'descr': '=i2'}",
                                     Bytes<int16_t>({-7, 300})));
  NumpyArray a = ReadNpy(path);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(ToWholeNumbers(a, "x"), (std::vector<int64_t>{-7, 300}));
}

TEST(NumpyFile, ReadsEveryDtype) {
  TempDir dir("numpy");
  struct Case {
    std::string descr, data;
    std::vector<float> floats;
    std::vector<int64_t> whole;
  };
  const int64_t big = int64_t(1) << 60;  // exact as an int64, not as a float
  std::vector<Case> cases = {
      {"|b1", Bytes<uint8_t>({0, 1, 1}), {0, 1, 1}, {0, 1, 1}},
      {"|u1", Bytes<uint8_t>({0, 200, 255}), {0, 200, 255}, {0, 200, 255}},
      {"|i1", Bytes<int8_t>({-128, 0, 127}), {-128, 0, 127}, {-128, 0, 127}},
      {"<u2", Bytes<uint16_t>({0, 1000, 65535}), {0, 1000, 65535}, {0, 1000, 65535}},
      {"<i2", Bytes<int16_t>({-32768, 5, 32767}), {-32768, 5, 32767}, {-32768, 5, 32767}},
      {"<u4", Bytes<uint32_t>({0, 7, 4294967295u}), {0, 7, 4294967295.0f}, {0, 7, 4294967295}},
      {"<i4",
       Bytes<int32_t>({-2147483647 - 1, 9, 2147483647}),
       {-2147483648.0f, 9, 2147483647.0f},
       {-2147483647 - 1, 9, 2147483647}},
      {"<u8", Bytes<uint64_t>({0, 3, uint64_t(big) + 1}), {0, 3, float(big)}, {0, 3, big + 1}},
      {"<i8",
       Bytes<int64_t>({-big - 1, -4, big + 1}),
       {-float(big), -4, float(big)},
       {-big - 1, -4, big + 1}},
      {"<f2", Bytes<uint16_t>({0x3c00, 0xc400, 0x4b00}), {1, -4, 14}, {1, -4, 14}},
      {"<f4", Bytes<float>({-1, 0, 3}), {-1, 0, 3}, {-1, 0, 3}},
      {"<f8", Bytes<double>({-1e6, 0, 12}), {-1e6f, 0, 12}, {-1000000, 0, 12}},
  };
  for (const Case& c : cases) {
    auto path = dir.Write("a.npy", Npy(Dict(c.descr, "(3,)"), c.data));
    NumpyArray a = ReadNpy(path);
    EXPECT_EQ(a.descr, c.descr);
    EXPECT_EQ(a.kind, c.descr[1]);
    EXPECT_EQ(a.item_bytes, c.descr[2] - '0');
    EXPECT_EQ(ToFloats(a), c.floats) << c.descr;
    EXPECT_EQ(ToWholeNumbers(a, "a"), c.whole) << c.descr;
  }
}

TEST(NumpyFile, HalfFloatsIncludingSubnormalsInfinitiesAndNan) {
  TempDir dir("numpy");
  auto path = dir.Write("h.npy", Npy(Dict("<f2", "(10,)"),
                                     Bytes<uint16_t>({0x0000, 0x8000, 0x0001, 0x03ff, 0x0400,
                                                      0x7bff, 0x3555, 0x7c00, 0xfc00, 0x7e00})));
  std::vector<float> f = ToFloats(ReadNpy(path));
  EXPECT_EQ(f[0], 0.0f);
  EXPECT_TRUE(f[1] == 0.0f && std::signbit(f[1]));
  EXPECT_EQ(f[2], std::ldexp(1.0f, -24));     // the smallest subnormal
  EXPECT_EQ(f[3], std::ldexp(1023.0f, -24));  // the largest subnormal
  EXPECT_EQ(f[4], std::ldexp(1.0f, -14));     // the smallest normal
  EXPECT_EQ(f[5], 65504.0f);                  // the largest finite half
  EXPECT_EQ(f[6], 0.333251953125f);           // 1/3 rounded to half
  EXPECT_EQ(f[7], std::numeric_limits<float>::infinity());
  EXPECT_EQ(f[8], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f[9]));
}

TEST(NumpyFile, ConvertsBigEndianToLittleEndian) {
  TempDir dir("numpy");
  auto i4 = dir.Write("i.npy",
                      Npy(Dict(">i4", "(2,)"), std::string("\x00\x00\x01\x02\xff\xff\xff\xfe", 8)));
  NumpyArray a = ReadNpy(i4);
  EXPECT_EQ(a.descr, ">i4");
  EXPECT_EQ(ToWholeNumbers(a, "i"), (std::vector<int64_t>{258, -2}));
  EXPECT_EQ(a.data, (std::vector<uint8_t>{0x02, 0x01, 0, 0, 0xfe, 0xff, 0xff, 0xff}));
  auto f8 = dir.Write("f.npy", Npy(Dict(">f8", "(1,)"), std::string("\x3f\xf8\0\0\0\0\0\0", 8)));
  EXPECT_EQ(ToFloats(ReadNpy(f8)), (std::vector<float>{1.5f}));
  auto u1 = dir.Write("u.npy", Npy(Dict(">u1", "(1,)"), "\x07"));  // one byte: no order
  EXPECT_EQ(ToWholeNumbers(ReadNpy(u1), "u"), (std::vector<int64_t>{7}));
}

TEST(NumpyFile, ScalarsAndEmptyArrays) {
  TempDir dir("numpy");
  NumpyArray scalar = ReadNpy(dir.Write("s.npy", Npy(Dict("<i8", "()"), Bytes<int64_t>({42}))));
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.count(), 1);
  EXPECT_EQ(ToWholeNumbers(scalar, "s"), (std::vector<int64_t>{42}));
  NumpyArray empty = ReadNpy(dir.Write("e.npy", Npy(Dict("<f4", "(0, 28, 28)"), "")));
  EXPECT_EQ(empty.count(), 0);
  EXPECT_TRUE(ToFloats(empty).empty());
}

TEST(NumpyFile, RejectsFortranOrder) {
  TempDir dir("numpy");
  auto path = dir.Write("f.npy", Npy(Dict("<f4", "(2, 2)", true), Bytes<float>({1, 2, 3, 4})));
  ExpectDataError(
      [&] { ReadNpy(path); },
      path + ": Fortran-order arrays are not supported; save with np.ascontiguousarray");
}

TEST(NumpyFile, RejectsTruncatedAndTrailingData) {
  TempDir dir("numpy");
  auto shortfile = dir.Write("x.npy", Npy(Dict("<u2", "(2, 3)"), std::string(7, '\1')));
  ExpectDataError([&] { ReadNpy(shortfile); },
                  shortfile + ": truncated: holds 7 bytes of data, the header announces 12");
  auto longfile = dir.Write("y.npy", Npy(Dict("|u1", "(4,)"), "abcdef"));
  ExpectDataError([&] { ReadNpy(longfile); },
                  longfile + ": 2 trailing bytes after the 4 bytes of data the header announces");
}

TEST(NumpyFile, RejectsWhatIsNotNpy) {
  TempDir dir("numpy");
  for (const std::string& text :
       {std::string(), std::string("PK\3\4 a zip file"), std::string("\x93NUMPX\1\0", 8)}) {
    auto path = dir.Write("bad.npy", text);
    ExpectDataError([&] { ReadNpy(path); },
                    path + ": not a NumPy .npy file (no \\x93NUMPY magic at its start)");
  }
  auto cut = dir.Write("cut.npy", Npy(Dict("|u1", "(1,)"), "\1").substr(0, 20));
  ExpectDataError([&] { ReadNpy(cut); }, cut + ": truncated .npy header");
  std::string v4 = Npy(Dict("|u1", "(1,)"), "\1");
  v4[6] = 4;
  auto future = dir.Write("v4.npy", v4);
  ExpectDataError(
      [&] { ReadNpy(future); },
      future + ": unsupported .npy format version 4.0 (1.0, 2.0 and 3.0 are supported)");
  ExpectDataError([&] { ReadNpy(dir / "missing.npy"); },
                  dir / "missing.npy" + ": cannot open: No such file or directory");
}

TEST(NumpyFile, RejectsMalformedHeaders) {
  TempDir dir("numpy");
  struct Case {
    std::string dict, why;
  };
  std::vector<Case> cases = {
      {"{'descr': '|u1', 'shape': (1,), }", "no 'fortran_order' key"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (1,), 'extra': 1}",
       "unexpected key 'extra'"},
      {"{'descr': '|u1', 'fortran_order': Maybe, 'shape': (1,)}", "expected True or False"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (-1,)}",
       "expected a dimension (a non-negative integer)"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (1,)} x",
       "unexpected text after the closing '}'"},
      {"{'descr': '|u1', 'descr': '|u1', 'fortran_order': False, 'shape': (1,)}",
       "key 'descr' appears twice"},
      {"{'descr: '|u1', 'fortran_order': False, 'shape': (1,)}", "expected ':'"},
  };
  for (const Case& c : cases) {
    auto path = dir.Write("h.npy", Npy(c.dict, "\1"));
    ExpectDataError([&] { ReadNpy(path); },
                    path + ": malformed .npy header (" + c.why + "): " + c.dict);
  }
}

TEST(NumpyFile, RejectsUnsupportedDtypesNamingThem) {
  TempDir dir("numpy");
  for (const std::string descr : {"|O", "<U5", "<c8", "|S3", "<M8[ns]", "|f1", "<b2", "|i4"}) {
    auto path = dir.Write("d.npy", Npy(Dict(descr, "(1,)"), "\1"));
    ExpectDataError([&] { ReadNpy(path); },
                    path + ": dtype '" + descr +
                        "' is not supported (only bool, (u)int8-64 and float16/32/64 arrays)");
  }
  auto structured =
      dir.Write("s.npy", Npy("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, "
                             "'shape': (1,), }",
                             Bytes<int32_t>({1, 2})));
  ExpectDataError([&] { ReadNpy(structured); },
                  structured +
                      ": structured dtype [('a', '<f4'), ('b', '<i4')] is not supported (only "
                      "bool, integer and float arrays)");
}

TEST(NumpyFile, RejectsShapesWhoseSizeOverflows) {
  TempDir dir("numpy");
  auto path = dir.Write("o.npy", Npy(Dict("<f8", "(4294967296, 4294967296, 8)"), ""));
  ExpectDataError([&] { ReadNpy(path); }, path + ": the header's shape is too large to be real");
}

TEST(NumpyFile, WholeNumbersRejectFractionsAndHugeValues) {
  TempDir dir("numpy");
  auto f4 = dir.Write("y.npy", Npy(Dict("<f4", "(3,)"), Bytes<float>({1, 2.5f, 3})));
  ExpectDataError([&] { ToWholeNumbers(ReadNpy(f4), "y.npy"); },
                  "y.npy[1] = 2.5 is not a whole number");
  auto f8 = dir.Write("z.npy", Npy(Dict("<f8", "(2,)"), Bytes<double>({0.1, 1})));
  ExpectDataError([&] { ToWholeNumbers(ReadNpy(f8), "z"); }, "z[0] = 0.1 is not a whole number");
  auto nan = dir.Write("n.npy", Npy(Dict("<f2", "(1,)"), Bytes<uint16_t>({0x7e00})));
  ExpectDataError([&] { ToWholeNumbers(ReadNpy(nan), "n"); }, "n[0] = nan is not a whole number");
  auto u8 = dir.Write("u.npy", Npy(Dict("<u8", "(2,)"), Bytes<uint64_t>({1, ~uint64_t(0)})));
  ExpectDataError([&] { ToWholeNumbers(ReadNpy(u8), "u"); },
                  "u[1] = 18446744073709551615 is too large");
  auto huge = dir.Write("h.npy", Npy(Dict("<f8", "(1,)"), Bytes<double>({1e19})));
  ExpectDataError([&] { ToWholeNumbers(ReadNpy(huge), "h"); }, "h[0] = 1e+19 is too large");
}

// Writes an archive of (member name, bytes) pairs, each stored or deflated.
void WriteZip(const std::string& path,
              const std::vector<std::pair<std::string, std::string>>& members, bool deflate) {
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  ASSERT_NE(z, nullptr) << "zip_open " << code;
  for (const auto& [name, bytes] : members) {
    // The buffers live in `members` until zip_close, which is when libzip reads them.
    zip_source_t* src = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
    ASSERT_NE(src, nullptr);
    zip_int64_t index = zip_file_add(z, name.c_str(), src, ZIP_FL_ENC_UTF_8);
    ASSERT_GE(index, 0) << zip_strerror(z);
    ASSERT_EQ(zip_set_file_compression(z, zip_uint64_t(index),
                                       deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0),
              0);
  }
  ASSERT_EQ(zip_close(z), 0) << zip_strerror(z);
}

TEST(NumpyFile, ReadsNpzStoredAndDeflated) {
  TempDir dir("numpy");
  std::string images(2 * 4 * 4, '\0');
  for (size_t i = 0; i < images.size(); ++i) images[i] = char(i * 7);
  std::vector<std::pair<std::string, std::string>> members = {
      {"x_train.npy", Npy(Dict("|u1", "(2, 4, 4)"), images)},
      {"y_train.npy", Npy(Dict("<i8", "(2,)"), Bytes<int64_t>({3, 9}))},
      {"notes.txt", "not an array"},
  };
  for (bool deflate : {false, true}) {
    auto path = dir / (deflate ? "c.npz" : "s.npz");
    WriteZip(path, members, deflate);
    auto arrays = ReadNpz(path);
    ASSERT_EQ(arrays.size(), 2u) << deflate;
    const NumpyArray& x = arrays.at("x_train");
    EXPECT_EQ(x.shape, (std::vector<int64_t>{2, 4, 4}));
    EXPECT_EQ(std::string(x.data.begin(), x.data.end()), images);
    EXPECT_EQ(ToWholeNumbers(arrays.at("y_train"), "y"), (std::vector<int64_t>{3, 9}));
  }
}

TEST(NumpyFile, NpzMessagesNameTheArchiveAndTheMember) {
  TempDir dir("numpy");
  auto path = dir / "a.npz";
  WriteZip(path, {{"x_train.npy", Npy(Dict("<f4", "(4,)"), Bytes<float>({1, 2}))}}, true);
  ExpectDataError([&] { ReadNpz(path); },
                  path +
                      ": member x_train.npy: truncated: holds 8 bytes of data, the header "
                      "announces 16");
  WriteZip(path, {{"y.npy", Npy(Dict("<f4", "(2, 2)", true), Bytes<float>({1, 2, 3, 4}))}}, false);
  ExpectDataError([&] { ReadNpz(path); },
                  path +
                      ": member y.npy: Fortran-order arrays are not supported; save with "
                      "np.ascontiguousarray");
  WriteZip(path, {{"z.npy", "garbage"}}, false);
  ExpectDataError(
      [&] { ReadNpz(path); },
      path + ": member z.npy: not a NumPy .npy file (no \\x93NUMPY magic at its start)");
}

TEST(NumpyFile, NpzRejectsDamagedArchives) {
  TempDir dir("numpy");
  auto path = dir / "a.npz";
  std::string data(4096, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = char(i * i % 251);
  WriteZip(path, {{"x.npy", Npy(Dict("|u1", "(4096,)"), data)}}, true);
  std::string whole;
  {
    std::ifstream in(path, std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  // Cut short: the central directory at the end is gone.
  auto cut = dir.Write("cut.npz", whole.substr(0, whole.size() / 2));
  ExpectDataErrorStartingWith([&] { ReadNpz(cut); }, cut + ": not a readable zip archive: ");
  // Damaged compressed data: zlib or the CRC check notices.
  std::string damaged = whole;
  for (size_t i = 200; i < 260; ++i) damaged[i] = char(damaged[i] ^ 0x5a);
  auto bad = dir.Write("bad.npz", damaged);
  ExpectDataErrorStartingWith([&] { ReadNpz(bad); }, bad + ": member x.npy: read error: ");
  // A stored member with one bit flipped: only the CRC check at its end notices.
  WriteZip(path, {{"x.npy", Npy(Dict("|u1", "(4096,)"), data)}}, false);
  {
    std::ifstream in(path, std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  whole[whole.size() / 2] = char(whole[whole.size() / 2] ^ 1);
  auto flipped = dir.Write("flipped.npz", whole);
  ExpectDataError([&] { ReadNpz(flipped); }, flipped + ": member x.npy: read error: CRC error");
  auto text = dir.Write("text.npz", "just some text, not a zip archive\n");
  ExpectDataErrorStartingWith([&] { ReadNpz(text); }, text + ": not a readable zip archive: ");
  ExpectDataErrorStartingWith([&] { ReadNpz(dir / "none.npz"); },
                              dir / "none.npz" + ": cannot open: ");
}

}  // namespace
}  // namespace dlh
