// Tests for launcher/data/image_folder.cpp: real PNG and JPEG files written with libpng and
// libjpeg into a scratch ImageFolder tree, read back: class numbering and order, channel
// conversion, resizing, JPEG fidelity, and the one-line message of each kind of bad input.
#include "launcher/data/image_folder.hpp"

#include <gtest/gtest.h>
#include <png.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

// clang-format off
#include <jpeglib.h>  // after <cstdio>: it uses FILE and size_t without including them
// clang-format on

#include "common/error.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

namespace fs = std::filesystem;

using test::TempDir;  // a fresh folder per test, removed afterwards

// Writes an 8-bit PNG; `format` is PNG_FORMAT_GRAY, _RGB or _RGBA, pixels interleaved.
void WritePng(const std::string& path, int width, int height, png_uint_32 format,
              const std::vector<uint8_t>& pixels) {
  fs::create_directories(fs::path(path).parent_path());
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = png_uint_32(width);
  image.height = png_uint_32(height);
  image.format = format;
  ASSERT_EQ(pixels.size(), PNG_IMAGE_SIZE(image));
  ASSERT_TRUE(png_image_write_to_file(&image, path.c_str(), 0, pixels.data(), 0, nullptr))
      << path << ": " << image.message;
}

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

// Writes a baseline JPEG of 1 (grey) or 3 (RGB) interleaved channels. libjpeg's default
// error handler exits the process; acceptable here, where the input is always valid.
void WriteJpeg(const std::string& path, int width, int height, int channels,
               const std::vector<uint8_t>& pixels, int quality = 100) {
  fs::create_directories(fs::path(path).parent_path());
  std::unique_ptr<FILE, FileCloser> file(std::fopen(path.c_str(), "wb"));
  ASSERT_NE(file, nullptr) << path;
  jpeg_compress_struct cinfo;
  jpeg_error_mgr errors;
  cinfo.err = jpeg_std_error(&errors);
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, file.get());
  cinfo.image_width = JDIMENSION(width);
  cinfo.image_height = JDIMENSION(height);
  cinfo.input_components = channels;
  cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels.data()) +
                   size_t(cinfo.next_scanline) * size_t(width) * size_t(channels);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
}

// Keeps the first half of the file.
void Truncate(const std::string& path) { fs::resize_file(path, fs::file_size(path) / 2); }

// An image of `width` x `height` x `channels` whose every sample is `value`.
std::vector<uint8_t> Flat(int width, int height, int channels, uint8_t value) {
  return std::vector<uint8_t>(size_t(width) * size_t(height) * size_t(channels), value);
}

// A smooth colour gradient, which JPEG at quality 100 reproduces closely.
std::vector<uint8_t> Gradient(int width, int height, int channels) {
  std::vector<uint8_t> out;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c)
        out.push_back(uint8_t(20 + 120 * x / width + 50 * y / height + 30 * c));  // <= 250
  return out;
}

ImportedSplit Read(const std::string& root, int channels, int height, int width,
                   const std::vector<std::string>& class_names_in = {},
                   std::vector<std::string>* class_names = nullptr) {
  ImageFolderOptions options;
  options.channels = channels;
  options.height = height;
  options.width = width;
  std::vector<std::string> names;
  return ReadImageFolder(root, options, class_names_in, class_names ? class_names : &names);
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

// ---------------------------------------------------------------------------------------
// Layout

TEST(ImageFolder, NumbersClassesInByteOrderAndSkipsHiddenEntries) {
  TempDir dir("image-folder");
  const std::string root = dir / "root";
  const auto grey = Flat(4, 4, 1, 9);
  WritePng(root + "/b/2.png", 4, 4, PNG_FORMAT_GRAY, grey);
  WritePng(root + "/b/10.png", 4, 4, PNG_FORMAT_GRAY, grey);
  WriteJpeg(root + "/b/1.jpg", 4, 4, 1, grey);
  WritePng(root + "/a/x.png", 4, 4, PNG_FORMAT_GRAY, grey);
  WritePng(root + "/C/y.png", 4, 4, PNG_FORMAT_GRAY, grey);
  WritePng(root + "/.hidden/z.png", 4, 4, PNG_FORMAT_GRAY, grey);  // not a class
  dir.Write("root/b/.DS_Store", "not an image, but hidden");
  dir.Write("root/README.txt", "files beside the class folders are not images");

  std::vector<std::string> names;
  const ImportedSplit split = Read(root, 1, 4, 4, {}, &names);
  EXPECT_EQ(names, (std::vector<std::string>{"C", "a", "b"}));  // 'C' < 'a' in byte order
  EXPECT_EQ(split.labels, (std::vector<int64_t>{0, 1, 2, 2, 2}));
  EXPECT_EQ(split.origins,
            (std::vector<std::string>{"C/y.png", "a/x.png", "b/1.jpg", "b/10.png", "b/2.png"}));
  EXPECT_EQ(split.shape, (Shape3{1, 4, 4}));
  EXPECT_EQ(split.bytes.size(), 5u * 16u);
  EXPECT_TRUE(split.floats.empty());
  EXPECT_EQ(split.count(), 5);
}

TEST(ImageFolder, TestFolderIsNumberedByTheTrainingClasses) {
  TempDir dir("image-folder");
  const std::string root = dir / "test";
  WritePng(root + "/c/1.png", 2, 2, PNG_FORMAT_GRAY, Flat(2, 2, 1, 3));
  WritePng(root + "/a/1.png", 2, 2, PNG_FORMAT_GRAY, Flat(2, 2, 1, 4));
  std::vector<std::string> names;
  const ImportedSplit split = Read(root, 1, 2, 2, {"a", "b", "c"}, &names);  // no 'b' here
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(split.labels, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(split.origins, (std::vector<std::string>{"a/1.png", "c/1.png"}));
}

TEST(ImageFolder, FollowsSymbolicLinks) {
  TempDir dir("image-folder");
  WritePng(dir / "store/cats/1.png", 2, 2, PNG_FORMAT_GRAY, Flat(2, 2, 1, 7));
  WritePng(dir / "store/2.png", 2, 2, PNG_FORMAT_GRAY, Flat(2, 2, 1, 8));
  fs::create_directories(dir / "root");
  fs::create_directory_symlink(dir / "store/cats", dir / "root/cats");
  fs::create_symlink(dir / "store/2.png", dir / "store/cats/2.png");
  const ImportedSplit split = Read(dir / "root", 1, 2, 2);
  EXPECT_EQ(split.origins, (std::vector<std::string>{"cats/1.png", "cats/2.png"}));
  EXPECT_EQ(split.bytes, (std::vector<uint8_t>{7, 7, 7, 7, 8, 8, 8, 8}));
}

// ---------------------------------------------------------------------------------------
// Pixels and channels

TEST(ImageFolder, SameSizeGreyPngIsCopiedExactly) {
  TempDir dir("image-folder");
  const std::vector<uint8_t> pixels = {0, 1, 2, 127, 254, 255};  // 3 wide, 2 high
  WritePng(dir / "root/a/1.png", 3, 2, PNG_FORMAT_GRAY, pixels);
  const ImportedSplit split = Read(dir / "root", 1, 2, 3);
  EXPECT_EQ(split.shape, (Shape3{1, 2, 3}));
  EXPECT_EQ(split.bytes, pixels);
}

TEST(ImageFolder, SameSizeRgbPngIsStoredPlanar) {
  TempDir dir("image-folder");
  // 2 x 2 pixels, interleaved RGB.
  WritePng(dir / "root/a/1.png", 2, 2, PNG_FORMAT_RGB,
           {10, 20, 30, 11, 21, 31, 12, 22, 32, 13, 23, 33});
  const ImportedSplit split = Read(dir / "root", 3, 2, 2);
  EXPECT_EQ(split.shape, (Shape3{3, 2, 2}));
  EXPECT_EQ(split.bytes, (std::vector<uint8_t>{10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32, 33}));
}

TEST(ImageFolder, RgbToGreyIsBt601LumaAsPilComputesIt) {
  TempDir dir("image-folder");
  WritePng(dir / "root/a/1.png", 4, 1, PNG_FORMAT_RGB,
           {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255});
  // PIL's Image.convert("L") of the same pixels.
  EXPECT_EQ(Read(dir / "root", 1, 1, 4).bytes, (std::vector<uint8_t>{76, 150, 29, 255}));
}

TEST(ImageFolder, GreyToRgbRepeatsTheValue) {
  TempDir dir("image-folder");
  WritePng(dir / "root/a/1.png", 2, 1, PNG_FORMAT_GRAY, {5, 200});
  EXPECT_EQ(Read(dir / "root", 3, 1, 2).bytes, (std::vector<uint8_t>{5, 200, 5, 200, 5, 200}));
}

TEST(ImageFolder, AlphaIsDroppedNotComposited) {
  TempDir dir("image-folder");
  // Opaque, half transparent and fully transparent pixels: the colour is kept as stored.
  WritePng(dir / "root/a/1.png", 3, 1, PNG_FORMAT_RGBA,
           {10, 20, 30, 255, 40, 50, 60, 128, 70, 80, 90, 0});
  EXPECT_EQ(Read(dir / "root", 3, 1, 3).bytes,
            (std::vector<uint8_t>{10, 40, 70, 20, 50, 80, 30, 60, 90}));
  WritePng(dir / "grey/a/1.png", 2, 1, PNG_FORMAT_GA, {100, 255, 200, 0});
  EXPECT_EQ(Read(dir / "grey", 1, 1, 2).bytes, (std::vector<uint8_t>{100, 200}));
}

// ---------------------------------------------------------------------------------------
// Resizing

TEST(ImageFolder, ShrinkingAveragesBlocks) {
  TempDir dir("image-folder");
  // 4 x 4 grey; each 2 x 2 block becomes one pixel, its mean rounded half up.
  WritePng(dir / "root/a/1.png", 4, 4, PNG_FORMAT_GRAY,
           {10, 20, 0, 0,    //
            30, 40, 0, 1,    //
            1, 2, 255, 255,  //
            3, 4, 255, 254});
  EXPECT_EQ(Read(dir / "root", 1, 2, 2).bytes, (std::vector<uint8_t>{25, 0, 3, 255}));
}

TEST(ImageFolder, ShrinkingByANonIntegerFactorWeighsByOverlap) {
  TempDir dir("image-folder");
  // 3 -> 2 wide: output 0 covers inputs 0 and half of 1, output 1 half of 1 and 2.
  WritePng(dir / "root/a/1.png", 3, 1, PNG_FORMAT_GRAY, {0, 90, 180});
  EXPECT_EQ(Read(dir / "root", 1, 1, 2).bytes, (std::vector<uint8_t>{30, 150}));
}

TEST(ImageFolder, EnlargingIsBilinear) {
  TempDir dir("image-folder");
  // Pixel centres aligned: outputs sit at input positions 0 (clamped), 0.25, 0.75, 1.
  WritePng(dir / "root/a/1.png", 2, 1, PNG_FORMAT_GRAY, {0, 100});
  EXPECT_EQ(Read(dir / "root", 1, 1, 4).bytes, (std::vector<uint8_t>{0, 25, 75, 100}));
}

TEST(ImageFolder, EnlargingKeepsAConstantImageConstant) {
  TempDir dir("image-folder");
  std::vector<uint8_t> pixels;
  for (int i = 0; i < 5 * 3; ++i) pixels.insert(pixels.end(), {77, 130, 201});
  WritePng(dir / "root/a/1.png", 5, 3, PNG_FORMAT_RGB, pixels);
  const ImportedSplit split = Read(dir / "root", 3, 8, 11);
  ASSERT_EQ(split.bytes.size(), 3u * 8u * 11u);
  for (size_t i = 0; i < split.bytes.size(); ++i) {
    const uint8_t want = i < 88 ? 77 : i < 176 ? 130 : 201;
    ASSERT_EQ(split.bytes[i], want) << "at " << i;
  }
}

// ---------------------------------------------------------------------------------------
// JPEG

// The largest difference between a stored planar sample and the interleaved original.
int MaxDifference(const std::vector<uint8_t>& planar, const std::vector<uint8_t>& interleaved,
                  int channels) {
  const size_t n = interleaved.size() / size_t(channels);
  int worst = 0;
  for (size_t i = 0; i < n; ++i)
    for (int c = 0; c < channels; ++c)
      worst = std::max(worst, std::abs(int(planar[size_t(c) * n + i]) -
                                       int(interleaved[i * size_t(channels) + size_t(c)])));
  return worst;
}

TEST(ImageFolder, JpegDecodesCloseToWhatWasEncoded) {
  TempDir dir("image-folder");
  const auto rgb = Gradient(16, 16, 3);
  const auto grey = Gradient(16, 16, 1);
  WriteJpeg(dir / "rgb/a/1.jpg", 16, 16, 3, rgb);
  WriteJpeg(dir / "grey/a/1.jpg", 16, 16, 1, grey);
  const ImportedSplit colour = Read(dir / "rgb", 3, 16, 16);
  ASSERT_EQ(colour.bytes.size(), rgb.size());
  EXPECT_LE(MaxDifference(colour.bytes, rgb, 3), 4);
  const ImportedSplit mono = Read(dir / "grey", 1, 16, 16);
  ASSERT_EQ(mono.bytes.size(), grey.size());
  EXPECT_LE(MaxDifference(mono.bytes, grey, 1), 2);
  // A colour JPEG read as grey: its luma, close to BT.601 of the original.
  std::vector<uint8_t> luma;
  for (size_t i = 0; i < rgb.size(); i += 3)
    luma.push_back(
        uint8_t((19595u * rgb[i] + 38470u * rgb[i + 1] + 7471u * rgb[i + 2] + 32768u) >> 16));
  EXPECT_LE(MaxDifference(Read(dir / "rgb", 1, 16, 16).bytes, luma, 1), 3);
}

// ---------------------------------------------------------------------------------------
// Errors: one line, starting with the path as given

TEST(ImageFolder, RejectsAFileThatIsNotAnImage) {
  TempDir dir("image-folder");
  WritePng(dir / "root/a/1.png", 2, 2, PNG_FORMAT_GRAY, Flat(2, 2, 1, 0));
  dir.Write("root/a/2.png", "just some text, named .png\n");
  ExpectDataError([&] { Read(dir / "root", 1, 2, 2); },
                  dir / "root/a/2.png: not a PNG or JPEG image");
  // The same with the root given with a trailing slash: no doubled slash in the message.
  ExpectDataError([&] { Read(dir / "root/", 1, 2, 2); },
                  dir / "root/a/2.png: not a PNG or JPEG image");
}

TEST(ImageFolder, RejectsATruncatedPng) {
  TempDir dir("image-folder");
  WritePng(dir / "root/a/1.png", 32, 32, PNG_FORMAT_RGB, Gradient(32, 32, 3));
  Truncate(dir / "root/a/1.png");
  try {
    Read(dir / "root", 3, 32, 32);
    ADD_FAILURE() << "no DataError for a truncated PNG";
  } catch (const DataError& e) {
    const std::string prefix = dir / "root/a/1.png: cannot decode PNG: ";
    EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

TEST(ImageFolder, RejectsATruncatedJpeg) {
  TempDir dir("image-folder");
  WriteJpeg(dir / "root/a/1.jpg", 32, 32, 3, Gradient(32, 32, 3));
  Truncate(dir / "root/a/1.jpg");
  ExpectDataError([&] { Read(dir / "root", 3, 32, 32); },
                  dir / "root/a/1.jpg: corrupt JPEG data: Premature end of JPEG file");
}

TEST(ImageFolder, RejectsAnEmptyClassFolder) {
  TempDir dir("image-folder");
  WritePng(dir / "root/a/1.png", 2, 2, PNG_FORMAT_GRAY, Flat(2, 2, 1, 0));
  fs::create_directories(dir / "root/b");
  dir.Write("root/b/.DS_Store", "hidden files do not count");
  ExpectDataError([&] { Read(dir / "root", 1, 2, 2); },
                  dir / "root/b: class folder holds no image");
}

TEST(ImageFolder, RejectsARootWithoutClassFolders) {
  TempDir dir("image-folder");
  fs::create_directories(dir / "root/.git");
  dir.Write("root/1.png", "images must be in class folders");
  ExpectDataError([&] { Read(dir / "root", 1, 2, 2); },
                  dir / "root: no class folder (the layout is ROOT/CLASS/IMAGE)");
}

TEST(ImageFolder, RejectsAMissingRoot) {
  TempDir dir("image-folder");
  ExpectDataError([&] { Read(dir / "missing", 1, 2, 2); },
                  dir / "missing: cannot read folder: No such file or directory");
}

TEST(ImageFolder, RejectsAClassNotAmongTheTrainingClasses) {
  TempDir dir("image-folder");
  WritePng(dir / "test/a/1.png", 2, 2, PNG_FORMAT_GRAY, Flat(2, 2, 1, 0));
  WritePng(dir / "test/x/1.png", 2, 2, PNG_FORMAT_GRAY, Flat(2, 2, 1, 0));
  ExpectDataError(
      [&] {
        Read(dir / "test", 1, 2, 2, {"a", "b", "c"});
      },
      dir / "test/x: class folder 'x' is not among the training classes (a, b, c)");
}

TEST(ImageFolder, RejectsAFolderInsideAClassFolder) {
  TempDir dir("image-folder");
  WritePng(dir / "root/a/more/1.png", 2, 2, PNG_FORMAT_GRAY, Flat(2, 2, 1, 0));
  ExpectDataError([&] { Read(dir / "root", 1, 2, 2); },
                  dir /
                      "root/a/more: a folder inside a class folder (the layout is "
                      "ROOT/CLASS/IMAGE)");
}

}  // namespace
}  // namespace dlh
